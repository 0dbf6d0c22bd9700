"""Domain types shared by every layer: spectra, tolerances, what happened to a spectrum.

Units live in the types: a `Tolerance` knows whether it is ppm or Da, masses
are neutral monoisotopic Daltons unless a name ends in ``_mz``.
"""

from __future__ import annotations

import enum
import math
import re
from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np

from rtsearch.errors import ConfigError

PROTON = 1.007276466812
H2O = 18.0105646837
C13_DELTA = 1.00335483507  # 13C - 12C, the isotope-error step

ToleranceUnit = Literal["ppm", "Da"]

_TOL_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(ppm|da|th|mmu)\s*$", re.I)


@dataclass(frozen=True, slots=True)
class Tolerance:
    """A symmetric mass tolerance, ``value`` in ``unit`` on either side.

    Examples
    --------
    >>> Tolerance.parse("20 ppm").bounds(1000.0)
    (999.98, 1000.02)
    """

    value: float
    unit: ToleranceUnit

    def __post_init__(self) -> None:
        if not (self.value > 0 and math.isfinite(self.value)):
            raise ConfigError(f"tolerance must be a positive number, got {self.value!r}")
        if self.unit not in get_args(ToleranceUnit):
            raise ConfigError(f"tolerance unit must be 'ppm' or 'Da', got {self.unit!r}")

    @classmethod
    def parse(cls, text: str) -> Tolerance:
        """Parse ``"20 ppm"``, ``"0.5 Da"`` (``Th`` is taken as Da, ``mmu`` as 1e-3 Da)."""
        m = _TOL_RE.match(str(text))
        if not m:
            raise ConfigError(f"cannot read tolerance {text!r}: expected e.g. '20 ppm' or '0.5 Da'")
        value, unit = float(m.group(1)), m.group(2).lower()
        if unit == "ppm":
            return cls(value, "ppm")
        if unit == "mmu":
            return cls(value * 1e-3, "Da")
        return cls(value, "Da")

    def width(self, mass: float | np.ndarray) -> float | np.ndarray:
        """Half-width of the window at ``mass``, in Da."""
        if self.unit == "ppm":
            return mass * self.value * 1e-6
        return self.value + 0.0 * mass

    def bounds(self, mass: float) -> tuple[float, float]:
        """``(low, high)`` in Da around ``mass``."""
        w = float(self.width(mass))
        return (mass - w, mass + w)

    def __str__(self) -> str:
        return f"{self.value:g} {self.unit}"


@dataclass(slots=True)
class Spectrum:
    """One mass spectrum as read from a file or the wire.

    ``charges`` lists the precursor charges to try: the file's charge, or
    several candidates (an ms2 file may give 2+ and 3+); empty when unknown.
    """

    run: str
    scan: int
    ms_level: int
    mz: np.ndarray  # float64, ascending
    intensity: np.ndarray  # float32
    precursor_mz: float = 0.0
    charges: tuple[int, ...] = ()
    rt: float = 0.0
    precursor_intensity: float = 0.0
    problem: str = ""  # why it cannot be scored, when read but malformed
    native_id: str = ""  # as its file names it (mzML id, MGF TITLE, scan=N); "" when it came without one

    @property
    def n_peaks(self) -> int:
        return int(self.mz.shape[0])


def spectrum_ids(native_id: list[str], scan: np.ndarray) -> list[str]:
    """Each spectrum's native id, ``scan=N`` where none came (``native_id`` empty: none at all, the wire's)."""
    if native_id:
        return [n or f"scan={s}" for n, s in zip(native_id, scan.tolist(), strict=True)]
    return [f"scan={s}" for s in scan.tolist()]


@dataclass(frozen=True, slots=True)
class Precursor:
    """One precursor of a deconvoluted spectrum: neutral monoisotopic mass (Da), m/z, charge, intensity."""

    mass: float
    mz: float = 0.0
    charge: int = 0
    intensity: float = 0.0


@dataclass(slots=True)
class DeconvolutedSpectrum:
    """A top-down spectrum after deconvolution (msalign): each peak a neutral monoisotopic mass with its charge.

    ``precursors`` are those of the isolation window with a mass > 0 (several when a deconvolution found
    several); empty for MS1, or for an MS2 whose precursor was not found (``problem`` then says so).
    """

    run: str
    scan: int
    ms_level: int
    mass: np.ndarray  # float64 Da, ascending
    intensity: np.ndarray  # float32
    charge: np.ndarray  # int16, the charge each mass was deconvoluted from (0: unknown)
    precursors: tuple[Precursor, ...] = ()
    rt: float = 0.0  # seconds
    spectrum_id: str = ""  # the file's ID / SPECTRUM_ID
    title: str = ""
    activation: str = ""
    ms1_scan: int = -1
    problem: str = ""  # why it cannot be searched, when read but unusable

    def as_spectrum(self) -> Spectrum:
        """This spectrum as a `Spectrum` of singly protonated ions (charge 1, m/z = mass + proton), the way
        deconvoluted spectra travel with the others (files, batches, the wire); `of` reads one back. Only the first
        precursor travels (none of the runs here has more), the activation and peak charges do not."""
        prec = self.precursors[0].mass + PROTON if self.precursors else 0.0
        return Spectrum(self.run, self.scan, self.ms_level, self.mass + PROTON, self.intensity, prec,
                        (DECONVOLUTED_CHARGE,), self.rt, self.precursors[0].intensity if self.precursors else 0.0,
                        self.problem)  # fmt: skip

    @classmethod
    def of(cls, sp: Spectrum, activation: str = "") -> DeconvolutedSpectrum:
        """The deconvoluted spectrum that `as_spectrum` gave ``sp`` (``problem`` says so when ``sp`` is not one)."""
        problem = sp.problem
        if not problem and sp.charges != (DECONVOLUTED_CHARGE,):
            problem = ("not a deconvoluted spectrum: top-down search takes neutral masses sent as charge 1 "
                       f"(m/z = mass + proton), got charges {list(sp.charges)}")  # fmt: skip
        elif not problem and sp.precursor_mz <= PROTON:
            problem = "no precursor mass"
        mass = np.asarray(sp.mz, np.float64) - PROTON
        precursors = (Precursor(sp.precursor_mz - PROTON, sp.precursor_mz, 1, sp.precursor_intensity),)
        return cls(sp.run, sp.scan, sp.ms_level, mass, sp.intensity, np.ones(mass.shape[0], np.int16),
                   precursors if not problem else (), sp.rt, activation=activation, problem=problem)  # fmt: skip


DECONVOLUTED_CHARGE = 1  # deconvoluted spectra travel as singly protonated ions (`DeconvolutedSpectrum.as_spectrum`)


class ResultStatus(enum.StrEnum):
    """What happened to one spectrum."""

    IDENTIFIED = "identified"
    UNIDENTIFIED = "unidentified"
    SHED = "shed"
    INVALID = "invalid"

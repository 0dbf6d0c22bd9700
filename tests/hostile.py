"""Hostile protocol-v1 messages with known outcomes: the fuzz harness's generator (tests and bench).

Each `Hostile` is one message and what a daemon must do with it: answer it (which run and scan,
``invalid`` or scored), count it in ``rtsearch_invalid_total`` under which reason, or count it as a
valid spectrum of an MS level. The classes are the ones an adversarial client found (issue 15):
integers beyond 64 bits, run names no file or topic can carry, absurd budgets, malformed but named
spectra, damaged peaks, frames and headers; and (issue 67) finite values no later stage takes (an ``rt``
of 1e308 broke the run's end, a precursor or peak m/z of 1e300, negative m/z), unbounded lists and headers
(10,000 charges stalled the engine), control characters in run names and ids, batched messages
beyond their bounds; valid spectra of real runs are mixed in. Seeded: the same seed gives the same messages.
"""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from rtsearch.protocol.batch import MAX_COUNT, encode_spectra
from rtsearch.protocol.wire import MAX_CHARGES, MAX_HEADER_BYTES, MAX_MZ, MAX_RT, RUN_START, SPECTRUM, encode_spectrum
from rtsearch.types import Spectrum


@dataclass
class Hostile:
    """One message and its expected outcome."""

    kind: str
    frames: list[bytes]
    answer: tuple[str, int] | None = None  # the (run, scan) of the one result it must get
    invalid: str | None = None  # the rtsearch_invalid_total reason it is counted under
    ms_level: int | None = None  # a valid spectrum of this MS level (counted as received)

    @property
    def status(self) -> str | None:
        """``invalid`` when its answer must be that; ``None`` for a scored (or shed) one."""
        return "invalid" if self.invalid and self.answer else None


def _header(frames: list[bytes], **changes: object) -> list[bytes]:
    h = json.loads(frames[1])
    h.update(changes)
    return [frames[0], json.dumps(h).encode(), *frames[2:]]


def _text_header(frames: list[bytes], old: str, new: str) -> list[bytes]:
    return [frames[0], frames[1].decode().replace(old, new).encode(), *frames[2:]]


Make = Callable[[Spectrum, str, int, random.Random], Hostile]


def _classes() -> dict[str, tuple[float, Make]]:
    """Each class: its weight among the hostile ones, and how to make one (spectrum, run, unique scan, rng)."""

    def enc(sp: Spectrum, run: str, scan: int, **kw: object) -> list[bytes]:
        return encode_spectrum(dataclasses.replace(sp, run=run, scan=scan), sent_ns=scan, **kw)  # type: ignore[arg-type]

    def named(kind: str, reason: str, frames: list[bytes], run: str, scan: int) -> Hostile:
        return Hostile(kind, frames, (run, scan), reason)

    def peaks(sp: Spectrum, how: str) -> Spectrum:
        mz, inten = sp.mz.copy(), sp.intensity.copy()
        if how == "disorder":
            mz = mz[::-1].copy()
        elif how == "nan":
            inten[len(inten) // 2] = np.nan
        elif how == "negative m/z":
            mz[0] = -abs(mz[0])  # still ascending
        elif how == "m/z beyond":
            mz[-1] = MAX_MZ * 2
        else:
            inten[0] = -1.0
        return dataclasses.replace(sp, mz=mz, intensity=inten)

    def charges(g: random.Random) -> list[int]:  # duplicated, out of range, or too many
        return g.choice([[2, 2], [2, 3, 3], [0, 2], [3, 11], list(range(1, MAX_CHARGES + 2))])

    def control(g: random.Random) -> str:
        return g.choice(["\x00", "\x1b", "\x7f", "\t", "\n", "\x9b"])

    def batched(sp: Spectrum, r: str, s: int, **changes: object) -> list[bytes]:  # one row, answered each
        return encode_spectra(r, [dataclasses.replace(sp, run=r, scan=s, **changes)], sent_ns=s)  # type: ignore[arg-type]

    return {
        "scan beyond 64 bits": (1, lambda sp, r, s, g: Hostile("scan beyond 64 bits",
                                _header(enc(sp, r, s), scan=2**63 + s), None, "field")),
        "sent_ns beyond 64 bits": (1, lambda sp, r, s, g: named("sent_ns beyond 64 bits", "field",
                                   _header(enc(sp, r, s), sent_ns=2**63 + s), r, s)),
        "run with a lone surrogate": (1, lambda sp, r, s, g: Hostile("run with a lone surrogate",
                                      _text_header(enc(sp, r, s), f'"{r}"', f'"x\\ud800{s}"'), None, "field")),
        "run too long": (1, lambda sp, r, s, g: Hostile("run too long", enc(sp, "r" * 600 + str(s), s), None,
                                                        "field")),
        "budget 1e300": (1, lambda sp, r, s, g: named("budget 1e300", "field", _header(enc(sp, r, s),
                                                      budget_ms=1e300), r, s)),
        "budget infinite": (1, lambda sp, r, s, g: named("budget infinite", "field", _text_header(
                            enc(sp, r, s, budget_ms=5.0), '"budget_ms":5.0', '"budget_ms":Infinity'), r, s)),
        "ms_level 0": (1, lambda sp, r, s, g: named("ms_level 0", "field", _header(enc(sp, r, s), ms_level=0),
                                                    r, s)),
        "scan as text": (1, lambda sp, r, s, g: named("scan as text", "field", _header(enc(sp, r, s), scan=str(s)),
                                                      r, s)),
        "scan as float": (1, lambda sp, r, s, g: named("scan as float", "field", _header(enc(sp, r, s),
                                                       scan=float(s)), r, s)),
        "charge 11": (1, lambda sp, r, s, g: named("charge 11", "field", _header(enc(sp, r, s), charge=11), r, s)),
        "n beyond 64 bits": (1, lambda sp, r, s, g: named("n beyond 64 bits", "field",
                             _header(enc(sp, r, s), n=10**30), r, s)),
        "peaks not ascending": (1, lambda sp, r, s, g: named("peaks not ascending", "peaks",
                                enc(peaks(sp, "disorder"), r, s), r, s)),
        "intensity NaN": (1, lambda sp, r, s, g: named("intensity NaN", "peaks", enc(peaks(sp, "nan"), r, s), r, s)),
        "negative intensity": (1, lambda sp, r, s, g: named("negative intensity", "peaks",
                               enc(peaks(sp, "negative"), r, s), r, s)),
        "n disagrees with the frames": (1, lambda sp, r, s, g: named("n disagrees with the frames", "peaks",
                                        _header(enc(sp, r, s), n=sp.n_peaks + 1), r, s)),
        "protocol version 2": (1, lambda sp, r, s, g: named("protocol version 2", "version",
                               _header(enc(sp, r, s), v=2), r, s)),
        "unknown topic": (1, lambda sp, r, s, g: named("unknown topic", "topic",
                          [b"spectrums", *enc(sp, r, s)[1:]], r, s)),
        "a spectrum on the batched topic": (1, lambda sp, r, s, g: named("a spectrum on the batched topic", "field",
                                            [b"spectra", *enc(sp, r, s)[1:]], r, s)),
        "header not JSON": (1, lambda sp, r, s, g: Hostile("header not JSON", [SPECTRUM, b'{"v": 1, "run"', b"", b""],
                                                           None, "header")),
        "header an array": (1, lambda sp, r, s, g: Hostile("header an array", [SPECTRUM, b"[1, 2]"], None, "header")),
        "one frame": (1, lambda sp, r, s, g: Hostile("one frame", [SPECTRUM], None, "frames")),
        "five frames": (1, lambda sp, r, s, g: named("five frames", "frames", [*enc(sp, r, s), b"x"], r, s)),
        "random bytes": (1, lambda sp, r, s, g: Hostile("random bytes", [g.randbytes(g.randint(0, 12)),
                                                        b"\xff" + g.randbytes(g.randint(0, 40))], None, "header")),
        # issue 67: finite values no later stage takes, unbounded lists and headers, control characters
        "rt 1e308": (1, lambda sp, r, s, g: named("rt 1e308", "field", _header(enc(sp, r, s),
                                                  rt=g.choice([1e308, -1e308, MAX_RT * 1.5])), r, s)),
        "precursor_mz absurd": (1, lambda sp, r, s, g: named("precursor_mz absurd", "field", _header(enc(sp, r, s),
                                precursor_mz=g.choice([1e300, MAX_MZ * 1.01])), r, s)),
        "precursor_intensity negative": (1, lambda sp, r, s, g: named("precursor_intensity negative", "field",
                                         _header(enc(sp, r, s), precursor_intensity=-1.0), r, s)),
        "charges 10,000": (1, lambda sp, r, s, g: named("charges 10,000", "field", _header(enc(sp, r, s),
                           charges=[1 + k % 10 for k in range(10_000)]), r, s)),
        "charges duplicated or out of range": (1, lambda sp, r, s, g: named("charges duplicated or out of range",
                                               "field", _header(enc(sp, r, s), charges=charges(g)), r, s)),
        "header over 64 kB": (1, lambda sp, r, s, g: named("header over 64 kB", "header", _header(enc(sp, r, s),
                              note="x" * (MAX_HEADER_BYTES + g.randint(1, 4096))), r, s)),
        "control character in the run": (1, lambda sp, r, s, g: Hostile("control character in the run",
                                         enc(sp, f"{r}{control(g)}{s}", s), None, "field")),
        "control character in the id": (1, lambda sp, r, s, g: named("control character in the id", "field",
                                        _header(enc(sp, r, s), id=f"scan={s}{control(g)}[31m"), r, s)),
        "peak m/z negative": (1, lambda sp, r, s, g: named("peak m/z negative", "peaks",
                              enc(peaks(sp, "negative m/z"), r, s), r, s)),
        "peak m/z beyond 1e6": (1, lambda sp, r, s, g: named("peak m/z beyond 1e6", "peaks",
                                enc(peaks(sp, "m/z beyond"), r, s), r, s)),
        "batched row rt 1e308": (1, lambda sp, r, s, g: named("batched row rt 1e308", "field",
                                 batched(sp, r, s, rt=1e308), r, s)),
        "batched row precursor_mz absurd": (1, lambda sp, r, s, g: named("batched row precursor_mz absurd", "field",
                                            batched(sp, r, s, precursor_mz=1e300), r, s)),
        "batched count beyond its bound": (1, lambda sp, r, s, g: Hostile("batched count beyond its bound",
                                           _header(batched(sp, r, s), count=MAX_COUNT + 1), None, "field")),
        "batched id with a control character": (1, lambda sp, r, s, g: Hostile(
            "batched id with a control character", _header(batched(sp, r, s), ids=[f"scan={s}\x00"]), None,
            "field")),
    }  # fmt: skip


def hostile_messages(
    spectra: Sequence[Spectrum], n: int, *, seed: int = 0, valid_share: float = 0.1, ms1_share: float = 0.02,
    runs: Sequence[str] = ("fuzz-a", "fuzz-b"),
) -> Iterator[Hostile]:
    """``n`` messages: ``valid_share`` valid MS2 spectra of ``spectra`` (and ``ms1_share`` MS1), the rest
    hostile, classes drawn by weight; every message that names a spectrum has a scan of its own."""
    rng = random.Random(seed)
    classes = _classes()
    names, weights = list(classes), [w for w, _ in classes.values()]
    small = [dataclasses.replace(s, mz=s.mz[:40], intensity=s.intensity[:40]) for s in spectra if s.n_peaks >= 4]
    for r in runs:
        yield Hostile("run.start", [RUN_START, json.dumps({"v": 1, "run": r}).encode()])
    for k in range(n):
        scan, run, sp = 1_000_000 + k, runs[k % len(runs)], rng.choice(small)
        u = rng.random()
        if u < valid_share:
            frames = encode_spectrum(dataclasses.replace(sp, run=run, scan=scan), sent_ns=scan)
            yield Hostile("valid MS2", frames, (run, scan), ms_level=2)
        elif u < valid_share + ms1_share:
            ms1 = dataclasses.replace(sp, run=run, scan=scan, ms_level=1, precursor_mz=0.0, charges=())
            yield Hostile("valid MS1", encode_spectrum(ms1, sent_ns=scan), ms_level=1)
        else:
            yield classes[rng.choices(names, weights)[0]][1](sp, run, scan, rng)


@dataclass
class Outcome:
    """What a daemon did with `hostile_messages`, against what it should have (`check`)."""

    sent: int
    answered: int
    missing: list[tuple[str, int, str]]  # answerable, not answered: run, scan, kind
    twice: list[tuple[str, int]]  # answered more than once
    unexpected: list[tuple[str, int]]  # answered, but nothing answerable was sent under that run and scan
    wrong_status: list[tuple[int, str, str]]  # scan, kind, status: invalid where valid or the other way
    invalid_counted: dict[str, float]
    invalid_expected: dict[str, float]

    @property
    def ok(self) -> bool:
        return not (self.missing or self.twice or self.unexpected or self.wrong_status) and \
            self.invalid_counted == self.invalid_expected  # fmt: skip


def check(sent: Sequence[Hostile], results: Sequence[dict[str, object]],
          invalid_counted: dict[str, float]) -> Outcome:  # fmt: skip
    """Compare a daemon's results and its ``rtsearch_invalid_total`` by reason with what ``sent`` expects."""
    answers = {h.answer: h for h in sent if h.answer is not None}
    got: dict[tuple[str, int], list[dict[str, object]]] = {}
    for r in results:
        got.setdefault((str(r["run"]), int(r["scan"])), []).append(r)  # type: ignore[call-overload]
    expected: dict[str, float] = {}
    for h in sent:
        if h.invalid:
            expected[h.invalid] = expected.get(h.invalid, 0.0) + 1
    return Outcome(
        sent=len(sent), answered=len(results),
        missing=[(k[0], k[1], h.kind) for k, h in answers.items() if k not in got],
        twice=[k for k, rs in got.items() if len(rs) > 1],
        unexpected=[k for k in got if k not in answers],
        wrong_status=[(k[1], answers[k].kind, str(rs[0]["status"])) for k, rs in got.items() if k in answers
                      and (rs[0]["status"] == "invalid") != (answers[k].status == "invalid")],
        invalid_counted={c: v for c, v in invalid_counted.items() if v or c in expected},
        invalid_expected=expected,
    )  # fmt: skip

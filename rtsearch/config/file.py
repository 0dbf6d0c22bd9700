"""TOML configuration → frozen dataclasses, and every choice's allowed values.

A raw TOML table is checked key by key (unknown keys and wrong types are a
`ConfigError` naming the key), then resolved into frozen dataclasses with
units in their types. ``resolved_dict`` gives the resolved form back as plain
data, which is logged and written beside results and into index manifests.

Each choice (enzyme, backend, spectra mode, ...) is a `Literal` here, and only here:
the command line's ``choices`` and every check derive from it (`choices`).
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from rtsearch.errors import ConfigError
from rtsearch.protocol.wire import MAX_BUDGET_MS
from rtsearch.types import Tolerance

Enzyme = Literal["trypsin", "trypsin/p", "lys-c", "lys-n", "asp-n", "chymotrypsin", "nonspecific"]
Specificity = Literal["full", "semi"]
DecoyMode = Literal["reverse", "none"]
ScoreKind = Literal["hyperscore", "dot", "xcorr"]
SpectraMode = Literal["sub", "pull"]
BackendName = Literal["cupy", "numpy"]  # where arrays live: a CUDA GPU (CuPy) or the host (NumPy)
BackendChoice = Literal["auto", BackendName]  # auto: CuPy when a CUDA GPU is usable, else NumPy
ResultsFormat = Literal["tsv", "parquet"]
# where the daemon's engine workers score: "process", each in a process of its own (the target opened again
# there: no GIL shared with the event loop), "thread", in the daemon's process; "auto": a process on a GPU
EngineHost = Literal["auto", "process", "thread"]
# how the GPU finds each query's best library entries: a warp walking its window ("narrow"), a matrix
# product over the library ("open"), or by the batch's average window ("auto"); NumPy has one way
LibraryMode = Literal["auto", "narrow", "open"]
# a protein's N-terminal forms in a top-down database (TopPIC's NONE, NME, NME_ACETYLATION, M_ACETYLATION):
# as is, initiator Met cleaved, Met cleaved and the new N-terminus acetylated, Met kept and acetylated
NTermForm = Literal["none", "nme", "nme_acetyl", "m_acetyl"]
ProteoformDecoys = Literal["shuffle", "reverse", "none"]
IonPair = Literal["b/y", "c/z"]  # fragment ions of top-down spectra: CID/HCD, or ETD/ECD/EThcD
# cluster workers (cluster/door.py): each the whole target, taking whole batches ("replicate"), or a piece of
ClusterMode = Literal["auto", "replicate", "partition"]  # the mass range cut by equal work; auto: replicate if it fits
PlacementKind = Literal["local", "ray"]  # who starts and restarts cluster workers: processes here, or Ray actors
LaneWorkers = Literal["auto", "shared", "own"]  # lanes x cluster: one set of workers or each lane's (cluster/share.py)


def choices(choice: Any) -> tuple[str, ...]:
    """The allowed values of a choice (``choices(BackendChoice)``: ``('auto', 'cupy', 'numpy')``)."""
    return tuple(get_args(choice))


def setting(default: Any, doc: str, *, flag: bool | str = False, metavar: str = "") -> Any:
    """A key with what it means written once: the reference's meaning (docs/make_configuration.py) and, with
    ``flag`` (True: ``--`` and the key with dashes; or the option's name), a command-line option that overrides it,
    whose ``--help`` is that meaning and the default (`rtsearch.cli.flags`)."""
    return field(default=default, metadata={"doc": doc, "flag": flag, "metavar": metavar})


@dataclass(frozen=True)
class DatabaseConfig:
    """How FASTA proteins become the peptides of an index."""

    enzyme: Enzyme = "trypsin"  # where proteins are cut
    specificity: Specificity = "full"  # "semi": one end of a peptide may be a non-enzymatic cut
    missed_cleavages: int = 2  # cleavage sites a peptide may span
    min_length: int = 7  # residues
    max_length: int = 50  # residues
    min_mass: float = 500.0  # Da, monoisotopic, of a peptide
    max_mass: float = 5000.0  # Da, monoisotopic, of a peptide
    clip_n_term_met: bool = True  # a protein's initiator Met also cleaved off
    fixed_mods: tuple[str, ...] = ("Carbamidomethyl@C",)  # on every such residue
    variable_mods: tuple[str, ...] = ("Oxidation@M",)  # each peptide also with these, up to max_variable_mods
    max_variable_mods: int = 2  # variable modifications a peptide may carry
    decoys: DecoyMode = "reverse"  # reversed peptides (terminal residue kept) for target-decoy FDR
    decoy_prefix: str = "rev_"  # a decoy's protein accession starts with this
    isoleucine_equals_leucine: bool = False  # I and L one residue (peptides differing only there are one)
    fragment_min_mz: float = 150.0  # fragment ions indexed within this m/z range
    fragment_max_mz: float = 2000.0  # fragment ions indexed within this m/z range
    bucket_size: int = 8192  # peptides a bucket of the fragment index (database/fragments.py)


@dataclass(frozen=True)
class SearchConfig:
    """How spectra are preprocessed, matched and scored."""

    precursor_tolerance: Tolerance = Tolerance(20.0, "ppm")  # a candidate's mass from the precursor's
    fragment_tolerance: Tolerance = Tolerance(0.5, "Da")  # a fragment ion from a peak
    isotope_errors: tuple[int, ...] = (0, 1)  # the precursor tried at each of these 13C-peak offsets
    charges: tuple[int, ...] = (2, 3, 4)  # tried where the file (or the message) gives no charge
    score: ScoreKind = "hyperscore"  # the primary score (dot: Li et al. 2014; a sparse XCorr)
    top_peaks: int = 150  # most intense peaks a spectrum keeps
    min_peaks: int = 10  # fewer peaks left: the spectrum is not scored (reason given)
    min_mz: float = 150.0  # peaks below this m/z are dropped
    precursor_removal_da: float = 1.5  # peaks this close to the precursor's m/z are dropped
    candidates: int = 40  # best fragment-index candidates a spectrum scored in full
    min_matched_peaks: int = 3  # a candidate with fewer matched fragments is not scored
    max_fragment_charge: int = 2  # fragment ions up to this charge
    ranks: int = 1  # matches reported a spectrum in results files (database search; 1: the best only)
    deisotope: bool = True  # applied only when the fragment tolerance is 0.05 Da or finer
    backend: BackendChoice = "auto"  # where every command computes (``--backend`` overrides)


@dataclass(frozen=True)
class LibraryConfig:
    """Spectral library search (``--library``): the open-modification window, the GPU's path."""

    open: bool = False  # every entry within +-open_window_da of the precursor mass (``--open``)
    open_window_da: float = 500.0  # Da either side of the precursor mass, with open
    gpu_mode: LibraryMode = "auto"  # the GPU's path: a warp a window, matrix products, or by window


@dataclass(frozen=True)
class ServeConfig:
    """The daemon's endpoints, budget and limits (``rtsearch serve`` flags override these)."""

    spectra: str = setting("tcp://127.0.0.1:5555", "the instrument's PUB to connect to (sub), or where to bind (pull)",
                           flag=True, metavar="ENDPOINT")  # fmt: skip
    spectra_mode: SpectraMode = setting("sub", "sub: connect to the instrument's PUB; pull: bind, for lossless PUSH "
                                        "feeds", flag=True)  # fmt: skip
    results: str = setting("tcp://127.0.0.1:5556", "where the results PUB binds", flag=True, metavar="ENDPOINT")
    metrics_port: int = setting(9108, "Prometheus /metrics, /healthz, /readyz (0: any free port)", flag=True,
                                metavar="PORT")  # fmt: skip
    metrics_host: str = "127.0.0.1"  # the address /metrics binds
    mqtt: str = setting("", "publish identifications and run summaries to this broker, HOST:PORT (empty: no MQTT)",
                        flag=True, metavar="HOST:PORT")  # fmt: skip
    instrument: str = setting("instrument", "names the MQTT topics and metric series", flag=True, metavar="NAME")
    budget_ms: float = setting(100.0, "an answer is due this long after receipt, ms (a message's budget_ms wins)",
                               flag=True, metavar="MS")  # fmt: skip
    identified_at: float = setting(0.01, "a target match is answered identified at or below this running q-value "
                                   "(q = (decoys + 1) / targets: at 0.01 a run has none before 100 targets rank "
                                   "above its first decoy)", flag=True, metavar="Q")  # fmt: skip
    results_dir: str = setting("rtsearch-results", "the folder of each run's results file (journals in .journal/)",
                               flag=True, metavar="DIR")  # fmt: skip
    results_format: ResultsFormat = "tsv"  # the run files' format
    max_batch: int = setting(4096, "spectra an engine batch at most", flag=True)
    max_queue: int = 32768  # spectra waiting at most; beyond, answered shed
    linger_ms: float = 0.0  # let a batch fill this long even with a worker free
    workers: int = setting(1, "engine threads, each with its own CUDA stream or engine process; those after the first "
                           "take only large batches (workers.py OVERLAP_MIN): 6 for bulk replays, with max_batch 4096 "
                           "and publishers 2 (the target 6 times on the GPU)", flag=True)  # fmt: skip
    engine: EngineHost = setting("auto", "where each worker scores: process (its own, the target opened again there: "
                                 "no GIL shared with the daemon), thread (the daemon's process), auto (a process on a "
                                 "GPU; engine_process.py)", flag=True)  # fmt: skip
    publishers: int = setting(0, "processes that encode and send results; 0: the engine workers do "
                              "(outputs/publish.py)", flag=True)  # fmt: skip
    intakes: int = setting(0, "processes decoding spectra (0: one per 4 cores, at most 4); 2+: behind a C proxy on "
                           "the spectra socket (intake/door.py)", flag=True)  # fmt: skip
    shutdown_timeout_s: float = 30.0  # at SIGTERM, what was received may take this long; the rest shed
    mqtt_queue: int = 10000  # MQTT messages waiting at most (beyond: dropped, counted)
    max_open_runs: int = 1000  # beyond, the run idle longest is ended (finished) to open a new one
    run_idle_s: float = 86_400.0  # a run that received nothing for this long is ended (finished)
    elution: bool = setting(False, "follow each identified precursor through the MS1 scans and publish its "
                            "elution's apex and end (topic 'elution' on the results socket, <base>/<run>/elution on "
                            "MQTT; outputs/elution.py)", flag=True)  # fmt: skip
    cluster: int = setting(0, "score on N workers of their own (processes here, or Ray actors with placement ray), "
                           "each opening the target on the backend; this daemon is their front door and keeps the "
                           "target on the host (0: score here; rtsearch/cluster/)", flag=True)  # fmt: skip
    cluster_mode: ClusterMode = setting("auto", "replicate: each worker holds the whole target, whole batches go to "
                                        "the least busy; partition: each worker holds a slice of the precursor-mass "
                                        "range cut by equal work (Li et al.) and scores the queries in its piece; "
                                        "auto: replicate when the target fits a worker's memory (worker_memory_gb, "
                                        "else its share of its GPU), else partition", flag=True)  # fmt: skip
    cluster_placement: PlacementKind = setting("local", "who starts and restarts the workers: local processes, or "
                                               "Ray actors", flag="--placement")  # fmt: skip
    ray_address: str = setting("", "placement ray: the cluster to join (\"auto\", \"ray://host:10001\"); empty: "
                               "start one on this host", flag=True, metavar="ADDR")  # fmt: skip
    gpus_per_worker: float = 0.0  # placement "ray": GPUs each worker asks for (0.5: two share one; 0: CPU workers)
    cluster_host: str = "127.0.0.1"  # where workers reach this daemon (several hosts: its address on their network)
    cluster_curve: bool = False  # CURVE on loopback too (always off it: cluster/auth.py); a host shared with strangers
    worker_memory_gb: float = 0.0  # a cluster worker's room for the target (0: its share of its GPU; CPU: no limit)
    piece_workers: int = 1  # partition: the workers holding each piece (cluster / piece_workers pieces; door.py)
    lanes: int = setting(1, "spread the runs over N daemon processes behind this one (each opens the target, scores "
                         "on its own engine, lane k on GPU k mod the host's GPUs, and owns the runs it is given; for "
                         "many runs at once: one run stays on one lane; serve/lanes.py); 1: this one",
                         flag=True)  # fmt: skip
    lane_workers: LaneWorkers = setting("auto", "with lanes and a cluster: shared (the lanes send to one cluster, each "
                                        "piece of a partition held once, each worker batching what every lane sends "
                                        "it; local placement), own (each lane a cluster of its own), or auto (own "
                                        "while the target fits each of the lanes' workers whole, else shared)",
                                        flag=True)  # fmt: skip


@dataclass(frozen=True)
class ProteoformConfig:
    """How FASTA proteins become the proteoforms of a top-down database (``[proteoforms]``)."""

    n_term_forms: tuple[str, ...] = ("none", "nme", "nme_acetyl", "m_acetyl")  # each an `NTermForm`
    fixed_mods: tuple[str, ...] = ()  # on every such residue
    # PTMs a mass shift is named by where it fits one (and, with [topdown] known_shifts, aligned as steps)
    known_ptms: tuple[str, ...] = ("Acetyl@K", "Phospho@STY", "Oxidation@M", "Methyl@KR", "Dimethyl@KR")
    decoys: ProteoformDecoys = "shuffle"  # decoy proteins for target-decoy FDR
    decoy_prefix: str = "DECOY_"  # a decoy protein's accession starts with this
    decoy_seed: int = 20240531  # the shuffles' seed (a database builds the same every time)
    max_length: int = 10_000  # longer proteins are left out (counted in the manifest)


@dataclass(frozen=True)
class TopDownConfig:
    """How a top-down search aligns deconvoluted spectra with proteoforms (``[topdown]``)."""

    tolerance_da: float = 0.02  # fragment PRMs: at least this, and at least `fragment_ppm` of the precursor mass
    fragment_ppm: float = 10.0  # (a PRM from a C-terminal ion carries the precursor's error; TopPIC: -e 15)
    precursor_ppm: float = 15.0  # a proteoform's mass from the precursor's (ppm)
    max_shifts: int = 1  # unknown mass shifts a PrSM may hold
    max_shift_mass: float = 500.0  # Da, either sign
    known_shifts: int = 0  # known PTMs ([proteoforms] known_ptms) a PrSM may hold besides, as alignment steps
    candidates: int = 20  # whole N-terminal forms aligned a spectrum (truncations: ten times as many)
    truncations: bool = True  # truncated sub-sequences as candidates too
    ions: IonPair = "b/y"  # every spectrum's: spectra travel without activation (`DeconvolutedSpectrum.as_spectrum`)

    def tolerance(self, precursor_mass: float) -> float:
        """The fragment PRM tolerance (Da) of a spectrum with this precursor mass."""
        return max(self.tolerance_da, self.fragment_ppm * 1e-6 * precursor_mass)


@dataclass(frozen=True)
class Config:
    database: DatabaseConfig = field(default_factory=DatabaseConfig)
    search: SearchConfig = field(default_factory=SearchConfig)
    serve: ServeConfig = field(default_factory=ServeConfig)
    library: LibraryConfig = field(default_factory=LibraryConfig)
    proteoforms: ProteoformConfig = field(default_factory=ProteoformConfig)
    topdown: TopDownConfig = field(default_factory=TopDownConfig)
    # whether the file had a [database] table (a search then checks the index against it)
    database_given: bool = False


# keys that lived elsewhere before: a config naming them gets told where they are now
MOVED = {("serve", "backend"): "[search] backend (it applies to every command)"}
SECTIONS = ("database", "search", "serve", "library", "proteoforms", "topdown")


def _literal_check(section: str, key: str, value: Any, typ: Any) -> Any:
    allowed = get_args(typ)
    v = str(value).lower() if isinstance(value, str) else value
    if v not in allowed:
        raise ConfigError(f"[{section}] {key} = {value!r}: expected one of {', '.join(allowed)}")
    return v


def _coerce(section: str, key: str, value: Any, default: Any, typ: Any) -> Any:
    where = f"[{section}] {key}"
    if get_args(typ) and all(isinstance(a, str) for a in get_args(typ)):
        return _literal_check(section, key, value, typ)
    if isinstance(default, Tolerance):
        if not isinstance(value, str):
            raise ConfigError(f"{where} must be a string like '20 ppm' or '0.5 Da'")
        try:
            return Tolerance.parse(value)
        except ConfigError as e:
            raise ConfigError(f"{where}: {e}") from None
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ConfigError(f"{where} must be true or false, got {value!r}")
        return value
    if isinstance(default, int):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where} must be an integer, got {value!r}")
        return value
    if isinstance(default, float):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{where} must be a number, got {value!r}")
        if not math.isfinite(value):
            raise ConfigError(f"{where} must be a finite number, got {value!r}")
        return float(value)
    if isinstance(default, str):
        if not isinstance(value, str):
            raise ConfigError(f"{where} must be a string, got {value!r}")
        return value
    if isinstance(default, tuple):
        if not isinstance(value, list):
            raise ConfigError(f"{where} must be a list, got {value!r}")
        kind = type(default[0]) if default else str
        for item in value:
            if isinstance(item, bool) or not isinstance(item, kind):
                raise ConfigError(f"{where}: every item must be a {kind.__name__}, got {item!r}")
        return tuple(value)
    raise ConfigError(f"{where}: unsupported value {value!r}")  # pragma: no cover


def _section(cls: type, section: str, raw: dict[str, Any]) -> Any:
    if not isinstance(raw, dict):
        raise ConfigError(f"[{section}] must be a table")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    defaults = cls()
    kwargs: dict[str, Any] = {}
    for key, value in raw.items():
        if (section, key) in MOVED:
            raise ConfigError(f"[{section}] {key} has moved to {MOVED[section, key]}")
        if key not in fields:
            known = ", ".join(sorted(fields))
            raise ConfigError(f"unknown key [{section}] {key!r}; known keys: {known}")
        hints = cls.__annotations__
        typ = eval(hints[key], globals()) if isinstance(hints[key], str) else hints[key]  # noqa: S307
        kwargs[key] = _coerce(section, key, value, getattr(defaults, key), typ)
    cfg = cls(**kwargs)
    _validate(section, cfg)
    return cfg


def _validate(section: str, cfg: Any) -> None:
    if isinstance(cfg, DatabaseConfig):
        if not 0 <= cfg.missed_cleavages <= 10:
            raise ConfigError("[database] missed_cleavages must be between 0 and 10")
        if not 1 <= cfg.min_length <= cfg.max_length <= 255:
            raise ConfigError("[database] need 1 <= min_length <= max_length <= 255")
        if not 0 <= cfg.max_variable_mods <= 6:
            raise ConfigError("[database] max_variable_mods must be between 0 and 6")
        if not 0 < cfg.min_mass < cfg.max_mass:
            raise ConfigError("[database] need 0 < min_mass < max_mass")
        if cfg.bucket_size < 64:
            raise ConfigError("[database] bucket_size must be at least 64")
    if isinstance(cfg, SearchConfig):
        if not cfg.charges or any(not 1 <= z <= 10 for z in cfg.charges):
            raise ConfigError("[search] charges must be a non-empty list of integers 1..10")
        if not cfg.isotope_errors or any(not -2 <= i <= 3 for i in cfg.isotope_errors):
            raise ConfigError("[search] isotope_errors must be a non-empty list of integers -2..3")
        if not 10 <= cfg.top_peaks <= 256:
            raise ConfigError("[search] top_peaks must be between 10 and 256")
        if not 1 <= cfg.candidates <= 500:
            raise ConfigError("[search] candidates must be between 1 and 500")
        if not 1 <= cfg.max_fragment_charge <= 4:
            raise ConfigError("[search] max_fragment_charge must be between 1 and 4")
        if not 1 <= cfg.ranks <= min(cfg.candidates, 10):
            raise ConfigError(f"[search] ranks must be between 1 and {min(cfg.candidates, 10)} (≤ candidates, ≤ 10)")
    if isinstance(cfg, LibraryConfig) and not 0 < cfg.open_window_da <= 10_000:
        raise ConfigError("[library] open_window_da must be a number of Da in (0, 10000]")
    if isinstance(cfg, ServeConfig):
        validate_serve(cfg)
    if isinstance(cfg, ProteoformConfig):
        bad = [f for f in cfg.n_term_forms if f not in choices(NTermForm)]
        if bad or not cfg.n_term_forms:
            raise ConfigError(f"[proteoforms] n_term_forms: each one of {', '.join(choices(NTermForm))}, "
                              f"at least one; got {list(cfg.n_term_forms)}")  # fmt: skip
        if not 1 <= cfg.max_length <= 100_000:
            raise ConfigError("[proteoforms] max_length must be between 1 and 100000")
    if isinstance(cfg, TopDownConfig):
        _check_topdown(cfg)


def _check_topdown(cfg: TopDownConfig) -> None:
    if not 0.001 <= cfg.tolerance_da <= 1.0:
        raise ConfigError("[topdown] tolerance_da must be between 0.001 and 1 Da")
    if not 0 <= cfg.fragment_ppm <= 100:
        raise ConfigError("[topdown] fragment_ppm must be between 0 and 100")
    if not 0 < cfg.precursor_ppm <= 1000:
        raise ConfigError("[topdown] precursor_ppm must be in (0, 1000]")
    if not 0 <= cfg.max_shifts <= 2:
        raise ConfigError("[topdown] max_shifts must be 0, 1 or 2")
    if not 0 <= cfg.known_shifts <= 4:
        raise ConfigError("[topdown] known_shifts must be between 0 and 4")
    if not 0 < cfg.max_shift_mass <= 2000:
        raise ConfigError("[topdown] max_shift_mass must be in (0, 2000] Da")
    if not 1 <= cfg.candidates <= 500:
        raise ConfigError("[topdown] candidates must be between 1 and 500")


# every number of [serve] (and of the flags that override it): finite, and within what a daemon honours
SERVE_RANGES: dict[str, tuple[float, float]] = {
    "budget_ms": (0.001, MAX_BUDGET_MS), "linger_ms": (0.0, 60_000.0), "shutdown_timeout_s": (0.1, 3_600.0),
    "max_batch": (1, 1_000_000), "max_queue": (1, 100_000_000), "workers": (1, 8), "publishers": (0, 16),
    "intakes": (0, 32), "cluster": (0, 256), "gpus_per_worker": (0.0, 8.0), "worker_memory_gb": (0.0, 1e6),
    "metrics_port": (0, 65535), "mqtt_queue": (1, 10_000_000), "max_open_runs": (1, 100_000),
    "run_idle_s": (1.0, 7 * 86_400.0), "lanes": (1, 64), "piece_workers": (1, 16), "identified_at": (0.0, 1.0),
}  # fmt: skip


def validate_serve(cfg: ServeConfig) -> None:
    """Check a `ServeConfig` (also after command-line flags replaced some of its values)."""
    for key, (lo, hi) in SERVE_RANGES.items():
        if not (math.isfinite(value := getattr(cfg, key)) and lo <= value <= hi):
            raise ConfigError(f"[serve] {key} must be between {lo:g} and {hi:g}, got {value!r}")
    if cfg.max_batch > cfg.max_queue:
        raise ConfigError("[serve] need max_batch <= max_queue")
    if bad := [key for key in ("spectra", "results") if "://" not in getattr(cfg, key)]:
        raise ConfigError(f"[serve] {bad[0]} must be a ZeroMQ endpoint like tcp://127.0.0.1:5555")
    if cfg.mqtt:
        mqtt_address(cfg.mqtt)


def mqtt_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (or ``HOST``, port 1883) → ``(host, port)``."""
    host, _, port = text.rpartition(":") if ":" in text else (text, "", "1883")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"MQTT address {text!r}: expected HOST:PORT, e.g. 127.0.0.1:1883")
    return host, int(port)


def parse_config(raw: dict[str, Any]) -> Config:
    """Resolve a raw TOML mapping into a `Config`."""
    unknown = set(raw) - set(SECTIONS)
    if unknown:
        raise ConfigError(f"unknown table(s) {sorted(unknown)}; known: {', '.join(f'[{s}]' for s in SECTIONS)}")
    return Config(
        database=_section(DatabaseConfig, "database", raw.get("database", {})),
        search=_section(SearchConfig, "search", raw.get("search", {})),
        serve=_section(ServeConfig, "serve", raw.get("serve", {})),
        library=_section(LibraryConfig, "library", raw.get("library", {})),
        proteoforms=_section(ProteoformConfig, "proteoforms", raw.get("proteoforms", {})),
        topdown=_section(TopDownConfig, "topdown", raw.get("topdown", {})),
        database_given="database" in raw,
    )


def with_search(cfg: Config, **values: Any) -> Config:
    """``cfg`` with ``[search]`` ``values`` in place (a command's flags), checked as the file's are."""
    _validate("search", search := dataclasses.replace(cfg.search, **values))
    return dataclasses.replace(cfg, search=search)


def load_config(path: str | Path | None) -> Config:
    """Read a TOML file (``None`` gives the defaults)."""
    if path is None:
        return Config()
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"{p}: cannot read config: {e.strerror}") from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{p}: invalid TOML: {e}") from None
    try:
        return parse_config(raw)
    except ConfigError as e:
        raise ConfigError(f"{p}: {e}") from None


def resolved_dict(obj: Any) -> Any:
    """Plain-data form of a config dataclass (tolerances as strings)."""
    if isinstance(obj, Tolerance):
        return str(obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: resolved_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, tuple):
        return [resolved_dict(x) for x in obj]
    return obj

"""The currency every layer trades in: scored batches, and what a spectrum's answer looks like.

A leaf module (NumPy and `rtsearch.types` only), so scoring, search, the daemon and
the writers import it without a circle.

- `BestMatches`: per spectrum of a batch, the best match (an id among the searched
  target's entries; -1: none) and its features, in the target's order.
- `ScoredBatch`: a batch's spectra (run, scan, precursor, retention time), their best
  matches and, for the unscored, the reason.
- `ResultRow` / `RESULT_COLUMNS`: one spectrum's row in a results file, the columns every
  kind of search writes, in file order (a kind's extra fields and its features follow).
- `ResultMessage`: one spectrum's answer on the wire (docs/protocol.md), a `TypedDict`,
  so results stay plain dicts that orjson encodes; its match fields are `LIVE_FIELDS`,
  the file's columns but the peptide-level q-value, known only at the end of a run.
- `Results`: a run's answers to a batch, column by column, until a publisher turns them
  into `ResultMessage` s.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from typing import Required, TypedDict

import numpy as np

from rtsearch.batch import SpectraBatch
from rtsearch.types import ResultStatus, spectrum_ids


@dataclass
class BestMatches:
    """Per spectrum (S rows): the top match and its features; ``match`` is -1 where none."""

    match: np.ndarray  # int64 [S]: an id among the searched target's entries
    charge: np.ndarray  # int64 [S]
    calc_mz: np.ndarray  # float64 [S]
    ppm_error: np.ndarray  # float64 [S]
    matched_peaks: np.ndarray  # int64 [S]
    features: np.ndarray  # float64 [S, F]: the target's features, in its order

    @classmethod
    def none(cls, n: int, n_features: int) -> BestMatches:
        """``n`` spectra without a match."""
        return cls(
            match=np.full(n, -1, np.int64), charge=np.zeros(n, np.int64), calc_mz=np.full(n, np.nan),
            ppm_error=np.full(n, np.nan), matched_peaks=np.zeros(n, np.int64),
            features=np.full((n, n_features), np.nan),
        )  # fmt: skip

    def take(self, idx: np.ndarray) -> BestMatches:
        # field by field: `dataclasses.fields` cost 29 µs a call, paid by every run of every batch the daemon answers
        return BestMatches(self.match[idx], self.charge[idx], self.calc_mz[idx], self.ppm_error[idx],
                           self.matched_peaks[idx], self.features[idx])  # fmt: skip

    @classmethod
    def concat(cls, parts: Sequence[BestMatches]) -> BestMatches:
        return cls(*(np.concatenate([getattr(p, name) for p in parts]) for name in _BEST_FIELDS))


_BEST_FIELDS = tuple(f.name for f in fields(BestMatches))


@dataclass
class Names:
    """Per spectrum of a batch, its best match's ProForma and protein accessions ("" and [] where none): worked
    out where the batch was scored (the daemon's engine process), so that the daemon need not."""

    peptides: list[str]
    proteins: list[list[str]]

    def take(self, idx: np.ndarray) -> Names:
        rows = idx.tolist()
        return Names([self.peptides[i] for i in rows], [self.proteins[i] for i in rows])


@dataclass
class ScoredBatch:
    """Per spectrum of one batch: identity, best match (``best.match`` -1 if none), reason."""

    run: list[str]
    scan: np.ndarray
    precursor_mz: np.ndarray
    rt: np.ndarray
    best: BestMatches
    reason: list[str]
    # seconds per engine stage of the batch this came from (unsynchronized wall clock: where a slow
    # batch spent its time, for the daemon's log); empty for batches not scored by an engine
    stages: dict[str, float] = field(default_factory=dict)
    names: Names | None = None  # the matches' names, when worked out beside scoring (`rtsearch.search.live.named`)
    native_id: list[str] = field(default_factory=list)  # each spectrum's id in its file (`SpectraBatch.native_id`)
    # ranks 2, 3, ... (`[search] ranks`), each [S]: the next best match of every spectrum (match -1 where none)
    lower: list[BestMatches] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.run)

    def take(self, rows: Sequence[int] | np.ndarray) -> ScoredBatch:
        """The spectra at ``rows``, in that order."""
        idx = np.asarray(rows, dtype=np.int64)
        names = self.names.take(idx) if self.names is not None else None
        return ScoredBatch([self.run[i] for i in idx], self.scan[idx], self.precursor_mz[idx], self.rt[idx],
                           self.best.take(idx), [self.reason[i] for i in idx], names=names,
                           native_id=[self.native_id[i] for i in idx] if self.native_id else [],
                           lower=[b.take(idx) for b in self.lower])  # fmt: skip

    def ids(self) -> list[str]:
        """Each spectrum's native id, ``scan=N`` where none came."""
        return spectrum_ids(self.native_id, self.scan)


def concat_batches(batches: Sequence[ScoredBatch]) -> ScoredBatch:
    """One `ScoredBatch` holding ``batches`` in order (stages dropped; names kept when every batch has them; lower
    ranks as deep as the deepest batch's, none where a batch has fewer)."""
    names = None
    if all(b.names is not None for b in batches):
        names = Names([p for b in batches for p in b.names.peptides],  # type: ignore[union-attr]
                      [p for b in batches for p in b.names.proteins])  # type: ignore[union-attr]  # fmt: skip
    return ScoredBatch(
        [r for b in batches for r in b.run], np.concatenate([b.scan for b in batches]),
        np.concatenate([b.precursor_mz for b in batches]), np.concatenate([b.rt for b in batches]),
        BestMatches.concat([b.best for b in batches]), [r for b in batches for r in b.reason], names=names,
        native_id=[n for b in batches for n in b.ids()] if any(b.native_id for b in batches) else [],
        lower=lower_ranks(batches),
    )  # fmt: skip


def lower_ranks(batches: Sequence[ScoredBatch]) -> list[BestMatches]:
    """Ranks 2, 3, ... of ``batches`` in order, as deep as the deepest batch's (no match where a batch has fewer)."""
    depth = max((len(b.lower) for b in batches), default=0)
    return [BestMatches.concat([b.lower[r] if r < len(b.lower) else BestMatches.none(len(b), b.best.features.shape[1])
                                for b in batches]) for r in range(depth)]  # fmt: skip


def unscored_batch(
    run: str, scans: Sequence[int], precursor_mz: Sequence[float], reasons: Sequence[str], *, n_features: int,
    ids: Sequence[str] = (),
) -> ScoredBatch:  # fmt: skip
    """A `ScoredBatch` of spectra that were never scored (shed, invalid), with their reasons (and native ids)."""
    n = len(scans)
    return ScoredBatch(
        run=[run] * n, scan=np.asarray(scans, np.int64), precursor_mz=np.asarray(precursor_mz, np.float64),
        rt=np.zeros(n), best=BestMatches.none(n, n_features), reason=list(reasons), native_id=list(ids),
    )  # fmt: skip


class ResultRow(TypedDict):
    """One spectrum in a results file: the columns every kind writes, in file order."""

    run: str
    scan: int
    spectrum_id: str  # the spectrum's native id in its file (mzML id, MGF TITLE), else scan=N
    rank: int  # 1: the spectrum's best match; 2, 3, ...: the next ones (`[search] ranks`), with no q-value
    charge: int
    precursor_mz: float
    rt: float  # retention time, seconds, as the spectrum gave it
    calc_mz: float
    ppm_error: float
    peptide: str  # ProForma
    proteins: str  # accessions, ";"-separated
    is_decoy: bool
    score: float  # the run's discriminant (higher is better)
    q_value: float
    peptide_q_value: float
    pep: float  # posterior error probability (`rtsearch.search.fdr.peps`)
    matched_peaks: int
    reason: str  # why there is no match


RESULT_COLUMNS: tuple[str, ...] = tuple(ResultRow.__annotations__)
# what a live result carries of the file's columns: the peptide-level q-value and PEP exist only at a run's end; the
# retention time and the spectrum's id are the sender's own (a result echoes its ``sent_ns``, not the spectrum); a
# result is the spectrum's best match (rank 1)
FILE_ONLY: tuple[str, ...] = ("peptide_q_value", "pep", "rt", "spectrum_id", "rank")
LIVE_FIELDS: tuple[str, ...] = tuple(c for c in RESULT_COLUMNS if c not in FILE_ONLY)


class ResultMessage(TypedDict, total=False):
    """One spectrum's answer on the wire (topic ``result``); a match's fields only when it has one.

    ``score`` is the run's live ranking score (the primary score, then the run's discriminant),
    ``q_value`` the running q-value; a kind of search may add fields of its own (its module's
    ``result_fields``). The daemon stamps ``sent_ns`` (echoed), ``received_ns`` and ``published_ns``.
    """

    v: int
    run: Required[str]
    scan: Required[int]
    status: Required[str]  # a `rtsearch.types.ResultStatus` value
    reason: str
    peptide: str
    proteins: list[str]
    charge: int
    precursor_mz: float
    calc_mz: float
    ppm_error: float
    score: float
    q_value: float
    is_decoy: bool
    matched_peaks: int
    sent_ns: int | None
    received_ns: int
    published_ns: int


STATUSES: tuple[str, ...] = tuple(s.value for s in ResultStatus)  # a result's status by its code (`Results`)


@dataclass
class Results:
    """One run's answers to a batch, column by column; `messages` gives them as `ResultMessage` s.

    What crosses from the daemon's workers to its publishers: arrays, and the names of the matched
    spectra. Numbers of spectra without a match are not read; ``peptide``, ``proteins`` and the
    kind's ``extra`` fields are given for the matched spectra only, in order.
    """

    run: str
    scan: np.ndarray  # int64 [S]
    status: np.ndarray  # int8 [S]: a code of `STATUSES`
    reason: list[str]  # [S], "" where matched
    precursor_mz: np.ndarray  # float64 [S]
    matched: np.ndarray  # bool [S]
    charge: np.ndarray  # int64 [S]
    calc_mz: np.ndarray  # float64 [S]
    ppm_error: np.ndarray
    score: np.ndarray
    q_value: np.ndarray
    is_decoy: np.ndarray  # bool [S]
    matched_peaks: np.ndarray  # int64 [S]
    peptide: list[str] = field(default_factory=list)  # [M]
    proteins: list[list[str]] = field(default_factory=list)  # [M]
    extra: dict[str, np.ndarray] = field(default_factory=dict)  # [M] each
    # float64 [S]: each spectrum's retention time, seconds, where it was scored (not on the wire: the elution
    # tracker places each precursor it follows in its MS1 trace by it, however late the answer); None if unscored
    rt: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.scan.shape[0])

    @classmethod
    def unscored(cls, run: str, scans: Sequence[int], precursor_mz: Sequence[float], reasons: Sequence[str],
                 status: str) -> Results:  # fmt: skip
        """Answers without a match (``shed``, ``invalid``, ...), with their reasons."""
        n = len(scans)
        zeros, nan = np.zeros(n, np.int64), np.full(n, np.nan)
        return cls(run, np.asarray(scans, np.int64), np.full(n, STATUSES.index(status), np.int8), list(reasons),
                   np.asarray(precursor_mz, np.float64), np.zeros(n, bool), zeros, nan, nan, nan, nan,
                   np.zeros(n, bool), zeros)  # fmt: skip

    def counts(self) -> dict[str, int]:
        """Answers by status."""
        n = np.bincount(self.status.astype(np.int64), minlength=len(STATUSES))
        return {s: int(k) for s, k in zip(STATUSES, n.tolist(), strict=True) if k}

    def messages(self) -> list[ResultMessage]:
        """Each answer as the wire's `ResultMessage` (without the stamps)."""
        run, statuses = self.run, STATUSES
        names, proteins = iter(self.peptide), iter(self.proteins)
        # plain lists, zipped: indexing numpy scalars one by one costs more than the conversion
        cols = zip(
            self.scan.tolist(), self.status.tolist(), self.reason, self.precursor_mz.tolist(), self.matched.tolist(),
            self.charge.tolist(), self.calc_mz.tolist(), self.ppm_error.tolist(), self.score.tolist(),
            self.q_value.tolist(), self.is_decoy.tolist(), self.matched_peaks.tolist(), strict=True,
        )  # fmt: skip
        out: list[ResultMessage] = [
            {"run": run, "scan": scan, "status": statuses[st], "peptide": next(names), "proteins": next(proteins),
             "charge": z, "precursor_mz": prec, "calc_mz": calc, "ppm_error": ppm, "score": score, "q_value": qv,
             "is_decoy": d, "matched_peaks": k}
            if m else {"run": run, "scan": scan, "status": statuses[st], "reason": reason, "precursor_mz": prec}
            for scan, st, reason, prec, m, z, calc, ppm, score, qv, d, k in cols
        ]  # fmt: skip
        if self.extra:
            keys = tuple(self.extra)
            rows = (r for r, m in zip(out, self.matched.tolist(), strict=True) if m)
            for r, values in zip(rows, zip(*(self.extra[k].tolist() for k in keys), strict=True), strict=True):
                r.update(zip(keys, values, strict=True))  # type: ignore[typeddict-item]
        return out


Scorer = Callable[[SpectraBatch], ScoredBatch]  # a batch scored, its matches named (in a thread, a process, a cluster)

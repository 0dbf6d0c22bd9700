"""Each open run's results, appended to a journal as they are published, so that no stop loses them.

Before a batch's results go out (write-ahead), its rows — the scored batch as the run's table
keeps it, and each spectrum's published status — are appended to the run's journal,
``<results-dir>/.journal/<run>-<id>.rtj``, with one ``os.write``: in the kernel's page cache at
once, so a SIGKILL loses nothing written. A flusher thread fsyncs the journals written to every
`FSYNC_S`, so a power cut loses at most that. When the run's results file is written, its
journal is deleted. A daemon starting on a results folder first finishes every journal it finds
there (`recover`): the run's table is rebuilt, its discriminant and q-values fitted, and its
results file written, as if its ``run.end`` had come.

A journal is a sequence of records: ``RTJ1``, the payload's length (u32, little-endian), the
payload. The first payload is a JSON object (format, version, run, the target's kind, features
and entries); each later one a batch: its header's length (u32), its JSON header (row count,
reasons) and the batch's columns as raw little-endian arrays (`_COLUMNS`, the features, the
answers' status codes of `rtsearch.matches.STATUSES`; a batch without any match, ``"unmatched"`` in its
header, only the first three columns and the codes). A record cut short (a write that did not
finish) ends the journal.
"""

from __future__ import annotations

import json
import logging
import os
import struct
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from rtsearch.io.results import claim_results_path, results_path, write_run_results
from rtsearch.matches import STATUSES, BestMatches, ScoredBatch
from rtsearch.search.live import RunSummary, run_summary
from rtsearch.search.table import PsmTable
from rtsearch.search.target import SearchTarget
from rtsearch.serve.runtime import name_os_thread
from rtsearch.types import ResultStatus

log = logging.getLogger(__name__)

FOLDER = ".journal"
FSYNC_S = 1.0
_MAGIC = b"RTJ1"
_LEN = struct.Struct("<I")
_COLUMNS = (("scan", "<i8"), ("precursor_mz", "<f8"), ("rt", "<f8"), ("match", "<i8"), ("charge", "<i8"),
            ("calc_mz", "<f8"), ("ppm_error", "<f8"), ("matched_peaks", "<i8"))  # fmt: skip
_RANK = _COLUMNS[3:]  # a lower rank's columns (`[search] ranks`)


def _record(payload: bytes) -> bytes:
    return _MAGIC + _LEN.pack(len(payload)) + payload


def _unmatched(batch: ScoredBatch) -> bool:
    """Whether no spectrum of ``batch`` has a match (shed, invalid, an engine error): its matches are
    `BestMatches.none`'s, written as nothing (at overload most rows are shed: 25 bytes a row instead of 265)."""
    b = batch.best
    return not batch.lower and bool((b.match < 0).all() and not b.charge.any() and not b.matched_peaks.any()
                                    and np.isnan(b.calc_mz).all() and np.isnan(b.ppm_error).all()
                                    and np.isnan(b.features).all())  # fmt: skip


def _batch_payload(batch: ScoredBatch, status: np.ndarray) -> bytes:
    unmatched = _unmatched(batch)
    head = orjson.dumps({"n": len(batch), "reasons": batch.reason if any(batch.reason) else None,
                         "ids": batch.native_id or None, "lower": len(batch.lower),
                         **({"unmatched": True} if unmatched else {})})  # fmt: skip
    if unmatched:
        cols = [batch.scan, batch.precursor_mz, batch.rt]
        arrays = [np.ascontiguousarray(a, dtype=dt).tobytes() for a, (_, dt) in zip(cols, _COLUMNS[:3], strict=True)]
        return b"".join([_LEN.pack(len(head)), head, *arrays, np.ascontiguousarray(status, np.uint8).tobytes()])
    b = batch.best
    cols = [batch.scan, batch.precursor_mz, batch.rt, b.match, b.charge, b.calc_mz, b.ppm_error, b.matched_peaks]
    arrays = [np.ascontiguousarray(a, dtype=dt).tobytes() for a, (_, dt) in zip(cols, _COLUMNS, strict=True)]
    return b"".join([_LEN.pack(len(head)), head, *arrays, np.ascontiguousarray(b.features, "<f8").tobytes(),
                     np.ascontiguousarray(status, np.uint8).tobytes(), *map(_rank_bytes, batch.lower)])  # fmt: skip


def _rank_bytes(b: BestMatches) -> bytes:
    """A lower rank's matches: `_RANK` columns, then the features."""
    cols = [np.ascontiguousarray(getattr(b, name), dtype=dt).tobytes() for name, dt in _RANK]
    return b"".join([*cols, np.ascontiguousarray(b.features, "<f8").tobytes()])


class RunJournal:
    """The journal of one run (segment), open for appending."""

    def __init__(self, folder: Path, run: str, target: SearchTarget) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / f"{results_path(folder, run, 'x').stem}-{uuid.uuid4().hex[:12]}.rtj"
        self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        self.dirty = False
        head = {"format": "rtsearch-journal", "version": 1, "run": run, "kind": target.kind,
                "features": list(target.features), "entries": target.entries}  # fmt: skip
        self._write(_record(json.dumps(head).encode()))

    def _write(self, data: bytes) -> None:
        if self._fd is None:
            return  # closed (its run was finished): nothing more belongs here
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]
        self.dirty = True

    def append(self, batch: ScoredBatch, status: np.ndarray) -> None:
        """One batch of the run and its answers' status codes (`STATUSES`; called before they are published)."""
        self._write(_record(_batch_payload(batch, status)))

    def sync(self) -> None:
        if self._fd is not None and self.dirty:
            self.dirty = False
            os.fsync(self._fd)

    def close(self, *, delete: bool) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if delete:
            self.path.unlink(missing_ok=True)


class Journals:
    """The journals of a daemon's open runs, and the thread that fsyncs them every `FSYNC_S`."""

    def __init__(self, results_dir: str | Path, target: SearchTarget) -> None:
        self.folder = Path(results_dir) / FOLDER
        self.target = target
        self._open: set[RunJournal] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._flush, name="journal-fsync", daemon=True)
        self._thread.start()

    def open(self, run: str) -> RunJournal:
        journal = RunJournal(self.folder, run, self.target)
        with self._lock:
            self._open.add(journal)
        return journal

    def close(self, journal: RunJournal, *, delete: bool) -> None:
        with self._lock:
            self._open.discard(journal)
        journal.close(delete=delete)

    def _flush(self) -> None:
        name_os_thread()
        while not self._stop.wait(FSYNC_S):
            self.sync()

    def sync(self) -> None:
        with self._lock:
            journals = list(self._open)
        for j in journals:
            try:
                j.sync()
            except OSError as e:  # its run closed it meanwhile, or the disk failed: said, not fatal
                log.debug("journal %s: fsync: %s", j.path, e)

    def shutdown(self) -> None:
        """Stop the flusher; fsync and close what is open (those runs' journals stay, for `recover`)."""
        self._stop.set()
        self._thread.join(5)
        self.sync()
        with self._lock:
            journals, self._open = list(self._open), set()
        for j in journals:
            j.close(delete=False)


@dataclass
class Recovered:
    """A run finished from its journal."""

    summary: RunSummary
    path: Path
    cut_bytes: int  # bytes at the journal's end that did not hold a whole record (lost)


def read_journal(path: Path) -> tuple[dict[str, Any], list[ScoredBatch], list[list[str]], int]:
    """A journal's header, batches and their statuses, and the bytes of a cut-short last record."""
    data = path.read_bytes()
    records = list(_records(data))
    if not records:
        raise ValueError("no header record")
    head = json.loads(records[0][0])
    if head.get("format") != "rtsearch-journal" or head.get("version") != 1:
        raise ValueError("not a version-1 rtsearch journal")
    n_features = len(head["features"])
    batches, statuses = [], []
    for payload, _ in records[1:]:
        (hlen,) = _LEN.unpack_from(payload)
        meta = json.loads(payload[4 : 4 + hlen])
        n, at = meta["n"], 4 + hlen
        cols = {}
        unmatched = meta.get("unmatched", False)  # no match in the batch: its matches are not written
        for name, dt in _COLUMNS[:3] if unmatched else _COLUMNS:
            cols[name] = np.frombuffer(payload, dtype=dt, count=n, offset=at)
            at += 8 * n
        if unmatched:
            best = BestMatches.none(n, n_features)
        else:
            feats = np.frombuffer(payload, dtype="<f8", count=n * n_features, offset=at).reshape(n, n_features)
            at += 8 * n * n_features
            best = BestMatches(cols["match"], cols["charge"], cols["calc_mz"], cols["ppm_error"],
                               cols["matched_peaks"], feats)  # fmt: skip
        codes = np.frombuffer(payload, dtype=np.uint8, count=n, offset=at)
        at += n
        lower = []
        for _ in range(meta.get("lower", 0)):
            rank = {}
            for name, dt in _RANK:
                rank[name] = np.frombuffer(payload, dtype=dt, count=n, offset=at)
                at += 8 * n
            lower.append(BestMatches(**rank, features=np.frombuffer(payload, dtype="<f8", count=n * n_features,
                                                                     offset=at).reshape(n, n_features)))  # fmt: skip
            at += 8 * n * n_features
        reasons, ids = list(meta["reasons"] or [""] * n), list(meta.get("ids") or [])
        batches.append(ScoredBatch([head["run"]] * n, cols["scan"], cols["precursor_mz"], cols["rt"], best, reasons,
                                   native_id=ids, lower=lower))  # fmt: skip
        statuses.append([STATUSES[s] for s in codes.tolist()])
    end = records[-1][1]
    return head, batches, statuses, len(data) - end


def _records(data: bytes) -> Iterator[tuple[bytes, int]]:
    """Whole records of ``data``: (payload, offset after it); stops at the first cut-short or damaged one."""
    at = 0
    while at + 8 <= len(data) and data[at : at + 4] == _MAGIC:
        (size,) = _LEN.unpack_from(data, at + 4)
        if at + 8 + size > len(data):
            return
        yield data[at + 8 : at + 8 + size], at + 8 + size
        at += 8 + size


def recover(
    results_dir: str | Path, target: SearchTarget, fmt: str, claimed: set[Path],
    provenance: dict[str, Any] | None = None,
) -> list[Recovered]:
    """Finish every run whose journal is in ``results_dir``: its results file, then the journal deleted.

    A journal of another kind of target (or another target's features or size) is left where it is, with a
    warning: its matches would be named wrongly.
    """
    folder = Path(results_dir) / FOLDER
    out: list[Recovered] = []
    for path in sorted(folder.glob("*.rtj")) if folder.is_dir() else []:
        try:
            head, batches, statuses, cut = read_journal(path)
        except (OSError, ValueError, KeyError) as e:
            log.warning("journal %s cannot be read (%s); left where it is", path, e)
            continue
        if (head["kind"], head["features"], head["entries"]) != (target.kind, list(target.features), target.entries):
            log.warning("journal %s was written against another target (%s, %d entries); left where it is", path,
                        head["kind"], head["entries"])  # fmt: skip
            continue
        if not batches:
            path.unlink()
            continue
        table = PsmTable(target)
        for b in batches:
            table.add(b)
        table.finalize()
        by_status = dict.fromkeys((s.value for s in ResultStatus), 0)
        for sts in statuses:
            for s in sts:
                by_status[s] += 1
        out_path = write_run_results(table, claim_results_path(results_dir, head["run"], fmt, claimed), provenance)
        summary = run_summary(head["run"], table, by_status)
        log.warning("run %r recovered from its journal (the daemon stopped before its run.end): %d results in %s%s",
                    head["run"], summary.spectra, out_path, f"; {cut} bytes of a cut-short record lost" if cut else "")
        path.unlink()
        out.append(Recovered(summary, out_path, cut))
    return out

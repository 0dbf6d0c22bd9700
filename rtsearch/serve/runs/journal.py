"""Each open run's results, appended to a journal before they are published, so that no stop loses them.

Before a batch's results go out (write-ahead), its rows — the scored batch as the run's table
keeps it, and each spectrum's published status — are appended to the run's journal,
``<results-dir>/.journal/<run>-<id>.rtj``, with one ``os.write``: in the kernel's page cache at
once, so a SIGKILL loses nothing written. A flusher thread fsyncs the journals written to every
`FSYNC_S`, so a power cut loses at most that. When the run's results file is written, its
journal is deleted. A daemon starting on a results folder finishes every journal it finds
there (`recover`): the run's table is rebuilt, its discriminant and q-values fitted, and its
results file written, as if its ``run.end`` had come.

A journal's file is made with its run's first batch, and at most `MAX_OPEN` are open at once (the runs written to
last; another is opened again to append): a daemon with 20,000 runs open holds 64 files, not 20,000 (one a run ran
out of systemd's default 1,024 at 1,096 runs). A write that fails (the folder made read-only, a full disk) is
counted, its bytes cut back to the last whole record, and the record kept in memory with those after it (the
backlog, `rtsearch_journal_backlog_bytes`) and tried again every `RETRY_S` — by the next append or the flusher —
until the folder takes it: the answers are still published meanwhile (the run's table holds them too), and nothing
published is missing from the files once the folder is writable again. Only a stop while it is not loses them.

A journal is a sequence of records: ``RTJ1``, the payload's length (u32, little-endian), the
payload. The first payload is a JSON object (format, version, run, the target's kind, features
and entries); each later one a batch: its header's length (u32), its JSON header (row count,
reasons) and the batch's columns as raw little-endian arrays (`_COLUMNS`, the features, the
answers' status codes of `rtsearch.matches.STATUSES`; a batch without any match, ``"unmatched"`` in its
header, only the first three columns and the codes). A record cut short (a write that did not
finish) ends the journal.
"""

from __future__ import annotations

import collections
import json
import logging
import os
import struct
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from rtsearch.io.results import results_path
from rtsearch.matches import STATUSES, BestMatches, ScoredBatch
from rtsearch.search.table import PsmTable
from rtsearch.search.target import SearchTarget
from rtsearch.serve.children.runtime import name_os_thread
from rtsearch.serve.observe.stats import JournalWrite
from rtsearch.types import ResultStatus

log = logging.getLogger(__name__)

FOLDER = ".journal"
FSYNC_S = 1.0
MAX_OPEN = 64  # journal files open at once at most (see the module docstring)
RETRY_S = 1.0  # a journal whose last write failed is tried again this often
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
    """The journal of one run (segment): its file, and the records it still owes the file (`Journals` writes)."""

    def __init__(self, path: Path, head: bytes) -> None:
        self.path = path
        self.lock = threading.Lock()  # its file's state; never held while waiting on `Journals`' own lock
        self.fd: int | None = None  # open now (at most `MAX_OPEN` journals are)
        self.size = 0  # bytes of whole records in the file
        self.backlog: collections.deque[bytes] = collections.deque([head])  # records not in the file yet
        self.pending = len(head)  # their bytes
        self.batches = 0  # batch records appended (written or owed)
        self.dirty = False  # written since its last fsync
        self.failing = False  # its last write failed (said once, until one succeeds)
        self.tried = 0.0  # when a write of it last failed (monotonic s)
        self.closed = False

    @property
    def owed(self) -> int:
        """Bytes appended that are not in its file yet (the header alone owes nothing: no batch, no file)."""
        return self.pending if self.batches else 0


class Journals:
    """The journals of a daemon's open runs: their files (`MAX_OPEN` open at most), the writes they owe, and the
    thread that fsyncs them every `FSYNC_S` and tries the failed ones again (see the module docstring)."""

    def __init__(self, results_dir: str | Path, target: SearchTarget, *, record: Callable[..., None] = lambda _: None,
                 max_open: int = MAX_OPEN) -> None:  # fmt: skip
        """``record``: gets a `JournalWrite` for each failed try and whenever the bytes owed change."""
        self.folder = Path(results_dir) / FOLDER
        self.target = target
        self.record = record
        self.max_open = max_open
        self._journals: set[RunJournal] = set()
        self._files: collections.OrderedDict[RunJournal, None] = collections.OrderedDict()  # open ones, last used last
        self._lock = threading.Lock()  # the two above
        self._owed = 0  # bytes owed by the journals whose writes fail (their backlogs), as last recorded
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._flush, name="journal-fsync", daemon=True)
        self._thread.start()

    def open(self, run: str) -> RunJournal:
        """A new journal for ``run`` (its file is made with its first batch)."""
        head = {"format": "rtsearch-journal", "version": 1, "run": run, "kind": self.target.kind,
                "features": list(self.target.features), "entries": self.target.entries}  # fmt: skip
        path = self.folder / f"{results_path(self.folder, run, 'x').stem}-{uuid.uuid4().hex[:12]}.rtj"
        journal = RunJournal(path, _record(json.dumps(head).encode()))
        with self._lock:
            self._journals.add(journal)
        return journal

    def append(self, journal: RunJournal, batch: ScoredBatch, status: np.ndarray) -> None:
        """One batch of the run and its answers' status codes (`STATUSES`; called before they are published)."""
        data = _record(_batch_payload(batch, status))
        with journal.lock:
            if journal.closed:
                return  # its run was finished: nothing more belongs here
            journal.backlog.append(data)
            journal.pending += len(data)
            journal.batches += 1
            if journal.failing and time.monotonic() - journal.tried < RETRY_S:
                self._owe()
                return  # failing: tried again at most every RETRY_S (here, or by the flusher)
            self._write(journal)

    def _write(self, journal: RunJournal) -> None:
        """Write what ``journal`` owes its file, in order (its lock held); a failure keeps the rest owed."""
        was = journal.failing
        try:
            fd = self._fd(journal)
            while journal.backlog:
                view = memoryview(journal.backlog[0])
                while view:
                    view = view[os.write(fd, view) :]
                done = len(journal.backlog.popleft())
                journal.size += done
                journal.pending -= done
                journal.dirty = True
        except OSError as e:
            journal.failing, journal.tried = True, time.monotonic()
            self._cut(journal)
            self.record(JournalWrite(failed=1))
            if not was:
                log.error("journal %s cannot be written (%s): its run's answers are kept in memory and written once "
                          "it can be; tried every %.0f s", journal.path, e.strerror or e, RETRY_S)  # fmt: skip
        else:
            if was:
                journal.failing = False
                log.warning("journal %s written again", journal.path)
        if was or journal.failing:
            self._owe()

    def _cut(self, journal: RunJournal) -> None:
        """A write failed: the file cut back to its whole records (a record cut short would end it for `recover`),
        closed (opened again to retry)."""
        fd, journal.fd = journal.fd, None
        if fd is None:
            return
        try:
            os.ftruncate(fd, journal.size)
        except OSError as e:
            log.warning("journal %s: cannot cut a failed write back (%s)", journal.path, e.strerror or e)
        finally:
            os.close(fd)
            with self._lock:
                self._files.pop(journal, None)

    def _fd(self, journal: RunJournal) -> int:
        """``journal``'s file, opened (made, the first time) if it is not; the least recently used beyond
        `max_open` closed (one whose lock another thread holds is passed over)."""
        if journal.fd is not None:
            with self._lock:
                self._files.move_to_end(journal)
            return journal.fd
        self.folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(journal.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.ftruncate(fd, journal.size)  # a write cut short before (the cut failed): what follows must be whole
        except OSError:
            os.close(fd)
            raise
        journal.fd = fd
        with self._lock:
            self._files[journal] = None
            extra = len(self._files) - self.max_open
            for other in list(self._files) if extra > 0 else ():
                if extra <= 0:
                    break
                if other is journal or not other.lock.acquire(blocking=False):
                    continue
                try:
                    if other.fd is not None:
                        os.close(other.fd)  # (its fsync is the flusher's: it opens it again for that)
                        other.fd = None
                    del self._files[other]
                    extra -= 1
                finally:
                    other.lock.release()
        return fd

    def _owe(self) -> None:
        """Record the bytes the failing journals owe (when it changed)."""
        with self._lock:
            owed = sum(j.owed for j in self._journals if j.failing)
            changed, self._owed = owed != self._owed, owed
        if changed:
            self.record(JournalWrite(owed_bytes=owed))

    def close(self, journal: RunJournal, *, delete: bool) -> None:
        """``journal``'s run is done: its file closed, and deleted (``delete``: its results file is written) or kept
        for the next start (what it owes tried once more)."""
        with journal.lock:
            if not delete and journal.backlog and journal.batches:
                self._write(journal)
            journal.closed = True
            if journal.fd is not None:
                if not delete:
                    self._sync_fd(journal, journal.fd)
                os.close(journal.fd)
                journal.fd = None
            journal.backlog.clear()
            journal.pending = 0
            if delete:
                journal.path.unlink(missing_ok=True)
        with self._lock:
            self._files.pop(journal, None)
            self._journals.discard(journal)
        if journal.failing:
            self._owe()

    def _flush(self) -> None:
        name_os_thread()
        while not self._stop.wait(FSYNC_S):
            self.sync()

    def failure(self) -> str | None:
        """Why the fsync thread stopped before the shutdown, if it did (written answers would never be synced)."""
        if self._thread.is_alive() or self._stop.is_set():
            return None
        return "the journals' fsync thread stopped"

    def sync(self) -> None:
        """Try again what failing journals owe (once `RETRY_S` passed), and fsync what was written since the last
        time (a journal's lock is held only to take a copy of its descriptor: the fsync itself is outside it)."""
        with self._lock:
            journals = list(self._journals)
        now = time.monotonic()
        for j in journals:
            with j.lock:
                if j.closed:
                    continue
                if j.failing and now - j.tried >= RETRY_S:
                    self._write(j)
                if not j.dirty:
                    continue
                try:
                    fd = os.dup(j.fd) if j.fd is not None else os.open(j.path, os.O_WRONLY)
                except OSError as e:
                    log.debug("journal %s: fsync: %s", j.path, e)
                    continue
                j.dirty = False
            self._sync_fd(j, fd)
            os.close(fd)

    @staticmethod
    def _sync_fd(journal: RunJournal, fd: int) -> None:
        try:
            os.fsync(fd)
        except OSError as e:  # the disk failed: said, not fatal (the next write says more)
            log.warning("journal %s: fsync: %s", journal.path, e.strerror or e)

    def shutdown(self) -> None:
        """Stop the flusher; write what is owed where the folder takes it, fsync and close what is open (those runs'
        journals stay, for `recover`)."""
        self._stop.set()
        self._thread.join(5)
        with self._lock:
            journals = list(self._journals)
        for j in journals:
            self.close(j, delete=False)
        lost = sum(j.owed for j in journals if j.failing)
        if lost:
            log.error("%d bytes of answers could not be journaled before the stop: their runs' files will lack them",
                      lost)  # fmt: skip


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


def leftover(results_dir: str | Path) -> list[Path]:
    """The journals an earlier daemon left in ``results_dir`` (call before this daemon writes any), oldest name
    first."""
    folder = Path(results_dir) / FOLDER
    return sorted(folder.glob("*.rtj")) if folder.is_dir() else []


def leftover_runs(results_dir: str | Path, target: SearchTarget) -> list[tuple[str, Path]]:
    """The run and journal of each journal an earlier daemon left in ``results_dir`` for ``target`` (`leftover`;
    one that cannot be read or was written against another target is left where it is, said)."""
    out = []
    for path in leftover(results_dir):
        try:
            head = journal_head(path)
        except (OSError, ValueError, KeyError) as e:
            log.warning("journal %s cannot be read (%s); left where it is", path, e)
            continue
        if not fits(head, target):
            log.warning("journal %s was written against another target (%s, %d entries); left where it is", path,
                        head["kind"], head["entries"])  # fmt: skip
            continue
        out.append((head["run"], path))
    return out


def journal_head(path: Path) -> dict[str, Any]:
    """A journal's header record alone (its run, target kind, features, entries); `ValueError` when it has none."""
    with open(path, "rb") as fh:
        first = fh.read(8)
        if len(first) < 8 or first[:4] != _MAGIC:
            raise ValueError("no header record")
        (size,) = _LEN.unpack_from(first, 4)
        head = json.loads(fh.read(size))
    if head.get("format") != "rtsearch-journal" or head.get("version") != 1 or not isinstance(head.get("run"), str):
        raise ValueError("not a version-1 rtsearch journal")
    return dict(head)


def fits(head: dict[str, Any], target: SearchTarget) -> bool:
    """Whether a journal was written against ``target`` (its kind, features and size): else its matches would be
    named wrongly, and it is left for a daemon serving its own target."""
    return bool((head["kind"], head["features"], head["entries"]) ==
                (target.kind, list(target.features), target.entries))  # fmt: skip


def journal_table(path: Path, target: SearchTarget) -> tuple[str, PsmTable, dict[str, int], int]:
    """A journal's run name, its table (not finalized), its answers by status, and the bytes of a cut-short last
    record (lost)."""
    head, batches, statuses, cut = read_journal(path)
    table = PsmTable(target)
    for b in batches:
        table.add(b)
    by_status = dict.fromkeys((s.value for s in ResultStatus), 0)
    for sts in statuses:
        for st in sts:
            by_status[st] += 1
    return head["run"], table, by_status, cut


SET_ASIDE = "failed"  # `<results-dir>/.journal/failed/`: journals whose run could not be finished, with the reason


def set_aside(path: Path, why: str) -> Path:
    """Move a journal whose run could not be finished out of the way of the next start, its reason beside it
    (``<name>.reason.txt``): a daemon that cannot finish one run still serves the others (a journal no restart
    could finish once kept every restart from becoming ready). Returns where it went."""
    aside = path.parent / SET_ASIDE
    aside.mkdir(parents=True, exist_ok=True)
    to = aside / path.name
    os.replace(path, to)
    (aside / f"{path.name}.reason.txt").write_text(why.rstrip() + "\n")
    return to

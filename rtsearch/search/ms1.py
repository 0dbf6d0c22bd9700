"""MS1 elution of a search's identified precursors: each run's MS1 features (`rtsearch.signal.features`) and, per
result row with a match, its precursor's apex RT and area (`rtsearch.signal.precursors`), added to the table as
``ms1_apex_rt`` and ``ms1_area`` (NaN where the run has no MS1 scans or the precursor no feature; the apex alone
NaN where the run cut the elution off before its apex). The MS1 scans are read in a pass of their own after the
search: the search's reader hands out MS2 batches only, in worker processes, and only runs with a matched
precursor are read again."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rtsearch.io.spectra import read_spectra, run_name
from rtsearch.search.table import PsmTable
from rtsearch.signal.features import detect_features
from rtsearch.signal.precursors import precursor_elution

log = logging.getLogger(__name__)
COLUMNS = ("ms1_apex_rt", "ms1_area")


def attach_ms1(table: PsmTable, runs: Sequence[str | Path], *, xp: Any = np) -> int:
    """Add ``ms1_apex_rt`` and ``ms1_area`` to ``table`` from the MS1 scans of ``runs`` (smoothing on ``xp``);
    the number of rows given a feature."""
    n = len(table)
    apex, area = np.full(n, np.nan), np.full(n, np.nan)
    row_run = table.rows("run")
    mz, rt = table.rows("precursor_mz"), table.rows("rt")
    charge = np.concatenate([b.best.charge for b in table.batches]).astype(np.int64) if n else np.zeros(0, np.int64)
    matched = np.concatenate([b.best.match for b in table.batches]) >= 0 if n else np.zeros(0, bool)
    for path in runs:
        rows = np.flatnonzero((row_run == run_name(Path(path))) & matched & (charge > 0))
        if rows.size == 0:
            continue
        feats = detect_features(read_spectra(path, ms_levels=(1,)), xp=xp)
        if len(feats) == 0:
            continue
        apex[rows], area[rows] = precursor_elution(feats.cols, mz[rows], charge[rows], rt[rows])
        log.debug("%s: %d MS1 features, %d of %d matched precursors on one", path, len(feats),
                  int(np.isfinite(area[rows]).sum()), rows.size)  # fmt: skip
    table.attach(COLUMNS[0], apex)
    table.attach(COLUMNS[1], area)
    return int(np.isfinite(area).sum())

"""The chunks' merge of a wide precursor window on the GPU (`merge_topk`) gives what NumPy's reference
(`merge_chunks`) gives, on random lists, on ties beyond its shared memory, and in the engine at a 200 Da window."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from rtsearch.batch import SpectraBatch
from rtsearch.config import Tolerance
from rtsearch.database.build import build_index
from rtsearch.io.spectra import read_spectra
from rtsearch.scoring.backend import get_backend
from rtsearch.scoring.database.engine import Engine
from rtsearch.scoring.database.kernels import CHUNK
from rtsearch.scoring.database.merge_kernel import GATHERED, merge_chunks, merge_on_device
from tests.devruns import DATABASE, DEV_RUNS
from tests.gpu.test_parity import _compare
from tests.unit.test_merge_chunks import chunk_lists

pytestmark = pytest.mark.gpu


def _both(t_query: np.ndarray, tp: np.ndarray, tc: np.ndarray, n_q: int, k: int):
    import cupy as cp

    want_p, want_c = np.zeros((n_q, k), np.int64), np.zeros((n_q, k), np.int32)
    merge_chunks(np, t_query, tp, tc, want_p, want_c)
    first = np.searchsorted(t_query, np.arange(n_q + 1))
    got_p, got_c = cp.full((n_q, k), 7, cp.int64), cp.full((n_q, k), 7, cp.int32)  # every slot must be written
    merge_on_device(cp, cp.asarray(first), cp.asarray(tp), cp.asarray(tc), got_p, got_c)
    return (want_p, want_c), (got_p.get(), got_c.get())


def test_random_lists_merge_as_the_reference():
    rng = np.random.default_rng(5)
    for n_q, k in ((1, 1), (50, 5), (300, 40)):
        (wp, wc), (gp, gc) = _both(*chunk_lists(rng, n_q, k), n_q, k)
        assert np.array_equal(wp, gp) and np.array_equal(wc, gc)


def test_ties_beyond_shared_memory_rank_from_global():
    k, chunks = 40, GATHERED // 40 + 20  # one query's entries all of one count: more than a block gathers
    t_query = np.array([0] * chunks + [1], np.int64)
    tp = (np.arange((chunks + 1) * k, dtype=np.int64)[::-1]).reshape(chunks + 1, k)  # peptides descending
    tc = np.full(tp.shape, 3, np.int32)
    tc[-1] = 9  # query 1: one chunk, higher counts
    (wp, wc), (gp, gc) = _both(t_query, tp, tc, 2, k)
    assert np.array_equal(wp, gp) and np.array_equal(wc, gc) and wp[0, 0] == k  # the lowest peptides of query 0


def test_the_engine_at_a_200_da_window_scores_as_numpy(data):
    dev = next(d for d in DEV_RUNS if d.name == "BSA1")
    fastas, run = dev.paths(data)
    index = build_index(fastas, DATABASE)
    cfg = dataclasses.replace(dev.search_config(), precursor_tolerance=Tolerance(200.0, "Da"), ranks=3)
    spectra = SpectraBatch.of(list(read_spectra(run, default_charges=cfg.charges))[:48])
    gpu = Engine(index, cfg, get_backend("cupy"))
    q = gpu.queries(spectra, np.ones(len(spectra), bool))
    assert (q.hi - q.lo).max() > 4 * CHUNK  # windows of several chunks: merged
    ref = Engine(index, cfg, get_backend("numpy")).score(spectra)
    got = gpu.score(spectra)
    gpu._gpu.merge_kernel = False  # the reference's CuPy calls, for the same batch
    by_sort = gpu.score(spectra)
    for other in (got, by_sort):
        _compare(ref, other)  # the same peptides and charges at every rank, features within 1e-4

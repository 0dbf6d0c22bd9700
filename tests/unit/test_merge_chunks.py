"""The chunks' merge of a wide precursor window, NumPy's (`merge_chunks`, the reference of the GPU's
`merge_topk`, tests/gpu/test_merge_kernel.py), against each query's lists ranked one by one by hand."""

from __future__ import annotations

import numpy as np

from rtsearch.scoring.database.merge_kernel import merge_chunks


def chunk_lists(rng: np.random.Generator, n_q: int, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random tasks' lists as the count kernel writes them: a query's 1-6 chunks of 1,000 peptides, each its up to
    ``k`` best by (count desc, peptide asc), -1 / 0 after; counts tied often."""
    t_query, tp, tc = [], [], []
    for q in range(n_q):
        for c in range(int(rng.integers(1, 7))):
            n = int(rng.integers(0, k + 1))
            pep = rng.choice(1000, n, replace=False) + 1000 * c
            cnt = rng.integers(1, 6, n)
            order = np.lexsort((pep, -cnt))
            t_query.append(q)
            tp.append(np.concatenate([pep[order], np.full(k - n, -1)]))
            tc.append(np.concatenate([cnt[order], np.zeros(k - n, int)]))
    return np.array(t_query), np.array(tp, np.int64), np.array(tc, np.int32)


def test_each_query_keeps_its_k_best_by_count_then_peptide():
    rng = np.random.default_rng(11)
    n_q, k = 40, 5
    t_query, tp, tc = chunk_lists(rng, n_q, k)
    out_pep, out_cnt = np.zeros((n_q, k), np.int64), np.zeros((n_q, k), np.int32)
    merge_chunks(np, t_query, tp, tc, out_pep, out_cnt)
    short = 0
    for q in range(n_q):
        entries = sorted((-c, p) for t in np.flatnonzero(t_query == q) for p, c in zip(tp[t], tc[t], strict=True)
                         if p >= 0)  # fmt: skip
        best = entries[:k]
        short += len(best) < k
        assert out_pep[q].tolist() == [p for _, p in best] + [-1] * (k - len(best))
        assert out_cnt[q].tolist() == [-c for c, _ in best] + [0] * (k - len(best))
    assert 0 < short < n_q  # some queries with fewer than k candidates in all, most with more

"""`Pending`: the jobs behind the batcher's handles, taken whole or in part, in the handles' order."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rtsearch.batch import SpectraBatch
from rtsearch.serve.engine.jobs import Jobs, Stamps
from rtsearch.serve.engine.pending import Pending
from rtsearch.types import Spectrum

RUN = object()  # the one run every job belongs to (only its identity matters here)


def _jobs(first_scan: int, n: int) -> Jobs:
    """``n`` one-to-three-peak spectra, scans from ``first_scan``, each peak's m/z naming its scan."""
    spectra = [Spectrum("r", s, 2, np.full(1 + s % 3, float(s)), np.ones(1 + s % 3, np.float32), 500.0 + s, (2,))
               for s in range(first_scan, first_scan + n)]  # fmt: skip
    scans = np.arange(first_scan, first_scan + n, dtype=np.int64)
    stamps = Stamps(scans * 10, scans * 10, scans, np.full(n, 10**9), np.zeros(n, bool))
    return Jobs(SpectraBatch.of(spectra), stamps, np.zeros(n, np.int32), [RUN])


def _check(jobs: Jobs, scans: list[int]) -> None:
    assert jobs.spectra.scan.tolist() == scans
    assert jobs.stamps.sent_ns.tolist() == [10 * s for s in scans]
    for sp in jobs.spectra.spectra():  # peaks still belong to their spectrum
        assert sp.mz.size == 1 + sp.scan % 3 and set(sp.mz.tolist()) == {float(sp.scan)}


def test_whole_segments_are_handed_on_as_they_are_and_parts_are_copied():
    pending = Pending()
    a, b = _jobs(0, 4), _jobs(100, 3)
    ha, hb = pending.add(a), pending.add(b)
    assert pending.take(ha) is a  # a whole segment in order: no copy
    assert len(pending) == 3
    part = pending.take(hb[[2, 0]])
    _check(part, [102, 100])
    _check(pending.take(hb[[1]]), [101])
    assert len(pending) == 0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 6), min_size=1, max_size=6), st.randoms(use_true_random=False))
def test_any_handles_come_back_segment_by_segment_in_their_order_each_once(sizes, rng):
    pending, handles, scans, segment = Pending(), [], [], {}
    for k, n in enumerate(sizes):
        for h in pending.add(_jobs(100 * k, n)).tolist():
            handles.append(h)
            segment[h] = k
        scans += range(100 * k, 100 * k + n)
    scan_of = dict(zip(handles, scans, strict=True))
    remaining = handles[:]
    rng.shuffle(remaining)
    while remaining:
        pick, remaining = remaining[: rng.randint(1, len(remaining))], remaining[1:]
        remaining = [h for h in remaining if h not in pick]
        expect = sorted(pick, key=lambda h: segment[h])  # stable: the handles' order within a segment
        _check(pending.take(np.array(pick, dtype=np.int64)), [scan_of[h] for h in expect])
    assert len(pending) == 0


def test_a_claim_forgets_its_handles_at_once_and_gathers_them_later_once():
    """What the engine thread does under the pool's lock (`claim`) and after it (`Claim.jobs`): the queue is free
    of the claimed spectra before their columns are gathered, and asking again gives the same jobs, not a copy."""
    pending = Pending()
    a, b, c = _jobs(0, 4), _jobs(100, 3), _jobs(200, 2)
    ha, hb, hc = pending.add(a), pending.add(b), pending.add(c)
    claim = pending.claim(np.r_[ha, hb[[2, 0]]])
    assert len(claim) == 6 and len(pending) == 3  # b's middle spectrum and c wait
    _check(pending.take(np.r_[hb[[1]], hc]), [101, 200, 201])  # taken before the claim is gathered
    assert len(pending) == 0 and pending.add(_jobs(300, 1)).tolist() == [9]  # a's and b's segments freed
    first = claim.jobs()
    _check(first, [0, 1, 2, 3, 102, 100])
    assert claim.jobs() is first
    whole = pending.claim(np.array([9]))
    assert whole.jobs().spectra.scan.tolist() == [300]


def test_all_that_waits_of_one_chunk_is_claimed_as_the_general_path_would():
    """The lone spectrum's path (`Pending._claim_last`): everything held, of one chunk — in order: handed on as it
    is; in another order, or what is left of a chunk taken in part: copied in the handles' order."""
    pending = Pending()
    a = _jobs(0, 1)
    assert pending.take(pending.add(a)) is a and len(pending) == 0
    b = _jobs(100, 3)
    hb = pending.add(b)
    _check(pending.take(hb[[2, 0, 1]]), [102, 100, 101])
    c = _jobs(200, 3)
    hc = pending.add(c)
    _check(pending.take(hc[[1]]), [201])
    _check(pending.take(hc[[0, 2]]), [200, 202])
    assert len(pending) == 0 and pending.add(_jobs(300, 2)).tolist() == [hc[-1] + 1, hc[-1] + 2]

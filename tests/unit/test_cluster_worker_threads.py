"""A cluster worker's scoring threads (`rtsearch.cluster.worker.run_worker`, ``threads=2``): batches sent by two doors
while another is being scored are each answered once, spectrum for spectrum as the batch scored alone, to the door
that sent it; a stop with batches in hand answers them first."""

from __future__ import annotations

import pickle
import threading

import numpy as np
import pytest
import zmq

from rtsearch.batch import SpectraBatch
from rtsearch.cli.demo import TOML, bundled
from rtsearch.cluster.worker import WorkerSpec, run_worker, scoring_threads
from rtsearch.config import load_config
from rtsearch.io.spectra import read_spectra
from rtsearch.scoring.backend import get_backend
from rtsearch.search.database import DatabaseTarget
from rtsearch.search.live import named


@pytest.fixture
def target(demo_index):
    return DatabaseTarget(demo_index, load_config(bundled(TOML)).search, get_backend("numpy"))


def _door(ctx: zmq.Context) -> tuple[zmq.Socket, zmq.Socket, tuple[str, str]]:
    router, beats = ctx.socket(zmq.ROUTER), ctx.socket(zmq.PULL)
    ends = []
    for s in (router, beats):
        s.setsockopt(zmq.LINGER, 0)
        ends.append(f"tcp://127.0.0.1:{s.bind_to_random_port('tcp://127.0.0.1')}")
    return router, beats, (ends[0], ends[1])


def test_two_scoring_threads_answer_each_batch_once_to_its_door(target, data) -> None:
    ms2 = [s for s in read_spectra(data / "ecoli-small/Ecoli_MS2_small.mzML") if s.ms_level == 2]
    batches = [SpectraBatch.of(ms2[a:b]) for a, b in ((0, 30), (30, 31), (31, 70), (70, 90), (90, 139))]
    ctx = zmq.Context()
    doors = [_door(ctx) for _ in range(2)]
    spec = WorkerSpec("w0", -1, lambda: target, *doors[0][2], warm_up=False, others=(doors[1][2],))
    stop = threading.Event()
    worker = threading.Thread(target=run_worker, args=(spec, stop), kwargs={"threads": 2}, daemon=True)
    worker.start()
    try:
        for router, _, _ in doors:
            assert router.poll(30_000), "no hello"
            name, kind, hello = router.recv_multipart()
            assert (name, kind, pickle.loads(hello)["threads"]) == (b"w0", b"hello", 2)
        for k, b in enumerate(batches):  # all at once: the second thread takes what arrives while one scores
            doors[k % 2][0].send_multipart([b"w0", b"batch", k.to_bytes(8, "little"), pickle.dumps((b, None))])
        got: dict[int, tuple[int, object]] = {}
        poller = zmq.Poller()
        for router, _, _ in doors:
            poller.register(router, zmq.POLLIN)
        while len(got) < len(batches):
            ready = dict(poller.poll(30_000))
            assert ready, f"answers missing: {sorted(set(range(len(batches))) - set(got))}"
            for d, (router, _, _) in enumerate(doors):
                while router in ready and router.poll(0):
                    _, kind, rid, reply, *times = router.recv_multipart()
                    k = int.from_bytes(rid, "little")
                    assert kind == b"scored" and k not in got and len(times) == 3
                    got[k] = (d, pickle.loads(reply))
        for k, b in enumerate(batches):
            door, (kind, scored) = got[k]
            assert (door, kind) == (k % 2, "scored")
            want = named(target, target.score(b))
            assert scored.scan.tolist() == want.scan.tolist()
            assert scored.best.match.tolist() == want.best.match.tolist()
            np.testing.assert_allclose(scored.best.features, want.best.features, rtol=1e-6)
        assert sum(int((s.best.match >= 0).sum()) for _, (_, s) in got.values()) > 40  # real identifications
        # stop with a batch just sent: it is answered before the worker ends
        doors[0][0].send_multipart([b"w0", b"batch", (99).to_bytes(8, "little"), pickle.dumps((batches[2], None))])
        for router, _, _ in doors:
            router.send_multipart([b"w0", b"stop"])
        assert doors[0][0].poll(30_000)
        assert doors[0][0].recv_multipart()[2] == (99).to_bytes(8, "little")
        worker.join(30)
        assert not worker.is_alive()
    finally:
        stop.set()
        worker.join(30)
        ctx.destroy(linger=0)


def test_scoring_threads_default_by_backend_and_the_knob(monkeypatch) -> None:
    monkeypatch.delenv("RTSEARCH_WORKER_THREADS", raising=False)
    assert (scoring_threads("cupy"), scoring_threads("numpy")) == (1, 1)
    monkeypatch.setenv("RTSEARCH_WORKER_THREADS", "3")
    assert scoring_threads("numpy") == 3

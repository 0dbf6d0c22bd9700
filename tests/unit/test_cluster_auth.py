"""Who may speak to a cluster's door (`rtsearch.cluster.auth`, issue 67): off loopback — or on it with
``cluster_curve`` — only a peer with the workers' CURVE key gets through the handshake; a peer without it never has
its hello taken nor receives a batch, whatever name it claims, while the keyed workers score. The lanes' shared doors
live in a folder no other user may enter."""

from __future__ import annotations

import contextlib
import socket

import pytest
import zmq

from rtsearch.cluster import frames as wire
from rtsearch.cluster.auth import loopback
from rtsearch.cluster.door import ClusterScorer
from rtsearch.cluster.share import Share
from rtsearch.errors import EndpointError
from tests.unit.test_cluster_door import Scripted, _batch, _until


def own_address() -> str | None:
    """A non-loopback IPv4 address of this machine that a socket can bind (its route out), else None."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # TEST-NET-1: the routing table chooses the source; nothing is sent
            address = s.getsockname()[0]
        except OSError:
            return None
    if loopback(address):
        return None
    with socket.socket() as s:
        try:
            s.bind((address, 0))
        except OSError:
            return None
    return str(address)


def test_what_is_loopback() -> None:
    assert all(map(loopback, ("127.0.0.1", "127.4.5.6", "::1", "[::1]", "localhost", "LocalHost")))
    assert not any(map(loopback, ("192.0.2.2", "10.0.0.1", "0.0.0.0", "::", "*", "eth0", "node1.example.org")))


@pytest.mark.parametrize("where", ["address", "loopback forced"])
def test_a_door_off_loopback_takes_only_its_keyed_workers(where: str) -> None:
    host = own_address() if where == "address" else "127.0.0.1"
    if host is None:
        pytest.skip("no non-loopback IPv4 address here (the forced case covers CURVE)")
    placement = Scripted({"w0": "ok"})  # a thread worker with its spec's keys (`Scripted._run`)
    with ClusterScorer(None, placement, workers=1, host=host, curve=where != "address") as door:  # type: ignore[arg-type]
        spec = placement.specs["w0"]
        assert door.curve and spec.keys is not None and door.router.startswith(f"tcp://{host}:")
        assert spec.keys.secret not in repr(spec).encode()  # never in a log line
        ctx = zmq.Context.instance()
        plain, other_key, beats = ctx.socket(zmq.DEALER), ctx.socket(zmq.DEALER), ctx.socket(zmq.PUSH)
        public, secret = zmq.curve_keypair()  # a key pair not the workers', the door's public key known
        other_key.curve_serverkey = spec.keys.server
        other_key.curve_publickey, other_key.curve_secretkey = public, secret
        for s in (plain, other_key):
            s.setsockopt(zmq.IDENTITY, spec.identity)  # worst case: the worker's name and token known
        for s, ep in ((plain, door.router), (other_key, door.router), (beats, door.beats)):
            s.setsockopt(zmq.LINGER, 0)
            s.connect(ep)
        for s in (plain, other_key):  # (one refused before its hello was queued has nowhere to queue it: no hang)
            with contextlib.suppress(zmq.Again):
                s.send_multipart([b"hello", wire.hello(wire.Hello("w0", -1, 1, "numpy"))], zmq.NOBLOCK)
        beats.send_multipart(wire.beat_frames(b"w9", 0))  # (a stranger's heartbeat reaching the door is counted)
        assert _until(lambda: door.refused >= 1), door.refused  # the ZAP handler said no to the other key
        for k in range(3):  # the keyed worker scores; neither stranger got a batch
            got = door.score(_batch([1000.0 + k]))
            assert got.reason == ["w0"]
        assert not plain.poll(0) and not other_key.poll(0)
        assert door._router.curve_server and door._beats.curve_server
        assert door.workers["w0"].pid == placement.pids["w0"] and door.dropped == 0 and door.failed() == 0
        for s in (plain, other_key, beats):
            s.close()
        door._keys._auth.stop()  # type: ignore[union-attr]  # the ZAP handler's thread gone: never silent
        assert door.failed() == 1 and not door.alive()
    assert door.failed() == 0  # closed


def test_loopback_doors_have_no_curve_and_shared_ones_live_in_a_private_folder(tmp_path) -> None:
    with ClusterScorer(None, Scripted({"w0": "ok"}), workers=1) as door:  # type: ignore[arg-type]
        assert not door.curve and door.score(_batch([1000.0])).reason == ["w0"]
    folder = tmp_path / "lanes"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    with pytest.raises(EndpointError, match="mode 0700, not 755"):
        ClusterScorer(None, Scripted({}), workers=1, share=Share(str(folder), 0, 2))  # type: ignore[arg-type]
    folder.chmod(0o700)
    Share(str(folder), 0, 2).check()

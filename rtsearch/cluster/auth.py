"""Who may speak to a cluster's front door: ZeroMQ CURVE off loopback (issue 67).

A door whose ``[serve] cluster_host`` is not loopback (or with ``cluster_curve = true``) makes two key pairs at each
start (`zmq.curve_keypair`): its own, the server's, and one its workers share, the client's. Its ROUTER (batches) and
heartbeat PULL are CURVE servers, and a ZAP handler of its own (`zmq.auth.thread.ThreadAuthenticator`, a thread)
lets in only a peer holding the workers' key: any other is refused at the handshake, before a frame of it reaches
the door (and before it could take a worker's name, `ROUTER_HANDOVER`). The traffic is encrypted besides.

The workers' half (`WorkerKeys`: the door's public key and the workers' pair) travels inside their `WorkerSpec`: as a
local process's arguments (a pipe of this host's) or as a Ray actor's (Ray's own channel: the Ray cluster is trusted
with the keys as with the code it runs — run it with TLS, ``RAY_USE_TLS``, or on a private network). The keys live
as long as the door (never written to disk, never logged); a daemon started again makes new ones.

On loopback (127.0.0.0/8, ::1, localhost) no CURVE (its cost on every batch buys nothing there): only this host's
users reach those ports (a host shared with users not trusted: ``cluster_curve = true``). Every worker's ZeroMQ
identity, and its heartbeats' name, carry a random token of the door's start (`identity`; 128 bits, in its spec as
the keys are), so that a local peer can neither take a worker's name — the door's ROUTER hands a name over to the
latest peer that claims it (`ROUTER_HANDOVER`, for a restarted worker), which would cut the worker off — nor speak
for it: a peer without it is a stranger, its messages dropped. Lanes sharing workers meet them at ``ipc://``
endpoints in a folder only the daemon's user may enter (`rtsearch.cluster.share`): names without a token there.
Whatever the transport, nothing a peer sends is unpickled (`rtsearch.cluster.frames`).
"""

from __future__ import annotations

import ipaddress
import logging
import secrets
import threading
from dataclasses import dataclass, field
from typing import Any

import zmq
from zmq.auth.thread import ThreadAuthenticator

log = logging.getLogger(__name__)

DOMAIN = "rtsearch-cluster"  # the ZAP domain of a door's sockets


def loopback(host: str) -> bool:
    """Whether ``host`` (an address, or ``localhost``) is this host's loopback: only its users reach it."""
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a name, an interface ("eth0"), "*": reachable from elsewhere
        return False


def token() -> str:
    """A door start's secret for its workers' identities (see the module docstring)."""
    return secrets.token_hex(16)


def identity(name: str, token: str) -> bytes:
    """Worker ``name``'s ZeroMQ identity (and heartbeats' name) with a door's ``token`` ("": the name alone)."""
    return f"{name}.{token}".encode() if token else name.encode()


@dataclass(frozen=True)
class WorkerKeys:
    """What a worker needs to reach its door: the door's public key and the workers' key pair (Z85)."""

    server: bytes
    public: bytes
    secret: bytes = field(repr=False)  # never in a log line (a spec's repr)

    def client(self, sock: zmq.Socket[Any]) -> None:
        """``sock`` (before it connects) a CURVE client of the door."""
        sock.curve_serverkey = self.server
        sock.curve_publickey = self.public
        sock.curve_secretkey = self.secret


class DoorKeys:
    """A door's keys for one start, and the ZAP handler that lets in only its workers (see the module docstring)."""

    def __init__(self, ctx: zmq.Context[Any]) -> None:
        public, self._secret = zmq.curve_keypair()
        client_public, client_secret = zmq.curve_keypair()
        self.worker = WorkerKeys(public, client_public, client_secret)
        self.refused = 0  # handshakes with a key not the workers'
        self._lock = threading.Lock()
        self._auth = ThreadAuthenticator(ctx, log=logging.getLogger(f"{__name__}.zap"))
        self._auth.start()
        self._auth.configure_curve_callback(DOMAIN, self)

    def server(self, sock: zmq.Socket[Any]) -> None:
        """``sock`` (before it binds) a CURVE server that asks the ZAP handler, and refuses all without one."""
        sock.curve_server = True
        sock.curve_secretkey = self._secret
        sock.curve_publickey = self.worker.server
        sock.zap_domain = DOMAIN.encode()
        sock.setsockopt(zmq.ZAP_ENFORCE_DOMAIN, 1)  # no handler (its thread gone): refused, not let in

    def callback(self, domain: str, key: bytes) -> bool:
        """The ZAP handler's question (its thread): whether ``key`` (Z85) is the workers'."""
        if key == self.worker.public:
            return True
        with self._lock:
            self.refused += 1
            first = self.refused == 1
        if first:  # once: a scanner would fill the log
            log.warning("cluster: refused a peer without the workers' key at the door (domain %s); refusals are "
                        "counted, not logged again", domain)  # fmt: skip
        return False

    def alive(self) -> bool:
        """Whether the ZAP handler's thread runs."""
        return self._auth.is_alive()

    def close(self) -> None:
        self._auth.stop()

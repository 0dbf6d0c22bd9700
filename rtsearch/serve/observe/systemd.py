"""systemd's readiness protocol (``Type=notify``): tell the service manager the daemon is ready or stopping.

`notify` sends ``READY=1``, ``STOPPING=1``, ``STATUS=…`` lines to the datagram socket systemd names in
``$NOTIFY_SOCKET`` (a path, or ``@name`` in the abstract namespace); without it (not under systemd) it does
nothing. Written here rather than taken from a library: the protocol is one datagram, and the maintained
bindings (python-systemd, sdnotify) need libsystemd or add a dependency for these few lines.
"""

from __future__ import annotations

import logging
import os
import socket

log = logging.getLogger(__name__)


def notify(*lines: str) -> bool:
    """Send ``lines`` (``"READY=1"``, ``"STATUS=…"``) to systemd; whether a service manager was there to hear."""
    address = os.environ.get("NOTIFY_SOCKET", "")
    if not address:
        return False
    if address.startswith("@"):
        address = "\0" + address[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.sendto("\n".join(lines).encode(), address)
        return True
    except OSError as e:  # systemd went away, or the socket is not ours to use: the daemon serves on
        log.warning("NOTIFY_SOCKET %s: %s", os.environ.get("NOTIFY_SOCKET"), e)
        return False

"""A child's main in a module that takes a while to import: what a child does before its setup runs
(tests/unit/test_child_signals.py)."""

import socket
import time

time.sleep(3.0)  # imported in the child as its main is unpickled, before it ignores SIGINT itself


def wait_closed(conn: socket.socket) -> None:
    conn.recv(1)  # the parent's end closed: stop

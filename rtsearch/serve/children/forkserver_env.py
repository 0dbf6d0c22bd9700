"""Imported first in the daemon's fork server (`rtsearch.serve.children.runtime.child_context`).

One BLAS thread from the start, before NumPy loads OpenBLAS, so that the server forks its children with no BLAS
threads running (each child wants one anyway: `rtsearch.serve.children.runtime.single_threaded_blas`).

SIGINT ignored: the fork server resets each child it forks to the SIGINT disposition it had when it took over
its signals, after its preloads, and a child ignores SIGINT itself only once its setup runs (after it has
imported its main's module). A Ctrl-C in the terminal reaches every process of the group; in that window it ended
a child with a ``KeyboardInterrupt`` traceback (``ForkServerProcess-1``, seen at ``rtsearch serve``). Only in the
fork server: the module is imported there from `multiprocessing.forkserver.main`, which is on the stack.
"""

import os
import signal
import sys
from types import FrameType

for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")


def _in_fork_server() -> bool:
    frame: FrameType | None = sys._getframe()
    while frame is not None:
        code = frame.f_code
        if code.co_name == "main" and code.co_filename.endswith(os.path.join("multiprocessing", "forkserver.py")):
            return True
        frame = frame.f_back
    return False


if _in_fork_server():
    signal.signal(signal.SIGINT, signal.SIG_IGN)

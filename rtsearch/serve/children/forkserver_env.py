"""Imported first in the daemon's fork server (`rtsearch.serve.children.runtime.child_context`): one BLAS thread from
the start, before NumPy loads OpenBLAS, so that the server forks its children with no BLAS threads running (each child
wants one anyway: `rtsearch.serve.children.runtime.single_threaded_blas`)."""

import os

for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

"""Errors that rtsearch raises on purpose.

Every error a user can cause (bad input file, bad config, stale index) is an
`RtsearchError` whose message is one line naming what is wrong and where. Only
``cli.py`` turns them into exit codes; everything else just raises.
"""

from __future__ import annotations


class RtsearchError(Exception):
    """Base class: a problem the user can fix, reported as one line."""

    exit_code = 2


class ConfigError(RtsearchError):
    """The configuration file or a command-line option is invalid."""


class InputError(RtsearchError):
    """An input file (FASTA, spectra) is missing, truncated or malformed."""


class IndexMismatchError(RtsearchError):
    """An on-disk index was built with other parameters or another format version."""


class BackendError(RtsearchError):
    """The requested compute backend (e.g. CuPy) is not available."""


class EndpointError(RtsearchError):
    """A socket or port the daemon must bind or connect to cannot be used (in use, malformed)."""


class ServiceError(RtsearchError):
    """A part of the running daemon failed (its intake process died, an engine thread stopped, ...).

    The daemon answers what it can, writes its runs' files and exits with this error, non-zero,
    so that a supervisor (systemd's ``Restart=on-failure``) starts it again.
    """

    exit_code = 1


class EngineError(RuntimeError):
    """An executor failed on a batch: the engine process (the message is its exception's), or the cluster's door
    (no worker answered it within its budget)."""

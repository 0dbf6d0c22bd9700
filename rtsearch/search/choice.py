"""What a command searches, as a value: chosen on the command line, opened wherever it is needed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from rtsearch.config import Config
from rtsearch.scoring.backend import Backend
from rtsearch.search.target import SearchTarget


@dataclass(frozen=True)
class TargetChoice:
    """What a command searches — an index, a spectral library (``open_search``: every entry within the open window)
    or a proteoform database at ``path`` — with the configuration it opens with; picklable (a lane opens its own)."""

    kind: Literal["index", "library", "proteoforms"]
    path: str
    cfg: Config
    open_search: bool = False

    def open(self, backend: Backend) -> SearchTarget:
        """The target, loaded (memory-mapped, then onto ``backend``'s device)."""
        if self.kind == "library":
            from rtsearch.search.library import LibraryTarget

            return LibraryTarget.open(self.path, self.cfg, backend, open_search=True if self.open_search else None)
        if self.kind == "proteoforms":
            from rtsearch.search.topdown import TopDownTarget

            return TopDownTarget.open(self.path, self.cfg.topdown, backend)
        from rtsearch.search.database import DatabaseTarget

        cfg = self.cfg
        return DatabaseTarget.open(self.path, cfg.search, backend, expect=cfg.database if cfg.database_given else None)

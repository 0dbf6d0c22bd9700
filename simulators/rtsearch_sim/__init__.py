"""rtsearch-sim: replay recorded runs (or synthetic load) to an rtsearch daemon and measure it.

Independent of the daemon's own metrics: the collector subscribes to the
result stream and counts what came back against what was sent.
"""

__all__ = ["collector", "replay"]

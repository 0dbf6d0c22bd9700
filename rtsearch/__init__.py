"""rtsearch: real-time peptide identification for tandem mass spectrometry."""

from __future__ import annotations

__version__ = "0.1.0"

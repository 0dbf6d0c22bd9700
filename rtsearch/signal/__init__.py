"""LC-MS signal: mass traces from MS1 scans, Savitzky–Golay smoothing, chromatographic peaks and features."""

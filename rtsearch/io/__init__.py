"""Files in and out (core): spectrum files → `Spectrum` (`spectra`), result tables → TSV or Parquet (`results`)."""

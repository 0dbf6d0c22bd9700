"""LC-MS signal: mass traces from MS1 scans, Savitzky–Golay smoothing, chromatographic peaks and features.

Written here rather than taken from a library: the smoother is the Lipid Data Analyzer thesis's uneven-spacing
Savitzky–Golay filter (least squares on the points' own times, intensity weights, repeated passes), which no
maintained Python library provides (SciPy's ``savgol_filter`` assumes even spacing and SciPy is not a
dependency), and it had to run as a batched CUDA kernel beside its NumPy reference. Tracing, centroiding and
peak cutting are kept beside it in array form, every trace of a run at once; pyopenms (OpenMS's
MassTraceDetection, ElutionPeakDetection, PeakPickerHiRes: a 45 MB C++ wheel, not a dependency) is the
yardstick in ``bench/ms1_signal.py``: 90.7–99.9 % of its peaks found on BSA1 and the LTQ Orbitrap runs,
areas within 0.5 % at the median, centroids within 0.013 ppm and 0.1 % of intensity (docs/history/RESULTS.md).
"""

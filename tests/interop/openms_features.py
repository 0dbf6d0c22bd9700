"""A run's MS1 features by OpenMS (run in the interop environment, where pyopenms is installed), as a TSV file:
MassTraceDetection → ElutionPeakDetection → FeatureFindingMetabo with their defaults (centroided first by
PeakPickerHiRes where the scans are profile), peptide isotope model, charges 1–6. One row a feature: monoisotopic
m/z, charge (0: a single trace), RT, RT span, intensity, overall quality and its traces. Usage:
openms_features.py RUN.mzML[.gz] PPM OUT.tsv"""

import sys

import pyopenms as oms

exp = oms.MSExperiment()
oms.MzMLFile().load(sys.argv[1], exp)
exp.setSpectra([s for s in exp.getSpectra() if s.getMSLevel() == 1])
if exp.size() and exp[0].getType() == oms.SpectrumSettings.SpectrumType.PROFILE:
    exp = oms.PeakPickerHiRes().pickExperiment(exp, True)
mtd = oms.MassTraceDetection()
p = mtd.getDefaults()
p.setValue("mass_error_ppm", float(sys.argv[2]))
mtd.setParameters(p)
split = oms.ElutionPeakDetection().detectPeaks(mtd.run(exp, 0))
ffm = oms.FeatureFindingMetabo()
p = ffm.getDefaults()
p.setValue("charge_upper_bound", 6)
p.setValue("isotope_filtering_model", "peptides")
p.setValue("mz_scoring_13C", "true")
p.setValue("report_convex_hulls", "true")
ffm.setParameters(p)
features = oms.FeatureMap()
ffm.run(split, features)
with open(sys.argv[3], "w") as out:
    out.write("mz\tcharge\trt\trt_min\trt_max\tintensity\tquality\ttraces\n")
    for f in features:
        box = f.getConvexHull().getBoundingBox()
        out.write(f"{f.getMZ():.6f}\t{f.getCharge()}\t{f.getRT():.3f}\t{box.minPosition()[0]:.3f}\t"
                  f"{box.maxPosition()[0]:.3f}\t{f.getIntensity():.6g}\t{f.getOverallQuality():.6g}\t"
                  f"{int(f.getMetaValue('num_of_masstraces'))}\n")

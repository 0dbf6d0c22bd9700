"""The four development runs, their databases and settings (../shared/data/README.md)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from rtsearch.config import DatabaseConfig, SearchConfig
from rtsearch.types import Tolerance


@dataclass(frozen=True)
class DevRun:
    name: str
    fastas: tuple[str, ...]
    run: str
    precursor: str
    fragment: str
    floor: int  # PSMs at 1 % FDR of the best established engine (the table)

    def search_config(self) -> SearchConfig:
        return dataclasses.replace(
            SearchConfig(),
            precursor_tolerance=Tolerance.parse(self.precursor),
            fragment_tolerance=Tolerance.parse(self.fragment),
        )

    def paths(self, data: Path) -> tuple[list[Path], Path]:
        return [data / f for f in self.fastas], data / self.run


DATABASE = DatabaseConfig()  # trypsin, 2 missed cleavages, 7-50, Carbamidomethyl C, Oxidation M <= 2

YEAST = "yeast-small/yeast_2021_04_reviewed.fasta"
DEV_RUNS = (
    DevRun("BSA1", ("bsa-orbitrapxl/BSA.fasta", YEAST), "bsa-orbitrapxl/BSA1.mzML.gz", "20 ppm", "0.5 Da", 55),
    DevRun("Ecoli_MS2_small", ("ecoli-small/ecoli.fasta",), "ecoli-small/Ecoli_MS2_small.mzML", "20 ppm", "0.5 Da", 85),
    DevRun("demo", (YEAST,), "yeast-small/demo.ms2", "3 Da", "0.5 Da", 76),
    DevRun("SmallCalibratible_Yeast", (YEAST,), "yeast-small/SmallCalibratible_Yeast.mzML", "10 ppm", "0.02 Da", 76),
)

"""`rtsearch.io.peakblocks.floats`: Arrow's float columns as NumPy without Arrow's ``to_numpy``, which imports pandas
where it is installed (0.38 s in every reader process on the GPU machine)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pyarrow as pa

from rtsearch.io.peakblocks import floats
from tests.conftest import ROOT


def test_chunks_slices_and_nulls() -> None:
    column = pa.chunked_array([pa.array([1.0, None, 3.0]), pa.array([4.0, 5.0, 6.0]).slice(1, 1)])
    assert np.array_equal(floats(column), [1.0, np.nan, 3.0, 5.0], equal_nan=True)
    assert floats(pa.chunked_array([pa.array([2.5, 3.5]).slice(1)])).tolist() == [3.5]
    assert floats(pa.chunked_array([], pa.float64())).shape == (0,)


def test_reading_an_mgf_asks_for_no_pandas(tmp_path) -> None:
    mgf = tmp_path / "a.mgf"
    mgf.write_text("BEGIN IONS\nPEPMASS=500.5\nCHARGE=2+\n100.5 20\n200.25 30\nEND IONS\n" * 3)
    code = textwrap.dedent(f"""
        import sys
        asked = []
        class Finder:
            def find_spec(self, name, path=None, target=None):
                asked.append(name)
        sys.meta_path.insert(0, Finder())
        from rtsearch.io.spectra import read_spectra
        spectra = list(read_spectra({str(mgf)!r}))
        assert len(spectra) == 3 and spectra[0].mz.tolist() == [100.5, 200.25], spectra
        print(sorted(n for n in asked if n.split(".")[0] == "pandas"))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]", out.stdout

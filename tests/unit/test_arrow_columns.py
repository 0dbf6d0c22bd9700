"""`rtsearch.io.arrow`: arrays built from their buffers equal what ``pyarrow.array`` builds (which imports pandas
where it is installed), and a results file written with them asks for no pandas."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pyarrow as pa
import pytest

from rtsearch.io.arrow import bool_array, float_array, int_array, string_array
from tests.conftest import ROOT


@pytest.mark.parametrize("values", [
    [], [""], ["PEPTIDE", "", "sp|P1|A;sp|P2|B", "ünïcødé ✓"], ["a", None, "b", None], ["a\x00b", "c"], ["\x00"],
    ["x" * 1000] * 37,
])  # fmt: skip
def test_strings(values) -> None:
    got = string_array(values)
    want = pa.array(values, type=pa.string())
    assert got.equals(want) and got.null_count == want.null_count
    assert got.to_pylist() == values


def test_numbers() -> None:
    f = np.array([1.5, np.nan, -0.0, 3e300, np.nan, 7.0, 8.0, 9.0, 10.0])  # more than one validity byte
    assert float_array(f).equals(pa.array(f, type=pa.float64(), mask=np.isnan(f)))
    assert float_array(f).null_count == 2 and float_array(np.array([1.0])).null_count == 0
    assert float_array(f[::2]).to_pylist() == [1.5, -0.0, None, 8.0, 10.0]  # a strided view
    i = np.array([3, -1, 2**40], np.int64)
    assert int_array(i).equals(pa.array(i, type=pa.int64()))
    b = np.array([True, False, True] * 5)
    assert bool_array(b).equals(pa.array(b, type=pa.bool_()))


def test_writing_a_results_file_asks_for_no_pandas(tmp_path) -> None:
    code = textwrap.dedent(f"""
        import sys
        asked = []
        class Finder:
            def find_spec(self, name, path=None, target=None):
                asked.append(name)
        sys.meta_path.insert(0, Finder())
        import numpy as np
        from rtsearch.io.results import write_columns
        cols = {{"run": ["r1", "r\\t2"], "peptide": ["PEPTIDE", ""], "q_value": np.array([0.01, np.nan]),
                 "scan": np.array([1, 2]), "is_decoy": np.array([False, True])}}
        for name in ("a.tsv", "a.parquet"):
            assert write_columns(cols, tuple(cols), {str(tmp_path)!r} + "/" + name) == 2
        print(sorted(n for n in asked if n.split(".")[0] == "pandas"))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]", out.stdout
    assert (tmp_path / "a.tsv").read_text().splitlines()[1:] == ["r1\tPEPTIDE\t0.01\t1\tfalse", "r 2\t\t\t2\ttrue"]

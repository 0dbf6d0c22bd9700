"""`rtsearch.io.arrow`: arrays built from their buffers equal what ``pyarrow.array`` builds, float columns read back
as ``to_numpy`` would — both of which import pandas where it is installed (0.38 s a process on the GPU machine) — and
neither reading an MGF nor writing a results file asks for pandas."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pyarrow as pa
import pytest

from rtsearch.io.arrow import bool_array, float_array, floats, int_array, string_array
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


def test_strings_translated_byte_for_byte() -> None:
    """The results file's cell rule (tabs and line breaks to spaces, quotes to apostrophes) over the encoded bytes
    is Arrow's replace over the strings, multi-byte characters untouched."""
    import pyarrow.compute as pc

    values = ['a\tb', 'line\nbreak\r', 'say "ü"', "", None, "日本\t語", "x\x00\ty"]
    got = string_array(values, translate=bytes.maketrans(b'\t\n\r"', b"   '"))
    want = pc.replace_substring(pc.replace_substring_regex(pa.array(values, pa.string()), pattern="[\t\n\r]",
                                                           replacement=" "), pattern='"', replacement="'")  # fmt: skip
    assert got.equals(want), got.to_pylist()


def test_numbers() -> None:
    f = np.array([1.5, np.nan, -0.0, 3e300, np.nan, 7.0, 8.0, 9.0, 10.0])  # more than one validity byte
    assert float_array(f).equals(pa.array(f, type=pa.float64(), mask=np.isnan(f)))
    assert float_array(f).null_count == 2 and float_array(np.array([1.0])).null_count == 0
    assert float_array(f[::2]).to_pylist() == [1.5, -0.0, None, 8.0, 10.0]  # a strided view
    i = np.array([3, -1, 2**40], np.int64)
    assert int_array(i).equals(pa.array(i, type=pa.int64()))
    b = np.array([True, False, True] * 5)
    assert bool_array(b).equals(pa.array(b, type=pa.bool_()))


def _pandas_asked(code: str) -> list[str]:
    """The pandas modules a new process running ``code`` looks for (a meta-path finder records every lookup)."""
    hook = textwrap.dedent("""
        import sys
        asked = []
        class Finder:
            def find_spec(self, name, path=None, target=None):
                asked.append(name)
        sys.meta_path.insert(0, Finder())
    """)
    tail = "\nimport json\nprint(json.dumps(sorted(n for n in asked if n.split('.')[0] == 'pandas')))\n"
    out = subprocess.run([sys.executable, "-c", hook + textwrap.dedent(code) + tail], capture_output=True, text=True,
                         cwd=ROOT, check=True)  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_float_columns_read_back() -> None:
    column = pa.chunked_array([pa.array([1.0, None, 3.0]), pa.array([4.0, 5.0, 6.0]).slice(1, 1)])
    assert np.array_equal(floats(column), [1.0, np.nan, 3.0, 5.0], equal_nan=True)
    assert floats(pa.chunked_array([pa.array([2.5, 3.5]).slice(1)])).tolist() == [3.5]
    assert floats(pa.chunked_array([], pa.float64())).shape == (0,)


def test_reading_an_mgf_asks_for_no_pandas(tmp_path) -> None:
    mgf = tmp_path / "a.mgf"
    mgf.write_text("BEGIN IONS\nPEPMASS=500.5\nCHARGE=2+\n100.5 20\n200.25 30\nEND IONS\n" * 3)
    assert _pandas_asked(f"""
        from rtsearch.io.spectra import read_spectra
        spectra = list(read_spectra({str(mgf)!r}))
        assert len(spectra) == 3 and spectra[0].mz.tolist() == [100.5, 200.25], spectra
    """) == []


def test_writing_a_results_file_asks_for_no_pandas(tmp_path) -> None:
    assert _pandas_asked(f"""
        import numpy as np
        from rtsearch.io.results import write_columns
        cols = {{"run": ["r1", "r\\t2"], "peptide": ["PEPTIDE", ""], "q_value": np.array([0.01, np.nan]),
                 "scan": np.array([1, 2]), "is_decoy": np.array([False, True])}}
        for name in ("a.tsv", "a.parquet"):
            assert write_columns(cols, tuple(cols), {str(tmp_path)!r} + "/" + name) == 2
    """) == []
    assert (tmp_path / "a.tsv").read_text().splitlines()[1:] == ["r1\tPEPTIDE\t0.01\t1\tfalse", "r 2\t\t\t2\ttrue"]

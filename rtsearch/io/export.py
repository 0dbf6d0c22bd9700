"""rtsearch results in the field's interchange formats: psm_utils TSV, Percolator PIN, mzIdentML 1.2.

`export` reads a results file written here (TSV or Parquet; offline, or a daemon's run file) and writes its
matches (every rank the file holds: `[search] ranks`; lower ranks have no q-value or PEP) as

- ``psm_utils``: psm_utils' lossless TSV (`psm_utils.io.read_file(..., filetype="tsv")`): ``peptidoform``
  (ProForma with ``/charge``), ``spectrum_id``, ``run``, ``is_decoy``, ``score``, ``qvalue``, ``pep``, ``precursor_mz``,
  ``retention_time``, ``protein_list``, ``rank``, ``source``, every feature as ``rescoring:NAME`` and the
  peptide-level q-value as ``meta:peptide_qvalue``;
- ``pin``: Percolator's input (``SpecId`` = run_scan_charge_rank, ``Label`` 1 / -1, ``ScanNr``, ``ExpMass``,
  ``CalcMass``, the features, ``Peptide`` as ``-.PEPTIDE.-``, then the proteins, one a column), what Percolator
  and mokapot rescore;
- ``mzid``: mzIdentML 1.2 through psims (its bundled controlled vocabularies: no network), one
  SpectrumIdentificationResult a matched spectrum (an item a rank) with the score (``search engine specific
  score``), the q-value (``PSM-level q-value``) and the retention time (``scan start time``).

A spectrum is named by its ``spectrum_id`` column (its native id: the mzML ``id``, the MGF ``TITLE``, else
``scan=N``); mzIdentML gives ``scan=N`` as its spectrumID (PSI-MS "scan number only nativeID format", which
every reader here can give) and the native id as the ``spectrum title``.

psm_utils is not imported: it pins pyteomics below 5, which rtsearch's mzML reading needs; the tests read
these files with psm_utils in an environment of its own (scripts/test makes it).
"""

from __future__ import annotations

import math
import os
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from rtsearch import __version__
from rtsearch.database import unimod
from rtsearch.database.mods import UNIMOD
from rtsearch.errors import InputError
from rtsearch.io.perms import as_umask
from rtsearch.io.results import read_results
from rtsearch.matches import RESULT_COLUMNS
from rtsearch.types import PROTON

ExportFormat = Literal["psm_utils", "pin", "mzid"]
_STRINGS = ("run", "peptide", "proteins", "reason")
_TOKEN = re.compile(r"\[([^\]]+)\]-|-\[([^\]]+)\]$|([A-Z])((?:\[[^\]]+\])*)")


def export(results: str | Path, out: str | Path, fmt: ExportFormat) -> int:
    """Write ``results``' matched spectra to ``out`` in ``fmt`` (atomically); how many."""
    cols = read_results(results, None)
    missing = [c for c in RESULT_COLUMNS if c not in cols and c not in ("spectrum_id", "rank")]  # those filled below
    if missing:
        raise InputError(f"{results}: not an rtsearch results file (no column {', '.join(missing)})")
    if "spectrum_id" not in cols:  # a file from before the column
        cols["spectrum_id"] = [f"scan={s}" for s in cols["scan"]]
    if "rank" not in cols:  # a file from before ranks: one match a spectrum
        cols["rank"] = [1] * len(cols["scan"])
    rows = [i for i, p in enumerate(cols["peptide"]) if p]
    features = [c for c in cols if c not in RESULT_COLUMNS and c not in _STRINGS and _numeric(cols[c])]
    writer = {"psm_utils": _psm_utils, "pin": _pin, "mzid": _mzid}[fmt]
    out = Path(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
    except OSError as e:
        raise InputError(f"{out}: cannot write ({e.strerror or e})") from None
    os.close(fd)
    try:
        writer(cols, rows, features, Path(tmp))
        as_umask(tmp)
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return len(rows)


def _numeric(values: Sequence[Any]) -> bool:
    return all(v is None or isinstance(v, int | float) for v in values[:1000])


def _num(v: Any) -> str:
    return "" if v is None or (isinstance(v, float) and math.isnan(v)) else repr(float(v)) if isinstance(v, float) \
        else str(v)  # fmt: skip


def _accessions(text: str | None) -> list[str]:
    return [a for a in (text or "").split(";") if a]


def _psm_utils(cols: dict[str, list[Any]], rows: list[int], features: list[str], path: Path) -> None:
    head = ["peptidoform", "spectrum_id", "run", "is_decoy", "score", "qvalue", "pep", "precursor_mz", "retention_time",
            "protein_list", "rank", "source", "meta:peptide_qvalue", *(f"rescoring:{f}" for f in features)]  # fmt: skip
    with open(path, "w", newline="") as fh:
        fh.write("\t".join(head) + "\n")
        for i in rows:
            cells = [f"{cols['peptide'][i]}/{cols['charge'][i]}", cols["spectrum_id"][i], cols["run"][i],
                     str(bool(cols["is_decoy"][i])), _num(cols["score"][i]), _num(cols["q_value"][i]),
                     _num(cols["pep"][i]), _num(cols["precursor_mz"][i]), _num(cols["rt"][i]),
                     repr(_accessions(cols["proteins"][i])), str(cols["rank"][i]), "rtsearch",
                     _num(cols["peptide_q_value"][i]),
                     *(_num(cols[f][i]) for f in features)]  # fmt: skip
            fh.write("\t".join(cells) + "\n")


def _pin(cols: dict[str, list[Any]], rows: list[int], features: list[str], path: Path) -> None:
    features = ["charge", "rt", *(f for f in features if f not in ("charge", "rt"))]  # readers take charge from it
    head = ["SpecId", "Label", "ScanNr", "ExpMass", "CalcMass", *features, "Peptide", "Proteins"]
    with open(path, "w", newline="") as fh:
        fh.write("\t".join(head) + "\n")
        for i in rows:
            z = int(cols["charge"][i])
            exp = (float(cols["precursor_mz"][i]) - PROTON) * z
            calc = (float(cols["calc_mz"][i]) - PROTON) * z
            values = [_num(cols[f][i]) or "0" for f in features]  # Percolator takes no empty feature
            cells = [f"{cols['run'][i]}_{cols['scan'][i]}_{z}_{cols['rank'][i]}", "-1" if cols["is_decoy"][i] else "1",
                     str(cols["scan"][i]), f"{exp:.6f}", f"{calc:.6f}", *values, f"-.{cols['peptide'][i]}.-",
                     *_accessions(cols["proteins"][i])]  # fmt: skip
            fh.write("\t".join(cells) + "\n")


def _modifications(proforma: str) -> tuple[str, list[dict[str, Any]]]:
    """Residues and psims modification dicts (1-based location; 0 N-terminal, length+1 C-terminal) of a ProForma
    string rtsearch wrote (Unimod names, or signed masses)."""
    seq: list[str] = []
    mods: list[dict[str, Any]] = []
    pending_c: list[str] = []
    for m in _TOKEN.finditer(proforma):
        n_term, c_term, aa, tags = m.groups()
        if n_term:
            mods.append(_mod(0, n_term))
        elif c_term:
            pending_c.append(c_term)
        else:
            seq.append(aa)
            mods += [_mod(len(seq), t) for t in re.findall(r"\[([^\]]+)\]", tags or "")]
    mods += [_mod(len(seq) + 1, t) for t in pending_c]
    return "".join(seq), mods


def _mod(location: int, tag: str) -> dict[str, Any]:
    known = UNIMOD.get(tag)
    known = unimod.mass(tag) if known is None else known
    if known is not None:
        return {"location": location, "name": tag, "monoisotopic_mass_delta": known}
    try:
        return {"location": location, "monoisotopic_mass_delta": float(tag), "name": "unknown modification"}
    except ValueError:
        raise InputError(f"modification {tag!r}: neither a Unimod name rtsearch knows nor a mass") from None


def _mzid(cols: dict[str, list[Any]], rows: list[int], features: list[str], path: Path) -> None:
    from psims.controlled_vocabulary import controlled_vocabulary as cv
    from psims.mzid import MzIdentMLWriter

    cv.obo_cache.use_remote = False  # psims' bundled vocabularies: never the network
    runs = sorted({cols["run"][i] for i in rows})
    run_id = {r: f"spectra_{k}" for k, r in enumerate(runs)}
    accessions = sorted({a for i in rows for a in _accessions(cols["proteins"][i])})
    db_id = {a: f"dbseq_{k}" for k, a in enumerate(accessions)}
    peptides = sorted({cols["peptide"][i] for i in rows})
    pep_id = {p: f"peptide_{k}" for k, p in enumerate(peptides)}
    evidence: dict[tuple[str, str], str] = {}
    decoy: dict[str, bool] = {}
    for i in rows:
        decoy[cols["peptide"][i]] = bool(cols["is_decoy"][i])
        for a in _accessions(cols["proteins"][i]):
            evidence.setdefault((cols["peptide"][i], a), f"evidence_{len(evidence)}")
    with MzIdentMLWriter(str(path), close=True) as w:
        w.controlled_vocabularies()
        w.provenance(software={"name": "rtsearch", "id": "rtsearch", "version": __version__,
                               "uri": "https://pypi.org/project/rtsearch/"})  # fmt: skip
        w.register("SearchDatabase", "database")
        w.register("SpectrumIdentificationList", "psms")
        w.register("SpectrumIdentificationProtocol", "protocol")
        for r in runs:
            w.register("SpectraData", run_id[r])
        with w.sequence_collection():
            for a in accessions:
                w.write_db_sequence(a, None, id=db_id[a], search_database_id="database")
            for p in peptides:
                seq, mods = _modifications(p)
                w.write_peptide(seq, pep_id[p], mods)
            for (p, a), eid in evidence.items():
                w.write_peptide_evidence(pep_id[p], db_id[a], eid, None, None, is_decoy=decoy[p])
        with w.analysis_collection():
            w.SpectrumIdentification(spectra_data_ids_used=list(run_id.values()), search_database_ids_used=["database"],
                                     spectrum_identification_list_id="psms",
                                     spectrum_identification_protocol_id="protocol").write()  # fmt: skip
        with w.analysis_protocol_collection():
            w.spectrum_identification_protocol(search_type="ms-ms search", analysis_software_id="rtsearch",
                                               id="protocol")  # fmt: skip
        with w.data_collection():
            spectra = [{"location": r, "id": run_id[r], "file_format": "mzML format",
                        "spectrum_id_format": "scan number only nativeID format"} for r in runs]  # fmt: skip
            w.inputs(search_databases=[{"location": "rtsearch index", "id": "database", "file_format": "FASTA format",
                                        "name": "rtsearch index"}], spectra_data=spectra)  # fmt: skip
            with w.analysis_data(), w.spectrum_identification_list(id="psms"):
                for k, group in enumerate(_by_spectrum(cols, rows)):
                    i = group[0]
                    w.write_spectrum_identification_result(
                        f"scan={cols['scan'][i]}", f"sir_{k}", spectra_data_id=run_id[cols["run"][i]],
                        identifications=[_item(cols, j, pep_id, evidence) for j in group],
                        params=[{"scan start time": float(cols["rt"][i] or 0.0), "unit_name": "second"},
                                {"spectrum title": cols["spectrum_id"][i]}])  # fmt: skip


def _by_spectrum(cols: dict[str, list[Any]], rows: list[int]) -> list[list[int]]:
    """``rows`` grouped by spectrum (a spectrum's ranks are consecutive rows of a results file)."""
    groups: list[list[int]] = []
    for i in rows:
        if groups and (cols["run"][i], cols["scan"][i]) == (cols["run"][groups[-1][0]], cols["scan"][groups[-1][0]]):
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


def _item(cols: dict[str, list[Any]], i: int, pep_id: dict[str, str], evidence: dict[tuple[str, str], str]
          ) -> dict[str, Any]:  # fmt: skip
    """Row ``i`` as a SpectrumIdentificationItem (its q-value only where it has one: rank 1)."""
    p, q = cols["peptide"][i], cols["q_value"][i]
    has_q = q is not None and not math.isnan(float(q))
    return {"experimental_mass_to_charge": float(cols["precursor_mz"][i]),
            "calculated_mass_to_charge": float(cols["calc_mz"][i]), "charge_state": int(cols["charge"][i]),
            "peptide_id": pep_id[p],
            "peptide_evidence_id": [evidence[(p, a)] for a in _accessions(cols["proteins"][i])],
            "score": {"search engine specific score": float(cols["score"][i])}, "id": f"sii_{i}",
            "params": [{"PSM-level q-value": float(q)}] if has_q else [], "rank": int(cols["rank"][i]),
            "pass_threshold": has_q and float(q) <= 0.01}  # fmt: skip

"""mzIdentML 1.2 of an rtsearch results file, valid against the schema (psims' ``mzIdentML1.2.0.xsd``), written
through psims with its bundled controlled vocabularies (no network).

What the search was is read from the results' provenance (`rtsearch.io.provenance`: the configuration, the target's
manifest with its FASTA files, the spectrum files):

- the protocol: ``ms-ms search`` (``spectral library search`` for a library), the enzyme (PSI-MS name, semi-specific,
  missed cleavages; ``no cleavage`` for top-down, ``NoEnzyme`` for a library), every fixed and variable modification
  with its Unimod accession and site rule, the precursor and fragment tolerances, the 1 % PSM threshold;
- the inputs: the FASTA files (``FASTA format``, the decoy rule and prefix) and each run's spectrum file by its path,
  format and native id format: an mzML's own (read from its header; else ``mzML unique identifier``) with its
  spectrum ids, an MGF's ``index=N`` (its entries' order, read again from the file), ``scan=N`` for mzXML, MS2,
  msalign and a daemon's runs;
- every PeptideEvidence with its start, end and flanking residues, found in the FASTA files (a decoy at its target's
  place: reversed peptides keep their length), and every DBSequence with its length;
- every item's score (``search engine specific score``), q-value (``PSM-level q-value``), PEP (``PSM-level local
  FDR``, as psm_utils writes and reads it), peptide-level q-value (``distinct peptide-level q-value``) and, for
  top-down, E-value (``PSM-level e-value``).

Where the provenance or a file it names is missing (a results file moved without its sidecar, a FASTA deleted), what
it would give is left out (the schema allows it) and a warning says what.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rtsearch import __version__
from rtsearch.database import unimod
from rtsearch.database.mods import UNIMOD, Modification, parse_mod
from rtsearch.errors import InputError
from rtsearch.io.provenance import sidecar
from rtsearch.types import Tolerance

log = logging.getLogger(__name__)

ENZYMES = {"trypsin": "Trypsin", "trypsin/p": "Trypsin/P", "lys-c": "Lys-C", "lys-n": "Lys-N", "asp-n": "Asp-N",
           "chymotrypsin": "Chymotrypsin", "nonspecific": "unspecific cleavage"}  # fmt: skip
_CUTS_BEFORE = ("lys-n", "asp-n")  # their reversed decoys keep the first residue (`rtsearch.database.digest`)
_SPECIFICITY = {"n-term": "modification specificity peptide N-term",
                "c-term": "modification specificity peptide C-term",
                "protein n-term": "modification specificity protein N-term",
                "protein c-term": "modification specificity protein C-term"}  # fmt: skip
_FORMATS = {".mzml": "mzML format", ".mgf": "Mascot MGF format", ".mzxml": "ISB mzXML format", ".ms2": "MS2 format",
            ".msalign": "msalign format"}  # fmt: skip
_SCAN_ONLY = "scan number only nativeID format"
UNKNOWN_FORMAT = "mass spectrometer file format"  # the parent term: a daemon's run (from the wire), or no provenance


@dataclass
class Run:
    """A run's SpectraData: where its spectra are, their format, and each result's spectrumID."""

    location: str
    file_format: str
    id_format: str
    ids: dict[str, str] = field(default_factory=dict)  # the results' spectrum_id -> spectrumID, where they differ

    def spectrum_id(self, native: str, scan: int) -> str:
        if self.id_format == _SCAN_ONLY:
            return f"scan={scan}"
        return self.ids.get(native, native)


def read_provenance(results: str | Path) -> dict[str, Any]:
    """The provenance record of ``results`` (its sidecar, else a Parquet file's own), or {} with a warning."""
    path = sidecar(results)
    try:
        return dict(json.loads(path.read_text()))
    except (OSError, ValueError):
        pass
    if str(results).endswith(".parquet"):
        import pyarrow.parquet as pq

        meta = pq.read_schema(results).metadata or {}
        if b"rtsearch.provenance" in meta:
            return dict(json.loads(meta[b"rtsearch.provenance"]))
    log.warning("%s: no provenance (%s): the mzIdentML says no enzyme, modification, tolerance or input file", results,
                path.name)  # fmt: skip
    return {}


def write_mzid(cols: dict[str, list[Any]], rows: list[int], path: Path, prov: dict[str, Any]) -> None:
    """The ``rows`` of the results ``cols`` as mzIdentML 1.2 at ``path``, described by the provenance ``prov``."""
    from psims.controlled_vocabulary import controlled_vocabulary as cv
    from psims.mzid import MzIdentMLWriter

    cv.obo_cache.use_remote = False  # psims' bundled vocabularies: never the network
    kind = "topdown" if "proteoform_start" in cols else "library" if "library_id" in cols else "database"
    config, target = prov.get("config", {}), prov.get("target", {})
    params = target.get("params") or (config.get("proteoforms") if kind == "topdown" else config.get("database")) or {}
    runs = _runs(sorted({cols["run"][i] for i in rows}), prov.get("inputs") or [])
    run_id = {r: f"spectra_{k}" for k, r in enumerate(runs)}
    accessions = sorted({a for i in rows for a in _accessions(cols["proteins"][i])})
    db_id = {a: f"dbseq_{k}" for k, a in enumerate(accessions)}
    peptides = sorted({cols["peptide"][i] for i in rows})
    pep_id = {p: f"peptide_{k}" for k, p in enumerate(peptides)}
    fastas = _fastas(target, kind)
    places = _Places(fastas, params) if fastas else None
    evidence: dict[tuple[str, str], str] = {}
    decoy: dict[str, bool] = {}
    spans: dict[tuple[str, str], tuple[int, int]] = {}  # top-down: where the results say a proteoform is
    for i in rows:
        decoy[cols["peptide"][i]] = bool(cols["is_decoy"][i])
        for a in _accessions(cols["proteins"][i]):
            evidence.setdefault((cols["peptide"][i], a), f"evidence_{len(evidence)}")
            if kind == "topdown" and cols["proteoform_start"][i]:
                spans[(cols["peptide"][i], a)] = (int(cols["proteoform_start"][i]), int(cols["proteoform_end"][i]))
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
                length = places.length(a) if places else None
                w.write_db_sequence(a, None, id=db_id[a], search_database_id="database",
                                    **({"length": length} if length else {}))  # fmt: skip
            for p in peptides:
                seq, mods = modifications(p)
                w.write_peptide(seq, pep_id[p], mods)
            for (p, a), eid in evidence.items():
                span = spans.get((p, a))
                start, end = span or (None, None)
                pre = post = None
                if places and (found := places.find(p, a, span)) is not None:
                    start, end, pre, post = found
                w.write_peptide_evidence(pep_id[p], db_id[a], eid, start, end, is_decoy=decoy[p], pre=pre, post=post)
        with w.analysis_collection():
            w.SpectrumIdentification(spectra_data_ids_used=list(run_id.values()), search_database_ids_used=["database"],
                                     spectrum_identification_list_id="psms",
                                     spectrum_identification_protocol_id="protocol").write()  # fmt: skip
        with w.analysis_protocol_collection():
            w.spectrum_identification_protocol(id="protocol", analysis_software_id="rtsearch",
                                               **_protocol(kind, params, config))  # fmt: skip
        with w.data_collection():
            spectra = [{"location": run.location, "id": run_id[r], "spectrum_id_format": run.id_format,
                        "file_format": run.file_format} for r, run in runs.items()]  # fmt: skip
            # w.inputs made by hand (psims < 1.5, pinned), to write the database as `_named_database` does
            w.state_machine.transition("inputs")
            database = _named_database()(**_database(kind, target, params, fastas), context=w.context)
            w.Inputs([], [database], [w.SpectraData(**d) for d in spectra]).write(w.writer)
            with w.analysis_data(), w.spectrum_identification_list(id="psms", num_sequences_searched=_searched(target)):
                for k, group in enumerate(_by_spectrum(cols, rows)):
                    i = group[0]
                    run = runs[cols["run"][i]]
                    w.write_spectrum_identification_result(
                        run.spectrum_id(cols["spectrum_id"][i], int(cols["scan"][i])), f"sir_{k}",
                        spectra_data_id=run_id[cols["run"][i]],
                        identifications=[_item(cols, j, pep_id, evidence) for j in group],
                        params=[{"scan start time": float(cols["rt"][i] or 0.0), "unit_name": "second"},
                                {"spectrum title": cols["spectrum_id"][i]}])  # fmt: skip


def _accessions(text: str | None) -> list[str]:
    return [a for a in (text or "").split(";") if a]


def _number(v: Any) -> float | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


# --- the protocol ---------------------------------------------------------------------------------------------------


def _protocol(kind: str, params: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """psims' spectrum_identification_protocol arguments for a search of ``kind``."""
    if kind == "topdown":
        top = config.get("topdown", {})
        enzyme: dict[str, Any] = {"name": "no cleavage", "missed_cleavages": 0, "id": "enzyme"}
        tolerances = [(top.get("precursor_ppm"), "ppm"), (top.get("fragment_ppm"), "ppm")]
        mods = _search_mods(params.get("fixed_mods", ()), params.get("known_ptms", ()))
    else:
        search = config.get("search", {})
        tolerances = [_tolerance(search.get("precursor_tolerance")), _tolerance(search.get("fragment_tolerance"))]
        if kind == "library":
            enzyme, mods = {"name": "NoEnzyme", "missed_cleavages": 0, "id": "enzyme"}, []
        else:
            enzyme = {"name": ENZYMES.get(str(params.get("enzyme")), "NoEnzyme"), "id": "enzyme",
                      "missed_cleavages": int(params.get("missed_cleavages", 0)),
                      "semi_specific": params.get("specificity") == "semi"}  # fmt: skip
            mods = _search_mods(params.get("fixed_mods", ()), params.get("variable_mods", ()))
    (parent, p_unit), (fragment, f_unit) = tolerances
    unit = {"ppm": "parts per million", "Da": "dalton"}
    return {"search_type": "spectral library search" if kind == "library" else "ms-ms search", "enzymes": [enzyme],
            "modification_params": mods, "threshold": {"PSM-level q-value": 0.01},
            "parent_tolerance": (parent, None, unit[p_unit]) if parent else None,
            "fragment_tolerance": (fragment, None, unit[f_unit]) if fragment else None}  # fmt: skip


def _tolerance(text: str | None) -> tuple[float | None, str]:
    if not text:
        return None, "ppm"
    t = Tolerance.parse(text)
    return t.value, t.unit


def _search_mods(fixed: Any, variable: Any) -> list[dict[str, Any]]:
    """SearchModification dicts: each rule's delta, residues (``.`` for any at a terminus), site rule and Unimod
    accession (``unknown modification`` for a mass)."""
    out = []
    for texts, is_fixed in ((fixed, True), (variable, False)):
        for text in texts:
            mod = parse_mod(text)
            entry: dict[str, Any] = {"mass_delta": mod.delta, "fixed": is_fixed,
                                     "residues": " ".join(mod.residues) or "."}  # fmt: skip
            if mod.kind != "residue":
                entry["specificity"] = [_SPECIFICITY[mod.kind]]
            entry.update(_identity(mod))
            out.append(entry)
    return out


def _identity(mod: Modification) -> dict[str, Any]:
    accession = unimod.accession(mod.name) if mod.name[0] not in "+-" else None
    if accession is None:
        return {"accession": "MS:1001460", "name": "unknown modification"}
    return {"accession": accession}


# --- the inputs -----------------------------------------------------------------------------------------------------


def _fastas(target: dict[str, Any], kind: str) -> list[Path]:
    """The target's FASTA files that are still where it was built from."""
    if kind == "library":
        return []
    found: list[Path] = []
    missing: list[Path] = []
    for rec in target.get("inputs") or []:
        p = Path(rec.get("path") or rec.get("name", ""))
        (found if rec.get("path") and p.is_file() else missing).append(p)
    if missing:
        log.warning("FASTA %s not found where the target records it: PeptideEvidence without positions, DBSequence "
                    "without lengths", ", ".join(str(m) for m in missing))  # fmt: skip
        return []
    return found


def _database(kind: str, target: dict[str, Any], params: dict[str, Any], fastas: list[Path]) -> dict[str, Any]:
    """The SearchDatabase: the FASTA files (or the library) searched, with the decoy rule."""
    if kind == "library":  # the library's source files (MSP, sptxt, ...)
        sources = [Path(str(s)) for s in target.get("sources") or []]
        msp = sources and all(s.suffix.lower() == ".msp" for s in sources)
        return {"id": "database", "name": ", ".join(s.name for s in sources) or str(target.get("folder", "unknown")),
                "location": str(sources[0] if len(sources) == 1 else target.get("folder", "unknown")),
                "file_format": "NIST MSP format" if msp else "database file formats", "params": ["spectral library"]}
    inputs = target.get("inputs") or []
    name = ", ".join(str(r.get("name")) for r in inputs) or str(target.get("folder", "unknown"))
    location = str(fastas[0]) if len(fastas) == 1 else str(target.get("folder") or name)
    out: dict[str, Any] = {"id": "database", "name": name, "location": location, "file_format": "FASTA format"}
    if _searched(target):
        out["num_database_sequences"] = _searched(target)
    prefix = params.get("decoy_prefix")
    decoys = params.get("decoys")
    if decoys and decoys != "none" and prefix:
        rule = {"reverse": "decoy DB type reverse", "shuffle": "decoy DB type shuffle"}.get(decoys)
        out["params"] = ["DB composition target+decoy", {"decoy DB accession regexp": f"^{re.escape(prefix)}"},
                         *([rule] if rule else [])]  # fmt: skip
    return out


def _named_database() -> type:
    from psims.mzid.components import SearchDatabase, UserParam, element

    class NamedDatabase(SearchDatabase):
        """psims' SearchDatabase with its name as the DatabaseName's value too: OpenMS reads the value (an empty one
        is "No DatabaseName element found, use results at own risk", the database then "unknown")."""

        def write_content(self, xml_file: Any) -> None:
            if self.file_format is not None:
                with element(xml_file, "FileFormat"):
                    self.write_params(xml_file, self.prepare_params(self.file_format))
            with element(xml_file, "DatabaseName"):
                UserParam(name=self.name, value=self.name).write(xml_file)
            self.write_params(xml_file)

    return NamedDatabase


def _searched(target: dict[str, Any]) -> int:
    """How many protein sequences the target holds, decoys included (0: not known)."""
    counts = target.get("counts") or {}
    return int(counts.get("proteins", 0)) + int(counts.get("decoys", 0))


def _runs(names: list[str], inputs: list[dict[str, Any]]) -> dict[str, Run]:
    """Each run's SpectraData, from the spectrum file the provenance names for it."""
    from rtsearch.io.spectra import run_name

    files = {run_name(r["path"]): Path(r["path"]) for r in inputs if r.get("path")}
    out = {}
    for name in names:
        path = files.get(name)
        suffix = next((s for s in _FORMATS if path and path.name.lower().removesuffix(".gz").endswith(s)), "")
        if path is None or not path.is_file():
            if path is not None:
                log.warning("%s: not found: its spectra are named scan=N", path)
            out[name] = Run(str(path or name), _FORMATS.get(suffix, UNKNOWN_FORMAT), _SCAN_ONLY)
        elif suffix == ".mzml":
            out[name] = Run(str(path), _FORMATS[suffix], _mzml_id_format(path))
        elif suffix == ".mgf":
            out[name] = Run(str(path), _FORMATS[suffix], "multiple peak list nativeID format", _mgf_indexes(path))
        else:
            out[name] = Run(str(path), _FORMATS.get(suffix, UNKNOWN_FORMAT), _SCAN_ONLY)
    return out


def _mzml_id_format(path: Path) -> str:
    """The native id format an mzML's header declares (e.g. ``Thermo nativeID format``), else ``mzML unique
    identifier`` (its spectra named by their ids)."""
    import gzip

    from lxml import etree

    with gzip.open(path) if path.name.lower().endswith(".gz") else open(path, "rb") as fh:
        for _, el in etree.iterparse(fh, events=("start",), recover=True, huge_tree=True):
            tag = etree.QName(el).localname
            if tag == "cvParam" and (el.get("name") or "").endswith("nativeID format"):
                return str(el.get("name"))
            if tag == "run":
                break
    return "mzML unique identifier"


def _mgf_indexes(path: Path) -> dict[str, str]:
    """An MGF's spectra by the id rtsearch gave them (their TITLE, else ``scan=N``) -> ``index=N``, their place in
    the file from 0 (the ``multiple peak list nativeID format``)."""
    from rtsearch.io.spectra import read_spectra

    out: dict[str, str] = {}
    for k, s in enumerate(read_spectra(path)):
        out.setdefault(s.native_id or f"scan={s.scan}", f"index={k}")
    return out


# --- peptides and where they are ------------------------------------------------------------------------------------


def modifications(text: str) -> tuple[str, list[dict[str, Any]]]:
    """The residues and psims Modification dicts of a ProForma string rtsearch wrote: Unimod names or signed masses
    at residues (1-based location), at the N-terminus (0) or C-terminus (length + 1), over a range of residues (at its
    first, the range's residues named) or at no known place (no location)."""
    from pyteomics import proforma  # here: it imports psims, and with it SQLAlchemy and asyncio (0.3 s)

    try:
        parsed = proforma.ProForma.parse(text)
    except Exception as e:  # pyteomics raises its own error types and ValueError
        raise InputError(f"peptide {text!r}: not ProForma rtsearch reads ({e})") from None
    seq = "".join(aa for aa, _ in parsed.sequence)
    mods = [_mod(k + 1, tag) for k, (_, tags) in enumerate(parsed.sequence) for tag in tags or ()]
    props = parsed.properties
    mods += [_mod(0, tag) for tag in props.get("n_term") or ()]
    mods += [_mod(len(seq) + 1, tag) for tag in props.get("c_term") or ()]
    for interval in props.get("intervals") or ():  # at the range's first residue: mzIdentML has no range
        mods += [_mod(interval.start + 1, tag) for tag in interval.tags]
    for tag in props.get("unlocalized_modifications") or ():
        mods.append(_mod(None, tag))
    return seq, mods


def _mod(location: int | None, tag: Any) -> dict[str, Any]:
    from pyteomics import proforma

    name = getattr(tag, "value", None)
    if isinstance(tag, proforma.MassModification):
        return {"location": location, "monoisotopic_mass_delta": float(tag.value), "name": "unknown modification"}
    known = UNIMOD.get(str(name))
    known = unimod.mass(str(name)) if known is None else known
    if known is None:
        raise InputError(f"modification {name!r}: neither a Unimod name rtsearch knows nor a mass")
    accession = unimod.accession(str(name))
    return {"location": location, "monoisotopic_mass_delta": known,
            **({"accession": accession} if accession else {"name": name})}  # fmt: skip


class _Places:
    """Where peptides are in the FASTA proteins: (start, end) 1-based inclusive, and the residues before and after
    (``-`` at a terminus). A decoy is placed where its target is (reversed, it keeps its length)."""

    def __init__(self, fastas: list[Path], params: dict[str, Any]) -> None:
        from rtsearch.database.fasta import read_fastas

        self.proteins = {p.accession: p.sequence for p in read_fastas([str(f) for f in fastas])}
        self.prefix = str(params.get("decoy_prefix") or "")
        self.keep_first = params.get("enzyme") in _CUTS_BEFORE
        self.il = bool(params.get("isoleucine_equals_leucine"))

    def _protein(self, accession: str) -> tuple[str | None, bool]:
        if accession in self.proteins:
            return self.proteins[accession], False
        if self.prefix and accession.startswith(self.prefix):
            return self.proteins.get(accession[len(self.prefix) :]), True
        return None, False

    def length(self, accession: str) -> int | None:
        seq, _ = self._protein(accession)
        return len(seq) if seq else None

    def find(self, peptide: str, accession: str, span: tuple[int, int] | None = None
             ) -> tuple[int, int, str, str] | None:  # fmt: skip
        """Where ``peptide`` is in ``accession``'s protein, or within it at ``span`` (top-down: the results say)."""
        seq, reversed_decoy = self._protein(accession)
        if seq is None:
            return None
        if span is not None:
            at, end = span[0] - 1, span[1]
        else:
            residues = modifications(peptide)[0]
            if reversed_decoy:
                residues = residues[0] + residues[:0:-1] if self.keep_first else residues[-2::-1] + residues[-1]
            at = _find(seq, residues, self.il)
            if at < 0:
                return None
            end = at + len(residues)
        return at + 1, end, seq[at - 1] if at else "-", seq[end] if end < len(seq) else "-"


def _find(protein: str, peptide: str, il: bool) -> int:
    at = protein.find(peptide)
    if at < 0 and il:
        at = protein.replace("I", "L").find(peptide.replace("I", "L"))
    return at


# --- results --------------------------------------------------------------------------------------------------------


def _by_spectrum(cols: dict[str, list[Any]], rows: list[int]) -> Iterator[list[int]]:
    """``rows`` grouped by spectrum (a spectrum's ranks are consecutive rows of a results file)."""
    group: list[int] = []
    for i in rows:
        if group and (cols["run"][i], cols["scan"][i]) != (cols["run"][group[0]], cols["scan"][group[0]]):
            yield group
            group = []
        group.append(i)
    if group:
        yield group


def _item(cols: dict[str, list[Any]], i: int, pep_id: dict[str, str], evidence: dict[tuple[str, str], str]
          ) -> dict[str, Any]:  # fmt: skip
    """Row ``i`` as a SpectrumIdentificationItem (its q-value, PEP and peptide q-value where it has them: rank 1)."""
    p = cols["peptide"][i]
    q, score = _number(cols["q_value"][i]), _number(cols["score"][i])  # no score: a library match sharing no peak
    params: list[dict[str, Any]] = []
    for column, term in (("q_value", "PSM-level q-value"), ("pep", "PSM-level local FDR"),
                         ("peptide_q_value", "distinct peptide-level q-value"), ("evalue", "PSM-level e-value")):
        value = _number(cols[column][i]) if column in cols else None
        if value is not None:
            params.append({term: value})
    return {"experimental_mass_to_charge": float(cols["precursor_mz"][i]),
            "calculated_mass_to_charge": float(cols["calc_mz"][i]), "charge_state": int(cols["charge"][i]),
            "peptide_id": pep_id[p],
            "peptide_evidence_id": [evidence[(p, a)] for a in _accessions(cols["proteins"][i])],
            "score": {"search engine specific score": score} if score is not None else None, "id": f"sii_{i}",
            "params": params, "rank": int(cols["rank"][i]), "pass_threshold": q is not None and q <= 0.01}  # fmt: skip

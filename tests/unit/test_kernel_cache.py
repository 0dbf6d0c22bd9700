"""Precompiled kernels seeded into CuPy's kernel cache (`rtsearch.scoring.kernel_cache`): the shipped archive's
cubins copied where CuPy looks, none overwritten, nothing done (and no error) for a machine it was not made for."""

from __future__ import annotations

import hashlib
import tarfile
from pathlib import Path
from types import SimpleNamespace

from rtsearch.scoring.kernel_cache import DATA, archive_tag, seed, seed_for

SHIPPED = "sm90-cupy14.2.0"


def test_the_shipped_archive_is_cubins_whose_hash_cupy_checks() -> None:
    """Each member is a CuPy cache file: the cubin's SHA-1 (hex) then the cubin, as CuPy writes and checks it."""
    with tarfile.open(DATA / f"kernels-{SHIPPED}.tar.gz") as tar:
        members = tar.getmembers()
        assert len(members) >= 50
        for m in members:
            assert m.isfile() and m.name.endswith(".cubin") and "/" not in m.name
            data = tar.extractfile(m).read()  # type: ignore[union-attr]
            head, cubin = data[:40], data[40:]
            assert head == hashlib.sha1(cubin).hexdigest().encode()
            assert cubin[:4] == b"\x7fELF"  # a CUDA binary


def test_seed_copies_what_is_missing_and_keeps_what_is_there(tmp_path: Path) -> None:
    cache = tmp_path / "kernel_cache"
    with tarfile.open(DATA / f"kernels-{SHIPPED}.tar.gz") as tar:
        names = sorted(m.name for m in tar.getmembers())
    cache.mkdir()
    (cache / names[0]).write_bytes(b"compiled here")  # one this machine compiled already
    assert seed(cache, SHIPPED) == len(names) - 1
    assert sorted(p.name for p in cache.iterdir()) == names  # no partial files left
    assert (cache / names[0]).read_bytes() == b"compiled here"
    assert seed(cache, SHIPPED) == 0  # the second process copies nothing


def test_no_archive_for_this_machine_seeds_nothing(tmp_path: Path) -> None:
    assert seed(tmp_path / "c", archive_tag("75", "14.2.0")) == 0 and not (tmp_path / "c").exists()
    broken = tmp_path / "data"
    broken.mkdir()
    (broken / f"kernels-{SHIPPED}.tar.gz").write_bytes(b"not a tar")
    assert seed(tmp_path / "c", SHIPPED, data=broken) == 0  # a warning, CuPy compiles as before


def test_seed_for_reads_the_machine_from_cupy(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("CUPY_CACHE_DIR", str(tmp_path / "env-cache"))
    fake = SimpleNamespace(__version__="14.2.0", cuda=SimpleNamespace(Device=lambda: SimpleNamespace(
        compute_capability="90"), compiler=SimpleNamespace()))  # fmt: skip
    assert seed_for(fake) > 50 and any((tmp_path / "env-cache").iterdir())
    other = SimpleNamespace(__version__="13.6.0", cuda=fake.cuda)
    assert seed_for(other) == 0


def test_seed_for_seeds_once_a_process(tmp_path: Path, monkeypatch) -> None:
    """Every backend start asks; the archive is read once a process and cache."""
    monkeypatch.setenv("CUPY_CACHE_DIR", str(tmp_path / "once"))
    fake = SimpleNamespace(__version__="14.2.0", cuda=SimpleNamespace(Device=lambda: SimpleNamespace(
        compute_capability="90"), compiler=SimpleNamespace()))  # fmt: skip
    assert seed_for(fake) > 50
    for f in (tmp_path / "once").iterdir():
        f.unlink()
    assert seed_for(fake) == 0 and not any((tmp_path / "once").iterdir())  # not read again

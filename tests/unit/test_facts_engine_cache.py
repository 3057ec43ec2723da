"""The engine probe's cache on the host (fleet/facts/engine_probe.py), run as fleet runs it: the
probe's source through `python -c`, from /, in a fresh interpreter. A `torch` package of our own
on PYTHONPATH stands in for the engine's (importing the real one costs seconds), and its
directory is one of the `sys.path` entries the cache is keyed by."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fleet.facts.commands import ENGINE_PROBE_SOURCE, engine_fact
from fleet.facts.engine_probe import BOOT_ID_PATH, CACHE_SEPARATOR, PROBE_MARK
from fleet.facts.parsers import parse_engine_probe


@pytest.fixture
def site(tmp_path: Path) -> Path:
    packages = tmp_path / "site"
    (packages / "torch").mkdir(parents=True)
    (packages / "torch" / "__init__.py").write_text("__version__ = '2.11.0+cu130'\nclass version:\n    cuda = '13.0'\n")
    return packages


def probe(tmp_path: Path, site: Path, *args: str, boot_id: str = "boot-1") -> tuple[dict, list[Path]]:
    boot = tmp_path / "boot_id"
    boot.write_text(boot_id + "\n")
    # The one thing a unit test cannot change is the kernel's boot id: the probe reads this file instead.
    source = ENGINE_PROBE_SOURCE.replace(repr(BOOT_ID_PATH)[1:-1], str(boot))
    env = {**os.environ, "PYTHONPATH": str(site), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-c", source, *args], cwd="/", env=env, capture_output=True, text=True, timeout=60, check=True)
    report = parse_engine_probe(done.stdout)
    return report.model_dump(), sorted((tmp_path / "cache" / "fleet" / "engine-probe").glob("*.txt"))


def tamper(cache_file: Path, torch_version: str) -> None:
    """Mark the cached report, so that a run that answers from the cache shows it."""
    key, separator, report = cache_file.read_text().partition(CACHE_SEPARATOR)
    cache_file.write_text(key + separator + json.dumps({**json.loads(report), "torch_version": torch_version}))


def test_a_second_probe_answers_from_the_cache(tmp_path: Path, site: Path) -> None:
    first, files = probe(tmp_path, site)
    assert first["torch_version"] == "2.11.0+cu130" and first["torch_cuda"] == "13.0"
    assert len(files) == 1
    tamper(files[0], "from-the-cache")
    again, _ = probe(tmp_path, site)
    assert again["torch_version"] == "from-the-cache"


def test_a_package_installed_or_removed_invalidates_the_cache(tmp_path: Path, site: Path) -> None:
    _, files = probe(tmp_path, site)
    tamper(files[0], "from-the-cache")
    (site / "triton").mkdir()  # pip install: a new entry in site-packages changes its mtime
    (site / "triton" / "__init__.py").write_text("")
    os.utime(site, ns=(os.stat(site).st_atime_ns, os.stat(site).st_mtime_ns + 1_000_000_000))
    fresh, _ = probe(tmp_path, site)
    assert fresh["torch_version"] == "2.11.0+cu130"


def test_a_new_boot_or_refresh_probes_afresh(tmp_path: Path, site: Path) -> None:
    _, files = probe(tmp_path, site)
    tamper(files[0], "from-the-cache")
    assert probe(tmp_path, site, "--refresh")[0]["torch_version"] == "2.11.0+cu130"
    tamper(files[0], "from-the-cache")
    assert probe(tmp_path, site, boot_id="boot-2")[0]["torch_version"] == "2.11.0+cu130"


def test_an_unwritable_cache_is_no_error(tmp_path: Path, site: Path) -> None:
    (tmp_path / "cache").write_text("a file where the cache directory would go")
    report, files = probe(tmp_path, site)
    assert report["torch_version"] == "2.11.0+cu130" and files == []


def test_refresh_reaches_the_probe_command() -> None:
    assert engine_fact("/opt/py/bin/python", refresh=True).command.endswith(" --refresh")
    assert not engine_fact("/opt/py/bin/python").command.endswith("--refresh")
    assert engine_fact("/opt/py/bin/python").command.startswith("cd / && exec ${fleet_timeout:+timeout 90} /opt/py/bin/python -c ")
    assert PROBE_MARK in ENGINE_PROBE_SOURCE


def test_a_cache_hit_imports_no_json_hashlib_or_re(tmp_path: Path, site: Path) -> None:
    # json (with re and enum), hashlib (OpenSSL) and tempfile were two thirds of a hit's time
    probe(tmp_path, site)
    source = ENGINE_PROBE_SOURCE.replace(repr(BOOT_ID_PATH)[1:-1], str(tmp_path / "boot_id"))
    env = {**os.environ, "PYTHONPATH": str(site), "XDG_CACHE_HOME": str(tmp_path / "cache")}

    def imports(code: str) -> tuple[set[str], str]:
        done = subprocess.run([sys.executable, "-X", "importtime", "-c", code], cwd="/", env=env, capture_output=True, text=True, timeout=60, check=True)
        return {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}, done.stdout

    startup, _ = imports("pass")  # what this interpreter's site imports anyway
    hit, out = imports(source)
    assert parse_engine_probe(out).torch_version == "2.11.0+cu130"
    assert not (hit - startup) & {"json", "hashlib", "re", "enum", "tempfile", "platform", "torch"}, sorted(hit - startup)


def test_a_cache_file_cut_short_is_a_miss(tmp_path: Path, site: Path) -> None:
    _, files = probe(tmp_path, site)
    tamper(files[0], "from-the-cache")
    files[0].write_text(files[0].read_text()[:-5])
    assert probe(tmp_path, site)[0]["torch_version"] == "2.11.0+cu130"

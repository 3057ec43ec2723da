"""The sweep-backend seam (issue 24): `fleet sweep`, `--resume`, `--cancel`, `fleet status` and
`fleet fetch-logs` reach a backend only through `fleet.backend`, chosen from the hosts' entries
for a start and from the sweep's folder afterwards. A backend for tests only
(tests/unit/skeleton_backend.py), registered with one line, answers every command, and its
results are read by the shared ledger and by `fleet report` as any sweep's."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import fleet
from fleet import backend as seam
from fleet import cli
from fleet.inventory import HostKind
from tests.unit.fake_hosts import make_host

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "playbooks" / "demo.yaml"
FLEET_DIR = Path(fleet.__file__).resolve().parent
BACKEND_MODULES = set(seam.BACKENDS.values())


@pytest.fixture
def skeleton(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # The one registration a new backend needs (asked first: it claims only its own hosts).
    monkeypatch.setattr(seam, "BACKENDS", {"skeleton": "tests.unit.skeleton_backend", **seam.BACKENDS})
    monkeypatch.setattr(cli, "_select_hosts", lambda spec: [make_host("skeleton-1"), make_host("skeleton-2")])
    results = tmp_path / "results"
    monkeypatch.setenv("FLEET_RESULTS_DIR", str(results))
    return results


def fleet_cli(*args: str):
    return CliRunner().invoke(cli.app, list(args), catch_exceptions=False)


def test_a_registered_backend_answers_every_sweep_command(skeleton: Path) -> None:
    started = fleet_cli("sweep", "-p", str(DEMO), "--hosts", "skeleton-1,skeleton-2")
    assert started.exit_code == 0, started.output
    (sweep_id,) = [p.name for p in skeleton.iterdir() if p.is_dir()]
    directory = skeleton / sweep_id
    runs = sorted(directory.glob("*/runs/*.json"))
    summary = json.loads((directory / "summary.json").read_text())
    assert runs and summary == {"results": len(runs), "unreadable": {}}  # read back by the shared ledger, each once
    assert f"results: {directory} ({len(runs)} results)" in started.stdout
    events = [line for line in started.stdout.splitlines() if not line.startswith("results: ")]
    assert len(events) == len(runs) + 1  # a line per run event and the summary's, as an SSH sweep prints them

    status = fleet_cli("status", "--json")  # the latest sweep: the skeleton's, by its folder
    assert status.exit_code == 0 and json.loads(status.stdout)["skeleton-2"]["phase"] == "finished", status.output
    fetched = fleet_cli("fetch-logs", "--json")
    assert fetched.exit_code == 0 and json.loads(fetched.stdout)["skeleton-1"]["note"] == "a skeleton keeps no logs"
    resumed = fleet_cli("sweep", "--resume", sweep_id)
    assert resumed.exit_code == 0 and "resumed: nothing was left to run" in resumed.stderr, resumed.output
    cancelled = fleet_cli("sweep", "--cancel", sweep_id)
    assert cancelled.exit_code == 0 and f"cancelled {sweep_id}" in cancelled.stderr, cancelled.output

    report = fleet_cli("report", str(directory), "--format", "json")
    assert report.exit_code == 0, report.output
    rows = [json.loads(line) for line in report.stdout.splitlines()]  # one JSON object per result
    assert sorted(row["run_id"] for row in rows) == sorted(p.stem for p in runs)


def test_hosts_no_other_backend_claims_go_to_ssh_and_a_cluster_to_slurm() -> None:
    assert seam.backend_for_hosts([make_host("ct200")]).name == "ssh"
    cluster = make_host("gpu1").model_copy(update={"kind": HostKind.slurm})
    assert seam.backend_for_hosts([cluster]).name == "slurm"


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
    return names


def test_no_module_below_the_backends_imports_one() -> None:
    # Only the command line and the registry choose a backend; the backends' own packages may
    # import their own modules (fleet/slurm/ its sweep, fleet/sweep/backend.py the controller).
    own = {"fleet.slurm.backend": "slurm", "fleet.sweep.backend": "sweep"}
    offenders = []
    for path in sorted(FLEET_DIR.rglob("*.py")):
        module = ".".join(path.relative_to(FLEET_DIR.parent).with_suffix("").parts)
        if module in ("fleet.cli", "fleet.backend") or module in BACKEND_MODULES:
            continue
        offenders += [f"{module} imports {name}" for name in _imports(path) & BACKEND_MODULES]
        if module.startswith("fleet.sweep.") or not module.startswith("fleet.slurm."):
            offenders += [f"{module} imports {name}" for name in _imports(path) if name.startswith("fleet.slurm")]
    assert offenders == []
    assert set(own) == BACKEND_MODULES

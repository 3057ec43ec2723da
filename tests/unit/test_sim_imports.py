"""Planning, fixes and diagnosis never import the simulator: what fleet knows about SGLang lives in
`fleet.host.engines.sglang`, and the simulator is one user of it, started as a process (`python -m`),
never a library the controller reads SGLang's behaviour from.

Scanned: every module of the `fleet` package outside `fleet/host/engines/sim/`. Not scanned: tests
(they drive the sim in-process) and `benchmarks/` (measurement harnesses that run the sim)."""

from __future__ import annotations

from pathlib import Path

from tests.unit.import_scan import FLEET_DIR, imports_of, modules_outside

SIM_PACKAGE = "fleet.host.engines.sim"
SIM_DIR = FLEET_DIR / "host" / "engines" / "sim"


def _is_sim(name: str) -> bool:
    return name == SIM_PACKAGE or name.startswith(SIM_PACKAGE + ".")


def sim_imports(path: Path) -> list[str]:
    return imports_of(path, _is_sim)


def controller_modules() -> list[Path]:
    return modules_outside(SIM_DIR)


def test_no_module_outside_the_simulator_imports_it() -> None:
    offenders = [f"{path.relative_to(FLEET_DIR.parent)}:{hit}" for path in controller_modules() for hit in sim_imports(path)]
    assert offenders == []


def test_the_scan_sees_every_kind_of_import(tmp_path: Path) -> None:
    # The scan must be able to fail: each spelling of a simulator import is caught, other modules are not.
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import fleet.host.engines.sim.cli\n"
        "from fleet.host.engines.sim.server import prepare\n"
        "from fleet.host.engines import sim\n"
        "from fleet.host.engines import sglang\n"
        "import importlib\n"
        "def later():\n"
        "    from fleet.host.engines.sim import serverargs\n"
        "    importlib.import_module('fleet.host.engines.sim.cli')\n"
        "    return 'fleet.host.engines.sim'\n"  # a module name for `python -m`, not an import
        "import fleet.host.engines.simulation_notes\n"
    )
    assert [hit.split(":")[0] for hit in sim_imports(sample)] == ["1", "2", "3", "7", "8"]
    assert len(controller_modules()) > 50
    assert (FLEET_DIR / "fixes" / "feasibility.py") in controller_modules() and (SIM_DIR / "cli.py") not in controller_modules()

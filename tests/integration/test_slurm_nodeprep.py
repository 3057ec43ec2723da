"""Node preparation inside Slurm allocations, on a real Slurm cluster (tests/testfleet/slurm.py):
each task's node gathers its facts and runs the preflight rules before the agent starts
(fleet.host.nodeprep), a node that fails is refused and left out of the resubmission, and models
are staged to node-local storage once per node and boot (again after a real reboot of a node)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from fleet.host.contract import load_result
from fleet.host.contract.nodeprep import NodePrep, load_node_preps
from fleet.host.facts_output import split_sections
from fleet.inventory import Host
from fleet.slurm.sweep import SlurmSweep, SlurmSweepOutcome, start_slurm_sweep
from tests.integration.slurm_sweeps import DEMO, cluster_entry, connect
from tests.testfleet.slurm import SlurmCluster

pytestmark = pytest.mark.testfleet


def entry(cluster: SlurmCluster, shared: Path) -> Host:
    # node_local_dir left at its default, $TMPDIR/fleet-models: /tmp of each test host (a tmpfs of its own).
    return cluster_entry(cluster, shared.name)


def sweep(cluster: SlurmCluster, shared: Path, results: Path) -> tuple[SlurmSweepOutcome, list[str]]:
    lines: list[str] = []
    outcome = start_slurm_sweep(DEMO, entry(cluster, shared), results, connect=connect, poll_interval_s=1.0, say=lines.append)
    return outcome, lines


def task_dirs(outcome: SlurmSweepOutcome) -> dict[tuple[str, int], Path]:
    mirror = outcome.directory / outcome.record.cluster / "slurm"
    return {(a.key, t.index): mirror / a.key / f"task-{t.index}" for a in outcome.record.arrays for t in a.tasks}


def preps_of(outcome: SlurmSweepOutcome) -> dict[tuple[str, int], list[NodePrep]]:
    return {key: load_node_preps(path) for key, path in task_dirs(outcome).items()}


def one_result_per_run(outcome: SlurmSweepOutcome) -> None:
    record: SlurmSweep = outcome.record
    ids = [load_result(p).run_id for p in sorted((outcome.directory / record.cluster / "runs").glob("*.json"))]
    assert sorted(ids) == sorted({r for a in record.arrays for t in a.tasks for r in t.run_ids})


def test_facts_and_preflight_run_on_the_node_and_models_stage_once_per_node_and_boot(slurm: SlurmCluster, tmp_path: Path) -> None:
    shared = slurm.base / "shared" / f"nodeprep-{tmp_path.name}"
    first, lines = sweep(slurm, shared, tmp_path / "first")
    assert first.problems == [] and first.record.state == "finished", lines
    one_result_per_run(first)
    preps = preps_of(first)
    boots = {node.name: node.boot_id() for node in slurm.nodes}
    models = {"Qwen/Qwen3.6-27B", "z-lab/Qwen3.6-27B-DFlash"}  # demo.yaml's target and draft
    starts = [p for ps in preps.values() for p in ps]
    assert len(starts) == 3 and all(p.agent_started for p in starts)
    assert {p.node for p in starts} == {"ct200", "ct201"}  # the scheduler spread the three tasks
    for (key, index), ps in preps.items():
        (prep,) = ps
        # Gathered on the node itself: its hostname and boot id, in the facts script's own output.
        assert prep.hostname == prep.node and prep.boot_id == boots[prep.node]
        sections = split_sections((task_dirs(first)[(key, index)] / str(prep.facts_file)).read_text())
        assert sections["boot_id"].text.strip() == boots[prep.node] and prep.node in sections["kernel"].text.split()  # uname -n
        verdicts = {c.rule_id: c.verdict for c in prep.checks}
        assert verdicts["gpu-count"] == "ok" and verdicts["toolkit-supports-gpu"] == "ok" and verdicts["staging-space"] == "ok", prep.checks
        # The server loaded the node-local copy: the shard the agent ran names it, not the shared dir.
        shard = json.loads((task_dirs(first)[(key, index)] / "shard.json").read_text())
        argv = shard["servers"][0]["argv"]
        assert {s.model for s in prep.staged} == models and all(s.path.startswith("/tmp/fleet-models/") for s in prep.staged)
        assert any(s.path in argv for s in prep.staged) and not any(str(shared) in arg for arg in argv), argv
    # One copy per node and boot, however many tasks the node ran (the two on one node took turns
    # on the lock: the second found the first one's copy).
    copies = Counter((p.node, p.boot_id, s.model) for p in starts for s in p.staged if s.action == "copied")
    assert copies == Counter({(node, boots[node], model): 1 for node in ("ct200", "ct201") for model in models}), starts

    # A real reboot of ct200 wipes its /tmp; the next sweep stages there again, not on ct201.
    slurm.fleet.reboot("ct200")
    slurm.start_node("ct200", timeout=60)
    assert slurm.fleet["ct200"].boot_id() != boots["ct200"]
    second, lines = sweep(slurm, shared, tmp_path / "second")
    assert second.problems == [] and second.record.state == "finished", lines
    one_result_per_run(second)
    again = [p for ps in preps_of(second).values() for p in ps]
    actions = {(p.node, p.boot_id, s.action) for p in again for s in p.staged}
    rebooted = slurm.fleet["ct200"].boot_id()
    assert ("ct200", rebooted, "copied") in actions and ("ct201", boots["ct201"], "copied") not in actions, actions
    again_copies = Counter((p.node, p.boot_id, s.model) for p in again for s in p.staged if s.action == "copied")
    assert again_copies == Counter({("ct200", rebooted, model): 1 for model in models})


def test_a_node_that_fails_preflight_is_refused_reported_and_excluded(slurm: SlurmCluster, tmp_path: Path) -> None:
    ct201 = slurm.fleet["ct201"]
    ct201.set_gpu_profile(toolkit="12.8")  # SM 12.0 (RTX PRO 6000) needs CUDA >= 12.9: preflight's toolkit rule fails
    try:
        outcome, lines = sweep(slurm, slurm.base / "shared" / f"refused-{tmp_path.name}", tmp_path / "results")
    finally:
        ct201.set_gpu_profile(toolkit="13.1")
    assert outcome.problems == [] and outcome.record.state == "finished", lines
    one_result_per_run(outcome)
    starts = [p for ps in preps_of(outcome).values() for p in ps]
    refused = [p for p in starts if not p.agent_started]
    assert refused and {p.node for p in refused} == {"ct201"}, starts
    for prep in refused:
        (failure,) = prep.failures
        assert failure.rule_id == "toolkit-supports-gpu" and "release 12.8" in failure.evidence, failure
        assert prep.staged == []  # a refused node stages nothing
    # Every run ran on ct200: each task's last start was there.
    assert {ps[-1].node for ps in preps_of(outcome).values()} == {"ct200"}
    # The controller said so, and the resubmission left ct201 out.
    assert any("node ct201" in line and "toolkit-supports-gpu" in line and "submitting again" in line for line in lines), lines
    (array,) = outcome.record.arrays
    assert len(array.submissions) == 2
    script = (outcome.directory / outcome.record.cluster / "slurm" / array.key / "submit-1.sh").read_text()
    assert "#SBATCH --exclude=ct201" in script
    summary = json.loads((outcome.directory / "summary.json").read_text())
    assert summary["nodes_refused"] and {(r["node"], tuple(r["failed"])) for r in summary["nodes_refused"]} == {("ct201", ("toolkit-supports-gpu",))}

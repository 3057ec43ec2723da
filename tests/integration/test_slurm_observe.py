"""`fleet status` and `fleet fetch-logs` of a Slurm sweep, by its job ids, on the real cluster
(tests/testfleet/slurm.py): Slurm's state of every array task, the runs done, and the logs (the
agent's, the servers', Slurm's own output files) back through the login host."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml

from fleet.slurm.sweep import SlurmSweep, resume_slurm_sweep, start_slurm_sweep
from fleet.backend import sweep_status
from tests.integration.slurm_sweeps import DEMO, REPO, cluster_entry, connect, one_result_per_run
from tests.testfleet.slurm import SlurmCluster

pytestmark = pytest.mark.testfleet


def fleet_cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fleet", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)


def test_status_and_fetch_logs_of_a_slurm_sweep_by_job_id(slurm: SlurmCluster, tmp_path: Path) -> None:
    entry = cluster_entry(slurm, tmp_path.name)
    hosts_dir = tmp_path / "hosts"
    hosts_dir.mkdir()
    (hosts_dir / "slurm-lab.yaml").write_text(yaml.safe_dump(entry.model_dump(mode="json", exclude_defaults=True) | {"kind": "slurm"}))
    results_root = tmp_path / "results"
    env = {**os.environ, "FLEET_HOSTS_DIR": str(hosts_dir), "FLEET_RESULTS_DIR": str(results_root), "COLUMNS": "250"}
    stop = threading.Event()
    stop.set()  # submit, then stop watching at once: the jobs go on under Slurm
    first = start_slurm_sweep(DEMO, entry, results_root, connect=connect, poll_interval_s=1.0, stop=stop)
    (array,) = first.record.arrays
    job_id = array.submissions[0].job_id

    # While it runs (or waits): one row per array task, with Slurm's own state and the job id.
    live = fleet_cli(env, "status", first.sweep_id, "--json")
    assert live.returncode == 0, live.stderr
    rows = json.loads(live.stdout)
    assert sorted(rows) == [f"gpu1/task-{i}" for i in range(3)]
    for index in range(3):
        (slurm_view,) = rows[f"gpu1/task-{index}"]["servers"].values()
        assert slurm_view["job_id"] in (f"{job_id}_{index}", f"{job_id}_[{index}-2]", f"{job_id}_[0-2]"), slurm_view
        assert slurm_view["state"] in ("PENDING", "RUNNING", "COMPLETING", "COMPLETED"), slurm_view
        assert rows[f"gpu1/task-{index}"]["total"] == 2

    outcome = resume_slurm_sweep(first.directory, connect=connect, poll_interval_s=1.0)
    assert outcome.record.state == "finished", outcome.problems
    results = one_result_per_run(outcome.directory, outcome.record)

    # Done: the latest sweep by default, as a table; every task finished with its runs and node.
    table = fleet_cli(env, "status")
    assert table.returncode == 0, table.stderr
    for index in range(3):
        assert f"gpu1/task-{index}" in table.stdout and f"job {job_id}_{index} COMPLETED on ct20" in table.stdout, table.stdout
    statuses = sweep_status(results_root, None, connect=connect)
    assert {s.phase.value for s in statuses.values()} == {"finished"}
    assert sum(s.done for s in statuses.values()) == len(results)

    fetched = fleet_cli(env, "fetch-logs", "--json")
    assert fetched.returncode == 0, fetched.stderr
    (item,) = json.loads(fetched.stdout).values()
    logs = Path(item["directory"]) / "logs"
    outputs = sorted((logs / "slurm").glob("slurm-*.out"))
    assert [p.name for p in outputs] == [f"slurm-{job_id}_{i}.out" for i in range(3)]
    for path in outputs:  # the batch script's own line, then the agent's log (its stderr inside the allocation)
        text = path.read_text()
        assert "fleet: job " in text and "fleet-agent INFO run " in text, text[-2000:]
    assert {p.stem for p in logs.glob("*.log")} == {r["server_label"] for r in results.values()}  # each server's whole log
    shown = (logs / "slurm" / "scontrol-show-job.txt").read_text()
    assert shown.count("JobState=COMPLETED") == 3, shown

    # A job slurmctld has forgotten (here: an id it never had): read from sacct where the cluster
    # keeps accounting; this one keeps none (no slurmdbd), and the row says so.
    copy = results_root / f"{first.sweep_id}-copy"
    shutil.copytree(outcome.directory, copy)
    record = SlurmSweep.load(copy)
    record.arrays[0].submissions[0].job_id = "99999999"
    record.save(copy)
    rows_of_copy = sweep_status(results_root, copy.name, connect=connect)
    for row in rows_of_copy.values():
        (slurm_view,) = row.servers.values()
        assert "not known to slurmctld any more; sacct unavailable here (" in slurm_view["phase"], slurm_view
        assert row.phase.value == "finished"  # its runs have their results on the shared dir

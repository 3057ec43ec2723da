"""The README's first command on a machine with a GPU (issue 14 item 16): `fleet sweep -p
playbooks/demo.yaml --hosts local` with a real-looking `nvidia-smi` first on PATH that reports the
real H200 capture's GPU (the test hosts' fake tools, in driver 580's exact formats). The `local`
host file declares 2 RTX PRO 6000s and the sim engine: preflight says the machine's GPUs are not
used, the simulator plays the declared ones (and registers nothing in the machine's nvidia-smi),
and the sweep runs to completion, exit 0. (The lead checks the same on a real H200 host.)"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

from tests.testfleet.gpu_tools import local_gpu_env

REPO = Path(__file__).resolve().parents[2]
RTX = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
H200 = {"name": "NVIDIA H200", "count": 1, "compute_cap": "9.0", "memory_total_mib": 143771, "driver": "580.159.04",
        "cuda_driver_version": "13.0", "toolkit": "13.0", "power_limit_w": 700}  # fmt: skip


def test_the_demo_sweep_on_local_runs_to_completion_on_a_machine_with_an_h200(tmp_path: Path) -> None:
    env = local_gpu_env(tmp_path / "gpu", os.environ, H200)
    assert subprocess.run(["nvidia-smi", "-L"], env=env, capture_output=True, text=True).stdout.startswith("GPU 0: NVIDIA H200 (UUID: GPU-")
    # hosts/local.yaml as shipped, in folders of this test's own (the suite stays hermetic).
    local = yaml.safe_load((REPO / "hosts" / "local.yaml").read_text())
    assert local["gpus"] == {"count": 2, "model": RTX} and local["engine"]["kind"] == "sim"
    local["paths"] = {"work_dir": str(tmp_path / "work"), "model_cache": str(tmp_path / "models")}
    (tmp_path / "hosts").mkdir()
    (tmp_path / "hosts" / "local.yaml").write_text(yaml.safe_dump(local))
    env.update(FLEET_HOSTS_DIR=str(tmp_path / "hosts"), FLEET_RESULTS_DIR=str(tmp_path / "results"), XDG_CACHE_HOME=str(tmp_path / "cache"))
    done = subprocess.run(
        [sys.executable, "-m", "fleet", "sweep", "-p", "playbooks/demo.yaml", "--hosts", "local", "--json"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=400,
    )  # fmt: skip
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert done.returncode == 0, done.stderr[-3000:]
    summary = events[-1]
    assert summary["type"] == "summary" and summary["state"] == "finished", summary
    assert summary["results"] == summary["by_status"].get("ok") == 6, summary

    sweep = Path(summary["directory"])
    preflight = next(e for e in events if e["type"] == "provisioned")
    assert preflight["status"] in ("ok", "changed"), preflight
    shard = json.loads((sweep / "local" / "shard.json").read_text())
    assert {s["env"]["FLEET_SIM_GPU_DECLARED"] for s in shard["servers"]} == {RTX}
    # The sim played the declared GPUs: nothing of it in the machine's nvidia-smi, its memory the RTX's.
    assert list((Path(env["FLEET_FAKE_GPU_DIR"]) / "procs").glob("*.json")) == []
    results = [json.loads(p.read_text()) for p in (sweep / "local" / "runs").glob("*.json")]
    assert {g["name"] for r in results for g in r["host_facts"]["gpus"]} == {"NVIDIA H200"}  # the machine, as found
    logs = "".join(p.read_text() for p in (sweep / "local" / "logs").glob("*.log"))
    avail = [float(gb) for gb in re.findall(r"Load weight begin\. avail mem=([\d.]+) GB", logs)]
    # An RTX PRO 6000 has 95.6 GiB (97887 MiB), the H200 140.4 GiB (143771 MiB).
    assert avail and 90 < max(avail) < 95.6, avail  # (a draft loads after its target, with less left)

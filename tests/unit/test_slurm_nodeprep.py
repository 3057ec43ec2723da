"""Node preparation inside Slurm allocations, its pure parts on captured output: the node gate
(fleet.host.nodeprep) reading the facts script's output, judging it as fleet.provision.preflight
does, staging models once per boot under a lock, and the controller's reading of refusals."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from fleet.errors import ConfigError
from fleet.facts import HostFacts, gather_facts
from fleet.facts.commands import SECTION_MARK
from fleet.facts.models import FactsRequest
from fleet.host import nodeprep
from fleet.host.contract.nodeprep import REFUSED_EXIT, ModelToStage, NodeCheck, NodePrep, NodeRequirements, load_node_preps
from fleet.host.errors import ContractError
from fleet.host.facts_output import split_sections
from fleet.inventory import Host, load_host
from fleet.provision.preflight import PreflightRequirements, run_preflight
from fleet.slurm.jobs import parse_scontrol_jobs
from fleet.slurm.nodeprep import NodeRefusals, facts_request, facts_script, refusal, requirements
from fleet.slurm.outcome import Action, judge
from fleet.slurm.script import BatchJob, render_batch_script
from fleet.transport.fake import FakeTransport

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
RTX = FIXTURES / "facts" / "rtx-pro-6000-8gpu-driver580-cuda13.1"
NVCC = FIXTURES / "facts" / "nvcc"
PROBE = 'fleet-engine-probe:{"executable": "/opt/sglang/bin/python", "python_version": "3.12.3", "torch_version": "2.9.1+cu130", ' \
        '"torch_cuda": "13.0", "torch_arch_list": ["sm_90", "sm_100", "sm_120"], "torch_error": null, "triton_version": "3.5.1", ' \
        '"flashinfer_version": "0.5.3", "sglang_version": "0.5.23"}\n'  # fmt: skip


def cluster(engine: str = "sglang", model: str | None = None) -> Host:
    gpus = {"count": 0, **({"model": model} if model else {})}
    return Host.model_validate({"name": "slurm-lab", "kind": "slurm", "address": "login", "engine": {"kind": engine, "python": "/opt/sglang/bin/python"},
                                "gpus": gpus, "slurm": {"shared_dir": "/shared/fleet"}})  # fmt: skip


def node_of(c: Host) -> Host:
    return c.model_copy(update={"kind": "host", "slurm": None, "gpus": c.gpus.model_copy(update={"count": 8})})


def reqs(engine: str = "sglang", model: str | None = None) -> NodeRequirements:
    c = cluster(engine, model)
    return requirements(c, node_of(c), "/shared/fleet/slurm/s1", [])


def framed(sections: dict[str, tuple[str, int]]) -> str:
    """What the facts script prints: each section's output between its marker lines (the
    script's printf puts a newline before the end marker)."""
    return "".join(f"{SECTION_MARK} begin {name}\n{text}\n{SECTION_MARK} end {name} {code}\n" for name, (text, code) in sections.items())


def node_output(*, toolkit: str | None = "13.1", apps: str = "", header: str | None = None, gpus: str | None = None, probe: str = PROBE) -> str:
    nvcc = f"nvcc-path: /usr/local/cuda/bin/nvcc\n{(NVCC / f'nvcc-{toolkit}.txt').read_text()}" if toolkit else "nvcc-path: none\n"
    return framed({
        "boot_id": ("7c1d2e3f-0000-4000-8000-000000000001\n", 0),
        "gpus": (gpus if gpus is not None else (RTX / "fleet-query-gpu.csv").read_text(), 0),
        "gpu_processes": (apps, 0),
        "driver": (header if header is not None else (RTX / "nvidia-smi.txt").read_text(), 0),
        "toolkit": (nvcc, 0),
        "engine": (probe, 0),
        "kernel": ("gpu-node-07 6.8.0-49-generic x86_64\n", 0),
    })  # fmt: skip


def gate(output: str, req: NodeRequirements, granted: list[int], wanted: int | None = None, free: int | None = 10**12, pending: int = 0) -> dict[str, NodeCheck]:
    facts = nodeprep.read_facts(split_sections(output), req)
    checks = nodeprep.judge(facts, req, len(granted) if wanted is None else wanted, granted, free, pending, "/tmp/fleet-models")
    return {c.rule_id: c for c in checks}


def controller_facts(output: str, request: FactsRequest) -> HostFacts:
    """The same output read by fleet.facts' own gather, as from an SSH host that answered it."""
    t = FakeTransport("gpu-node-07", builtins=False)
    t.on(lambda call: call.kind == "run", output)
    return gather_facts(t, request.paths, request.engine_python)


# ---------------------------------------------------------------------------------------------
# reading the facts script's output


def test_the_node_cuts_the_real_facts_script_output_as_fleet_facts_does(tmp_path: Path) -> None:
    # The real composite script, run here (no GPU tools on this machine: failing sections too).
    c = cluster()
    request = FactsRequest(paths={"staging": str(tmp_path)}, engine_python="/nonexistent/python")
    done = subprocess.run(["sh", "-c", facts_script(request)], capture_output=True, text=True, timeout=120, cwd="/")
    ours = split_sections(done.stdout)
    assert len(ours) >= 10
    assert ours["engine"].exit_code == 127 and c.engine.python not in ours["engine"].text
    assert "engine" not in split_sections(subprocess.run(["sh", "-c", facts_script(request, probe_engine=False)], capture_output=True,
                                                         text=True, timeout=120, cwd="/").stdout)  # fmt: skip


@pytest.mark.parametrize(
    ("toolkit", "header", "expected"),
    [
        ("13.1", None, {"toolkit-supports-gpu": "ok", "driver-supports-toolkit": "warn"}),  # 13.1 on a CUDA 13.0 driver: minor compat
        ("12.8", None, {"toolkit-supports-gpu": "fail", "driver-supports-toolkit": "ok"}),  # SM 12.0 needs 12.9
        (None, None, {"toolkit-supports-gpu": "warn", "driver-supports-toolkit": "skip"}),  # no nvcc: only JIT is lost
        ("13.1", "| NVIDIA-SMI 550.54.14    Driver Version: 550.54.14    CUDA Version: 12.4 |\n",
         {"toolkit-supports-gpu": "ok", "driver-supports-toolkit": "fail"}),  # a CUDA 12 driver cannot load 13.x code
    ],
)  # fmt: skip
def test_the_node_gate_judges_as_preflight_does(toolkit: str | None, header: str | None, expected: dict[str, str]) -> None:
    output = node_output(toolkit=toolkit, header=header)
    req = reqs()
    ours = gate(output, req, [2, 3])
    assert {rule: ours[rule].verdict for rule in expected} == expected
    # The controller's preflight, on the same output read by fleet.facts' parsers, agrees.
    c = cluster()
    report = run_preflight(controller_facts(output, facts_request(node_of(c), None)), PreflightRequirements(expected_gpu_count=8))
    theirs = {check.rule_id: check.verdict.value for check in report.checks}
    assert {rule: theirs[rule] for rule in (*expected, "engine-installed")} == {**expected, "engine-installed": ours["engine-installed"].verdict}
    if toolkit == "12.8":
        failure = ours["toolkit-supports-gpu"]
        assert "needs >= 12.9" in failure.message and failure.evidence == "Cuda compilation tools, release 12.8, V12.8.93"


def test_a_granted_gpu_that_nvidia_smi_does_not_list_fails_the_count() -> None:
    seven = "".join((RTX / "fleet-query-gpu.csv").read_text().splitlines(keepends=True)[:7])  # GPU 7 fell off the bus
    checks = gate(node_output(gpus=seven), reqs(), [6, 7])
    assert checks["gpu-count"].verdict == "fail" and "[7] missing" in checks["gpu-count"].message
    assert checks["gpu-count"].evidence == "CUDA_VISIBLE_DEVICES=6,7"
    assert gate(node_output(gpus=seven), reqs(), [5, 6])["gpu-count"].verdict == "ok"
    # Fewer granted than the task's servers use (a GRES misconfiguration) fails too.
    assert gate(node_output(), reqs(), [0], wanted=2)["gpu-count"].verdict == "fail"


def test_a_process_on_a_granted_gpu_fails_idle_one_on_a_neighbours_gpu_does_not() -> None:
    busy = "".join((RTX / "fleet-query-apps-busy.csv").read_text().splitlines(keepends=True)[:3])  # pids 4100-4102 on GPUs 0-2
    checks = gate(node_output(apps=busy), reqs(), [1])
    assert checks["gpus-idle"].verdict == "fail" and "pid 4101" in checks["gpus-idle"].message
    assert gate(node_output(apps=busy), reqs(), [5, 6])["gpus-idle"].verdict == "ok"


def test_gpu_model_engine_and_the_sim_playing_declared_gpus() -> None:
    assert gate(node_output(), reqs(model="NVIDIA H200"), [0])["gpu-model"].verdict == "fail"
    assert gate(node_output(), reqs(model="NVIDIA RTX PRO 6000 Blackwell Server Edition"), [0])["gpu-model"].verdict == "ok"
    no_sglang = PROBE.replace('"sglang_version": "0.5.23"', '"sglang_version": null')
    assert gate(node_output(probe=no_sglang), reqs(), [0])["engine-installed"].verdict == "fail"
    # A sim host that declares H200s on RTX PRO 6000 nodes plays them: the machine's GPU rules do not apply.
    played = gate(node_output(toolkit="12.8"), reqs(engine="sim", model="NVIDIA H200"), [0])
    assert {played[r].verdict for r in ("gpu-count", "gpu-model", "toolkit-supports-gpu", "driver-supports-toolkit")} == {"skip"}


def test_staging_space_is_judged_on_what_this_boot_still_lacks() -> None:
    assert gate(node_output(), reqs(), [0], free=10**9, pending=0)["staging-space"].verdict == "skip"  # no models required
    c = cluster()
    req = requirements(c, node_of(c), "/shared/fleet/slurm/s1", [ModelToStage("m", "/shared/m", "m--main")])
    assert gate(node_output(), req, [0], free=10**9, pending=2 * 10**9)["staging-space"].verdict == "fail"
    assert gate(node_output(), req, [0], free=10**9, pending=0)["staging-space"].verdict == "ok"


# ---------------------------------------------------------------------------------------------
# staging (real files under tmp_path)


def shared_model(root: Path) -> ModelToStage:
    source = root / "shared" / "m"
    (source / "sub").mkdir(parents=True)
    (source / "config.json").write_text('{"a": 1}\n')
    (source / "sub" / "weights.bin").write_bytes(b"x" * 4096)
    (source / ".fleet-complete.json").write_text(json.dumps({"source": "card:x", "revision": "main", "files": {"config.json": 9, "sub/weights.bin": 4096}}))
    return ModelToStage("m", str(source), "m--main")


def test_a_model_is_staged_once_per_boot_and_again_after_a_reboot(tmp_path: Path) -> None:
    model, local = shared_model(tmp_path), tmp_path / "local"
    first = nodeprep.stage(model, local, "boot-1")
    second = nodeprep.stage(model, local, "boot-1")
    assert (first.action, second.action) == ("copied", "present") and first.bytes == 4105
    assert (local / "m--main" / "sub" / "weights.bin").read_bytes() == b"x" * 4096
    # A disk that kept its files over a reboot is still staged again: nothing vouches for them.
    assert nodeprep.stage(model, local, "boot-2").action == "copied"
    # A copy missing a file (someone cleaned half of /tmp) is copied again.
    (local / "m--main" / "config.json").unlink()
    assert nodeprep.stage(model, local, "boot-2").action == "copied"


def test_tasks_staging_at_once_copy_once_and_never_see_half_a_model(tmp_path: Path) -> None:
    model, local = shared_model(tmp_path), tmp_path / "local"
    (local / "m--main.partial").mkdir(parents=True)  # a copy killed mid-way (the node's previous job)
    (local / "m--main.partial" / "config.json").write_text("{")
    results: list[str] = []
    threads = [threading.Thread(target=lambda: results.append(nodeprep.stage(model, local, "b").action)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == ["copied", "present", "present", "present"]
    assert not (local / "m--main.partial").exists() and nodeprep.listing(local / "m--main") == {"config.json": 9, "sub/weights.bin": 4096}


def test_a_model_without_a_complete_shared_copy_is_not_staged(tmp_path: Path) -> None:
    model = shared_model(tmp_path)
    (Path(model.source) / ".fleet-complete.json").unlink()
    with pytest.raises(nodeprep.SharedCopyError, match="no complete copy on the shared fs"):
        nodeprep.stage(model, tmp_path / "local", "b")


def test_the_shard_points_at_the_node_local_copies() -> None:
    shard = {"servers": [{"argv": ["python", "-m", "sglang.launch_server", "--model-path", "/shared/models/q/main", "--speculative-draft-model-path",
                                   "/shared/models/d/main/sub"], "env": {"FLEET_MODEL": "/shared/models/q/main"}, "gpus": [3]}]}  # fmt: skip
    moved = nodeprep.point_at(shard, {"/shared/models/q/main": "/tmp/fleet-models/q--main", "/shared/models/d/main": "/tmp/fleet-models/d--main"})
    assert moved["servers"][0]["argv"][4:] == ["/tmp/fleet-models/q--main", "--speculative-draft-model-path", "/tmp/fleet-models/d--main/sub"]
    assert moved["servers"][0]["env"] == {"FLEET_MODEL": "/tmp/fleet-models/q--main"} and moved["servers"][0]["gpus"] == [3]
    assert nodeprep.shard_gpus(shard) == 1 and nodeprep.shard_gpus({**shard, "gpus": [3, 4]}) == 2 and nodeprep.shard_gpus({"servers": []}) == 0
    assert nodeprep.local_root("$TMPDIR/fleet-models", {"TMPDIR": "/scratch/job42"}) == Path("/scratch/job42/fleet-models")
    assert nodeprep.local_root("$TMPDIR", {}) == Path("/tmp")


# ---------------------------------------------------------------------------------------------
# the whole step, as the batch script runs it


def run_step(tmp_path: Path, output: str, env: dict[str, str], marker_files: dict[str, int] | None = None) -> tuple[int, NodePrep, dict]:
    model = shared_model(tmp_path)
    if marker_files is not None:  # a shared copy whose files are not what its marker lists
        (Path(model.source) / ".fleet-complete.json").write_text(json.dumps({"source": "card:x", "revision": "main", "files": marker_files}))
    script = tmp_path / "node-facts.sh"
    (tmp_path / "facts.txt").write_text(output)
    script.write_text(f"cat {shlex.quote(str(tmp_path / 'facts.txt'))}\n")  # the node's answer, replayed
    c = cluster()
    req = requirements(
        c.model_copy(update={"slurm": c.slurm.model_copy(update={"node_local_dir": str(tmp_path / "local")})}),  # type: ignore[union-attr]
        node_of(c),
        str(tmp_path),
        [model],
    )
    req_path = tmp_path / "node-requirements.json"
    assert req.facts_script == str(script)
    req_path.write_text(req.to_json())
    task = tmp_path / "task-0"
    task.mkdir()
    (task / "shard.json").write_text(json.dumps({"servers": [{"gpus": [2], "argv": ["--model-path", model.source], "env": {}}]}))
    bundle = Path(nodeprep.__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-m", "fleet.host.nodeprep", str(task), str(req_path)], capture_output=True, text=True, timeout=60,
                          env={"PATH": os.environ["PATH"], "PYTHONPATH": str(bundle), **env})  # fmt: skip
    (prep,) = load_node_preps(task)
    return done.returncode, prep, json.loads((task / "shard.json").read_text())


SLURM_ENV = {"SLURMD_NODENAME": "gpu-node-07", "SLURM_ARRAY_JOB_ID": "41", "SLURM_ARRAY_TASK_ID": "0", "SLURM_JOB_ID": "42",
             "SLURM_RESTART_COUNT": "1", "CUDA_VISIBLE_DEVICES": "2"}  # fmt: skip


def test_the_step_stages_and_lets_the_agent_start_on_a_fit_node(tmp_path: Path) -> None:
    code, prep, shard = run_step(tmp_path, node_output(), SLURM_ENV)
    assert code == 0 and prep.agent_started and (prep.node, prep.job_id, prep.start) == ("gpu-node-07", "41_0", 2)
    assert [s.action for s in prep.staged] == ["copied"] and shard["servers"][0]["argv"] == ["--model-path", str(tmp_path / "local" / "m--main")]
    assert prep.facts_file == "node-facts/41_0.2.txt" and (tmp_path / "task-0" / prep.facts_file).read_text() == node_output()


def test_the_step_refuses_a_node_that_fails_a_rule_and_stages_nothing(tmp_path: Path) -> None:
    code, prep, shard = run_step(tmp_path, node_output(toolkit="12.8"), SLURM_ENV)
    assert code == REFUSED_EXIT and not prep.agent_started and prep.staged == [] and not (tmp_path / "local").exists()
    assert [f.rule_id for f in prep.failures] == ["toolkit-supports-gpu"]
    assert prep.reason().startswith("node gpu-node-07 (boot ") and "release 12.8" in prep.reason()
    assert shard["servers"][0]["argv"] == ["--model-path", str(tmp_path / "shared" / "m")]  # untouched


# ---------------------------------------------------------------------------------------------
# the contract and the controller's side


def prep(node: str, job_id: str, start: int, started: bool, at: float) -> NodePrep:
    checks = [NodeCheck("toolkit-supports-gpu", "ok" if started else "fail", "CUDA 12.8 < 12.9", "release 12.8")]
    return NodePrep(node, node, "b" * 36, job_id, start, at, checks, started)


def write_prep(mirror: Path, array: str, index: int, p: NodePrep) -> None:
    path = mirror / array / f"task-{index}" / p.file_name()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(p.to_json())


def test_refusals_are_read_back_per_start_and_exclude_their_nodes(tmp_path: Path) -> None:
    write_prep(tmp_path, "gpu1", 0, prep("ct201", "5_0", 1, False, 1.0))
    write_prep(tmp_path, "gpu1", 0, prep("ct200", "9_0", 1, True, 2.0))  # the resubmission ran on ct200
    write_prep(tmp_path, "gpu1", 1, prep("ct200", "5_1", 1, True, 1.0))
    write_prep(tmp_path, "gpu2", 0, prep("ct202", "6_0", 1, False, 1.0))
    write_prep(tmp_path, "gpu2", 1, replace(prep("ct203", "6_1", 1, False, 1.0), checks=[], error="staging failed: shared copy", node_at_fault=False))
    refusals = NodeRefusals.read(tmp_path, [("gpu1", 0), ("gpu1", 1), ("gpu1", 2), ("gpu2", 0), ("gpu2", 1)])
    assert refusals.reason("gpu1", 0, "5_0") is not None and "node ct201" in str(refusals.reason("gpu1", 0, "5_0"))
    assert refusals.reason("gpu1", 0, "9_0") is None and refusals.reason("gpu1", 2, "5_2") is None and refusals.reason("gpu1", 0, None) is None
    assert refusals.excluded("gpu1") == ["ct201"] and refusals.excluded("gpu2") == ["ct202"]
    # Never every node that can hold the array: sbatch would refuse the submission.
    assert refusals.excluded("gpu1", ["ct200", "ct201"]) == ["ct201"] and refusals.excluded("gpu2", ["ct202"]) == []
    # A requeued start that was refused after a good one: the latest start counts.
    assert refusal([prep("a", "7_0", 1, True, 1.0), prep("b", "7_0", 2, False, 2.0)], "7_0") is not None


def test_a_refused_job_is_submitted_again_boundedly_and_the_script_excludes_the_node(tmp_path: Path) -> None:
    failed = parse_scontrol_jobs((FIXTURES / "slurm" / "scontrol_busy.txt").read_text())["2"]  # FAILED, exit 3:0 (REFUSED_EXIT)
    why = prep("ct201", "2", 1, False, 1.0).reason()
    verdict = judge(failed, {"r1", "r2"}, set(), 1, 3, why)
    assert verdict.action is Action.RESUBMIT and "node ct201" in verdict.reason and "toolkit-supports-gpu" in verdict.reason
    assert judge(failed, {"r1", "r2"}, set(), 3, 3, why).action is Action.REPORT
    assert judge(failed, {"r1", "r2"}, set(), 1, 3).action is Action.REPORT  # not refused: the agent failed
    job = BatchJob("fleet-s-gpu1", 1, 600, "/shared/s/gpu1", "/opt/py", "/shared/s/agent", "/shared/s/gpu1/o-%A_%a.out", array_tasks=(0, 2),
                   node_requirements="/shared/s/node-requirements.json", exclude=("ct201", "ct200", "ct201"))  # fmt: skip
    script = render_batch_script(job)
    assert "#SBATCH --exclude=ct200,ct201\n" in script
    grant, prepare, agent = (script.index(s) for s in ("-m fleet.host.grant", "-m fleet.host.nodeprep", "-m fleet.host.agent"))
    assert grant < prepare < agent and 'fleet.host.nodeprep "$dir" /shared/s/node-requirements.json\n' in script


def test_contract_documents_round_trip_and_bad_ones_name_file_and_field(tmp_path: Path) -> None:
    req = reqs()
    assert NodeRequirements.from_json(req.to_json()) == req
    assert req.toolkit_min_driver["12.8"] == "570.26" and req.arch_rules[0].min_toolkit == "12.9"
    p = prep("ct201", "5_0", 1, False, 1.0)
    assert NodePrep.from_json(p.to_json()) == p
    bad = json.loads(p.to_json())
    bad["checks"][0]["verdict"] = "maybe"
    path = tmp_path / "node-prep" / "5_0.1.json"
    path.parent.mkdir()
    path.write_text(json.dumps(bad))
    with pytest.raises(ContractError, match=r"5_0\.1\.json: checks\[0\]\.verdict: expected one of ok, warn, fail, skip"):
        load_node_preps(tmp_path)


def test_node_local_dir_is_validated_naming_file_and_field(tmp_path: Path) -> None:
    base = "name: lab\nkind: slurm\naddress: login\nslurm:\n  shared_dir: /shared\n"
    (tmp_path / "lab.yaml").write_text(base)
    assert load_host(tmp_path / "lab.yaml").slurm.node_local_dir == "$TMPDIR/fleet-models"  # type: ignore[union-attr]
    for value, ok in (("/local/nvme/fleet", True), ("$TMPDIR", True), ("null", True), ("local/fleet", False), ("$TMPDIR/a b", False), ("$HOME/x", False)):
        (tmp_path / "lab.yaml").write_text(base + f"  node_local_dir: {json.dumps(value) if value != 'null' else value}\n")
        if ok:
            load_host(tmp_path / "lab.yaml")
            continue
        with pytest.raises(ConfigError) as caught:
            load_host(tmp_path / "lab.yaml")
        assert str(tmp_path / "lab.yaml") in str(caught.value) and "slurm.node_local_dir" in str(caught.value) and "$TMPDIR" in str(caught.value)


def test_a_copy_that_does_not_match_its_marker_refuses_the_node_and_leaves_no_half_model(tmp_path: Path) -> None:
    code, prep, shard = run_step(tmp_path, node_output(), SLURM_ENV, marker_files={"config.json": 9, "sub/weights.bin": 8192})
    assert code == REFUSED_EXIT and not prep.agent_started and prep.failures == [] and not prep.node_at_fault  # not excluded
    assert prep.error is not None and "does not match its marker" in prep.error and "staging failed" in prep.reason()
    assert sorted(p.name for p in (tmp_path / "local").iterdir()) == [".m--main.lock"]  # neither the copy nor its .partial
    assert shard["servers"][0]["argv"] == ["--model-path", str(tmp_path / "shared" / "m")]


def test_a_whole_node_facts_file_from_the_test_cluster() -> None:
    # The facts script's output as a task on the test cluster's ct200 kept it (node-facts/<job>.<start>.txt):
    # fake GPU tools in the real formats (8 RTX PRO 6000, driver 580.95.05 / CUDA 13.0, nvcc 13.1).
    output = (FIXTURES / "slurm" / "nodeprep" / "node-facts-test-host.txt").read_text()
    checks = gate(output, reqs(), [3])
    assert {r: c.verdict for r, c in checks.items()} == {
        "gpu-count": "ok", "gpu-model": "skip", "gpus-idle": "ok", "toolkit-supports-gpu": "ok",
        "driver-supports-toolkit": "warn",  # toolkit 13.1 on a CUDA 13.0 driver: minor-version compatibility
        "engine-installed": "ok", "client-tools-installed": "skip", "staging-space": "skip",
    }  # fmt: skip
    assert "index=3" in checks["gpu-count"].evidence and "release 13.1" in checks["toolkit-supports-gpu"].evidence
    c = cluster()
    report = run_preflight(controller_facts(output, facts_request(node_of(c), None)), PreflightRequirements(expected_gpu_count=8))
    theirs = {check.rule_id: check.verdict.value for check in report.checks}
    assert all(theirs[r] == checks[r].verdict for r in ("toolkit-supports-gpu", "driver-supports-toolkit", "engine-installed"))

"""Preflight rules on facts parsed from real (H200) and derived (RTX PRO 6000) captures."""

from __future__ import annotations

import subprocess
from datetime import datetime, timezone
from pathlib import Path

import pytest
from rich.console import Console

from fleet.facts.commands import engine_fact
from fleet.facts.models import Driver, EnginePython, FactsRequest, HostFacts
from fleet.facts.parsers import (
    parse_disk_space,
    parse_driver_header,
    parse_engine_probe,
    parse_gpu_processes,
    parse_gpus,
    parse_meminfo,
    parse_nvcc,
    parse_systemd,
)
from fleet.inventory import Host
from fleet.provision.preflight import GPU_RULES, RULES, PreflightRequirements, Verdict, driver_cuda_version, preflight_table, run_preflight, torch_arch_support
from fleet.errors import PreflightFailed
from tests.interpreters import bare_python

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
H200 = FIXTURES / "real-tool-output" / "h200-driver580-cuda13.0"
RTX = FIXTURES / "facts" / "rtx-pro-6000-8gpu-driver580-cuda13.1"
NVCC = FIXTURES / "facts" / "nvcc"
RTX_NAME = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
GIB = 1024**3
PATHS = {"model_cache": "/srv/models", "staging": "/dev/shm/fleet"}


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def df_text(cache_avail_gib: float, shm_avail_gib: float, shm_type: str = "tmpfs") -> str:
    """`/srv`, `/dev/shm`, then df -P -T -B1 output for them, in the real format (see dev-machine/df-P-T-B1.txt)."""
    cache_total, shm_total = 3500 * GIB, 512 * GIB
    cache_avail, shm_avail = int(cache_avail_gib * GIB), int(shm_avail_gib * GIB)
    return (
        "/srv\n/dev/shm\nfleet-df:\n"
        "Filesystem     Type      1-blocks        Used   Available Capacity Mounted on\n"
        f"/dev/nvme0n1p2 ext4  {cache_total} {cache_total - cache_avail} {cache_avail}      50% /\n"
        f"shm            {shm_type}  {shm_total} {shm_total - shm_avail} {shm_avail}       0% /dev/shm\n"
    )


def rtx_facts(
    *,
    gpus: str | None = None,
    apps: str = "",
    nvcc: str | None = read(NVCC / "nvcc-13.1.txt"),
    smi: str | None = None,
    engine: EnginePython | None = None,
    cache_avail_gib: float = 2000,
    shm_avail_gib: float = 500,
    shm_type: str = "tmpfs",
    ram_available_kib: int = 1041239552,
    systemd: str = "systemd-booted: yes\nrunning\n",
    problems: dict[str, str] | None = None,
) -> HostFacts:
    """The derived 8x RTX PRO 6000 host, each fact parsed from fixture text; keywords swap one fact."""
    return HostFacts(
        request=FactsRequest(paths=PATHS, engine_python="/opt/sglang/bin/python"),
        gathered_at=datetime.now(timezone.utc),
        boot_id="0b6f5d0e-4f7b-4c55-9d43-2a1e8f6c9b17",
        gpus=parse_gpus(read(RTX / "fleet-query-gpu.csv") if gpus is None else gpus),
        gpu_processes=parse_gpu_processes(apps),
        driver=parse_driver_header(read(RTX / "nvidia-smi.txt") if smi is None else smi),
        toolkit=parse_nvcc(f"nvcc-path: /usr/local/cuda/bin/nvcc\n{nvcc}" if nvcc else "nvcc-path: none\n"),
        engine=engine,
        disks=parse_disk_space(df_text(cache_avail_gib, shm_avail_gib, shm_type), 0, PATHS),
        memory=parse_meminfo(f"MemTotal:       1056375288 kB\nMemAvailable:   {ram_available_kib} kB\n"),
        systemd=parse_systemd(systemd, 0 if "running" in systemd else 1),
        problems=problems or {},
    )


def blackwell_needs(**overrides: object) -> PreflightRequirements:
    values: dict[str, object] = {"expected_gpu_count": 8, "expected_gpu_model": RTX_NAME, "engine_kind": "sim", "service_manager": "process"}
    return PreflightRequirements(**{**values, **overrides})


def torch_engine(torch_cuda: str | None = "13.0", arch_list: list[str] | None = None, version: str = "2.11.0+cu130") -> EnginePython:
    return EnginePython(
        executable="/opt/sglang/bin/python",
        python_version="3.12.3",
        torch_version=version,
        torch_cuda=torch_cuda,
        torch_arch_list=arch_list,
        flashinfer_version="0.6.7.post3",
        sglang_version="0.5.9",
    )


def verdicts(report) -> dict[str, Verdict]:
    return {check.rule_id: check.verdict for check in report.checks}


def check(report, rule_id: str):
    return next(c for c in report.checks if c.rule_id == rule_id)


# --- the seed's case: compute capability 12.0 with a CUDA 12.8 toolkit -------------------------


def test_blackwell_with_toolkit_12_8_fails_with_the_reason_and_the_hint():
    report = run_preflight(rtx_facts(nvcc=read(NVCC / "nvcc-12.8.txt")), blackwell_needs(), host="ct201")
    assert not report.ok
    assert [c.rule_id for c in report.failures] == ["toolkit-supports-gpu"]
    failure = report.failures[0]
    assert "CUDA 12.8 (V12.8.93)" in failure.message
    assert "compute capability 12.0" in failure.message and ">= 12.9" in failure.message
    assert "SM 12.x requires CUDA >= 12.9" in failure.message
    assert "install CUDA toolkit >= 12.9" in failure.hint and "FLASHINFER_CUDA_ARCH_LIST=12.0a" in failure.hint
    assert report.summary().startswith("ct201: preflight failed: toolkit-supports-gpu: nvcc /usr/local/cuda/bin/nvcc is CUDA 12.8")
    with pytest.raises(PreflightFailed, match="SM 12.x requires CUDA >= 12.9"):
        raise PreflightFailed(report)


def test_blackwell_with_toolkit_13_1_passes():
    report = run_preflight(rtx_facts(), blackwell_needs(), host="ct200")
    assert report.ok, report.summary()
    assert verdicts(report)["toolkit-supports-gpu"] is Verdict.ok
    assert verdicts(report)["gpu-count"] is Verdict.ok and verdicts(report)["gpus-idle"] is Verdict.ok
    # driver 580 shows CUDA 13.0: a 13.1 toolkit runs under minor-version compatibility, with a warning
    driver = check(report, "driver-supports-toolkit")
    assert driver.verdict is Verdict.warn and "minor-version compatibility" in driver.message
    assert "590.44.01" in driver.hint
    assert report.summary() == "ct200: preflight passed with 1 warning(s)"


def test_sm_10_needs_toolkit_12_8():
    b200 = read(RTX / "fleet-query-gpu.csv").replace(", 12.0, ", ", 10.0, ").replace(RTX_NAME, "NVIDIA B200")
    needs = blackwell_needs(expected_gpu_model="NVIDIA B200")
    assert run_preflight(rtx_facts(gpus=b200, nvcc=read(NVCC / "nvcc-12.8.txt")), needs).ok
    old = read(NVCC / "nvcc-12.8.txt").replace("release 12.8, V12.8.93", "release 12.6, V12.6.85")
    failure = check(run_preflight(rtx_facts(gpus=b200, nvcc=old), needs), "toolkit-supports-gpu")
    assert failure.verdict is Verdict.fail and ">= 12.8" in failure.message


def test_no_toolkit_is_a_warning_not_a_failure():
    report = run_preflight(rtx_facts(nvcc=None), blackwell_needs())
    assert report.ok
    assert verdicts(report)["toolkit-supports-gpu"] is Verdict.warn
    assert verdicts(report)["driver-supports-toolkit"] is Verdict.skip


def test_real_h200_capture_passes_its_toolkit_and_driver_checks():
    facts = rtx_facts(
        gpus=read(H200 / "query-gpu.csv"),
        smi=read(H200 / "nvidia-smi.txt"),
        nvcc="".join(read(H200 / "versions.txt").splitlines(keepends=True)[:5]),
    )
    report = run_preflight(facts, blackwell_needs(expected_gpu_count=1, expected_gpu_model="NVIDIA H200"))
    assert report.ok
    assert verdicts(report)["toolkit-supports-gpu"] is Verdict.ok
    assert verdicts(report)["driver-supports-toolkit"] is Verdict.ok


# --- the driver ---------------------------------------------------------------------------------


def smi_with(driver: str, cuda: str) -> str:
    return read(RTX / "nvidia-smi.txt").replace("580.159.04", driver).replace("CUDA Version: 13.0", f"CUDA Version: {cuda}")


def test_driver_590_fully_supports_toolkit_13_1():
    assert verdicts(run_preflight(rtx_facts(smi=smi_with("590.44.01", "13.1")), blackwell_needs()))["driver-supports-toolkit"] is Verdict.ok


def test_driver_of_an_older_major_release_fails_for_the_toolkit():
    failure = check(run_preflight(rtx_facts(smi=smi_with("570.133.20", "12.8")), blackwell_needs()), "driver-supports-toolkit")
    assert failure.verdict is Verdict.fail
    assert "driver 570.133.20 supports CUDA 12.8 < toolkit 13.1" in failure.message
    assert ">= 590.44.01" in failure.hint


def test_driver_cuda_version_from_nvidias_table_when_nvidia_smi_shows_none():
    def facts(version: str) -> HostFacts:
        return rtx_facts().model_copy(update={"driver": Driver(version=version, cuda_version=None)})

    assert driver_cuda_version(facts("580.159.04")) == (13, 0)
    assert driver_cuda_version(facts("575.57.08")) == (12, 9)
    assert driver_cuda_version(facts("520.61.05")) is None


# --- GPUs: idle, count, model -------------------------------------------------------------------


def test_a_foreign_gpu_process_fails():
    busy = read(RTX / "fleet-query-apps-busy.csv")
    facts = rtx_facts(gpus=read(RTX / "fleet-query-gpu-busy.csv"), apps=busy)
    failure = check(run_preflight(facts, blackwell_needs(own_gpu_pids=frozenset(range(4100, 4108)))), "gpus-idle")
    assert failure.verdict is Verdict.fail
    assert failure.message == "1 foreign process(es) hold GPU memory: pid 5120 python on GPU 3 (memory unknown)"
    nobody_own = check(run_preflight(facts, blackwell_needs()), "gpus-idle")
    assert nobody_own.message.startswith("9 foreign process(es)") and "pid 4100 /opt/sglang/bin/python3 on GPU 0 (88012 MiB)" in nobody_own.message


def test_fleets_own_servers_are_not_foreign_but_memory_nobody_lists_is_a_warning():
    own = "".join(line for line in read(RTX / "fleet-query-apps-busy.csv").splitlines(keepends=True) if not line.startswith("5120"))
    facts = rtx_facts(gpus=read(RTX / "fleet-query-gpu-busy.csv"), apps=own)
    finding = check(run_preflight(facts, blackwell_needs(own_gpu_pids=frozenset(range(4100, 4108)))), "gpus-idle")
    assert finding.verdict is Verdict.warn and "GPU 3: 2430 MiB" in finding.message
    idle = rtx_facts(apps=own)  # idle memory figures: every listed process is fleet's own
    assert idle.gpus[0].memory_used_mib == 0
    finding = check(run_preflight(idle, blackwell_needs(own_gpu_pids=frozenset(range(4100, 4108)))), "gpus-idle")
    assert finding.verdict is Verdict.ok and "own servers (8 processes)" in finding.message


def test_wrong_gpu_count_fails():
    seven = "".join(read(RTX / "fleet-query-gpu.csv").splitlines(keepends=True)[:7])
    failure = check(run_preflight(rtx_facts(gpus=seven), blackwell_needs()), "gpu-count")
    assert failure.verdict is Verdict.fail
    assert failure.message == "nvidia-smi lists 7 GPUs, the inventory expects 8"
    extra = check(run_preflight(rtx_facts(), blackwell_needs(expected_gpu_count=4)), "gpu-count")
    assert extra.verdict is Verdict.warn and "gpus.count: 8" in extra.hint


def test_nvidia_smi_failure_fails_the_count_with_a_hint_for_its_cause():
    problem = "gpus: exited 18 (output: Failed to initialize NVML: Driver/library version mismatch | NVML library version: 590.44)"
    facts = rtx_facts(gpus="", problems={"gpus": problem})
    failure = check(run_preflight(facts, blackwell_needs()), "gpu-count")
    assert failure.verdict is Verdict.fail and "version mismatch" in failure.message
    assert "reboot the host" in failure.hint


def test_wrong_gpu_model_fails():
    failure = check(run_preflight(rtx_facts(), blackwell_needs(expected_gpu_model="NVIDIA H200", engine_kind="sglang")), "gpu-model")
    assert failure.verdict is Verdict.fail and RTX_NAME in failure.message


def test_a_sim_host_on_a_machine_of_other_gpus_plays_its_declared_ones():
    """`hosts/local.yaml` (2 RTX PRO 6000s, sim) on a machine with a real H200: the machine's GPUs,
    their processes and their CUDA stack are not the sim's; everything else is still checked."""
    h200 = rtx_facts()
    h200 = h200.model_copy(update={"gpus": [g.model_copy(update={"name": "NVIDIA H200", "compute_capability": "9.0"}) for g in h200.gpus[:1]]})
    report = run_preflight(h200, blackwell_needs(expected_gpu_count=2, engine_kind="sim", model_bytes_to_fetch=52 * 1024**4))
    gpu_checks = [c for c in report.checks if c.rule_id in GPU_RULES]
    assert {c.verdict for c in gpu_checks} == {Verdict.skip} and len(gpu_checks) == len(GPU_RULES)
    assert gpu_checks[0].message == (f"the sim engine plays the 2 {RTX_NAME} its host file declares; this machine's 1 GPU(s) (NVIDIA H200) are not used")
    assert verdicts(report)["model-cache-space"] is Verdict.fail  # the rest is checked as ever
    # The same machine under a real engine: the wrong host, said so.
    real = run_preflight(h200, blackwell_needs(expected_gpu_count=2, engine_kind="sglang"))
    assert verdicts(real)["gpu-model"] is Verdict.fail and verdicts(real)["gpu-count"] is Verdict.fail
    # A machine of the declared model (a test host's fake nvidia-smi, or the real thing) is judged as it is.
    assert verdicts(run_preflight(rtx_facts(), blackwell_needs(expected_gpu_count=2)))["gpu-count"] is Verdict.warn


# --- disk, tmpfs, RAM ---------------------------------------------------------------------------


def test_disk_too_small_for_the_model_fails():
    needs = blackwell_needs(model_bytes_to_fetch=52 * GIB)
    failure = check(run_preflight(rtx_facts(cache_avail_gib=40), needs), "model-cache-space")
    assert failure.verdict is Verdict.fail
    assert failure.message == "download 52.0 GiB into /srv/models (on /): only 40.0 GiB free of 3500.0 GiB"
    assert check(run_preflight(rtx_facts(cache_avail_gib=53), needs), "model-cache-space").verdict is Verdict.warn
    assert check(run_preflight(rtx_facts(cache_avail_gib=400), needs), "model-cache-space").verdict is Verdict.ok


def test_staging_needs_tmpfs_space_and_ram():
    needs = blackwell_needs(bytes_to_stage=52 * GIB)
    small = check(run_preflight(rtx_facts(shm_avail_gib=32), needs), "staging-space")
    assert small.verdict is Verdict.fail and "only 32.0 GiB free" in small.message and "remount" in small.hint
    low_ram = check(run_preflight(rtx_facts(ram_available_kib=40 * 1024 * 1024), needs), "staging-space")
    assert low_ram.verdict is Verdict.fail and "only 40.0 GiB available" in low_ram.message
    tight = check(run_preflight(rtx_facts(shm_avail_gib=53), needs), "staging-space")
    assert tight.verdict is Verdict.warn and "leaves under 2.6 GiB" in tight.message
    on_disk = check(run_preflight(rtx_facts(shm_type="ext4"), needs), "staging-space")
    assert on_disk.verdict is Verdict.warn and "not tmpfs" in on_disk.message
    assert check(run_preflight(rtx_facts(), needs), "staging-space").verdict is Verdict.ok


# --- the engine's Python ------------------------------------------------------------------------


def test_probe_of_a_python_without_torch_fails_the_engine_checks_without_crashing(tmp_path):
    done = subprocess.run(["sh", "-c", engine_fact(bare_python(tmp_path)).command], capture_output=True, text=True, timeout=60)
    engine = parse_engine_probe(done.stdout, done.returncode)
    assert engine.torch_version is None and engine.torch_cuda is None and engine.sglang_version is None
    report = run_preflight(rtx_facts(engine=engine), blackwell_needs(engine_kind="sglang"))
    torch_check = check(report, "engine-cuda-supports-gpu")
    assert torch_check.verdict is Verdict.fail and "ModuleNotFoundError: No module named 'torch'" in torch_check.message
    assert check(report, "engine-installed").verdict is Verdict.fail
    assert verdicts(report)["driver-runs-engine-cuda"] is Verdict.skip
    sim = run_preflight(rtx_facts(engine=engine), blackwell_needs(engine_kind="sim"))
    assert verdicts(sim)["engine-cuda-supports-gpu"] is Verdict.skip and sim.ok


def test_engine_python_that_could_not_be_probed_fails_naming_the_interpreter():
    facts = rtx_facts(problems={"engine": "engine: the engine's Python interpreter was not found"})
    failure = check(run_preflight(facts, blackwell_needs(engine_kind="sglang")), "engine-installed")
    assert failure.verdict is Verdict.fail and failure.message.startswith("/opt/sglang/bin/python: engine:")
    assert "engine.python" in failure.hint


@pytest.mark.parametrize(
    ("engine", "verdict", "words"),
    [
        (torch_engine("13.0", ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]), Verdict.ok, "has kernels for sm_120"),
        (torch_engine("13.0", None), Verdict.ok, "arch list is unknown"),
        (torch_engine("12.6", None, "2.6.0+cu126"), Verdict.fail, "built for CUDA 12.6; sm_120"),
        (torch_engine("12.8", ["sm_80", "sm_90"], "2.7.0+cu128"), Verdict.fail, "no kernel image is available"),
        (torch_engine("12.8", ["sm_80", "sm_90", "compute_90"], "2.7.0+cu128"), Verdict.warn, "only PTX"),
        (torch_engine(None, None, "2.7.0+cpu"), Verdict.fail, "CPU-only build"),
    ],
)
def test_engine_torch_must_support_the_gpu(engine, verdict, words):
    found = check(run_preflight(rtx_facts(engine=engine), blackwell_needs(engine_kind="sglang")), "engine-cuda-supports-gpu")
    assert found.verdict is verdict and words in found.message


def test_driver_must_run_the_engines_torch_cuda():
    needs = blackwell_needs(engine_kind="sglang")
    ok = check(run_preflight(rtx_facts(engine=torch_engine("13.0")), needs), "driver-runs-engine-cuda")
    assert ok.verdict is Verdict.ok
    old_driver = rtx_facts(engine=torch_engine("13.0"), smi=smi_with("570.133.20", "12.8"))
    failure = check(run_preflight(old_driver, needs), "driver-runs-engine-cuda")
    assert failure.verdict is Verdict.fail and "CUDA 13.x driver (>= 580.65.06)" in failure.message


@pytest.mark.parametrize(
    ("archs", "capability", "support"),
    [
        (["sm_120"], (12, 0), "native"),
        (["sm_120"], (12, 1), "native"),
        (["sm_90a"], (9, 0), "native"),
        (["sm_100a"], (10, 3), None),
        (["sm_90", "compute_90"], (12, 0), "ptx"),
        (["sm_80", "sm_86"], (9, 0), None),
    ],
)
def test_torch_arch_support(archs, capability, support):
    assert torch_arch_support(archs, capability) == support


# --- service manager, requirements, report ------------------------------------------------------


def test_systemd_units_need_a_running_systemd():
    offline = rtx_facts(systemd="systemd-booted: no\noffline\n")
    failure = check(run_preflight(offline, blackwell_needs(service_manager="systemd")), "service-manager")
    assert failure.verdict is Verdict.fail and "'offline'" in failure.message and "service_manager: process" in failure.hint
    assert check(run_preflight(offline, blackwell_needs(service_manager="process")), "service-manager").verdict is Verdict.ok
    assert check(run_preflight(rtx_facts(), blackwell_needs(service_manager="systemd")), "service-manager").verdict is Verdict.ok


def test_requirements_from_an_inventory_host():
    host = Host.model_validate(
        {
            "name": "ct200",
            "address": "10.201.1.2",
            "gpus": {"count": 8, "model": RTX_NAME},
            "engine": {"kind": "sglang", "python": "/opt/sglang/bin/python"},
            "service_manager": "process",
        }
    )
    needs = PreflightRequirements.for_host(host, model_bytes_to_fetch=52 * GIB, own_gpu_pids=[4100])
    assert (needs.expected_gpu_count, needs.expected_gpu_model, needs.model_bytes_to_fetch) == (8, RTX_NAME, 52 * GIB)
    assert needs.own_gpu_pids == frozenset({4100}) and needs.host_file == "hosts/ct200.yaml"


def test_every_rule_answers_on_a_host_where_nothing_could_be_read():
    empty = HostFacts(request=FactsRequest(paths={}, engine_python="python3"), gathered_at=datetime.now(timezone.utc))
    needs = blackwell_needs(engine_kind="sglang", service_manager="systemd", model_bytes_to_fetch=GIB, bytes_to_stage=GIB)
    report = run_preflight(empty, needs)
    assert [c.rule_id for c in report.checks] == [rule.id for rule in RULES]
    assert len({rule.id for rule in RULES}) == len(RULES)
    assert all(c.message for c in report.checks)
    assert {c.rule_id for c in report.failures} == {"gpu-count", "engine-installed", "model-cache-space", "staging-space", "service-manager"}
    assert all(c.hint for c in report.failures)


def test_report_renders_as_a_table_and_as_json():
    report = run_preflight(rtx_facts(nvcc=read(NVCC / "nvcc-12.8.txt")), blackwell_needs(), host="ct201")
    console = Console(record=True, width=240, color_system=None)
    console.print(preflight_table(report))
    text = console.export_text()
    assert "preflight ct201: 1 failed" in text
    assert "toolkit-supports-gpu" in text and "fail" in text and "FLASHINFER_CUDA_ARCH_LIST" in text
    assert type(report).model_validate_json(report.model_dump_json()) == report


# --- vLLM beside SGLang (a host file's engine.vllm) -----------------------------------------------


def vllm_facts(vllm_engine: EnginePython | None, *, own_python: bool = True, problems: dict[str, str] | None = None) -> HostFacts:
    """The RTX host with SGLang in /opt/sglang and vLLM probed in its own interpreter (or the same one)."""
    facts = rtx_facts(engine=torch_engine(arch_list=["sm_90", "sm_100", "sm_120"]), problems=problems)
    request = FactsRequest(paths=PATHS, engine_python="/opt/sglang/bin/python", vllm_python="/opt/vllm/bin/python" if own_python else None)
    return facts.model_copy(update={"request": request, "vllm_engine": vllm_engine})


def test_vllm_is_checked_in_its_own_interpreter_as_sglang_is_in_its():
    needs = blackwell_needs(engine_kind="sglang", vllm=True)
    vllm = torch_engine(arch_list=["sm_90", "sm_100", "sm_120"]).model_copy(update={"executable": "/opt/vllm/bin/python", "sglang_version": None, "vllm_version": "0.33.0"})
    report = run_preflight(vllm_facts(vllm), needs, host="ct200")
    assert verdicts(report)["vllm-installed"] is Verdict.ok and "vllm 0.33.0" in check(report, "vllm-installed").message
    assert verdicts(report)["vllm-cuda-supports-gpu"] is Verdict.ok

    cpu_only = vllm.model_copy(update={"torch_cuda": None})
    report = run_preflight(vllm_facts(cpu_only), needs, host="ct200")
    assert verdicts(report)["vllm-cuda-supports-gpu"] is Verdict.fail and "CPU-only" in check(report, "vllm-cuda-supports-gpu").message

    without = vllm.model_copy(update={"vllm_version": None})
    failed = check(run_preflight(vllm_facts(without), needs, host="ct200"), "vllm-installed")
    assert failed.verdict is Verdict.fail and "/opt/vllm/bin/python" in failed.message and "engine.vllm.python" in failed.hint

    unreachable = check(run_preflight(vllm_facts(None, problems={"vllm_engine": "exit 127: not found"}), needs, host="ct200"), "vllm-installed")
    assert unreachable.verdict is Verdict.fail and "/opt/vllm/bin/python: exit 127: not found" == unreachable.message


def test_vllm_in_the_engines_interpreter_and_a_host_without_vllm():
    # No engine.vllm.python of its own: the SGLang interpreter's probe says whether vllm is there.
    report = run_preflight(vllm_facts(None, own_python=False), blackwell_needs(engine_kind="sglang", vllm=True), host="ct200")
    assert verdicts(report)["vllm-installed"] is Verdict.fail and "has no vllm" in check(report, "vllm-installed").message
    report = run_preflight(vllm_facts(None, own_python=False), blackwell_needs(engine_kind="sglang"), host="ct200")
    assert verdicts(report)["vllm-installed"] is Verdict.skip and verdicts(report)["vllm-cuda-supports-gpu"] is Verdict.skip


def test_the_facts_script_probes_vllms_interpreter_when_it_is_another():
    from fleet.facts.gather import gather_script

    both = gather_script(FactsRequest(paths=PATHS, engine_python="/opt/sglang/bin/python", vllm_python="/opt/vllm/bin/python"))
    assert "/opt/vllm/bin/python" in both and "vllm_engine" in both
    same = gather_script(FactsRequest(paths=PATHS, engine_python="/opt/sglang/bin/python", vllm_python="/opt/sglang/bin/python"))
    assert "vllm_engine" not in same
    assert "/opt/vllm/bin/python" not in gather_script(FactsRequest(paths=PATHS, engine_python="/opt/sglang/bin/python", vllm_python="/opt/vllm/bin/python"), engine=False)

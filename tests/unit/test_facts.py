"""Fact parsers on real captured output, the composite script in a real sh, gather_facts and the cache end to end."""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from rich.console import Console

from fleet.facts import FactsCache, commands, facts_table, gather, gather_facts
from fleet.facts.commands import Fact, composite_script, engine_fact, file_fact, limited, parse_section
from fleet.facts.engine_probe import PROBE_MARK
from fleet.facts.models import Driver, FactsRequest
from fleet.facts.parsers import (
    parse_boot_id,
    parse_df,
    parse_disk_space,
    parse_driver_header,
    parse_du_bytes,
    parse_engine_probe,
    parse_gpu_processes,
    parse_gpus,
    parse_kernel,
    parse_kernel_module,
    parse_meminfo,
    parse_nvcc,
    parse_os_release,
    parse_systemd,
)
from fleet.errors import FactError
from fleet.host.facts_output import SectionOutput, split_sections
from fleet.transport.local import LocalTransport
from tests.interpreters import bare_python

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
H200 = FIXTURES / "real-tool-output" / "h200-driver580-cuda13.0"
RTX = FIXTURES / "facts" / "rtx-pro-6000-8gpu-driver580-cuda13.1"
NVCC = FIXTURES / "facts" / "nvcc"
DEV = FIXTURES / "facts" / "dev-machine"
DEVICE = FIXTURES / "facts" / "h200-driver580-cuda13.0-device"
RTX_NAME = "NVIDIA RTX PRO 6000 Blackwell Server Edition"


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def versions_lines(directory: Path, start: str, count: int) -> str:
    """`count` lines of a capture's versions.txt, from the first line starting with `start`."""
    lines = read(directory / "versions.txt").splitlines(keepends=True)
    first = next(i for i, line in enumerate(lines) if line.startswith(start))
    return "".join(lines[first : first + count])


def rc(path: Path) -> int:
    return int(read(path).strip())


# --- GPUs ---------------------------------------------------------------------------------------


def test_gpus_real_h200_with_header_units_and_extra_columns():
    (gpu,) = parse_gpus(read(H200 / "query-gpu.csv"))
    assert gpu.index == 0
    assert gpu.name == "NVIDIA H200"
    assert gpu.uuid == "GPU-1208484a-35cc-eb1d-a5b8-8afc67034931"
    assert gpu.pci_bus_id == "00000000:00:06.0"
    assert gpu.capability == (9, 0)
    assert (gpu.memory_total_mib, gpu.memory_used_mib, gpu.memory_free_mib) == (143771, 0, 143156)
    assert gpu.driver_version == "580.159.04"


def test_gpus_real_h200_noheader_nounits():
    fields = ("index", "name", "compute_cap", "memory.total", "driver_version")
    (gpu,) = parse_gpus(read(H200 / "query-gpu-noheader.csv"), fields=fields)
    assert (gpu.name, gpu.compute_capability, gpu.memory_total_mib, gpu.driver_version) == ("NVIDIA H200", "9.0", 143771, "580.159.04")
    assert gpu.uuid is None and gpu.memory_free_mib is None


def test_gpus_rtx_pro_6000_in_fleets_query_format():
    gpus = parse_gpus(read(RTX / "fleet-query-gpu.csv"))
    assert [g.index for g in gpus] == list(range(8))
    assert {g.name for g in gpus} == {RTX_NAME}
    assert {g.capability for g in gpus} == {(12, 0)}
    assert {g.memory_total_mib for g in gpus} == {97887}
    assert len({g.uuid for g in gpus}) == 8


def test_gpus_header_and_noheader_formats_agree():
    assert parse_gpus(read(RTX / "query-gpu.csv")) == parse_gpus(read(RTX / "fleet-query-gpu.csv"))


def test_gpus_nvidia_smi_missing_is_an_error_naming_the_cause():
    with pytest.raises(FactError, match="command not found.*nvidia-smi: not found"):
        parse_gpus(read(DEV / "nvidia-smi-not-found.txt"), rc(DEV / "nvidia-smi-not-found.rc"))


def test_gpus_driver_failure_keeps_nvidia_smis_message():
    text = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n"
    with pytest.raises(FactError, match="exited 9.*couldn't communicate"):
        parse_gpus(text, 9)


@pytest.mark.parametrize(
    "line",
    ["0, NVIDIA H200, 9.0", "zero, NVIDIA H200, GPU-x, 0:0, 9.0, 1, 0, 1, 580", "0, NVIDIA H200, GPU-x, 0:0, nine, 1, 0, 1, 580"],
)
def test_gpus_malformed_rows_are_rejected(line):
    with pytest.raises(FactError):
        parse_gpus(line + "\n")


def test_gpus_memory_not_available_is_none():
    (gpu,) = parse_gpus("0, NVIDIA GB10, GPU-x, 0000000F:01:00.0, 12.1, [N/A], [N/A], [N/A], 580.95.05\n")
    assert gpu.capability == (12, 1) and gpu.memory_total_mib is None


# --- GPU processes ------------------------------------------------------------------------------


def test_gpu_processes_real_idle_capture_is_empty():
    assert parse_gpu_processes(read(H200 / "query-apps.csv")) == []


def test_gpu_processes_real_one_process():
    (process,) = parse_gpu_processes(read(H200 / "query-apps-one-process.csv"))
    assert (process.pid, process.process_name, process.used_memory_mib) == (426, "python3", 2426)
    assert process.gpu_uuid == "GPU-1208484a-35cc-eb1d-a5b8-8afc67034931"


def test_gpu_processes_busy_with_not_available_memory():
    processes = parse_gpu_processes(read(RTX / "fleet-query-apps-busy.csv"))
    assert [p.pid for p in processes] == [*range(4100, 4108), 5120]
    assert processes[-1].used_memory_mib is None
    assert {p.used_memory_mib for p in processes[:-1]} == {88012}


def test_gpu_processes_no_running_processes_message_and_commas_in_names():
    assert parse_gpu_processes("No running processes found\n") == []
    (process,) = parse_gpu_processes("77, /opt/a, b/python, 12, GPU-1\n")
    assert process.process_name == "/opt/a, b/python" and process.gpu_uuid == "GPU-1"


# --- driver and toolkit -------------------------------------------------------------------------


@pytest.mark.parametrize("capture", [DEVICE / "nvidia-smi-version.txt", H200 / "nvidia-smi.txt", H200 / "nvidia-smi-q.txt", RTX / "nvidia-smi.txt"])
def test_driver_header(capture):
    driver = parse_driver_header(read(capture))
    assert (driver.version, driver.cuda_version) == ("580.159.04", "13.0")


def test_the_driver_fact_asks_nvidia_smi_for_its_version_only():
    # `--version` answers what the plain table's header did, without querying the GPUs (a real
    # H200: 21 ms against 105 ms), and refuses to be combined with a query (real capture, exit 2).
    assert commands.DRIVER.command.endswith("nvidia-smi --version")
    with pytest.raises(FactError, match="exited 2.*not valid for this command"):
        parse_driver_header(read(DEVICE / "nvidia-smi-version-with-query.txt"), 2)
    with pytest.raises(FactError, match="no 'Driver Version'"):
        parse_driver_header("Failed to initialize NVML: Driver/library version mismatch\n", 0)


def test_kernel_module_real_line_and_absent_file():
    text = versions_lines(H200, "NVRM version:", 2)
    assert parse_kernel_module(text) == "NVIDIA UNIX Open Kernel Module for x86_64 580.159.04 Release Build (nixbld@)"
    assert parse_kernel_module("cat: /proc/driver/nvidia/version: No such file or directory\n", 1) is None


def test_nvcc_real_13_0_and_12_8():
    toolkit = parse_nvcc("nvcc-path: /usr/local/cuda/bin/nvcc\n" + versions_lines(H200, "nvcc:", 5))
    assert (toolkit.version, toolkit.build, toolkit.nvcc_path) == ("13.0", "V13.0.88", "/usr/local/cuda/bin/nvcc")
    toolkit = parse_nvcc("nvcc-path: /opt/cuda-12.8/bin/nvcc\n" + read(NVCC / "nvcc-12.8.txt"))
    assert (toolkit.version, toolkit.build) == ("12.8", "V12.8.93")


def test_nvcc_absent_is_none_and_broken_is_an_error():
    assert parse_nvcc("nvcc-path: none\n") is None
    with pytest.raises(FactError, match="exited 126"):
        parse_nvcc("nvcc-path: /usr/bin/nvcc\nsh: 1: /usr/bin/nvcc: Permission denied\n", 126)


# --- the engine's Python ------------------------------------------------------------------------


def run_probe(python: str, pythonpath: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath:
        env["PYTHONPATH"] = str(pythonpath)
    command = engine_fact(python).command
    return subprocess.run(["sh", "-c", command], capture_output=True, text=True, env=env, timeout=60)


def test_probe_with_a_python_without_torch_reports_none(tmp_path: Path):
    done = run_probe(bare_python(tmp_path))
    engine = parse_engine_probe(done.stdout + done.stderr, done.returncode)
    assert done.returncode == 0
    assert engine.python_version == platform.python_version()
    assert (engine.torch_version, engine.torch_cuda, engine.torch_arch_list) == (None, None, None)
    assert engine.torch_error == "ModuleNotFoundError: No module named 'torch'"
    assert (engine.triton_version, engine.flashinfer_version, engine.sglang_version) == (None, None, None)


def write_package(root: Path, module: str, source: str, dist: str | None = None, version: str | None = None) -> None:
    (root / module).mkdir(parents=True)
    (root / module / "__init__.py").write_text(source)
    if dist:
        info = root / f"{dist.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        info.joinpath("METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")


def test_probe_reads_torch_cuda_arch_list_and_package_versions(tmp_path):
    torch_source = (
        "import sys, types\n"
        "__version__ = '2.11.0+cu130'\n"
        "version = types.SimpleNamespace(cuda='13.0')\n"
        "_C = types.SimpleNamespace(_cuda_getArchFlags=lambda: 'sm_75 sm_80 sm_86 sm_90 sm_100 sm_120')\n"
        "sys.stderr.write('UserWarning: a warning torch prints while importing\\n')\n"
    )
    write_package(tmp_path, "torch", torch_source)
    write_package(tmp_path, "sglang", "raise RuntimeError('sglang must not be imported by the probe')\n", "sglang", "0.5.9")
    write_package(tmp_path, "flashinfer", "raise RuntimeError('nor flashinfer')\n", "flashinfer-python", "0.6.7.post3")
    done = run_probe(bare_python(tmp_path), pythonpath=tmp_path)
    engine = parse_engine_probe(done.stdout + done.stderr, done.returncode)
    assert (engine.torch_version, engine.torch_cuda) == ("2.11.0+cu130", "13.0")
    assert engine.torch_arch_list == ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]
    assert engine.torch_error is None
    assert (engine.sglang_version, engine.flashinfer_version, engine.triton_version) == ("0.5.9", "0.6.7.post3", None)


def test_probe_reports_a_torch_that_fails_to_import(tmp_path):
    write_package(tmp_path, "torch", "raise OSError('libcudart.so.13: cannot open shared object file')\n")
    done = run_probe(bare_python(tmp_path), pythonpath=tmp_path)
    engine = parse_engine_probe(done.stdout, done.returncode)
    assert engine.torch_version is None
    assert engine.torch_error == "OSError: libcudart.so.13: cannot open shared object file"


def test_probe_missing_interpreter_and_garbage():
    done = run_probe(python="/nonexistent/bin/python3")
    with pytest.raises(FactError, match="interpreter was not found"):
        parse_engine_probe(done.stdout + done.stderr, done.returncode)
    with pytest.raises(FactError, match="unreadable probe result"):
        parse_engine_probe(PROBE_MARK + "{not json\n")
    with pytest.raises(FactError, match="unreadable probe result"):
        parse_engine_probe(PROBE_MARK + json.dumps({"executable": "/p"}) + "\n")


# --- disks, memory, OS, systemd, boot id --------------------------------------------------------


def test_df_real_posix_1024_blocks_without_type():
    root, shm = parse_df(versions_lines(H200, "Filesystem", 3))
    assert (root.filesystem, root.mount_point, root.fstype) == ("/dev/vda", "/", None)
    assert (root.total_bytes, root.used_bytes, root.available_bytes) == (264212084 * 1024, 16882040 * 1024, 67091532 * 1024)
    assert (shm.filesystem, shm.mount_point, shm.available_bytes) == ("tmpfs", "/dev/shm", 134217728 * 1024)


def test_df_real_with_type_and_byte_blocks():
    root, shm = parse_df(read(DEV / "df-P-T-B1.txt"))
    assert (root.fstype, root.total_bytes, root.available_bytes) == ("ext4", 270553174016, 82791071744)
    assert (shm.fstype, shm.mount_point, shm.total_bytes) == ("tmpfs", "/dev/shm", 25276063744)


def test_disk_space_maps_rows_to_configured_paths():
    text = "/srv\n/dev/shm\nfleet-df:\n" + read(DEV / "df-P-T-B1.txt")
    disks = parse_disk_space(text, 0, {"model_cache": "/srv/models", "staging": "/dev/shm/fleet"})
    assert disks["model_cache"].path == "/srv/models" and disks["model_cache"].measured_path == "/srv"
    assert disks["staging"].fstype == "tmpfs" and disks["staging"].available_bytes == 25276063744
    with pytest.raises(FactError, match="expected 1 paths and df rows, got 2 and 2"):
        parse_disk_space(text, 0, {"model_cache": "/srv/models"})


def test_du_bytes():
    assert parse_du_bytes("51200\t/dev/shm/fleet\n") == 51200 * 1024
    assert parse_du_bytes("absent\n") is None


def test_meminfo_real():
    memory = parse_meminfo(versions_lines(H200, "MemTotal:", 3))
    assert (memory.total_bytes, memory.available_bytes) == (131981020 * 1024, 131464416 * 1024)
    memory = parse_meminfo(read(DEV / "meminfo-head.txt"))
    assert (memory.total_bytes, memory.available_bytes) == (24683656 * 1024, 24147820 * 1024)


def test_os_release_and_kernel_real():
    system = parse_os_release(read(DEV / "os-release.txt"))
    assert (system.id, system.version_id, system.pretty_name) == ("debian", "12", "Debian GNU/Linux 12 (bookworm)")
    kernel = parse_kernel(read(DEV / "uname-n-r-m.txt"))
    assert (kernel.release, kernel.machine, kernel.hostname) == ("6.18.44-fc-v1045", "x86_64", "vm")
    kernel = parse_kernel(read(DEVICE / "uname-n-r-m.txt"))
    assert (kernel.release, kernel.machine, kernel.hostname) == ("6.18.44-fc-v973-gpu", "x86_64", "vm")
    with pytest.raises(FactError, match="expected one line"):
        parse_kernel("6.18.44\nx86_64\nvm\n")


def test_systemd_command_not_found_real():
    systemd = parse_systemd("systemd-booted: no\n" + versions_lines(H200, "bash: line 1: systemctl", 1), 127)
    assert (systemd.state, systemd.booted, systemd.usable) == (None, False, False)


def test_systemd_offline_real():
    systemd = parse_systemd("systemd-booted: no\n" + read(DEV / "systemctl-is-system-running.txt"), rc(DEV / "systemctl-is-system-running.rc"))
    assert (systemd.state, systemd.exit_code, systemd.usable) == ("offline", 1, False)


@pytest.mark.parametrize(("state", "code", "usable"), [("running", 0, True), ("degraded", 1, True), ("maintenance", 1, False)])
def test_systemd_states(state, code, usable):
    assert parse_systemd(f"systemd-booted: yes\n{state}\n", code).usable is usable


def test_boot_id_real_and_garbage():
    assert parse_boot_id(versions_lines(H200, "72c4de68", 1)) == "72c4de68-a9ce-4872-ae81-d4a579446045"
    with pytest.raises(FactError, match="expected a UUID"):
        parse_boot_id("\n")


# --- the composite script -----------------------------------------------------------------------


def run_script(facts: list[Fact[object]]) -> str:
    return subprocess.run(["sh", "-c", composite_script(facts)], capture_output=True, text=True, timeout=30).stdout


def test_composite_script_keeps_each_sections_exact_output_and_exit_code():
    facts = [
        Fact("no_final_newline", "printf 'a\\nb'", lambda text, code: text),
        Fact("final_newline", "printf 'c\\n\\n'; echo oops >&2; exit 3", lambda text, code: text),
        Fact("empty", "true", lambda text, code: text),
        Fact("quoting", "printf '%s\\n' \"it's $((1 + 1))\" '$HOME'", lambda text, code: text),
    ]
    sections = split_sections(run_script(facts))
    assert sections["no_final_newline"].text == "a\nb" and sections["no_final_newline"].exit_code == 0
    assert sections["final_newline"].text == "c\n\noops\n" and sections["final_newline"].exit_code == 3
    assert sections["empty"].text == "" and sections["empty"].exit_code == 0
    assert sections["quoting"].text == "it's 2\n$HOME\n"


def test_a_section_that_stats_a_hanging_path_times_out_alone():
    # what a dead NFS mount does to `[ -e ]` in the disk fact's walk: the section's own shell hangs
    slow = Fact("disks", commands.guarded("sleep 10; echo never", 1), lambda text, code: text, timeout_s=1)
    after = file_fact("after", "/proc/meminfo", lambda text, code: text)
    sections = split_sections(run_script([slow, after]))
    assert sections["after"].text.startswith("MemTotal:")
    with pytest.raises(FactError, match="timed out after 1 s"):
        parse_section(slow, sections["disks"])


def test_a_hanging_section_times_out_alone():
    slow = Fact("slow", "exec " + limited("sleep 10", 1), lambda text, code: text, timeout_s=1)
    after = Fact("after", "echo still here", lambda text, code: text)
    sections = split_sections(run_script([slow, after]))
    assert sections["after"].text == "still here\n"
    with pytest.raises(FactError, match="timed out after 1 s"):
        parse_section(slow, sections["slow"])


def test_the_facts_scripts_output_on_a_real_h200_host_reads_as_every_fact():
    # Captured 2026-12-01 on a real H200 host (Ubuntu 24.04, dash, GNU timeout, no systemctl):
    # the script this module builds (facts-script.sh beside it), for these paths and `python3`.
    request = FactsRequest(paths={"work_dir": "/tmp/fleetb4/work", "model_cache": "/tmp/fleetb4/models/qwen", "staging": "/dev/shm/fleet"}, engine_python="python3")
    facts = gather._volatile_facts(request) + gather._stable_facts(request)
    sections = split_sections(read(DEVICE / "facts-script-output.txt"))
    values = {fact.name: parse_section(fact, sections[fact.name]) for fact in facts}
    assert values["driver"] == Driver(version="580.159.04", cuda_version="13.0")
    assert values["kernel_module"] == "NVIDIA UNIX Open Kernel Module for x86_64 580.159.04 Release Build (nixbld@)"
    (gpu,) = values["gpus"]
    assert (gpu.name, gpu.memory_total_mib, gpu.memory_free_mib, gpu.capability) == ("NVIDIA H200", 143771, 143156, (9, 0))
    assert values["gpu_processes"] == [] and values["staging_dir"] is None
    assert (values["toolkit"].version, values["toolkit"].nvcc_path) == ("13.0", "/usr/local/cuda/bin/nvcc")
    engine = values["engine"]
    assert (engine.torch_version, engine.torch_cuda, engine.triton_version) == ("2.11.0+cu130", "13.0", "3.6.0")
    assert "sm_90" in engine.torch_arch_list
    assert values["disks"]["work_dir"].measured_path == "/tmp" and values["disks"]["staging"].measured_path == "/dev/shm"
    assert values["os"].id == "ubuntu" and values["kernel"].release == "6.18.44-fc-v973-gpu"
    assert values["memory"].total_bytes == 131961788 * 1024
    # no systemctl there: GNU timeout's own message, exit 127
    assert values["systemd"].state is None and values["systemd"].exit_code == 127


def test_files_are_read_exactly_by_the_shells_own_read(tmp_path):
    whole = tmp_path / "whole"
    whole.write_text("  leading spaces\\n and a backslash \\\ttab\n\nlast\n")
    unfinished = tmp_path / "unfinished"
    unfinished.write_text("a\nno final newline")
    (tmp_path / "empty").write_text("")
    names = ["whole", "unfinished", "empty", "missing"]
    sections = split_sections(run_script([file_fact(name, str(tmp_path / name), lambda text, code: text) for name in names]))
    assert sections["whole"] == SectionOutput(whole.read_text(), 0)
    assert sections["unfinished"] == SectionOutput("a\nno final newline", 0)
    assert sections["empty"] == SectionOutput("", 0)
    # as with cat: the reason on stderr (here the shell's), a non-zero exit
    assert sections["missing"].exit_code != 0 and str(tmp_path / "missing") in sections["missing"].text


def test_split_sections_leaves_out_an_unfinished_section():
    output = "@@fleet-facts@@ begin a\nx\n\n@@fleet-facts@@ end a 0\n@@fleet-facts@@ begin b\npartial"
    assert list(split_sections(output)) == ["a"]


# --- gather_facts and the cache, end to end through the real local transport -------------------


@pytest.fixture
def fake_host(tmp_path, monkeypatch):
    """This machine with fake nvidia-smi / nvcc printing the fixtures, like the SSH test hosts."""
    state = tmp_path / "state"
    state.mkdir()
    (state / "apps.csv").write_text("")
    (state / "nvcc.txt").write_text(read(NVCC / "nvcc-12.8.txt"))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(
        "#!/bin/sh\n"
        'case "$*" in\n'
        f'  *--query-gpu=*) exec /bin/cat "{RTX}/fleet-query-gpu.csv" ;;\n'
        f'  *--query-compute-apps=*) exec /bin/cat "{state}/apps.csv" ;;\n'
        f'  --version) exec /bin/cat "{DEVICE}/nvidia-smi-version.txt" ;;\n'
        '  *) echo "unsupported: $*" >&2; exit 2 ;;\n'
        "esac\n"
    )
    cuda_home = tmp_path / "cuda"
    (cuda_home / "bin").mkdir(parents=True)
    nvcc = cuda_home / "bin" / "nvcc"
    nvcc.write_text(f'#!/bin/sh\nexec /bin/cat "{state}/nvcc.txt"\n')
    for tool in (smi, nvcc):
        tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setenv("CUDA_HOME", str(cuda_home))
    monkeypatch.delenv("PYTHONPATH", raising=False)
    paths = {"work_dir": str(tmp_path / "work"), "model_cache": str(tmp_path / "models" / "qwen"), "staging": str(tmp_path / "shm" / "fleet")}
    return tmp_path, state, paths


def test_gather_facts_in_one_round_trip(fake_host):
    tmp_path, _, paths = fake_host
    facts = gather_facts(LocalTransport("fake"), paths, bare_python(tmp_path), timeout=120)
    assert facts.problems == {}
    assert len(facts.gpus) == 8 and facts.gpus[0].name == RTX_NAME
    assert facts.gpu_processes == []
    assert (facts.driver.version, facts.driver.cuda_version) == ("580.159.04", "13.0")
    assert (facts.toolkit.version, facts.toolkit.nvcc_path) == ("12.8", str(tmp_path / "cuda" / "bin" / "nvcc"))
    assert facts.engine.python_version == platform.python_version() and facts.engine.torch_version is None
    assert facts.boot_id == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert {d.measured_path for d in facts.disks.values()} == {str(tmp_path)}
    assert facts.disks["model_cache"].path == paths["model_cache"]
    assert facts.staging_dir_bytes is None
    assert facts.memory.total_bytes > 0 and facts.kernel.release == platform.release()
    restored = type(facts).model_validate_json(facts.model_dump_json())
    assert restored == facts


# what a cold gather may run, and what it must not (files are read with builtins, parents found
# with parameter expansion, no `sh -c` per section but where a stat can hang)
COUNTED = ("sh", "timeout", "cat", "dirname", "uname", "df", "du", "systemctl", "nvidia-smi", "grep", "head")


def test_a_cold_gather_starts_one_shell_and_only_the_tools_it_reads(fake_host, monkeypatch):
    tmp_path, _, paths = fake_host
    calls, counted = tmp_path / "calls.log", tmp_path / "counted-bin"
    counted.mkdir()
    for name in COUNTED:
        real = shutil.which(name)
        if real is not None:
            (counted / name).write_text(f'#!/bin/sh\necho {name} >> "{calls}"\nexec "{real}" "$@"\n')
            (counted / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{counted}:{os.environ['PATH']}")
    facts = gather_facts(LocalTransport("fake"), paths, bare_python(tmp_path), timeout=120)
    assert facts.problems == {} and facts.driver.cuda_version == "13.0"
    systemctl = 1 if shutil.which("systemctl") else 0
    # the engine's Python and nvcc ($CUDA_HOME/bin) are run by path, not looked up on PATH; the
    # script's shell, and one each for the sections that stat configured paths (disks, staging
    # dir, toolkit), under their limit
    expected = {"sh": 4, "nvidia-smi": 3, "df": 1, "uname": 1, "systemctl": systemctl, "timeout": 7 + systemctl}
    assert Counter(calls.read_text().split()) == {name: n for name, n in expected.items() if n}


def test_gather_facts_records_what_it_could_not_read(fake_host, monkeypatch):
    tmp_path, _, paths = fake_host
    # The system's commands but nvidia-smi: a GPU machine has a real one in /usr/bin.
    bare = tmp_path / "bin-without-nvidia-smi"
    bare.mkdir()
    for directory in (Path("/usr/bin"), Path("/bin")):
        for command in directory.iterdir():
            if command.name != "nvidia-smi" and not (bare / command.name).exists():
                (bare / command.name).symlink_to(command)
    monkeypatch.setenv("PATH", str(bare))
    facts = gather_facts(LocalTransport("fake"), paths, "/nonexistent/bin/python3", timeout=120)
    # On a GPU machine /proc/driver/nvidia still names the kernel module; the versions come from nvidia-smi only.
    assert facts.gpus == [] and (facts.driver is None or (facts.driver.version, facts.driver.cuda_version) == (None, None))
    assert "command not found" in facts.problems["gpus"]
    assert "interpreter was not found" in facts.problems["engine"]
    assert facts.boot_id and facts.disks["staging"].measured_path == str(tmp_path)


def test_cache_keeps_stable_facts_within_a_boot_and_refreshes_volatile_ones(fake_host):
    tmp_path, state, paths = fake_host
    cache = FactsCache(tmp_path / "cache")
    transport = LocalTransport("fake")
    first = cache.facts("ct200", transport, paths, bare_python(tmp_path), timeout=120)
    assert first.toolkit.version == "12.8" and first.staging_dir_bytes is None

    # without a reboot: a new toolkit is not seen (stable, cached), new GPU work and staged files are
    (state / "nvcc.txt").write_text(read(NVCC / "nvcc-13.1.txt"))
    (state / "apps.csv").write_text(read(RTX / "fleet-query-apps-busy.csv"))
    Path(paths["staging"]).mkdir(parents=True)
    Path(paths["staging"], "shard").write_bytes(b"x" * 65536)
    second = cache.facts("ct200", transport, paths, bare_python(tmp_path), timeout=120)
    assert second.toolkit.version == "12.8"
    assert len(second.gpu_processes) == 9
    assert second.staging_dir_bytes >= 65536
    assert second.gathered_at > first.gathered_at
    assert cache.load("ct200") == second

    # an entry from an earlier boot is not trusted: everything is gathered again
    stale = second.model_copy(update={"boot_id": "00000000-0000-4000-8000-000000000000"})
    cache.store("ct200", stale)
    third = cache.facts("ct200", transport, paths, bare_python(tmp_path), timeout=120)
    assert third.toolkit.version == "13.1" and third.boot_id == second.boot_id


def test_cache_answers_only_the_same_request_and_can_be_forced(fake_host):
    tmp_path, state, paths = fake_host
    cache = FactsCache(tmp_path / "cache")
    transport = LocalTransport("fake")
    cache.facts("ct200", transport, paths, bare_python(tmp_path), timeout=120)
    (state / "nvcc.txt").write_text(read(NVCC / "nvcc-13.1.txt"))
    other_paths = {**paths, "staging": str(tmp_path / "elsewhere")}
    assert cache.facts("ct200", transport, other_paths, bare_python(tmp_path), timeout=120).toolkit.version == "13.1"
    (state / "nvcc.txt").write_text(read(NVCC / "nvcc-12.8.txt"))
    assert cache.facts("ct200", transport, other_paths, bare_python(tmp_path), timeout=120, refresh=True).toolkit.version == "12.8"


def test_cache_file_is_written_atomically_and_unreadable_entries_are_misses(tmp_path, fake_host):
    _, _, paths = fake_host
    cache = FactsCache(tmp_path / "cache")
    facts = gather_facts(LocalTransport("fake"), paths, bare_python(tmp_path), timeout=120)
    cache.store("ct200", facts)
    assert [p.name for p in (tmp_path / "cache").iterdir()] == ["ct200.json"]
    assert cache.load("ct200") == facts
    cache.path("ct200").write_text("{ truncated")
    assert cache.load("ct200") is None
    cache.invalidate("ct200")
    assert cache.load("ct200") is None
    with pytest.raises(ValueError, match="host name"):
        cache.path("../etc/passwd")


def test_facts_table_shows_each_hosts_figures(fake_host):
    tmp_path, _, paths = fake_host
    facts = gather_facts(LocalTransport("fake"), paths, bare_python(tmp_path), timeout=120)
    console = Console(record=True, width=400, color_system=None)
    console.print(facts_table({"ct200": facts}))
    text = console.export_text()
    assert f"8x {RTX_NAME} (cc 12.0, 97887 MiB)" in text
    assert "580.159.04 / 13.0" in text and "12.8 (" in text and "no torch" in text
    assert "staging:" in text and "GiB free" in text

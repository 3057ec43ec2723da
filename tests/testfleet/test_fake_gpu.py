"""The fake GPU tools must print what the real ones print: compared with captured real output."""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.testfleet import fake_gpu

REAL = Path(__file__).parent / "real_tool_output" / "h200-driver580-cuda13.0"
NOW = time.mktime((2026, 11, 29, 10, 23, 17, 0, 0, -1))

# The host the real files were captured on, as a profile.
H200 = {
    "name": "NVIDIA H200",
    "count": 1,
    "compute_cap": "9.0",
    "memory_total_mib": 143771,
    "driver": "580.159.04",
    "cuda_driver_version": "13.0",
    "toolkit": "13.0",
    "uuids": ["GPU-1208484a-35cc-eb1d-a5b8-8afc67034931"],
    "bus_ids": ["00000000:00:06.0"],
    "memory_reserved_mib": 615,
    "power_limit_w": 700,
    "idle": {"temperature_c": 37, "power_w": 122, "pstate": "P0"},
}


def state_dir(tmp_path: Path, profile: dict, procs: Sequence[dict] = ()) -> Path:
    (tmp_path / "procs").mkdir()
    (tmp_path / "profile.json").write_text(json.dumps(profile))
    for proc in procs:
        (tmp_path / "procs" / f"{proc['pid']}.json").write_text(json.dumps(proc))
    return tmp_path


def smi(directory: Path, *argv: str, alive=lambda pid: True) -> str:
    return fake_gpu.nvidia_smi(list(argv), directory, "ct200", NOW, alive)


def test_table_matches_real_layout(tmp_path):
    real = (REAL / "nvidia-smi.txt").read_text().splitlines()
    real = real[: real.index("rc=0")]  # added by the capture script
    fake = smi(state_dir(tmp_path, H200)).splitlines()
    assert fake[0] == time.ctime(NOW) + "       "
    assert fake[1:] == real[1:]


@pytest.mark.parametrize(
    ("argv", "real_file"),
    [
        (["-L"], "nvidia-smi-L.txt"),
        (
            [
                "--query-gpu=index,name,uuid,pci.bus_id,compute_cap,memory.total,memory.used,memory.free,driver_version,temperature.gpu,utilization.gpu",
                "--format=csv",
            ],
            "query-gpu.csv",
        ),
        (
            ["--query-gpu=index,name,compute_cap,memory.total,driver_version", "--format=csv,noheader,nounits"],
            "query-gpu-noheader.csv",
        ),
        (["--query-compute-apps=pid,process_name,used_memory,gpu_uuid", "--format=csv"], "query-apps.csv"),
        (["--version"], "nvidia-smi-version.txt"),
    ],
)
def test_idle_outputs_match_real_files(tmp_path, argv, real_file):
    assert smi(state_dir(tmp_path, H200), *argv) == (REAL / real_file).read_text()


def test_compute_apps_with_a_process_matches_real_file(tmp_path):
    directory = state_dir(tmp_path, H200, [{"pid": 426, "process_name": "python3", "gpus": [0], "used_mib": 2426}])
    out = smi(directory, "--query-compute-apps=pid,process_name,used_memory,gpu_uuid", "--format", "csv")
    assert out + "\n" == (REAL / "query-apps-one-process.csv").read_text()


def test_rtx_pro_table_rows_have_the_real_580_layout(tmp_path):
    procs = [{"pid": 5459, "process_name": "python3", "gpus": [0], "used_mib": 2079}]
    lines = smi(state_dir(tmp_path, fake_gpu.DEFAULT_PROFILE, procs)).splitlines()
    # Rows copied from public nvidia-smi 580.95.05 output of RTX PRO 6000 hosts.
    assert "|   0  NVIDIA RTX PRO 6000 Blac...    On  |   00000000:01:00.0 Off |                    0 |" in lines
    assert "|                                         |                        |             Disabled |" in lines
    assert "|    0   N/A  N/A            5459      C   python3                                2079MiB |" in lines
    assert "| NVIDIA-SMI 580.95.05              Driver Version: 580.95.05      CUDA Version: 13.0     |" in lines
    assert all(len(line) == 91 for line in lines[1:] if line)
    assert sum(line.startswith("|   ") and "NVIDIA RTX PRO" in line for line in lines) == 8
    assert re.search(r"\|\s+2079MiB /  97887MiB \|", "\n".join(lines))


def test_live_process_is_listed_and_dead_one_is_hidden(tmp_path):
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid, live_pid = int(finished.stdout), subprocess.os.getpid()
    directory = state_dir(
        tmp_path,
        fake_gpu.DEFAULT_PROFILE,
        [
            {"pid": live_pid, "process_name": "sglang::scheduler", "gpus": [2, 3], "used_mib": 80000},
            {"pid": dead_pid, "process_name": "ghost", "gpus": [0], "used_mib": 1000},
        ],
    )
    out = fake_gpu.nvidia_smi(
        ["--query-compute-apps=pid,process_name,used_memory,gpu_uuid", "--format=csv,nounits"],
        directory,
        "ct200",
        NOW,
    )
    rows = list(csv.reader(io.StringIO(out), skipinitialspace=True))
    assert rows[0] == ["pid", "process_name", "used_gpu_memory [MiB]", "gpu_uuid"]
    assert [r[:3] for r in rows[1:]] == [[str(live_pid), "sglang::scheduler", "80000"]] * 2
    used = fake_gpu.nvidia_smi(["--query-gpu=index,memory.used", "--format=csv,noheader"], directory, "ct200", NOW)
    assert used.splitlines() == [f"{i}, {80000 if i in (2, 3) else 0} MiB" for i in range(8)]


def test_uuids_are_stable_per_hostname_and_distinct_between_hosts(tmp_path):
    # written out without the uuid module (its imports cost the tool's start-up): the same UUIDs
    assert fake_gpu.default_uuid("ct200", 3) == "GPU-" + str(uuid.uuid5(uuid.NAMESPACE_DNS, "ct200.gpu3.fleet-testfleet"))
    directory = state_dir(tmp_path, fake_gpu.DEFAULT_PROFILE)
    a = fake_gpu.nvidia_smi(["-L"], directory, "ct200", NOW)
    assert a == fake_gpu.nvidia_smi(["-L"], directory, "ct200", NOW)
    assert a != fake_gpu.nvidia_smi(["-L"], directory, "ct201", NOW)
    assert a.splitlines()[0].startswith("GPU 0: NVIDIA RTX PRO 6000 Blackwell Server Edition (UUID: GPU-")


def test_nvcc_matches_real_version_output(tmp_path):
    real = (REAL / "versions.txt").read_text().splitlines()[:5]
    assert fake_gpu.nvcc(["--version"], state_dir(tmp_path, H200)).splitlines() == real


def test_nvcc_follows_the_profile_toolkit(tmp_path):
    out = fake_gpu.nvcc(["-V"], state_dir(tmp_path, {**H200, "toolkit": "12.8"}))
    assert "Cuda compilation tools, release 12.8, V12.8.93" in out.splitlines()


def test_profiles_are_read_as_json_reads_them_without_importing_it():
    text = '{"a": [1, 2.5, "x\\u00e9", null, true, -1e3], "b": {"c": {}}}'
    assert fake_gpu.loads(" " + text + "\n") == json.loads(text)
    for bad in ("", "{", '{"a": 1} extra', "{'a': 1}"):
        with pytest.raises(ValueError):
            fake_gpu.loads(bad)


@pytest.mark.parametrize(
    ("argv", "real_file"),
    [
        (["--version", "--query-gpu=index", "--format=csv"], "nvidia-smi-version-with-query.txt"),
        (["--query-gpu=index", "--query-compute-apps=pid", "--format=csv"], "nvidia-smi-two-queries.txt"),
    ],
)
def test_refused_combinations_print_the_real_message(tmp_path, argv, real_file):
    with pytest.raises(fake_gpu.UsageError) as refused:
        smi(state_dir(tmp_path, H200), *argv)
    assert str(refused.value) == (REAL / real_file).read_text()


def test_bad_queries_fail_like_the_real_tool(tmp_path):
    directory = state_dir(tmp_path, H200)
    with pytest.raises(fake_gpu.UsageError, match='Field "bogus" is not a valid field to query'):
        smi(directory, "--query-gpu=index,bogus", "--format=csv")
    with pytest.raises(fake_gpu.UsageError, match="--format"):
        smi(directory, "--query-gpu=index")
    with pytest.raises(fake_gpu.UsageError):
        smi(directory, "-q")


def test_malformed_process_file_names_the_file(tmp_path):
    directory = state_dir(tmp_path, H200, [{"pid": 7, "process_name": "x", "gpus": [3], "used_mib": 1}])
    with pytest.raises(ValueError, match=r"procs/7\.json: gpus: expected indexes below 1"):
        smi(directory)

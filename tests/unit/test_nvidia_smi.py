"""The one nvidia-smi parser, on real output captured on an H200 host (driver 580, CUDA 13.0)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.host.nvidia_smi import ComputeApp, mib, parse_compute_apps, parse_csv, query_command
from fleet.host.errors import NvidiaSmiError

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real-tool-output" / "h200-driver580-cuda13.0"
UUID = "GPU-1208484a-35cc-eb1d-a5b8-8afc67034931"


def test_query_gpu_with_a_header_is_read_by_column_name() -> None:
    (row,) = parse_csv((REAL / "query-gpu.csv").read_text(), ("index", "uuid"))
    assert row["index"] == "0" and row["uuid"] == UUID and mib(row["memory.total"]) == 143771
    assert row["compute_cap"] == "9.0" and row["utilization.gpu"] == "0 %"


def test_query_gpu_without_a_header_is_read_in_query_order() -> None:
    fields = ("index", "name", "compute_cap", "memory.total", "driver_version")
    (row,) = parse_csv((REAL / "query-gpu-noheader.csv").read_text(), fields)
    assert row == {"index": "0", "name": "NVIDIA H200", "compute_cap": "9.0", "memory.total": "143771", "driver_version": "580.159.04"}


def test_compute_apps_real_output() -> None:
    assert parse_compute_apps((REAL / "query-apps-one-process.csv").read_text()) == [ComputeApp(426, "python3", 2426, UUID)]
    assert parse_compute_apps((REAL / "query-apps.csv").read_text()) == []
    # A process path with ", " in it stays whole; [N/A] memory (containers, MIG) is unknown, not 0.
    assert parse_compute_apps(f"7, /opt/a, b/python, [N/A], {UUID}\n") == [ComputeApp(7, "/opt/a, b/python", None, UUID)]


def test_what_cannot_be_read_names_the_line() -> None:
    with pytest.raises(NvidiaSmiError, match="line 2: expected 2 comma-separated fields"):
        parse_csv("0, GPU-a\n1\n", ("index", "uuid"))
    with pytest.raises(NvidiaSmiError, match="expected `pid, process_name, used_memory, gpu_uuid`"):
        parse_compute_apps("pid-less line\n")
    with pytest.raises(NvidiaSmiError, match="expected a MiB figure"):
        mib("lots")


def test_the_query_command_asks_for_machine_readable_csv() -> None:
    assert query_command("query-gpu", ("index", "uuid")) == ["nvidia-smi", "--query-gpu=index,uuid", "--format=csv,noheader,nounits"]

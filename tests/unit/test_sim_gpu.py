"""Reading the simulated GPUs from nvidia-smi / nvcc output (real captures) and CUDA_VISIBLE_DEVICES."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleet.host.engines.sim import gpu

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sim"


def test_parse_real_h200_query() -> None:
    gpus = gpu.parse_query_gpu((FIXTURES / "h200-query-gpu-noheader.csv").read_text())
    assert gpus == [gpu.SimGpu(0, "NVIDIA H200", (9, 0), 143771, "580.159.04")]
    assert gpus[0].memory_total_gb == pytest.approx(140.4, abs=0.05)


def test_parse_real_nvcc_version() -> None:
    assert gpu.parse_nvcc_version((FIXTURES / "h200-nvcc-version.txt").read_text()) == (13, 0)
    assert gpu.parse_nvcc_version("command not found") is None


def test_bad_query_output_names_the_line() -> None:
    with pytest.raises(gpu.GpuDetectionError, match="line 2"):
        gpu.parse_query_gpu("0, NVIDIA H200, 9.0, 143771, 580.159.04\n1, NVIDIA H200, 9.0\n")


def test_cuda_visible_devices_selects_and_reorders() -> None:
    gpus = [gpu.SimGpu(i, "G", (12, 0), 97887, "580") for i in range(4)]
    assert [g.index for g in gpu.select_visible(gpus, None)] == [0, 1, 2, 3]
    assert [g.index for g in gpu.select_visible(gpus, "3,1")] == [3, 1]
    assert [g.index for g in gpu.select_visible(gpus, "2,9,1")] == [2]  # CUDA stops at the first bad entry
    assert gpu.select_visible(gpus, "") == []


def test_register_and_unregister_process(tmp_path: Path) -> None:
    path = gpu.register_process(str(tmp_path), 4242, [2, 3], 60000)
    assert json.loads(path.read_text()) == {"pid": 4242, "process_name": "python3", "gpus": [2, 3], "used_mib": 60000}
    gpu.unregister_process(str(tmp_path), 4242)
    assert not path.exists()
    gpu.unregister_process(str(tmp_path), 4242)  # idempotent


def test_known_gpus_have_speeds() -> None:
    assert gpu.gpu_speed("NVIDIA RTX PRO 6000 Blackwell Server Edition") == (1792.0, 500.0)
    assert gpu.gpu_speed("NVIDIA H200")[0] > gpu.gpu_speed("NVIDIA H100 80GB HBM3")[0]

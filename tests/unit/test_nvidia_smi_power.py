"""nvidia-smi's power reading: the parser (fleet.host.nvidia_smi.parse_power) on output captured on a
real H200 (idle, and sampled every 500 ms through a matmul loop), and the test hosts' fake
nvidia-smi printing exactly what the real one prints for the same GPU and readings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleet.host.nvidia_smi import POWER_FIELDS, PowerReading, parse_power, query_command, watts
from fleet.host.errors import NvidiaSmiError
from tests.testfleet import fake_gpu

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real-tool-output" / "h200-driver580-cuda13.0"
LOOP_FIELDS = ("timestamp", "index", "power.draw", "power.draw.instant", "utilization.gpu")

# The captured H200 as a fake profile, at the reading of the idle captures.
H200 = {
    "name": "NVIDIA H200", "count": 1, "compute_cap": "9.0", "memory_total_mib": 143771, "driver": "580.159.04",
    "cuda_driver_version": "13.0", "toolkit": "13.0", "uuids": ["GPU-1208484a-35cc-eb1d-a5b8-8afc67034931"],
    "bus_ids": ["00000000:00:06.0"], "memory_reserved_mib": 615, "power_limit_w": 700,
    "idle": {"temperature_c": 37, "power_w": 78.37, "pstate": "P0"},
}  # fmt: skip


def test_the_power_query_is_the_one_captured() -> None:
    assert query_command("query-gpu", POWER_FIELDS) == [
        "nvidia-smi", "--query-gpu=index,power.draw,power.limit", "--format=csv,noheader,nounits",
    ]  # fmt: skip


def test_real_power_readings_with_and_without_header_and_units() -> None:
    idle = PowerReading(0, 78.37, 700.0)
    assert parse_power((REAL / "query-power.csv").read_text()) == [idle]
    assert parse_power((REAL / "query-power-noheader.csv").read_text()) == [idle]
    # With a header the columns are found by name among others.
    assert parse_power((REAL / "query-power-all.csv").read_text()) == [PowerReading(0, 78.39, 700.0)]


def test_a_looped_query_gives_every_sample_idle_and_under_load() -> None:
    samples = parse_power((REAL / "query-power-busy-loop.csv").read_text(), LOOP_FIELDS)
    assert len(samples) == 34 and {s.index for s in samples} == {0} and all(s.limit_w is None for s in samples)
    draws = [s.draw_w for s in samples]
    assert draws[0] == 78.40 and min(d for d in draws if d is not None) > 78
    loaded = [d for d in draws if d is not None and d > 600]
    assert len(loaded) == 16 and max(loaded) == 694.28  # 8 s at 500 ms, under the 700 W limit


def test_unavailable_and_malformed_readings() -> None:
    assert watts("[N/A]") is None and watts("N/A") is None and watts("455.00 W") == 455.0
    assert parse_power("0, [N/A], [N/A]\n") == [PowerReading(0, None, None)]
    with pytest.raises(NvidiaSmiError, match="power figure"):
        watts("lots W")
    with pytest.raises(NvidiaSmiError, match="expected 3 comma-separated fields"):
        parse_power("0, 78.37\n")
    with pytest.raises(NvidiaSmiError, match="index and power.draw"):
        parse_power("index, memory.used [MiB]\n0, 10 MiB\n")


def _fake(tmp_path: Path, *argv: str) -> str:
    (tmp_path / "procs").mkdir(exist_ok=True)
    (tmp_path / "profile.json").write_text(json.dumps(H200))
    return fake_gpu.nvidia_smi(list(argv), tmp_path, "ct200", 0.0, lambda pid: True)


@pytest.mark.parametrize(
    ("argv", "real_file"),
    [
        (["--query-gpu=index,power.draw,power.limit", "--format=csv"], "query-power.csv"),
        (["--query-gpu=index,power.draw,power.limit", "--format=csv,noheader,nounits"], "query-power-noheader.csv"),
    ],
)
def test_the_fake_prints_the_real_power_query(tmp_path: Path, argv: list[str], real_file: str) -> None:
    assert _fake(tmp_path, *argv) == (REAL / real_file).read_text()


def test_the_fake_knows_every_captured_power_field_in_the_real_layout(tmp_path: Path) -> None:
    real = (REAL / "query-power-all.csv").read_text().splitlines()
    fields = "index,power.draw,power.draw.average,power.draw.instant,power.limit,enforced.power.limit,power.default_limit"
    fake = _fake(tmp_path, f"--query-gpu={fields}", "--format=csv").splitlines()
    count = len(fields.split(","))
    assert fake[0] == ", ".join(real[0].split(", ")[:count])
    assert fake[1] == "0, 78.37 W, 78.37 W, 78.37 W, 700.00 W, 700.00 W, 700.00 W"
    assert parse_power("\n".join(fake)) == [PowerReading(0, 78.37, 700.0)]


def test_a_row_without_a_gpu_index_is_refused() -> None:
    with pytest.raises(NvidiaSmiError, match="GPU index"):
        parse_power("GPU-1, 78.37, 700.00\n")

"""fleet.measure.energy: joules from power samples (on the real H200 loop capture too), tokens per
joule and dollars per million tokens."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from fleet.host.nvidia_smi import parse_csv, watts
from fleet.measure.energy import dollars_per_million_tokens, energy_joules, tokens_per_joule

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real-tool-output" / "h200-driver580-cuda13.0"


def test_energy_integrates_linearly_between_samples_and_holds_the_ends() -> None:
    assert energy_joules([(0.0, 100.0), (10.0, 100.0)], 0.0, 10.0) == pytest.approx(1000.0)
    assert energy_joules([(0.0, 100.0), (10.0, 300.0)], 0.0, 10.0) == pytest.approx(2000.0)
    assert energy_joules([(0.0, 100.0), (10.0, 300.0)], 5.0, 10.0) == pytest.approx(1250.0)
    assert energy_joules([(2.0, 50.0), (4.0, 50.0)], 0.0, 10.0) == pytest.approx(500.0)  # held beyond the samples
    assert energy_joules([(20.0, 50.0)], 0.0, 10.0) is None  # no reading of its own
    with pytest.raises(ValueError, match="ends before it starts"):
        energy_joules([(0.0, 1.0)], 2.0, 1.0)


def test_energy_of_the_real_h200_matmul_loop() -> None:
    rows = parse_csv((REAL / "query-power-busy-loop.csv").read_text(), ("timestamp",))
    samples = []
    for row in rows:
        stamp, millis = row["timestamp"].split(".")
        moment = time.mktime(time.strptime(stamp, "%Y/%m/%d %H:%M:%S")) + int(millis) / 1000
        draw = watts(row["power.draw"])
        assert draw is not None
        samples.append((moment, draw))
    start = samples[0][0]
    idle = energy_joules(samples, start, start + 6.0)
    loaded = energy_joules(samples, start + 8.0, start + 15.0)  # 06:14:02.99 .. 06:14:09.99, all at ~690 W
    assert idle is not None and loaded is not None
    assert idle / 6.0 == pytest.approx(78.4, abs=0.2)
    assert loaded / 7.0 == pytest.approx(691.5, abs=3.0)


def test_tokens_per_joule_and_price() -> None:
    assert tokens_per_joule(6900, [3450.0, 3450.0]) == pytest.approx(1.0)
    assert tokens_per_joule(10, []) is None
    # 4 GPUs for an hour at $2.50 each: $10 for 2 million tokens, $5 a million.
    assert dollars_per_million_tokens(2_000_000, 3600.0, 4, 2.5) == pytest.approx(5.0)
    assert dollars_per_million_tokens(0, 10.0, 1, 2.5) is None
    for price in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="positive number"):
            dollars_per_million_tokens(10, 10.0, 1, price)

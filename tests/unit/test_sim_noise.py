"""The simulator's noise model (fleet.host.engines.sim.noise): off by default, seeded, its documented
shape (a few percent of lognormal throughput jitter, occasional slow runs, a heavier-tailed TTFT)
and its true figures; the engine applies a run's draw to its steps and draws anew at each flush."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import math
import statistics

import pytest

from fleet.host.engines.sim import perf
from fleet.host.engines.sim.cli import read_command_line
from fleet.host.errors import SimUsageError
from fleet.host.engines.sim.console import Console
from fleet.host.engines.sim.engine import Engine, EngineConfig, SimRequest
from fleet.host.engines.sim.faults import FaultProfile
from fleet.host.engines.sim.noise import NoiseModel, parse_noise
from fleet.host.errors import NoiseModelError

DRAWS = 20000


def test_noise_is_off_unless_asked_for() -> None:
    assert parse_noise(None, "x") is None and parse_noise("", "x") is None and parse_noise("off", "x") is None
    assert parse_noise("on", "x") == NoiseModel()
    assert parse_noise('{"throughput_sigma": 0.05, "slow_run_probability": 0}', "x") == NoiseModel(throughput_sigma=0.05, slow_run_probability=0.0)
    assert read_command_line(["--model-path", "m"], {}).settings.noise is None
    assert read_command_line(["--model-path", "m"], {"FLEET_SIM_NOISE": "on"}).settings.noise == NoiseModel()
    flag = read_command_line(["--model-path", "m", "--sim-noise", '{"ttft_sigma": 0.3}'], {"FLEET_SIM_NOISE": "off"})
    assert flag.settings.noise == NoiseModel(ttft_sigma=0.3)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("loud", "expected off, on or a JSON object"),
        ("[1]", "expected a JSON object"),
        ('{"jitter": 0.1}', "unknown keys ['jitter']"),
        ('{"slow_run_probability": 1.5}', "slow_run_probability: expected a probability"),
        ('{"ttft_stall_alpha": 1}', "ttft_stall_alpha: expected a Pareto shape"),
        ('{"throughput_sigma": true}', "throughput_sigma: expected a log-sd"),
    ],
)
def test_bad_noise_settings_name_the_source_and_field(text: str, message: str) -> None:
    with pytest.raises(NoiseModelError, match="^here: ") as caught:
        parse_noise(text, "here")
    assert message in str(caught.value)
    with pytest.raises(SimUsageError, match="environment variable FLEET_SIM_NOISE"):
        read_command_line(["--model-path", "m"], {"FLEET_SIM_NOISE": text})


def test_draws_are_seeded_by_server_seed_and_run() -> None:
    model = NoiseModel()
    assert model.run(3, 7) == model.run(3, 7) and model.prefill_factor(3, 7, 2) == model.prefill_factor(3, 7, 2)
    assert len({model.run(3, run).throughput_factor for run in range(50)}) == 50
    assert model.run(3, 0) != model.run(4, 0)


def test_throughput_jitter_is_a_few_percent_with_occasional_slow_runs_and_its_true_mean() -> None:
    model = NoiseModel()
    draws = [model.run(11, run) for run in range(DRAWS)]
    factors = [d.throughput_factor for d in draws]
    slow = sum(d.slow for d in draws) / DRAWS
    assert slow == pytest.approx(0.02, abs=0.004)
    regular = [math.log(d.throughput_factor) for d in draws if not d.slow]
    assert statistics.stdev(regular) == pytest.approx(0.03, rel=0.03) and abs(statistics.fmean(regular)) < 0.001
    assert statistics.fmean(factors) == pytest.approx(model.mean_throughput_factor(), rel=0.001)
    assert 0.99 < model.mean_throughput_factor() < 1.0  # slow runs pull the mean a little below 1
    assert all(d.throughput_factor < 0.9 for d in draws if d.slow)


def test_ttft_has_a_heavier_tail_than_throughput() -> None:
    model = NoiseModel()
    ttft = sorted(model.prefill_factor(5, 0, batch) for batch in range(DRAWS))
    step_time = sorted(1 / model.run(5, run).throughput_factor for run in range(DRAWS))

    def tail(values: list[float], q: float) -> float:  # a quantile over the median
        return values[int(q * len(values))] / values[len(values) // 2]

    for q in (0.9, 0.99, 0.999):
        assert tail(ttft, q) > 1.1 * tail(step_time, q)
    assert tail(ttft, 0.999) > 2 and max(ttft) > 5  # the Pareto stalls
    assert tail(step_time, 0.999) < 1.4  # a slow run is 1.25x, no more


GIB = 1 << 30
CONFIG = EngineConfig(
    max_running_requests=4,
    max_total_num_tokens=87061,
    context_len=32768,
    chunked_prefill_size=8192,
    max_prefill_tokens=16384,
    decode_log_interval=10,
    algorithm=None,
    verify_tokens=1,
    spec_num_draft_tokens=None,
    ddtree_budget=None,
    hybrid=True,
    max_mamba_cache_size=24,
    cuda_graph_max_bs=4,
    radix_cache=True,
    compute_cap_major=12,
    seed=9,
    noise_seed=31,
)
MODEL = perf.build_perf_model(bandwidth_gbs=1792, tflops=500, weights_bytes_per_gpu=51.05 * GIB, draft_weights_bytes_per_gpu=0, kv_cell_bytes=65536, tp_size=1, cuda_graphs=True)


class _Sink:
    def __init__(self) -> None:
        self.finished = asyncio.Event()

    def on_tokens(self, request: SimRequest, pieces: list[str]) -> None:
        pass

    def on_finish(self, request: SimRequest) -> None:
        self.finished.set()


class _Recording(Engine):
    """An engine that records the simulated seconds of every prefill and decode step."""

    spent: list[float]

    async def _spend(self, simulated_s: float) -> None:
        self.spent.append(simulated_s)


def _passes(config: EngineConfig, passes: int) -> list[list[float]]:
    """The simulated step times of `passes` identical one-request passes, flushing between them."""

    async def go() -> list[list[float]]:
        engine = _Recording(config, MODEL, FaultProfile(), Console(1, io.StringIO(), io.StringIO()), 1.0, lambda error: None)
        engine.ready = True
        task = asyncio.create_task(engine.run())
        times = []
        for _ in range(passes):
            engine.spent = []
            sink = _Sink()
            engine.submit(engine.new_request("Tell me about Rome", 4, 20, sink))
            await asyncio.wait_for(sink.finished.wait(), 5)
            assert engine.flush_cache()
            times.append(engine.spent)
        task.cancel()
        return times

    return asyncio.run(go())


def test_the_engine_varies_by_run_only_when_asked_and_by_the_models_draws() -> None:
    exact = _passes(CONFIG, 3)
    assert exact[0] == exact[1] == exact[2]  # noise off: the perf model's times, every pass
    noise = NoiseModel(throughput_sigma=0.2)
    noisy = _passes(dataclasses.replace(CONFIG, noise=noise), 3)
    for run, times in enumerate(noisy):
        factor = noise.run(CONFIG.noise_seed, run).throughput_factor
        # decode steps: the noise-free time over the run's factor (the first entry is the prefill)
        assert times[1:] == pytest.approx([t / factor for t in exact[run][1:]], rel=1e-12)
        assert times[0] == pytest.approx(exact[run][0] * noise.prefill_factor(CONFIG.noise_seed, run, 1) / factor, rel=1e-12)
    assert len({times[1] for times in noisy}) == 3
    assert _passes(dataclasses.replace(CONFIG, noise=noise), 3) == noisy  # seeded

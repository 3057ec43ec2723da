"""How a simulated server varies from run to run, as hardware does. Pure and seeded.

Off unless asked for (`--sim-noise` / `FLEET_SIM_NOISE`: `off`, the default, `on` for the
defaults below, or a JSON object of `NoiseModel` fields): with noise off every figure the sim
produces is the exact figure of its performance model, which tests of the scheduler rely on.

The model, per *run*. A run is the traffic between two prefix-cache flushes (a workload pass: the
agent flushes between passes), the first from the server's start; run k of a server with seed s
draws its noise from (s, k) alone, so the same seed and the same sequence of passes give the
same figures, and a restart with another seed gives others.

- Throughput jitter: every decode step of the run takes 1/f of its noise-free time, with f
  lognormal, median 1, log-sd `throughput_sigma` (3 %: a CV of about 3 %, what repeated passes on
  one GPU show from clocks, temperature and memory placement).
- An occasional slow run: with probability `slow_run_probability` (2 %) the run is also
  `slow_run_factor` (1.25x) slower throughout (a throttled GPU, a noisy neighbour).
- Heavier-tailed TTFT: every prefill batch takes g times its noise-free time (divided by the
  run's f, as the whole GPU is slower or faster), g lognormal with log-sd `ttft_sigma` (15 %), and
  with probability `ttft_stall_probability` (1 %) multiplied by a Pareto(`ttft_stall_alpha`) stall
  (at least 1x, heavy-tailed: a scheduling hiccup).

True figures: the noise-free figures are what the sim gives with noise off (the same seed and
workload). A run's throughput is its noise-free throughput times `RunNoise.throughput_factor`, so
the true mean of a configuration's pass throughput is its noise-free throughput times
`NoiseModel.mean_throughput_factor()`, and since every configuration draws from the same
distribution, the true speed-up between two configurations (the ratio of their mean throughputs,
and the geometric mean of paired pass ratios) is the ratio of their noise-free throughputs.
`observed_throughput` draws a run's throughput from a true one, for tests of statistics.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, fields
from typing import Any, Mapping
from fleet.host.errors import NoiseModelError

NOISE_ENV = "FLEET_SIM_NOISE"


@dataclass(frozen=True)
class RunNoise:
    """One run's draw: its throughput multiplier (decode steps take 1/this of their time)."""

    throughput_factor: float
    slow: bool


@dataclass(frozen=True)
class NoiseModel:
    throughput_sigma: float = 0.03
    slow_run_probability: float = 0.02
    slow_run_factor: float = 1.25
    ttft_sigma: float = 0.15
    ttft_stall_probability: float = 0.01
    ttft_stall_alpha: float = 2.5

    def run(self, seed: int, run: int) -> RunNoise:
        """Run `run`'s draw on a server seeded `seed` (the same pair, the same draw)."""
        rng = random.Random(f"fleet-sim-noise:{seed}:{run}")
        factor = math.exp(rng.gauss(0.0, self.throughput_sigma))
        slow = rng.random() < self.slow_run_probability
        return RunNoise(factor / self.slow_run_factor if slow else factor, slow)

    def prefill_factor(self, seed: int, run: int, batch: int) -> float:
        """How many times its noise-free time prefill batch `batch` of run `run` takes, before the
        run's throughput factor: lognormal, and now and then a Pareto-tailed stall."""
        rng = random.Random(f"fleet-sim-ttft:{seed}:{run}:{batch}")
        factor = math.exp(rng.gauss(0.0, self.ttft_sigma))
        if rng.random() < self.ttft_stall_probability:
            factor *= rng.paretovariate(self.ttft_stall_alpha)
        return factor

    def mean_throughput_factor(self) -> float:
        """E[throughput_factor]: exp(sigma^2 / 2) for the lognormal, less the slow runs' share."""
        slow = self.slow_run_probability
        return math.exp(self.throughput_sigma**2 / 2.0) * (1.0 - slow + slow / self.slow_run_factor)

    def observed_throughput(self, true_tok_s: float, seed: int, run: int) -> float:
        """What run `run` of a server seeded `seed` measures for a configuration whose noise-free
        throughput is `true_tok_s`."""
        return true_tok_s * self.run(seed, run).throughput_factor


_LIMITS: dict[str, tuple[float, float, str]] = {
    "throughput_sigma": (0.0, 1.0, "a log-sd within 0..1"),
    "slow_run_probability": (0.0, 1.0, "a probability within 0..1"),
    "slow_run_factor": (1.0, 100.0, "a slow-down factor within 1..100"),
    "ttft_sigma": (0.0, 2.0, "a log-sd within 0..2"),
    "ttft_stall_probability": (0.0, 1.0, "a probability within 0..1"),
    "ttft_stall_alpha": (1.01, 100.0, "a Pareto shape within 1.01..100 (above 1: a finite mean)"),
}


def parse_noise(text: str | None, source: str) -> NoiseModel | None:
    """`off`/empty/None: no noise (None); `on`: the documented defaults; a JSON object: those
    fields over the defaults. Raises NoiseModelError naming `source` and the field."""
    if text is None or text.strip() in ("", "off"):
        return None
    if text.strip() == "on":
        return NoiseModel()
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        raise NoiseModelError(f"{source}: expected off, on or a JSON object of noise fields, got {text!r}") from None
    return noise_from_mapping(data, source)


def noise_from_mapping(data: Any, source: str) -> NoiseModel:
    if not isinstance(data, Mapping):
        raise NoiseModelError(f"{source}: expected a JSON object of noise fields, got {data!r}")
    known = [field.name for field in fields(NoiseModel)]
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise NoiseModelError(f"{source}: unknown keys {unknown}; expected some of {known}")
    values: dict[str, float] = {}
    for name, value in data.items():
        low, high, expected = _LIMITS[name]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
            raise NoiseModelError(f"{source}: {name}: expected {expected}, got {value!r}")
        values[name] = float(value)
    return NoiseModel(**values)

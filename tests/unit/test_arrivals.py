"""Open-loop arrival times, checked statistically: the gaps fleet's agent draws are tested with the
one-sample Kolmogorov-Smirnov test against the exponential (a Poisson process, burstiness 1) and
the gamma of shape `burstiness` and mean 1/rate. The statistic, its critical value and the gamma
CDF are written here (scipy is no dependency); every draw is seeded, so the test is deterministic."""

from __future__ import annotations

import math
import random
from typing import Callable

import pytest

from fleet.host.agent.kinds.listed import arrival_offsets


def ks_statistic(sample: list[float], cdf: Callable[[float], float]) -> float:
    """D_n = sup |F_n(x) - F(x)|, checked on both sides of each step of the empirical CDF."""
    ordered = sorted(sample)
    n = len(ordered)
    return max(max((i + 1) / n - cdf(x), cdf(x) - i / n) for i, x in enumerate(ordered))


def ks_critical(n: int, alpha: float) -> float:
    """The asymptotic critical value sqrt(-ln(alpha / 2) / 2) / sqrt(n) (Smirnov), with Stephens'
    small-sample correction: D is refused above c / (sqrt(n) + 0.12 + 0.11 / sqrt(n))."""
    c = math.sqrt(-math.log(alpha / 2) / 2)
    return c / (math.sqrt(n) + 0.12 + 0.11 / math.sqrt(n))


def gamma_cdf(x: float, shape: float, scale: float) -> float:
    """The regularized lower incomplete gamma P(shape, x / scale): its series below shape + 1, the
    continued fraction (Lentz) above, as Numerical Recipes' gammp computes it."""
    if x <= 0:
        return 0.0
    z = x / scale
    log_front = shape * math.log(z) - z - math.lgamma(shape)
    if z < shape + 1:
        term = total = 1.0 / shape
        k = shape
        while abs(term) > abs(total) * 1e-15:
            k += 1
            term *= z / k
            total += term
        return total * math.exp(log_front)
    tiny = 1e-300
    b = z + 1 - shape
    c, d = 1 / tiny, 1 / b
    h = d
    for i in range(1, 10_000):
        an = -i * (i - shape)
        b += 2
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        h *= d * c
        if abs(d * c - 1) < 1e-15:
            break
    return 1.0 - h * math.exp(log_front)


def gaps(count: int, rate: float, burstiness: float, seed: int) -> list[float]:
    offsets = arrival_offsets(count, rate, burstiness, random.Random(seed))
    return [b - a for a, b in zip(offsets, offsets[1:])]


def test_gamma_cdf_matches_known_values() -> None:
    assert gamma_cdf(1.0, 1.0, 1.0) == pytest.approx(1 - math.exp(-1), rel=1e-12)  # the exponential
    assert gamma_cdf(3.0, 2.0, 1.0) == pytest.approx(1 - 4 * math.exp(-3), rel=1e-12)  # Erlang-2
    assert gamma_cdf(0.25, 0.5, 1.0) == pytest.approx(math.erf(0.5), rel=1e-12)  # chi-square with 1 degree, halved


@pytest.mark.parametrize("rate", [0.5, 8.0, 300.0])
def test_poisson_gaps_pass_ks_against_the_exponential(rate: float) -> None:
    sample = gaps(4001, rate, 1.0, seed=11)
    assert ks_statistic(sample, lambda x: 1 - math.exp(-rate * x)) < ks_critical(len(sample), 0.01)
    assert sum(sample) / len(sample) == pytest.approx(1 / rate, rel=0.05)


@pytest.mark.parametrize("burstiness", [0.3, 0.7, 2.0, 5.0])
def test_bursty_gaps_pass_ks_against_the_gamma_and_fail_against_the_exponential(burstiness: float) -> None:
    rate = 4.0
    sample = gaps(4001, rate, burstiness, seed=23)
    scale = 1 / (rate * burstiness)
    assert ks_statistic(sample, lambda x: gamma_cdf(x, burstiness, scale)) < ks_critical(len(sample), 0.01)
    # The test has the power to tell: the same gaps are no Poisson process.
    assert ks_statistic(sample, lambda x: 1 - math.exp(-rate * x)) > ks_critical(len(sample), 0.01)


def test_the_schedule_is_seeded_and_starts_at_once() -> None:
    first = arrival_offsets(50, 10.0, 0.5, random.Random(7))
    assert first == arrival_offsets(50, 10.0, 0.5, random.Random(7)) != arrival_offsets(50, 10.0, 0.5, random.Random(8))
    assert first[0] == 0.0 and first == sorted(first) and len(first) == 50

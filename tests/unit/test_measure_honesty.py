"""Do fleet.measure's intervals mean what they say? Passes are drawn from the simulator's noise model
(fleet.host.engines.sim.noise, called directly), whose true figures are known, over hundreds of
seeded trials: a 95 % interval must cover the truth in 90-99 % of them (well inside what chance
allows: at 400 trials a true 95 % coverage lands within 92.5-97.5 % with 99.9 % probability).
No verdict says faster or slower while its interval holds 1.0, and no two methods whose intervals
overlap are ranked apart. Deterministic (fixed seeds) and a few seconds long."""

from __future__ import annotations

import itertools

import pytest

from fleet.host.engines.sim.noise import NoiseModel
from fleet.measure.stats import Summary, fieller_ratio, paired_ratio, rank, summarize, verdict

TRIALS = 400
NOISE = NoiseModel()  # the documented defaults: 3 % jitter, 2 % slow runs
# A noisier host (10 % jitter, a slow run in ten) tests the intervals where they are wide.
ROUGH = NoiseModel(throughput_sigma=0.10, slow_run_probability=0.10, slow_run_factor=1.5)


def _passes(noise: NoiseModel, true_tok_s: float, seed: int, passes: int) -> list[float]:
    """`passes` passes of one server (seed) whose noise-free throughput is `true_tok_s`."""
    return [noise.observed_throughput(true_tok_s, seed, run) for run in range(passes)]


@pytest.mark.parametrize("noise", [NOISE, ROUGH], ids=["default", "rough"])
@pytest.mark.parametrize("passes", [3, 5])
def test_the_t_interval_of_a_mean_covers_the_true_mean(noise: NoiseModel, passes: int) -> None:
    true_mean = 100.0 * noise.mean_throughput_factor()
    covered = 0
    for trial in range(TRIALS):
        interval = summarize(_passes(noise, 100.0, trial, passes)).interval
        assert interval is not None
        covered += interval.contains(true_mean)
    assert 0.90 <= covered / TRIALS <= 0.99


@pytest.mark.parametrize("noise", [NOISE, ROUGH], ids=["default", "rough"])
@pytest.mark.parametrize("passes", [3, 5])
def test_speed_up_intervals_cover_the_true_ratio(noise: NoiseModel, passes: int) -> None:
    """DDTree at 1,061.5 tok/s over autoregressive at 161.2 (the true ratio, 6.585x), measured on
    two servers (seeds) of their own: the paired interval (pass i against pass i) and Fieller's
    (means of independent passes) each cover it in 90-99 % of trials."""
    true_ratio = 1061.5 / 161.2
    paired = fieller = 0
    for trial in range(TRIALS):
        method = _passes(noise, 1061.5, 2 * trial, passes)
        base = _passes(noise, 161.2, 2 * trial + 1, passes)
        ratio = paired_ratio(method, base)
        assert ratio.interval is not None
        paired += ratio.interval.contains(true_ratio)
        unpaired = fieller_ratio(method, base)
        fieller += unpaired.interval is not None and unpaired.interval.contains(true_ratio)
    assert 0.90 <= paired / TRIALS <= 0.99
    assert 0.90 <= fieller / TRIALS <= 0.99


@pytest.mark.parametrize("true_ratio", [1.0, 1.02, 1.05, 1.2, 0.95])
def test_no_verdict_claims_a_direction_its_interval_does_not_separate(true_ratio: float) -> None:
    """Across ratios near 1.0, where intervals straddle it often: a verdict names a direction
    exactly when the interval excludes 1.0, and the right one; at a true ratio of 1.0, "faster"
    or "slower" is said at most about as often as a 95 % interval misses."""
    directional = 0
    for trial, make in itertools.product(range(TRIALS // 2), (paired_ratio, fieller_ratio)):
        ratio = make(_passes(NOISE, 100.0 * true_ratio, 2 * trial, 3), _passes(NOISE, 100.0, 2 * trial + 1, 3))
        said = verdict(ratio)
        if ratio.interval is None or ratio.interval.contains(1.0):
            assert said == "not separable"
        else:
            assert said == ("faster" if ratio.interval.low > 1.0 else "slower")
            directional += 1
            if true_ratio != 1.0:
                assert said == ("faster" if true_ratio > 1.0 else "slower"), (trial, ratio)
    if true_ratio == 1.0:
        assert directional / TRIALS <= 0.08


def test_methods_whose_intervals_overlap_are_never_ranked_apart() -> None:
    """Six methods a few percent to 2x apart, three passes each, ranked in every trial: methods
    in different tiers never overlap, tiers come best first, and what is separated is rightly
    ordered against the true throughputs in all but the rare trial an interval misses."""
    true = {"ar": 100.0, "ngram": 101.0, "eagle": 104.0, "dflash": 112.0, "ddtree-b8": 125.0, "ddtree-b16": 200.0}
    misordered = 0
    for trial in range(TRIALS // 2):
        summaries: dict[str, Summary] = {
            name: summarize(_passes(NOISE, tok_s, trial * 16 + i, 3)) for i, (name, tok_s) in enumerate(true.items())
        }
        ranking = rank(summaries)
        assert ranking.unranked == ()
        assert sorted(name for tier in ranking.tiers for name in tier) == sorted(true)
        for upper, lower in itertools.combinations(range(len(ranking.tiers)), 2):
            for a, b in itertools.product(ranking.tiers[upper], ranking.tiers[lower]):
                first, second = summaries[a].interval, summaries[b].interval
                assert first is not None and second is not None and not first.overlaps(second)
                assert first.low > second.high  # the better tier first
                misordered += true[a] < true[b]
    assert misordered <= 2

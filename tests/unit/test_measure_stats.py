"""fleet.measure.stats on hand-made inputs: Student t quantiles against printed tables, summaries,
one pass, percentiles and their MLPerf floor, paired and Fieller ratios, verdicts, rankings."""

from __future__ import annotations

import math

import pytest

from fleet.measure.stats import (
    NO_INTERVAL_ONE_PASS,
    Interval,
    Ratio,
    fieller_ratio,
    paired_ratio,
    percentile_estimate,
    percentile_interval_floor,
    quantile_ranks,
    rank,
    regularized_beta,
    summarize,
    t_cdf,
    t_quantile,
    verdict,
)

# Two-sided 95 % (p = 0.975) and 99 % (p = 0.995) critical values, from a printed t table.
T_TABLE = [
    (0.975, 1, 12.706),
    (0.975, 2, 4.303),
    (0.975, 3, 3.182),
    (0.975, 4, 2.776),
    (0.975, 5, 2.571),
    (0.975, 6, 2.447),
    (0.975, 9, 2.262),
    (0.975, 10, 2.228),
    (0.975, 20, 2.086),
    (0.975, 30, 2.042),
    (0.975, 60, 2.000),
    (0.975, 120, 1.980),
    (0.995, 1, 63.657),
    (0.995, 4, 4.604),
    (0.995, 10, 3.169),
    (0.95, 1, 6.314),
    (0.95, 5, 2.015),
    (0.90, 3, 1.638),
    (0.999, 2, 22.327),
]


@pytest.mark.parametrize(("p", "df", "expected"), T_TABLE)
def test_t_quantile_matches_the_printed_table(p: float, df: int, expected: float) -> None:
    assert t_quantile(p, df) == pytest.approx(expected, abs=6e-4)


def test_t_quantile_is_symmetric_tends_to_the_normal_and_inverts_the_cdf() -> None:
    assert t_quantile(0.025, 7) == -t_quantile(0.975, 7)
    assert t_quantile(0.5, 3) == 0.0
    assert t_quantile(0.975, 1e7) == pytest.approx(1.959964, abs=1e-5)
    for df in (1, 2.5, 7.3, 40):  # Welch's degrees of freedom are not whole
        for p in (0.6, 0.9, 0.975, 0.9995):
            assert t_cdf(t_quantile(p, df), df) == pytest.approx(p, abs=1e-10)
    # I_x(a, 1) = x^a; I_x(1, b) = 1 - (1 - x)^b; I_0.5(a, a) = 0.5
    assert regularized_beta(0.3, 2.5, 1.0) == pytest.approx(0.3**2.5, rel=1e-12)
    assert regularized_beta(0.3, 1.0, 4.0) == pytest.approx(1 - 0.7**4, rel=1e-12)
    assert regularized_beta(0.5, 3.7, 3.7) == pytest.approx(0.5, rel=1e-12)
    with pytest.raises(ValueError):
        t_quantile(1.0, 3)


def test_summary_of_three_passes() -> None:
    s = summarize([98.0, 100.0, 102.0])
    assert (s.n, s.mean, s.median, s.stdev, s.note) == (3, 100.0, 100.0, 2.0, None)
    assert s.cv == pytest.approx(0.02) and not s.noisy
    assert s.interval is not None and s.interval.method == "t"
    half = 4.302653 * 2.0 / math.sqrt(3)
    assert (s.interval.low, s.interval.high) == pytest.approx((100 - half, 100 + half))


def test_a_cv_above_ten_percent_is_noisy() -> None:
    assert summarize([80.0, 100.0, 120.0]).noisy  # CV 0.2
    assert not summarize([95.0, 100.0, 105.0]).noisy  # CV 0.05


def test_one_pass_gives_a_value_and_says_plainly_that_there_is_no_interval() -> None:
    s = summarize([347.9])
    assert (s.n, s.mean, s.median, s.interval, s.stdev, s.cv, s.noisy) == (1, 347.9, 347.9, None, None, None, False)
    assert s.note == NO_INTERVAL_ONE_PASS and "no interval" in s.note
    r = paired_ratio([1061.5], [161.0])
    assert r.interval is None and r.note == NO_INTERVAL_ONE_PASS and r.estimate == pytest.approx(1061.5 / 161.0)
    assert verdict(r) == "not separable"
    assert fieller_ratio([1061.5], [161.0, 160.0]).interval is None


def test_bad_input_is_refused_with_its_reason() -> None:
    with pytest.raises(ValueError, match="no measurements"):
        summarize([])
    with pytest.raises(ValueError, match="finite"):
        summarize([1.0, math.nan])
    with pytest.raises(ValueError, match="positive"):
        paired_ratio([1.0, 0.0], [1.0, 1.0])
    with pytest.raises(ValueError, match="same count"):
        paired_ratio([1.0, 2.0], [1.0])


def test_paired_ratio_is_the_exponentiated_t_interval_of_log_ratios() -> None:
    method, base = [210.0, 190.0, 205.0, 199.0], [100.0, 96.0, 101.0, 99.0]
    logs = [math.log(m / b) for m, b in zip(method, base)]
    mean = sum(logs) / 4
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / 3)
    half = t_quantile(0.975, 3) * sd / 2
    r = paired_ratio(method, base)
    assert r.method == "paired" and r.n == 4
    assert r.estimate == pytest.approx(math.exp(mean))
    assert r.interval is not None
    assert (r.interval.low, r.interval.high) == pytest.approx((math.exp(mean - half), math.exp(mean + half)))


def test_fieller_interval_solves_its_quadratic_and_is_asymmetric() -> None:
    method, base = [200.0, 210.0, 190.0], [100.0, 110.0, 90.0]
    r = fieller_ratio(method, base)
    assert r.method == "fieller" and r.estimate == pytest.approx(2.0)
    assert r.interval is not None and r.interval.low < 2.0 < r.interval.high
    # At either end the t statistic of mean(a) - rho * mean(b) is exactly the critical value.
    va, vb = 100.0 / 3, 100.0 / 3
    for rho in (r.interval.low, r.interval.high):
        spread = va + 4.0 * vb  # Welch's df is taken at the estimate, rho = 2
        df = spread**2 / (va**2 / 2 + (4.0 * vb) ** 2 / 2)
        assert abs(200.0 - rho * 100.0) / math.sqrt(va + rho * rho * vb) == pytest.approx(t_quantile(0.975, df), rel=1e-9)
    assert r.interval.high - 2.0 > 2.0 - r.interval.low  # a ratio's interval leans upwards


def test_fieller_says_when_no_bounded_interval_exists() -> None:
    r = fieller_ratio([10.0, 11.0], [0.1, 20.0])
    assert r.interval is None and r.note is not None and "not separable from zero" in r.note
    assert verdict(r) == "not separable"


def _ratio(low: float, high: float) -> Ratio:
    return Ratio((low + high) / 2, Interval(low, high, 0.95, "test"), 3, "paired", None)


def test_verdict_names_a_direction_only_when_the_interval_excludes_one() -> None:
    assert verdict(_ratio(1.02, 1.3)) == "faster"
    assert verdict(_ratio(0.7, 0.98)) == "slower"
    assert verdict(_ratio(0.9, 1.2)) == "not separable"
    assert verdict(_ratio(1.0, 1.2)) == "not separable"  # touching 1.0 is not excluding it
    # Latency ratios: below 1 is faster.
    assert verdict(_ratio(0.7, 0.98), larger_is_faster=False) == "faster"
    assert verdict(_ratio(1.02, 1.3), larger_is_faster=False) == "slower"


def test_rank_groups_chains_of_overlapping_intervals_and_leaves_single_passes_unranked() -> None:
    methods = {
        "ddtree-b16": _ratio(5.9, 7.1),
        "ddtree-b15": _ratio(5.5, 6.0),  # overlaps b16
        "dflash": _ratio(3.0, 3.4),
        "eagle": _ratio(3.3, 3.6),  # overlaps dflash ...
        "ngram": _ratio(3.55, 3.7),  # ... and overlaps eagle but not dflash: still one tier
        "ar": _ratio(0.97, 1.03),
        "single": Ratio(9.0, None, 1, "paired", NO_INTERVAL_ONE_PASS),
    }
    ranking = rank(methods)
    assert ranking.tiers == (("ddtree-b16", "ddtree-b15"), ("ngram", "eagle", "dflash"), ("ar",))
    assert ranking.unranked == ("single",)
    assert rank(methods, larger_is_better=False).tiers == (("ar",), ("dflash", "eagle", "ngram"), ("ddtree-b15", "ddtree-b16"))
    assert rank({}).tiers == ()


def test_percentile_floor_follows_mlperfs_binomial_rule() -> None:
    assert [percentile_interval_floor(q) for q in (50, 90, 95, 99)] == [7, 44, 90, 459]
    for q in (50, 90, 95, 99):
        n = percentile_interval_floor(q)
        assert (q / 100) ** n <= 0.01 < (q / 100) ** (n - 1)


def test_percentile_estimate_withholds_below_the_floors_and_bounds_by_order_statistics_above() -> None:
    few = [[float(i) for i in range(100)], [float(i) for i in range(100, 200)]]
    p99 = percentile_estimate(few, 99)
    assert p99.n == 200 and p99.value is not None and p99.interval is None
    assert p99.note is not None and "459" in p99.note
    tiny = percentile_estimate([[1.0, 2.0, 3.0]], 99)
    assert tiny.value is None and tiny.note is not None and "withheld" in tiny.note
    with pytest.raises(ValueError, match="withheld"):
        tiny.estimate
    many = [[float((i * 37 + k) % 1000) for i in range(300)] for k in range(3)]
    first = percentile_estimate(many, 99)
    assert first == percentile_estimate(many, 99)  # deterministic: no resampling
    assert first.interval is not None and first.interval.method == "order statistic"
    assert first.interval.low <= first.estimate <= first.interval.high
    pooled = sorted(v for values in many for v in values)
    ranks = quantile_ranks(900, 0.99)
    assert ranks is not None and (first.interval.low, first.interval.high) == (pooled[ranks[0] - 1], pooled[ranks[1] - 1])
    median = percentile_estimate(many, 50)
    assert median.interval is not None and median.interval.low < 500 < median.interval.high


def _binomial_cdf(k: int, n: int, p: float) -> float:
    """P(B <= k), B ~ Binomial(n, p), summed term by term in exact integers and floats."""
    return sum(math.comb(n, j) * p**j * (1 - p) ** (n - j) for j in range(0, k + 1)) if k >= 0 else 0.0


@pytest.mark.parametrize("p", [0.5, 0.9, 0.95, 0.99, 0.1])
def test_quantile_ranks_are_the_equal_tailed_binomial_ranks(p: float) -> None:
    """Against the binomial summed in full: each tail outside [l, u) holds at most 2.5 %, and
    neither rank could move inward without breaking that (the interval is as tight as its rule)."""
    for n in [*range(1, 120), 367, 368, 459, 1000]:
        ranks = quantile_ranks(n, p)
        lower_ok = (1 - p) ** n <= 0.025  # P(B < 1): X_(1) bounds from below only if that is small
        upper_ok = p**n <= 0.025  # P(B >= n): X_(n) bounds from above only if that is small
        if not (lower_ok and upper_ok):
            assert ranks is None, (n, p)
            continue
        assert ranks is not None, (n, p)
        low, high = ranks
        assert 1 <= low < high <= n
        below, above = _binomial_cdf(low - 1, n, p), 1 - _binomial_cdf(high - 1, n, p)
        assert below <= 0.025 + 1e-12 and above <= 0.025 + 1e-12
        assert _binomial_cdf(low, n, p) > 0.025 - 1e-12  # l + 1 would leave more than 2.5 % below
        assert 1 - _binomial_cdf(high - 2, n, p) > 0.025 - 1e-12  # so would u - 1 above
        assert 1 - below - above >= 0.95 - 1e-12


def test_a_sample_too_small_for_the_percentile_gets_no_interval_and_says_so() -> None:
    """p99 needs 459 requests for an interval (MLPerf's rule); 458 get the value and a note that
    no interval can be given, never one made up of the sample's maximum. The order statistics
    themselves run out at 367 requests for p99 at 95 % (0.99^367 > 2.5 %), and at any size for a
    level the sample cannot reach: the note says that too."""
    values = [[float(i) for i in range(458)]]
    short = percentile_estimate(values, 99)
    assert short.value is not None and short.interval is None
    assert short.note is not None and short.note.startswith("no interval") and "459" in short.note
    enough = percentile_estimate([[float(i) for i in range(459)]], 99)
    assert enough.interval is not None and enough.note is None and enough.interval.high <= 458.0
    assert quantile_ranks(367, 0.99) is None and quantile_ranks(368, 0.99) == (360, 368)
    strict = percentile_estimate([[float(i) for i in range(459)]], 99, level=0.999)
    assert strict.value is not None and strict.interval is None
    assert strict.note is not None and "no order statistics" in strict.note
    with pytest.raises(ValueError, match="quantile ranks"):
        quantile_ranks(0, 0.5)


def test_edges_identical_passes_and_refused_arguments() -> None:
    assert regularized_beta(0.0, 2.0, 3.0) == 0.0 and regularized_beta(1.0, 2.0, 3.0) == 1.0
    steady = fieller_ratio([200.0, 200.0], [100.0, 100.0])
    assert steady.interval is not None and (steady.interval.low, steady.interval.high) == (2.0, 2.0)
    assert summarize([5.0, 5.0]).interval == Interval(5.0, 5.0, 0.95, "t")
    with pytest.raises(ValueError, match="degrees of freedom"):
        t_quantile(0.9, 0)
    with pytest.raises(ValueError, match="exclusive"):
        percentile_interval_floor(100)

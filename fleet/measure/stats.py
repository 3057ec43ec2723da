"""Repeated measurements of a figure, and what they support. Pure; standard library only (numpy
and scipy are not dependencies of fleet).

A *pass* is one measurement of a figure: one workload pass on a server (output tok/s, a mean
TTFT, an acceptance length...). From n passes:

- `summarize`: n, mean, median, the sample standard deviation, a 95 % Student t-interval of the
  mean, the coefficient of variation and a `noisy` flag (CV above 10 %). The t-interval promises
  95 % coverage of the true mean when pass-to-pass variation is roughly normal; it is the interval
  AIPerf reports over its profile runs, and with 2-10 passes there is nothing better to lean on
  (a bootstrap of 3 values has 10 distinct resamples). One pass gives the value and no interval,
  and says so (`Summary.note`), never a zero-width interval.
- `percentile_estimate`: a latency percentile of the requests pooled over passes, with a
  distribution-free order-statistic interval (binomial ranks, `quantile_ranks`), withheld below
  the sample size MLPerf's binomial rule asks for.
- `paired_ratio` / `fieller_ratio`: a speed-up as a ratio with its own interval.
- `verdict` and `rank`: "faster"/"slower" and rank order only where intervals separate.

Student's t quantiles are computed here (`t_quantile`) from the regularized incomplete beta
function; tests check them against printed tables.
"""

from __future__ import annotations

import functools
import math
import statistics
from dataclasses import dataclass
from typing import Literal, Mapping, Protocol, Sequence

from fleet.host.agent.stats import min_samples, percentile

LEVEL = 0.95
NOISY_CV = 0.10  # a coefficient of variation above this flags a figure as noisy
NO_INTERVAL_ONE_PASS = "one pass: no interval can be given (an interval needs at least 2 passes)"

Verdict = Literal["faster", "slower", "not separable"]


# --- Student's t ---------------------------------------------------------------------------------


def _beta_continued_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz's method, as in
    Numerical Recipes' betacf); converges quickly for x < (a + 1) / (a + b + 2)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    fraction = d
    for m in range(1, 1000):
        step = m * (b - m) * x / ((a - 1.0 + 2 * m) * (a + 2 * m))
        d = 1.0 + step * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + step / c
        c = c if abs(c) > tiny else tiny
        fraction *= d * c
        step = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 1.0 + 2 * m))
        d = 1.0 + step * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + step / c
        c = c if abs(c) > tiny else tiny
        change = d * c
        fraction *= change
        if abs(change - 1.0) < 1e-15:
            break
    return fraction


def regularized_beta(x: float, a: float, b: float) -> float:
    """I_x(a, b), the regularized incomplete beta function, for a, b > 0 and 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    front = math.exp(log_front)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_continued_fraction(a, b, x) / a
    return 1.0 - front * _beta_continued_fraction(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with `df` (> 0, not necessarily whole) degrees of freedom."""
    tail = 0.5 * regularized_beta(df / (df + t * t), df / 2.0, 0.5)
    return 1.0 - tail if t > 0 else tail


@functools.lru_cache(maxsize=4096)
def t_quantile(p: float, df: float) -> float:
    """The p-quantile of Student's t with `df` degrees of freedom: the t with P(T <= t) = p,
    found by bisection on `t_cdf` to about 1e-12 relative (t_quantile(0.975, 4) = 2.776...)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"a quantile needs 0 < p < 1, got {p}")
    if df <= 0:
        raise ValueError(f"degrees of freedom must be positive, got {df}")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    if p == 0.5:
        return 0.0
    low, high = 0.0, 1.0
    while t_cdf(high, df) < p:
        low, high = high, high * 2.0
    while high - low > 1e-12 * high:
        middle = (low + high) / 2.0
        if t_cdf(middle, df) < p:
            low = middle
        else:
            high = middle
    return (low + high) / 2.0


# --- intervals and summaries ---------------------------------------------------------------------


@dataclass(frozen=True)
class Interval:
    """A confidence interval [low, high] at `level` (0.95: 95 %), and how it was computed."""

    low: float
    high: float
    level: float
    method: str

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high

    def overlaps(self, other: Interval) -> bool:
        return self.low <= other.high and other.low <= self.high


class Estimated(Protocol):
    """A point estimate with its interval, if any (a Summary's mean, a Ratio)."""

    @property
    def estimate(self) -> float: ...

    @property
    def interval(self) -> Interval | None: ...


@dataclass(frozen=True)
class Summary:
    """n passes of a figure. `interval` is the t-interval of the mean (None for one pass, `note`
    says why); `cv` is stdev / |mean| (None for one pass or a zero mean); `noisy` is CV > 10 %."""

    n: int
    mean: float
    median: float
    stdev: float | None
    cv: float | None
    noisy: bool
    interval: Interval | None
    note: str | None

    @property
    def estimate(self) -> float:
        return self.mean


def _checked(values: Sequence[float], what: str) -> list[float]:
    checked = [float(v) for v in values]
    if not checked:
        raise ValueError(f"{what}: no measurements")
    bad = [v for v in checked if not math.isfinite(v)]
    if bad:
        raise ValueError(f"{what}: measurements must be finite numbers, got {bad[0]!r}")
    return checked


def _variance(values: Sequence[float], mean: float) -> float:
    """The sample variance (n - 1), in floats: two passes, the squares summed with fsum (error of a
    few ulps, where statistics.variance's exact fractions cost ~90 us for 3 values, most of a
    10k-cell report's figures); exactly 0 for identical values, as a zero-width interval needs."""
    if all(v == values[0] for v in values):
        return 0.0
    return math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1)


def summarize(values: Sequence[float], level: float = LEVEL) -> Summary:
    """Mean, median, t-interval of the mean, CV and the noisy flag of repeated passes. The
    interval is mean +- t_{(1+level)/2, n-1} * s / sqrt(n): 95 % coverage of the true mean for
    normal pass-to-pass variation, close to it for the few-percent lognormal jitter of throughput."""
    passes = _checked(values, "summarize")
    n = len(passes)
    mean = statistics.fmean(passes)
    median = statistics.median(passes)
    if n == 1:
        return Summary(n, mean, median, None, None, False, None, NO_INTERVAL_ONE_PASS)
    stdev = math.sqrt(_variance(passes, mean))
    half = t_quantile((1.0 + level) / 2.0, n - 1) * stdev / math.sqrt(n)
    cv = stdev / abs(mean) if mean != 0 else None
    interval = Interval(mean - half, mean + half, level, "t")
    return Summary(n, mean, median, stdev, cv, cv is not None and cv > NOISY_CV, interval, None)


# --- percentiles ---------------------------------------------------------------------------------

# MLPerf Inference's confidence for tail-latency claims (its minimum query counts and LoadGen's
# early-stopping rule both test at 99 %).
_MLPERF_CONFIDENCE = 0.99


def percentile_interval_floor(q: float) -> int:
    """The fewest pooled requests for which `percentile_estimate` gives an interval for the q-th
    percentile: the smallest n with (max(q, 100 - q)/100)^n <= 1 - 0.99, i.e. p50: 7, p90: 44,
    p95: 90, p99: 459.

    Why: MLPerf Inference judges a tail-latency percentile by the binomial count of queries beyond
    it, at 99 % confidence (its minimum query counts and LoadGen's early-stopping rule). With n
    requests and none beyond the reported value, the claim "the true q-th percentile is at most
    the sample's largest value" holds at 99 % confidence only when the chance that all n land
    below the true percentile, (q/100)^n, is at most 1 %: for p99 that is 459 requests, the
    figure LoadGen's early stopping asks for with no over-bound query. Fewer requests than that
    cannot bound the tail even by their maximum, so an interval from them would promise what the
    data cannot give. Below the median the same rule holds for the lower tail ((1 - q/100)^n).
    At this floor the 95 % order-statistic interval always exists (each tail's 1 % <= 2.5 %)."""
    if not 0 < q < 100:
        raise ValueError(f"percentile q must be within 0..100 (exclusive), got {q}")
    return math.ceil(math.log(1.0 - _MLPERF_CONFIDENCE) / math.log(max(q, 100.0 - q) / 100.0) - 1e-9)


@functools.lru_cache(maxsize=4096)
def quantile_ranks(n: int, p: float, level: float = LEVEL) -> tuple[int, int] | None:
    """The ranks (1-based) of the order statistics X_(l) <= X_(u) of n values that bound their
    distribution's p-quantile with probability at least `level`, whatever the distribution (a
    continuous one; ties only widen the closed interval); None where n is too small for any.

    X_(l) <= x_p exactly when at least l of the n values lie at or below x_p, and X_(u) >= x_p
    when fewer than u do; that count B is Binomial(n, p), so the interval covers x_p with
    probability P(l <= B < u) = 1 - P(B < l) - P(B >= u). Each tail is held to (1 - level)/2: l is
    the largest rank with P(B < l) <= (1 - level)/2, u the smallest with P(B >= u) <= (1 - level)/2.
    No l >= 1 exists where (1 - p)^n exceeds the tail, no u <= n where p^n does (p99 of fewer than
    368 values, at 95 %): then None, not an interval made up beyond the sample.

    The binomial is summed exactly (log-gamma terms) over n*p +- (12 sd + 40), where all but
    about 1e-25 of its mass lies (Bernstein's inequality): O(sqrt(n)) work, cached per (n, p,
    level), so a report's cells of equal size share it."""
    if n < 1 or not 0.0 < p < 1.0 or not 0.0 < level < 1.0:
        raise ValueError(f"quantile ranks need n >= 1, 0 < p < 1 and 0 < level < 1; got n={n}, p={p}, level={level}")
    tail = (1.0 - level) / 2.0
    mean, sd = n * p, math.sqrt(n * p * (1.0 - p))
    width = 12.0 * sd + 40.0
    low, high = max(0, math.floor(mean - width)), min(n, math.ceil(mean + width))
    front, log_p, log_q = math.lgamma(n + 1.0), math.log(p), math.log1p(-p)
    pmf = [math.exp(front - math.lgamma(k + 1.0) - math.lgamma(n - k + 1.0) + k * log_p + (n - k) * log_q) for k in range(low, high + 1)]
    # l: the first k with P(B <= k) > tail; then P(B < k) <= tail and X_(k) is the lower bound.
    below, k = 0.0, low
    while below + pmf[k - low] <= tail:
        below += pmf[k - low]
        k += 1
    lower = k
    # u: from the top, the last j with P(B >= j) <= tail.
    above, j = 0.0, high
    while above + pmf[j - low] <= tail:
        above += pmf[j - low]
        j -= 1
    upper = j + 1
    if lower < 1 or upper > n:
        return None
    return lower, upper


@dataclass(frozen=True)
class PercentileEstimate:
    """The q-th percentile of requests pooled over passes. `value` is None below the per-run rule's
    `min_samples(q)`; `interval` is None below `percentile_interval_floor(q)`; `note` says which."""

    q: float
    n: int
    value: float | None
    interval: Interval | None
    note: str | None

    @property
    def estimate(self) -> float:
        if self.value is None:
            raise ValueError(f"p{self.q:g} of {self.n} requests is withheld: {self.note}")
        return self.value


def percentile_estimate(passes: Sequence[Sequence[float]], q: float, level: float = LEVEL) -> PercentileEstimate:
    """The q-th percentile (numpy's linear definition, `fleet.host.agent.stats.percentile`) of the
    requests of all passes pooled, with a distribution-free order-statistic interval
    (`quantile_ranks`): [X_(l), X_(u)] of the pooled, sorted requests. One sort, O(n log n);
    deterministic; its coverage is exact binomial arithmetic, not a resampling estimate.

    It assumes the pooled requests are independent draws of the distribution whose percentile is
    reported. Where passes differ (a slower server start), that is the mixture of the passes with
    their own weights, and the count of requests below its percentile is a sum of binomials with
    different p, which is more concentrated about n*p than Binomial(n, p) (Hoeffding, 1956, for
    count ranges from at most n*p - 1 to at least n*p, as these ranks' are): the interval stays
    at least as wide as it needs to be. Pass-to-pass drift of a percentile itself shows in
    `summarize` over the per-pass percentiles, not here. It replaces a stratified bootstrap of
    1,000 resamples: about 23 ms a cell, most of a 10k-result report's time, and its coverage of
    a lognormal p90 from 3 passes of 30 requests measured 93.4 % of 1,000 samples, where this
    interval's is 96.7 % exactly (97.3 % measured).

    Withheld below `percentile_interval_floor(q)` (MLPerf's rule), and where no order statistics
    bound the percentile at `level` (a level above the floor's 99 %): the note says so."""
    groups = [_checked(values, f"p{q:g}") for values in passes if len(values)]
    ordered = sorted(value for group in groups for value in group)
    n = len(ordered)
    if n < min_samples(q):
        return PercentileEstimate(q, n, None, None, f"withheld: p{q:g} needs at least {min_samples(q)} requests, got {n}")
    value = percentile(ordered, q)  # re-sorting sorted values is one linear pass
    floor = percentile_interval_floor(q)
    if n < floor:
        return PercentileEstimate(q, n, value, None, f"no interval: p{q:g} needs at least {floor} requests for one (MLPerf's 99 % binomial rule), got {n}")
    ranks = quantile_ranks(n, q / 100.0, level)
    if ranks is None:
        return PercentileEstimate(q, n, value, None, f"no interval: {n} requests have no order statistics bounding p{q:g} at {level * 100:g} %")
    interval = Interval(ordered[ranks[0] - 1], ordered[ranks[1] - 1], level, "order statistic")
    return PercentileEstimate(q, n, value, interval, None)


# --- ratios --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ratio:
    """numerator / denominator (a speed-up: method over baseline) with its interval. `n`: pairs
    (paired) or the smaller sample (Fieller). `interval` None: `note` says why (one pass; an
    unbounded Fieller set)."""

    estimate: float
    interval: Interval | None
    n: int
    method: Literal["paired", "fieller"]
    note: str | None


def _positive(values: Sequence[float], what: str) -> list[float]:
    checked = _checked(values, what)
    if any(v <= 0 for v in checked):
        raise ValueError(f"{what}: a ratio needs positive measurements, got {min(checked)!r}")
    return checked


def paired_ratio(numerator: Sequence[float], denominator: Sequence[float], level: float = LEVEL) -> Ratio:
    """The ratio of passes paired by the prompts they sent (pass i of the method and pass i of
    the baseline sent the same requests): a t-interval on the log ratios ln(num_i / den_i),
    exponentiated. The estimate is their geometric mean.

    Why logs: a speed-up is multiplicative, its log is symmetric (2x and 0.5x are equally far
    from 1) and throughput jitter is close to lognormal, so the log ratios are close to normal
    and the t-interval's promise (95 % coverage of the true ratio) holds at few passes. Pairing
    removes what the pair shares (the prompts' lengths and kinds), so the interval is tighter
    than an unpaired one whenever the pairs are positively correlated, and never needs the
    baseline's mean to be far from zero (Fieller's condition)."""
    method = _positive(numerator, "paired ratio numerator")
    base = _positive(denominator, "paired ratio denominator")
    if len(method) != len(base):
        raise ValueError(f"paired ratio: {len(method)} passes against {len(base)}; pairs need the same count")
    logs = [math.log(m / b) for m, b in zip(method, base)]
    n = len(logs)
    centre = statistics.fmean(logs)
    if n == 1:
        return Ratio(math.exp(centre), None, 1, "paired", NO_INTERVAL_ONE_PASS)
    half = t_quantile((1.0 + level) / 2.0, n - 1) * math.sqrt(_variance(logs, centre)) / math.sqrt(n)
    interval = Interval(math.exp(centre - half), math.exp(centre + half), level, "paired log-ratio t")
    return Ratio(math.exp(centre), interval, n, "paired", None)


def fieller_ratio(numerator: Sequence[float], denominator: Sequence[float], level: float = LEVEL) -> Ratio:
    """The ratio of the means of two independent sets of passes (different prompts, or servers
    not run side by side), with Fieller's interval: every rho for which mean(num) - rho *
    mean(den) = 0 is not rejected by a t-test at 1 - level (Welch's degrees of freedom at the
    estimate, the means' variances s^2/n, no covariance).

    Why Fieller and not a bootstrap: with the 2-5 passes fleet runs, a bootstrap's resampling
    distribution is coarse (3 passes give 10 distinct resamples) and it undercovers; Fieller's
    interval is exact for normal means, deterministic, asymmetric where a ratio is, and says
    honestly when no bounded interval exists (the baseline's mean not separable from zero:
    `interval` None, with a note) instead of producing a misleading one."""
    method = _positive(numerator, "ratio numerator")
    base = _positive(denominator, "ratio denominator")
    a, b = statistics.fmean(method), statistics.fmean(base)
    estimate = a / b
    n = min(len(method), len(base))
    if n == 1:
        return Ratio(estimate, None, n, "fieller", NO_INTERVAL_ONE_PASS)
    va = _variance(method, a) / len(method)
    vb = _variance(base, b) / len(base)
    spread = va + estimate * estimate * vb
    if spread == 0:
        return Ratio(estimate, Interval(estimate, estimate, level, "Fieller"), n, "fieller", None)
    df = spread * spread / (va * va / (len(method) - 1) + (estimate**2 * vb) ** 2 / (len(base) - 1))
    t2 = t_quantile((1.0 + level) / 2.0, df) ** 2
    lead = b * b - t2 * vb
    if lead <= 0:
        return Ratio(estimate, None, n, "fieller", "no bounded interval: the baseline's mean is not separable from zero")
    root = math.sqrt(t2 * (a * a * vb + b * b * va - t2 * va * vb))
    interval = Interval((a * b - root) / lead, (a * b + root) / lead, level, "Fieller")
    return Ratio(estimate, interval, n, "fieller", None)


# --- verdicts and rankings -----------------------------------------------------------------------


def verdict(ratio: Ratio, *, larger_is_faster: bool = True) -> Verdict:
    """ "faster" or "slower" only where the ratio's interval excludes 1.0; otherwise (an interval
    containing 1.0, or no interval at all: one pass, an unbounded Fieller set) "not separable".
    `larger_is_faster`: True for throughput ratios, False for latency ratios."""
    interval = ratio.interval
    if interval is None or interval.contains(1.0):
        return "not separable"
    above = interval.low > 1.0
    return "faster" if above == larger_is_faster else "slower"


@dataclass(frozen=True)
class Ranking:
    """Methods in tiers, best first. Two methods are in different tiers only where their
    intervals separate; a tier is a chain of overlapping intervals (A overlaps B, B overlaps C:
    one tier, even if A and C alone would separate), so no two overlapping methods are ever
    ranked apart. Within a tier names are listed by estimate, which is not a ranking.
    `unranked`: methods without an interval (one pass), ranked against nothing."""

    tiers: tuple[tuple[str, ...], ...]
    unranked: tuple[str, ...]


def rank(methods: Mapping[str, Estimated], *, larger_is_better: bool = True) -> Ranking:
    """Rank methods by their intervals (see Ranking). Non-overlap of two 95 % intervals is a
    conservative test of a difference (stricter than a 5 % test), which is the side to err on
    when a table says one method beats another; a paired ratio between two methods is the
    sharper test and `verdict` gives it."""
    sign = -1.0 if larger_is_better else 1.0
    with_interval: list[tuple[str, Interval, float]] = []
    unranked: list[str] = []
    for name, method in methods.items():
        if method.interval is None:
            unranked.append(name)
        else:
            with_interval.append((name, method.interval, method.estimate))
    with_interval.sort(key=lambda item: (item[1].low, item[1].high))
    groups: list[list[tuple[str, Interval, float]]] = []
    reach = -math.inf
    for item in with_interval:
        if groups and item[1].low <= reach:
            groups[-1].append(item)
            reach = max(reach, item[1].high)
        else:
            groups.append([item])
            reach = item[1].high
    if larger_is_better:
        groups.reverse()
    tiers = tuple(tuple(name for name, _, _ in sorted(group, key=lambda item: (sign * item[2], item[0]))) for group in groups)
    return Ranking(tiers, tuple(sorted(unranked)))

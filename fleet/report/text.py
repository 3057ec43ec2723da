"""Figures as text, one way for every format: numbers, figures with their 95 % intervals,
percentiles with their n, speed-ups and their verdicts, statuses. A value that is not a measurement prints as "—", never as 0."""

from __future__ import annotations

import datetime as _dt

from fleet.host.agent.stats import min_samples
from fleet.measure.stats import NOISY_CV, PercentileEstimate, Ratio, Summary, Verdict, percentile_interval_floor
from fleet.report.model import Cell, Comparison, Crossover, Headline, Standing

DASH = "—"
ONE_PASS = "one pass: no interval can be given"
PERCENTILE_RULE = (
    "A TTFT percentile pools the requests of every pass of a cell, with a distribution-free 95 % interval: "
    "two of the pooled requests' own order statistics, chosen from the binomial count of requests below the "
    "percentile so that they bound it with at least 95 % probability. It is stated only where the sample "
    f"supports it: p50 needs {min_samples(50)} "
    f"requests, p90 {min_samples(90)}, p99 {min_samples(99)} (else 'withheld'); its interval needs "
    f"{percentile_interval_floor(50)}, {percentile_interval_floor(90)} and {percentile_interval_floor(99)} "
    "(MLPerf's 99 % binomial rule: fewer requests cannot bound the tail even by their maximum). An ITL "
    "percentile is each pass's own (results keep no per-token times), summarized over passes."
)
ONE_PASS_NOTE = (
    "One pass per configuration: no interval can be given (an interval needs at least 2 passes), so no "
    "speed-up below is called faster or slower and no method is ranked. Set `repeats: 3` (or more) in the "
    "playbook for figures with intervals."
)
GLANCE_NOTE = (
    "Fastest: the top tier of the ranking at the workload's lowest level; 'not separable from it': the methods "
    "whose throughput intervals overlap its tier. Speculative decoding stops paying at the lowest concurrency "
    "where no speculative speed-up interval lies wholly above 1.0."
)
INTERVAL_NOTE = (
    "Every figure is the mean of a cell's passes (its runs' repeats, and the same run in several sweeps) with "
    "its 95 % Student t-interval in brackets; CV is the passes' standard deviation over their mean, 'noisy' "
    f"above {NOISY_CV * 100:.0f} %. One pass gives the value and says that no interval can be given."
)
RATIO_NOTE = (
    "A speed-up (and a change against a baseline) is a ratio with its own 95 % interval: paired by pass where "
    "both sides hold the same passes (same sweep and repeat number: the same prompts), a t-interval of the log "
    "ratios, which removes what a pair shares; Fieller's interval for the ratio of two independent means "
    "otherwise (other sweeps, other passes), which is exact for normal means and says when no bounded interval exists."
)
VERDICT_NOTE = (
    "A method is called faster or slower only where its speed-up interval excludes 1.0; otherwise 'not "
    "separable'. Methods are ranked in tiers only where their throughput intervals separate: methods whose "
    "intervals overlap share a tier ('tied')."
)
BASELINE_NOTE = (
    "A change is flagged (faster, slower) only where the 95 % interval of now/then excludes 1.0 (no change); "
    "otherwise it is 'not separable' from the noise."
)
SIM_NOTE = (
    "Simulated runs (the `sim` engine) report durations and rates in simulated time: wall seconds "
    "divided by the host's sim_speed. They are marked simulated wherever they appear and only "
    "compare with other simulated figures."
)
ACCEPTANCE_NOTE = (
    "Acceptance length: accepted tokens per verify step, as SGLang counts it for the server "
    "(the prefill token is not counted): sum(completion_tokens - 1) / sum(spec_verify_ct) over the run's requests."
)


def number(value: float | None, digits: int = 1) -> str:
    return DASH if value is None else f"{value:,.{digits}f}"


def when(epoch: float | None) -> str:
    if epoch is None:
        return DASH
    return _dt.datetime.fromtimestamp(epoch, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _bounds(low: float, high: float, digits: int, scale: float = 1.0) -> str:
    return f"[{low * scale:,.{digits}f}–{high * scale:,.{digits}f}]"


def summary(figure: Summary | None, digits: int = 1, scale: float = 1.0, unit: str = "") -> str:
    """A figure over passes: its mean and 95 % interval, or the value of one pass and why no interval."""
    if figure is None:
        return DASH
    mean = f"{figure.mean * scale:,.{digits}f}{unit}"
    if figure.interval is None:
        return f"{mean} ({ONE_PASS})"
    # Every figure reported is a rate, a duration or a length: a t-interval of a few skewed passes
    # can reach below zero, where no value can be.
    return f"{mean} {_bounds(max(0.0, figure.interval.low), figure.interval.high, digits, scale)}"


def cv(figure: Summary | None) -> str:
    if figure is None or figure.cv is None:
        return DASH
    return f"{figure.cv * 100:.1f}%" + (" noisy" if figure.noisy else "")


def ratio(value: Ratio | None) -> str:
    """A speed-up with its 95 % interval, or the estimate and why it has none."""
    if value is None:
        return DASH
    if value.interval is None:
        return f"{value.estimate:.2f}× ({ONE_PASS if value.n == 1 else 'no bounded interval'})"
    return f"{value.estimate:.2f}× {_bounds(value.interval.low, value.interval.high, 2)}"


def verdict(value: Verdict | None) -> str:
    """The only words that call a method faster or slower: the verdict of its interval."""
    return DASH if value is None else value


def standing(value: Standing | None) -> str:
    if value is None:
        return DASH
    return f"{value.tier}" if value.shared == 1 else f"{value.tier} (tied, {value.shared})"


def ttft(estimate: PercentileEstimate | None) -> str:
    """A pooled TTFT percentile in ms with its interval and n; withheld below the sample-size rule."""
    if estimate is None:
        return DASH
    if estimate.value is None:
        return f"withheld (n={estimate.n} < {min_samples(estimate.q)})"
    value = f"{estimate.value * 1000:,.1f} ms"
    if estimate.interval is None:
        return f"{value} (n={estimate.n}, no interval < {percentile_interval_floor(estimate.q)})"
    return f"{value} {_bounds(estimate.interval.low, estimate.interval.high, 1, 1000)} (n={estimate.n})"


def status(cell: Cell) -> str:
    parts = [f"{name} ×{count}" if count > 1 else name for name, count in sorted(cell.statuses.items())]
    text = ", ".join(parts)
    fixes = sorted({r.fix for r in cell.measured if r.fix})
    if fixes:
        # A fixed variant runs other settings than the playbook's: say which, next to its figures.
        text += f" (fixed variant: {'; '.join(fixes)})"
    if cell.queued:
        text += " (level above the server's max_running_requests: queued)"
    return text


def level(value: int) -> str:
    return str(value) if value else DASH


def delta(comparison: Comparison) -> str:
    """now/then - 1 in percent, with its 95 % interval."""
    r = comparison.ratio
    change = f"{(r.estimate - 1) * 100:+.1f}%"
    if r.interval is None:
        return f"{change} ({ONE_PASS if r.n == 1 else 'no bounded interval'})"
    return f"{change} [{(r.interval.low - 1) * 100:+.1f}%, {(r.interval.high - 1) * 100:+.1f}%]"


def crossover(value: Crossover | None) -> str:
    if value is None:
        return "— (no concurrency levels)"
    if value.unknown_from is not None:
        return f"cannot tell from concurrency {value.unknown_from} ({ONE_PASS})"
    if value.level is None:
        return f"not reached up to {value.top}: try levels {list(value.next_levels)}"
    return f"at concurrency {value.level}: no speculative speed-up interval lies above 1.0 there"


def headline_fastest(headline: Headline) -> str:
    where = f" at concurrency {headline.level}" if headline.level else ""
    if headline.fastest is None:
        leader = headline.leader
        estimate = f" {leader.speedup.estimate:.2f}×" if leader is not None and leader.speedup is not None else ""
        named = f"{leader.key.variant}{estimate}" if leader is not None else DASH
        return f"not ranked{where} ({ONE_PASS}); highest estimate: {named}"
    cell = headline.fastest
    if cell.speedup is None:
        return f"{cell.key.variant}{where}: no speculative method is faster by its interval"
    return f"{cell.key.variant}{where}: {ratio(cell.speedup)} over autoregressive ({verdict(cell.verdict)}, {cell.speedup.method})"


def headline_tied(headline: Headline) -> str:
    if headline.fastest is None:
        return DASH
    return ", ".join(f"{c.key.variant} {ratio(c.speedup)}" if c.speedup else c.key.variant for c in headline.tied) or "— (its interval separates)"


def short(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def dollars(value: float | None) -> str:
    """$ per million tokens: cents where it is small, never 0 for a figure that is not one."""
    if value is None:
        return DASH
    return f"${value:.3f}" if value < 1 else f"${value:,.2f}"

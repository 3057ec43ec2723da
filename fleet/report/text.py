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
    "Fastest: separably faster than every other method by the paired ratio of the two (95 % interval above 1.0; "
    "against autoregressive that ratio is the speed-up shown); otherwise 'tie:', the methods none of which is "
    "separable from another, not ranked. '1st ÷ 2nd': that ratio for the two highest estimates. A concurrency "
    "workload is shown at its lowest and highest level measured for both autoregressive and a speculative method; "
    "speculative decoding stops paying at the lowest such level where no speculative speed-up interval lies wholly above 1.0."
)
ENERGY_NOTE = (
    "tok/J: energy is read once per run (per level and pass of a concurrency run), not per pass, so a workload's "
    "cell has one reading and no interval ('1 reading'); $/M tok from the host file's price and the mean throughput."
)


def one_pass_note(one: int, measured: int) -> str:
    """What the first screen says first when some cells have one pass (all: ONE_PASS_NOTE)."""
    if one == measured:
        return ONE_PASS_NOTE
    return (f"{one} of {measured} measured configurations have one pass: no interval can be given for them, so none of "
            "them is called faster or slower or ranked. Set `repeats: 3` (or more) in the playbook for intervals.")  # fmt: skip


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
    "separable'. A table's rank column puts methods in tiers only where their throughput intervals separate: "
    "methods whose intervals overlap share a tier ('tied'). The first screen decides on the sharper paired ratio "
    "of two methods instead, the quantity it prints, and ranks nothing within a tie."
)
BASELINE_NOTE = "A change is flagged (faster, slower) only where the 95 % interval of now/then excludes 1.0 (no change); otherwise it is 'not separable' from the noise."
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


def energy(figure: Summary | None) -> str:
    """Tokens per joule over a cell's readings (ENERGY_NOTE): one reading has no interval, however many passes."""
    if figure is None:
        return DASH
    if figure.interval is None:
        return f"{figure.mean:,.3f} (1 reading)"
    return summary(figure, 3)


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


def caps_of(cell: Cell) -> str:
    """The max_running_requests its servers ran with (what the engine allowed, not what was asked)."""
    return ", ".join(str(n) for n in sorted({r.server_max_running for r in cell.measured if r.server_max_running})) or DASH


def level(value: int) -> str:
    return str(value) if value else DASH


def delta(comparison: Comparison) -> str:
    """now/then - 1 in percent, with its 95 % interval."""
    r = comparison.ratio
    change = f"{(r.estimate - 1) * 100:+.1f}%"
    if r.interval is None:
        return f"{change} ({ONE_PASS if r.n == 1 else 'no bounded interval'})"
    return f"{change} [{(r.interval.low - 1) * 100:+.1f}%, {(r.interval.high - 1) * 100:+.1f}%]"


def caps(value: Crossover) -> str:
    """The max_running_requests the servers ran with, where speculative and autoregressive differ."""
    if not value.speculative_caps or value.speculative_caps == value.autoregressive_caps:
        return ""
    listed = (", ".join(map(str, value.speculative_caps)), ", ".join(map(str, value.autoregressive_caps)) or DASH)
    return "Servers' max_running_requests: speculative {}, autoregressive {}".format(*listed)


def crossover(value: Crossover | None) -> str:
    """Where speculative decoding stops paying, only ever at a level measured for both sides."""
    if value is None:
        return f"{DASH} (no levels)"
    capped = caps(value)
    if not value.levels:
        return "no level measured for both autoregressive and a speculative method" + (f"; {capped}" if capped else "")
    # Levels one side never reached (its servers capped below them) are said, never judged.
    alone = "; ".join(f"{side.capitalize()} alone at {', '.join(map(str, levels))}" for side, levels in
                      (("autoregressive", value.autoregressive_only), ("speculative", value.speculative_only)) if levels)  # fmt: skip
    tail = "".join(f". {part}" for part in (alone, capped) if part)
    if value.unknown_from is not None:
        return f"cannot tell from concurrency {value.unknown_from} (one pass){tail}"
    if value.level is None:
        return f"not reached up to {value.top}: try levels {list(value.next_levels)}{tail}"
    paid = f", pays up to {value.paid_up_to}" if value.paid_up_to is not None else " (the lowest level measured for both)"
    return f"at concurrency {value.level}{paid}{tail}"


def _member(cell: Cell) -> str:
    if not cell.speculative:
        return cell.key.variant
    return f"{cell.key.variant} {ratio(cell.speedup)}" if cell.speedup is not None else f"{cell.key.variant} {summary(cell.tok_s)} tok/s"


def headline_fastest(headline: Headline) -> str:
    """The fastest method with its speed-up vs autoregressive; a tie lists its methods and names none."""
    first = headline.first
    if first is None:
        return DASH
    if not headline.ranked:
        estimate = f" {first.speedup.estimate:.2f}×" if first.speedup is not None else ""
        return f"not ranked (one pass); highest estimate: {first.key.variant}{estimate}"
    if headline.tied:
        return "tie: " + ", ".join(_member(c) for c in headline.tied)
    if not first.speculative:
        best = next((c for c in (headline.second,) if c is not None and c.speedup is not None), None)
        return f"{first.key.variant}" + (f" (best speculative: {_member(best)})" if best is not None else "")
    return _member(first)


def headline_versus(headline: Headline) -> str:
    """1st ÷ 2nd by estimate: the paired ratio that decides whether the top two are separable."""
    if headline.versus is None or headline.first is None or headline.second is None:
        return DASH
    return f"{headline.first.key.variant} ÷ {headline.second.key.variant}: {ratio(headline.versus)}"


def short(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def dollars(value: float | None) -> str:
    """$ per million tokens: cents where it is small, never 0 for a figure that is not one."""
    if value is None:
        return DASH
    return f"${value:.3f}" if value < 1 else f"${value:,.2f}"

"""Statistics behind run figures: numpy's percentile definition, and no zeros standing in for "unknown"."""

from __future__ import annotations

import pytest

from fleet.host.agent.stats import histogram, min_samples, percentile, ratio, summary


@pytest.mark.parametrize(
    ("q", "expected"),
    # numpy.percentile([15, 20, 35, 40, 50], q) (method "linear", numpy's default)
    [(0, 15.0), (40, 29.0), (50, 35.0), (90, 46.0), (99, 49.6), (100, 50.0)],
)
def test_percentile_interpolates_like_numpy(q: float, expected: float) -> None:
    assert percentile([40, 15, 50, 35, 20], q) == pytest.approx(expected)


def test_percentile_of_one_value_and_bad_input() -> None:
    assert percentile([7.5], 99) == 7.5
    with pytest.raises(ValueError):
        percentile([], 50)
    with pytest.raises(ValueError):
        percentile([1.0], 101)


def test_summary_is_none_without_values() -> None:
    assert summary([]) is None


@pytest.mark.parametrize(("q", "needed"), [(50, 2), (90, 10), (95, 20), (99, 100), (0, 1)])
def test_a_percentile_needs_a_value_at_or_above_it(q: float, needed: int) -> None:
    assert min_samples(q) == needed
    with pytest.raises(ValueError):
        min_samples(100)


def test_summary_states_only_the_percentiles_its_sample_supports() -> None:
    # 4 values: a median, but a p90 or p99 of 4 requests would only be the slowest one, renamed.
    assert summary([1.0, 2.0, 3.0, 4.0]) == {"n": 4, "mean": 2.5, "min": 1.0, "max": 4.0, "p50": 2.5, "p90": None, "p99": None}
    assert summary([7.0]) == {"n": 1, "mean": 7.0, "min": 7.0, "max": 7.0, "p50": None, "p90": None, "p99": None}
    ten = summary([float(v) for v in range(1, 11)])
    assert ten is not None and ten["p90"] == pytest.approx(9.1) and ten["p99"] is None
    hundred = summary([float(v) for v in range(1, 101)])
    assert hundred is not None and hundred["n"] == 100 and hundred["p99"] == pytest.approx(99.01)


def test_ratio_is_none_rather_than_zero() -> None:
    assert ratio(0, 10) is None
    assert ratio(10, 0) is None
    assert ratio(512, 4.0) == 128.0


def test_histogram_counts_in_value_order() -> None:
    assert histogram([3, 1, 3, 16, 1, 3]) == {"1": 2, "3": 3, "16": 1}
    assert list(histogram([10, 9, 2])) == ["2", "9", "10"]

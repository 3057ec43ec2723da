"""The lossless check (fleet.host.agent.lossless) and the sim's silent corruption it must catch:
the sim's tokens are the same for every method of a model (speculative decoding is lossless),
and `corrupt_outputs` changes them from a position on without a trace anywhere else."""

from __future__ import annotations

import dataclasses
import json

import pytest

from fleet.host.agent.lossless import (
    EARLY_POSITION,
    FAIL,
    GREEDY_SET,
    MAX_NEW_TOKENS,
    PASS,
    PENDING,
    Output,
    compare,
    first_divergence,
    outputs_of,
    parse_response,
    record,
    request_body,
)
from fleet.host.engines.sim.faults import OutputCorruption, parse_fault_profile
from fleet.host.errors import FaultProfileError
from tests.unit.test_sim_engine import CONFIG, DDTREE, Harness, run

DFLASH = dataclasses.replace(CONFIG, algorithm="DFLASH", verify_tokens=16, spec_num_draft_tokens=16)


def outputs(ids: list[list[int]]) -> list[Output]:
    return [Output(name, tuple(i), " ".join(map(str, i))) for (name, _), i in zip(GREEDY_SET, ids)]


REFERENCE = [list(range(100 * k, 100 * k + MAX_NEW_TOKENS)) for k in range(4)]


def diverged(at: list[int | None]) -> list[list[int]]:
    return [ids if p is None else ids[:p] + [-1] + ids[p + 1 :] for ids, p in zip(REFERENCE, at)]


def test_identical_outputs_pass_with_no_divergence() -> None:
    check = compare(outputs(REFERENCE), outputs(REFERENCE), "tp1-autoregressive")
    assert check.verdict == PASS and check.positions == (None,) * 4 and check.unit == "token"
    assert "4 of 4 greedy prompts identical" in check.message


def test_early_divergence_on_most_prompts_fails_with_the_positions() -> None:
    check = compare(outputs(diverged([2, 0, 5, None])), outputs(REFERENCE), "tp1-autoregressive")
    assert check.verdict == FAIL and check.failed and check.positions == (2, 0, 5, None) and check.early == 3
    assert "prose: token 2" in check.message and "code: token 0" in check.message and "not lossless" in check.message
    assert check.to_json()["first_divergence"] == [2, 0, 5, None]


def test_late_or_rare_divergence_is_recorded_and_passes() -> None:
    late = compare(outputs(diverged([EARLY_POSITION, 30, 20, None])), outputs(REFERENCE))
    assert late.verdict == PASS and late.positions == (EARLY_POSITION, 30, 20, None) and late.early == 0
    half = compare(outputs(diverged([1, 2, None, None])), outputs(REFERENCE))
    assert half.verdict == PASS and half.early == 2  # two of four is not most


def test_text_is_compared_where_a_server_sends_no_ids() -> None:
    no_ids = [Output(o.prompt, None, o.text) for o in outputs(REFERENCE)]
    check = compare(no_ids, outputs(REFERENCE))
    assert check.verdict == PASS and check.unit == "char"
    bad = [Output(o.prompt, None, "X" + o.text[1:]) for o in outputs(REFERENCE)]
    assert compare(bad, outputs(REFERENCE)).verdict == FAIL
    assert "text (the server sent no token ids)" in compare(bad, outputs(REFERENCE)).message


def test_first_divergence_counts_a_shorter_output_where_it_ends() -> None:
    assert first_divergence([1, 2, 3], [1, 2, 3]) is None
    assert first_divergence([1, 2], [1, 2, 3]) == 2
    assert first_divergence([1, 9, 3], [1, 2, 3]) == 1


def test_no_reference_in_common_is_pending_and_records_read_back() -> None:
    assert compare(outputs(REFERENCE), []).verdict == PENDING
    saved = json.loads(json.dumps(record("reference", "m|tp1", outputs(REFERENCE), None)))
    assert outputs_of(saved) == outputs(REFERENCE)
    assert outputs_of({"set": "other"}) is None and outputs_of({"set": saved["set"], "outputs": [{"prompt": 1}]}) is None


def test_the_request_is_greedy_with_a_fixed_seed_and_the_answer_reads_ids() -> None:
    body = request_body("hi")
    assert body["sampling_params"] == {"temperature": 0.0, "max_new_tokens": MAX_NEW_TOKENS, "ignore_eos": True, "sampling_seed": 0}
    assert body["stream"] is False
    assert parse_response("p", {"text": "a b", "output_ids": [5, 6], "meta_info": {}}) == Output("p", (5, 6), "a b")
    assert parse_response("p", [{"text": "a b"}]) == Output("p", None, "a b")
    with pytest.raises(ValueError):
        parse_response("p", {"error": "x"})


PROMPTS = [(prompt, MAX_NEW_TOKENS) for _, prompt in GREEDY_SET]


def test_every_method_of_the_sim_returns_the_autoregressive_tokens() -> None:
    reference = run(Harness(CONFIG), PROMPTS)
    for config in (DDTREE, DFLASH):
        speculative = run(Harness(config), PROMPTS)
        assert [r.output_ids for r in speculative] == [r.output_ids for r in reference]
        assert any(r.verify_ct and r.completion_tokens / r.verify_ct > 1.5 for r in speculative)  # it did speculate
    assert all(len(r.output_ids) == MAX_NEW_TOKENS for r in reference)


def test_the_corruption_fault_changes_tokens_from_its_position_silently() -> None:
    faults = parse_fault_profile({"corrupt_outputs": [{"algorithm": "DDTREE", "budget": 15, "from_token": 3}]}, "f.json")
    assert faults.corrupt_outputs == (OutputCorruption("DDTREE", 15, 3),)
    reference = run(Harness(CONFIG), PROMPTS)
    harness = Harness(DDTREE, faults)
    corrupted = run(harness, PROMPTS)
    healthy = run(Harness(DDTREE), PROMPTS)
    for bad, good, ref in zip(corrupted, healthy, reference):
        assert bad.output_ids[:3] == ref.output_ids[:3] and all(a != b for a, b in zip(bad.output_ids[3:], ref.output_ids[3:]))
        assert (bad.verify_ct, bad.completion_tokens) == (good.verify_ct, good.completion_tokens)  # same speed and acceptance
    assert "error" not in harness.log.getvalue().lower() and not harness.crashes
    check = compare(
        [Output(n, tuple(r.output_ids), r.text) for (n, _), r in zip(GREEDY_SET, corrupted)],
        [Output(n, tuple(r.output_ids), r.text) for (n, _), r in zip(GREEDY_SET, reference)],
    )
    assert check.verdict == FAIL and check.positions == (3, 3, 3, 3)
    # Another budget, or the autoregressive server, is not touched.
    other = parse_fault_profile({"corrupt_outputs": [{"algorithm": "DDTREE", "budget": 16}]}, "f.json")
    assert [r.output_ids for r in run(Harness(DDTREE, other), PROMPTS)] == [r.output_ids for r in reference]
    assert [r.output_ids for r in run(Harness(CONFIG, faults), PROMPTS)] == [r.output_ids for r in reference]


@pytest.mark.parametrize(
    "bad, says",
    [
        ({"corrupt_outputs": {}}, "corrupt_outputs: expected a list"),
        ({"corrupt_outputs": [{"budget": 3}]}, "missing key 'algorithm'"),
        ({"corrupt_outputs": [{"algorithm": "DDTREE", "from_token": -1}]}, "from_token: expected >= 0"),
        ({"corrupt_outputs": [{"algorithm": "DDTREE", "typo": 1}]}, "unknown keys ['typo']"),
    ],
)
def test_a_malformed_corruption_is_refused_naming_the_field(bad: dict, says: str) -> None:
    with pytest.raises(FaultProfileError, match="f.json: corrupt_outputs") as caught:
        parse_fault_profile(bad, "f.json")
    assert says in str(caught.value)


def test_the_report_compares_what_the_agent_could_not_and_fails_a_divergent_run(tmp_path) -> None:
    """A speculative result whose check is pending (no reference on its host) is compared by the
    report with the autoregressive result of the same host type, model and TP: diverged early on
    most prompts, it is a not_lossless failure with its positions, and gives no figure."""
    import shutil
    from pathlib import Path

    from fleet.host.agent.lossless import Check
    from fleet.report import load_sweep, render
    from fleet.report.model import build_report

    source = Path(__file__).resolve().parents[1] / "fixtures" / "report" / "noisy"
    sweep_dir = tmp_path / "noisy"
    shutil.copytree(source, sweep_dir)
    runs = sorted((sweep_dir / "local" / "runs").glob("*.json"))
    loaded = {path: json.loads(path.read_text()) for path in runs}
    reference = next(p for p, r in loaded.items() if r["server_label"] == "tp1-autoregressive" and r["status"] == "ok")
    candidate = next(p for p, r in loaded.items() if r["server_label"] != "tp1-autoregressive" and r["status"] == "ok" and r["workload"]["kind"] != "concurrency")
    key = "qwen3.6-27b|tp1"
    loaded[reference]["lossless"] = record("reference", key, outputs(REFERENCE), None)
    loaded[candidate]["lossless"] = record("candidate", key, outputs(diverged([1, 4, 0, None])), Check(PENDING))
    for path in (reference, candidate):
        path.write_text(json.dumps(loaded[path]))
    report = build_report([load_sweep(sweep_dir)])
    row = next(r for r in report.rows if r.run_id == loaded[candidate]["run_id"])
    assert row.status == "failed" and row.lossless == "fail" and row.lossless_divergence == [1, 4, 0, None]
    assert row.output_tok_s is None and row.passes == [] and row.reason and row.reason.startswith("not_lossless: ")
    (failure,) = [f for f in report.failures if f.failure_class == "not_lossless"]
    assert failure.label == loaded[candidate]["label"] and "prose 1, code 4, arithmetic 0, json -" in failure.evidence
    assert "not_lossless" in render(report, "md").split("## Failures")[1]


def test_a_judged_candidates_outputs_are_not_held_and_the_report_is_the_same(tmp_path) -> None:
    """What a report and a sweep hold of a result (fleet.sweep.resultcache.reported) drops the
    greedy outputs of a candidate the agent already judged (most of a sim result's digest), and
    keeps a reference's and a pending candidate's, which the report compares itself: the report
    of those digests is the report of the whole results, line for line."""
    import shutil
    from pathlib import Path

    from fleet.host.agent.lossless import Check
    from fleet.host.contract import SweepDir
    from fleet.report import load_sweep, render
    from fleet.report.load import Loaded
    from fleet.report.model import build_report
    from fleet.sweep.ledger import read_sweep_results
    from fleet.sweep.resultcache import ttfts

    source = Path(__file__).resolve().parents[1] / "fixtures" / "report" / "noisy"
    sweep_dir = tmp_path / "noisy"
    shutil.copytree(source, sweep_dir)
    loaded = {path: json.loads(path.read_text()) for path in sorted((sweep_dir / "local" / "runs").glob("*.json"))}
    ok = [p for p, r in loaded.items() if r["status"] == "ok" and r["workload"]["kind"] != "concurrency"]
    reference = next(p for p in ok if loaded[p]["server_label"] == "tp1-autoregressive")
    pending, passed, failed = [p for p in ok if loaded[p]["server_label"] != "tp1-autoregressive"][:3]
    key = "qwen3.6-27b|tp1"
    loaded[reference]["lossless"] = record("reference", key, outputs(REFERENCE), None)
    loaded[pending]["lossless"] = record("candidate", key, outputs(diverged([None, None, 9, None])), Check(PENDING))
    loaded[passed]["lossless"] = record("candidate", key, outputs(REFERENCE), compare(outputs(REFERENCE), outputs(REFERENCE), "tp1-autoregressive"))
    judged = compare(outputs(diverged([1, 4, 0, None])), outputs(REFERENCE), "tp1-autoregressive")
    loaded[failed]["lossless"] = record("candidate", key, outputs(diverged([1, 4, 0, None])), judged)
    for path in (reference, pending, passed, failed):
        path.write_text(json.dumps(loaded[path]))

    kept = load_sweep(sweep_dir)
    held = {loaded_result.result.run_id: loaded_result.result.extras.get("lossless", {}) for loaded_result in kept.results}
    assert "outputs" in held[loaded[reference]["run_id"]] and "outputs" in held[loaded[pending]["run_id"]]
    assert "outputs" not in held[loaded[passed]["run_id"]] and "outputs" not in held[loaded[failed]["run_id"]]
    assert held[loaded[failed]["run_id"]]["check"]["verdict"] == judged.verdict == FAIL
    whole = dataclasses.replace(kept, results=[Loaded(sweep_dir / r.host / SweepDir.RUNS, r, ttfts(r.requests))
                                               for r in read_sweep_results(sweep_dir, sweep_id=kept.sweep_id).results])  # fmt: skip
    for fmt in ("md", "json"):
        body, whole_body = (render(build_report([sweep]), fmt).splitlines() for sweep in (kept, whole))
        assert [line for line in body if not line.startswith("Generated ")] == [line for line in whole_body if not line.startswith("Generated ")]
    rows = {row.run_id: row for row in build_report([kept]).rows}
    assert rows[loaded[pending]["run_id"]].lossless == PASS  # compared by the report: late divergence on one prompt
    assert rows[loaded[failed]["run_id"]].lossless == FAIL and rows[loaded[passed]["run_id"]].lossless == PASS

"""`fleet report` on real sim sweeps (tests/fixtures/report/: two sweeps of the seed campaign on
two SSH test hosts, with injected failures; see generate.py there): no figure that misleads, no
speed-up across workloads, host types or TP sizes, baseline changes flagged only where their
interval separates, and the flat results read back by pandas, one row per run and level.
Intervals, verdicts, rankings and the first screen: test_report_intervals.py."""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fleet.cli import app
from fleet.host.contract import RunStatus
from fleet.report import ReportError, flat, load_sweep, render, report_of, stream
from fleet.report.model import GroupKey, Report, Row, build_report, make_cells, rows_of
from fleet.report.text import DASH

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "report"
SWEEP, BASELINE = FIXTURES / "sweep", FIXTURES / "baseline"
FIGURES = ("output_tok_s", "output_tok_s_per_request", "request_throughput", "acceptance_length", "ttft_s", "itl_s")


@pytest.fixture(scope="module")
def report() -> Report:
    return report_of([SWEEP])


def expected_rows(directory: Path) -> int:
    """One row per run and level: a concurrency run's levels (per repeat), else one."""
    count = 0
    for path in directory.glob("*/runs/*.json"):
        result = json.loads(path.read_text())
        levels = result.get("levels") or []
        count += len(levels) if result["workload"]["kind"] == "concurrency" and levels else 1
    return count


def test_the_fixture_is_a_two_host_sweep_with_every_kind_of_outcome(report: Report) -> None:
    (sweep,) = report.sweeps
    assert set(sweep.hosts) == {"ct200", "ct201"} and not sweep.unreadable
    assert len(sweep.results) == len(list(SWEEP.glob("*/runs/*.json")))
    statuses = {loaded.result.status for loaded in sweep.results}
    assert statuses == set(RunStatus), "the fixture should hold ok, partial, failed, skipped and not_comparable runs"
    assert all(loaded.result.sim_speed == 0.02 for loaded in sweep.results)
    # The release comes from the shard (as planned) or the server's /server_info. A variant the
    # fixer makes during the sweep whose server never started has neither (fleet.sweep.fixing
    # does not pass the planned release on yet).
    planned = [lo.result for lo in sweep.results if not (lo.result.provenance or {}).get("failed_run_id")]
    assert planned and all(r.engine_release == "0.5.23" for r in planned)


def test_a_run_that_is_not_ok_never_shows_a_figure(report: Report) -> None:
    not_ok = [row for row in report.rows if row.status != "ok"]
    assert {row.status for row in not_ok} == {"partial", "failed", "skipped", "not_comparable"}
    for row in not_ok:
        assert all(getattr(row, name) is None for name in FIGURES), row.label
        assert row.passes == [] and row.reason, row.label
        flat = row.flat()
        assert flat["comparable"] is False and all(flat[k] is None for k in ("output_tok_s", "acceptance_length", "ttft_s_p50", "itl_s_p99"))
    # The results themselves hold figures for partial and not-comparable runs (what they measured):
    # the report is what keeps them out.
    partial = next(loaded.result for loaded in report.sweeps[0].results if loaded.result.status is RunStatus.partial and loaded.result.figures["output_tok_s"])
    assert partial.figures["output_tok_s"] > 0
    for group in report.groups:
        for cell in group.cells:
            if not cell.measured:
                assert cell.tok_s is None and cell.speedup is None and cell.acceptance_length is None and cell.ttft(50) is None
    # Measurements and failures never share a table: every row of a host type's table is a
    # measured cell (its status "ok"), and the runs that measured nothing are in their own sections.
    markdown = render(report, "md")
    checked = 0
    for line in markdown.splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) == 21 and cells[1] not in ("method", "---"):  # a host type's table: method x workload x level
            assert cells[18].startswith("ok") and cells[5] != DASH, line
            checked += 1
    assert checked > 20
    not_measured = {r.label for r in report.rows if r.status in ("failed", "partial")}
    failures = markdown.split("## Failures")[1].split("## Skipped")[0]
    assert not_measured and all(label in failures for label in not_measured)


def test_the_not_comparable_run_is_the_cut_prompt_and_the_plan_warned(report: Report) -> None:
    (row,) = [r for r in report.rows if r.status == "not_comparable"]
    assert row.label == "tp1-dflash/long_context" and row.reason is not None and row.reason.startswith("prompt cut to ")
    assert any(n.kind == "not_comparable" and n.label == row.label for n in report.not_run)
    plan = json.loads((SWEEP / "plan.json").read_text())
    (entry,) = [r for r in plan["runs"] if r["label"] == row.label]
    assert "long_context will be not_comparable" in entry["prediction"]


def test_a_speed_up_divides_by_the_autoregressive_run_of_the_same_workload_host_type_tp_and_level(report: Report) -> None:
    cells = {cell.key: cell for group in report.groups for cell in group.cells}
    speedups = [cell for cell in cells.values() if cell.speedup is not None]
    assert len(speedups) > 20
    for cell in speedups:
        (basis,) = [c for k, c in cells.items() if (k.group, k.workload, k.level, k.variant) == (cell.key.group, cell.key.workload, cell.key.level, "autoregressive")]
        assert basis.tok_s is not None and cell.tok_s is not None
        # One pass each, of the same sweep and repeat: a pair, whose ratio is the ratio of the figures.
        assert cell.speedup.method == "paired" and cell.speedup.estimate == pytest.approx(cell.tok_s.mean / basis.tok_s.mean)  # type: ignore[union-attr]


def test_no_speed_up_is_ever_borrowed_across_workloads_host_types_or_tp(report: Report) -> None:
    rows = report.rows
    ar_tp4 = [r for r in rows if r.group.tp == 4 and not r.speculative]
    assert ar_tp4
    # Without TP4's autoregressive runs, TP4 has no speed-up at all: never TP1's or TP8's baseline.
    groups = make_cells([r for r in rows if r not in ar_tp4])
    assert all(c.speedup is None for g in groups if g.key.tp == 4 for c in g.cells)
    assert any(c.speedup is not None for g in groups if g.key.tp == 1 for c in g.cells)
    # The same autoregressive runs on another host type (another GPU model, or real instead of simulated): none either.
    for other in (replace(ar_tp4[0].group, gpu="NVIDIA H200"), replace(ar_tp4[0].group, simulated=False)):
        moved = [replace(r, group=other) if r in ar_tp4 else r for r in rows]
        assert all(c.speedup is None for g in make_cells(moved) if g.key == ar_tp4[0].group for c in g.cells)
    # Autoregressive short runs only: no speed-up for any other workload.
    only_short = [r for r in rows if r.speculative or r.workload == "short"]
    for group in make_cells(only_short):
        for cell in group.cells:
            assert cell.speedup is None or cell.key.workload == "short"


def test_a_comparison_of_one_pass_each_flags_nothing() -> None:
    """Two sweeps of one pass each: a change has no interval, so none is flagged, even a 2x one
    (the old rule flagged it against a fixed noise floor). test_report_intervals.py flags changes
    between sweeps with passes."""
    compared = report_of([SWEEP], [BASELINE])
    assert len(compared.comparisons) > 20
    assert all(c.ratio.interval is None and c.verdict == "not separable" for c in compared.comparisons)
    base = load_sweep(BASELINE)
    slower = next(loaded for loaded in base.results if loaded.result.status is RunStatus.ok and loaded.result.workload["kind"] == "short")
    figures = {**slower.result.figures, "output_tok_s": slower.result.figures["output_tok_s"] / 2}
    base.results[base.results.index(slower)] = replace(slower, result=replace(slower.result, figures=figures))
    doctored = build_report([load_sweep(SWEEP)], [base])
    (halved,) = [c for c in doctored.comparisons if c.key.workload == "short" and f"tp{c.key.group.tp}-{c.key.variant}" == slower.result.server_label]
    assert halved.ratio.estimate > 1.5 and halved.verdict == "not separable"
    markdown = render(doctored, "md")
    assert "## Against the baseline" in markdown and "| faster |" not in markdown and "| slower |" not in markdown


def test_the_same_run_in_two_sweeps_is_two_passes_with_an_interval() -> None:
    pooled = report_of([SWEEP, BASELINE])
    summaries = [cell.tok_s for group in pooled.groups for cell in group.cells if cell.tok_s is not None]
    assert summaries and all(s.n == 2 and s.interval is not None for s in summaries)
    # Both sides hold the same passes (the same two sweeps, repeat 0): speed-ups are paired.
    assert {c.speedup.method for c in pooled.cells if c.speedup is not None} == {"paired"}
    assert "[95 %]" in render(pooled, "md")


def test_a_sweep_still_running_reports_what_has_finished(tmp_path: Path) -> None:
    running = tmp_path / "running"
    shutil.copytree(SWEEP, running)
    (running / "summary.json").unlink()
    # Half of the results not there yet; failed originals and their fixed variants stay.
    results = [p for p in sorted(running.glob("*/runs/*.json")) if json.loads(p.read_text())["status"] == "ok"]
    for path in results[: len(results) // 2]:
        path.unlink()
    (running / "ct201" / "runs" / "truncated.json").write_text('{"schema": "fleet.run_result/2", "run_id": ')
    partial = report_of([running])
    pending = [n for n in partial.not_run if n.kind == "pending"]
    assert pending and all(n.reason == "no result yet" for n in pending)
    (unreadable,) = [n for n in partial.not_run if n.kind == "unreadable"]
    assert "truncated.json" in unreadable.reason and "expected a whole JSON document" in unreadable.reason
    assert "planned runs have no result yet" in render(partial, "md")
    # Fixes are known from the fixed variants' own provenance before summary.json exists.
    fixed = [f for f in partial.failures if f.fix]
    assert fixed and all(f.fix.startswith("applied: ") and f.outcome for f in fixed)  # type: ignore[union-attr]


def test_the_csv_reads_back_in_pandas_one_row_per_run_and_level(tmp_path: Path, report: Report) -> None:
    pandas = pytest.importorskip("pandas", reason="pandas is in the test extras (pip install -e '.[test]')")
    path = tmp_path / "report.csv"
    path.write_text(render(report, "csv"))
    frame = pandas.read_csv(path)
    assert len(frame) == expected_rows(SWEEP) == len(report.rows)
    assert frame.groupby(["run_id", "level", "repeat"], dropna=False).size().max() == 1  # no run and level twice
    concurrency = frame[(frame.workload_kind == "concurrency") & frame.level.notna()]
    assert concurrency.run_id.nunique() < len(concurrency)  # several levels per concurrency run
    assert frame[~frame.comparable].output_tok_s.isna().all()
    assert (frame[frame.comparable].output_tok_s > 0).all()
    assert frame.simulated.all() and (frame.sim_speed == 0.02).all()
    assert all(Path(p).exists() for p in frame.result_path)  # every figure traceable to its file
    ok = frame[frame.comparable & (frame.workload_kind == "short")]
    assert ok.ttft_s_p99.isna().all() and (ok.ttft_s_n >= 10).all() and ok.ttft_s_p90.notna().all()  # 12 requests: p90, no p99
    lines = render(report, "json").splitlines()
    assert len(lines) == len(frame) and json.loads(lines[0]).keys() == set(frame.columns)


def test_markdown_has_the_header_groups_and_tables(report: Report) -> None:
    markdown = render(report, "md")
    for heading in ("## At a glance", "## Sweeps", "## Hosts", "## Failures", "## Skipped, quarantined, infeasible, not comparable, pending", "## How to read it"):
        assert heading in markdown
    titles = [g.key.title for g in report.groups]
    assert titles == [f"NVIDIA RTX PRO 6000 Blackwell Server Edition (simulated) · SGLang 0.5.23 · TP{tp}" for tp in (1, 4, 8)]
    assert all(f"## {t}" in markdown for t in titles)
    assert "580.95.05" in markdown and "Qwen/Qwen3.6-27B@main" in markdown  # driver and model revision in the header
    assert "cuda_illegal_instruction" in markdown and "quarantined" in markdown and "applied: max_running_requests" in markdown
    assert "Concurrency curve, concurrency" in markdown


def test_the_cli_writes_each_format_and_refuses_bad_input(tmp_path: Path) -> None:
    runner = CliRunner()
    for fmt in ("md", "html", "csv", "json"):
        target = tmp_path / f"report.{fmt}"
        result = runner.invoke(app, ["report", str(SWEEP), "--baseline", str(BASELINE), "--format", fmt, "-o", str(target)])
        assert result.exit_code == 0, result.output
        assert target.stat().st_size > 1000
    html = (tmp_path / "report.html").read_text()
    assert 'href="../' in html or 'href="/' in html  # links to result files, relative to the report
    result = runner.invoke(app, ["report", str(tmp_path / "nothing")])
    assert result.exit_code == 2 and "expected a sweep folder" in result.output
    result = runner.invoke(app, ["report", str(SWEEP), "--format", "pdf"])
    assert result.exit_code == 2 and "expected one of md, html, csv, json" in result.output
    other = tmp_path / "other-playbook"
    shutil.copytree(BASELINE, other)
    record = json.loads((other / "sweep.json").read_text())
    (other / "sweep.json").write_text(json.dumps({**record, "playbook_name": "demo"}))
    result = runner.invoke(app, ["report", str(SWEEP), "--baseline", str(other)])
    assert result.exit_code == 2, result.output
    assert f"{other}/sweep.json: playbook_name: expected a sweep of the playbook it is compared with (qwen36-specdec), got 'demo'" in result.output
    with pytest.raises(ReportError, match=r"sweep\.json: expected a sweep folder's file"):
        load_sweep(tmp_path)


def test_the_cli_streams_each_format_as_render_makes_it_and_a_failure_keeps_the_old_file(tmp_path: Path, report: Report, monkeypatch: pytest.MonkeyPatch) -> None:
    """`fleet report` writes JSON lines and CSV a row at a time (fleet.report.stream), to stdout
    and to -o alike: the same text as `render`'s whole one. A report that fails half-way leaves
    the file at -o as it was (the write is atomic), not a torn report."""
    runner = CliRunner()
    for fmt in ("md", "csv", "json"):
        target = tmp_path / f"report.{fmt}"
        result = runner.invoke(app, ["report", str(SWEEP), "--format", fmt, "-o", str(target)])
        assert result.exit_code == 0, result.output
        whole = render(report_of([SWEEP]), fmt, target.parent)
        assert target.read_text() == whole
        shown = runner.invoke(app, ["report", str(SWEEP), "--format", fmt])
        assert shown.exit_code == 0 and shown.stdout == render(report_of([SWEEP]), fmt, None)
    pieces = list(stream(report, "json"))
    assert len(pieces) == len(report.rows) > 1  # a line at a time

    def failing_half_way(report: Report) -> Iterator[str]:
        yield '{"first": "row"}\n'
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(flat, "jsonl_lines", failing_half_way)
    target = tmp_path / "report.json"
    before = target.read_text()
    result = runner.invoke(app, ["report", str(SWEEP), "--format", "json", "-o", str(target)])
    assert result.exit_code == 2 and "Input/output error" in result.output
    assert target.read_text() == before and [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_the_cli_writes_through_a_link_and_into_a_pipe_without_replacing_either(tmp_path: Path) -> None:
    """-o a link: the file it points to gets the report and the link stays a link. -o a named pipe (as
    a device or /dev/stdout is): the report goes into it and the pipe stays, never renamed over (the
    atomic write's rename made /dev/full a regular file when the suite ran as root)."""
    runner = CliRunner()
    whole = render(report_of([SWEEP]), "json", tmp_path)
    (tmp_path / "real.json").write_text("old")
    (tmp_path / "link.json").symlink_to("real.json")
    assert runner.invoke(app, ["report", str(SWEEP), "--format", "json", "-o", str(tmp_path / "link.json")]).exit_code == 0
    assert (tmp_path / "link.json").is_symlink() and (tmp_path / "real.json").read_text() == whole

    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    received: list[str] = []
    reader = threading.Thread(target=lambda: received.append(pipe.read_text()), daemon=True)
    reader.start()
    result = runner.invoke(app, ["report", str(SWEEP), "--format", "json", "-o", str(pipe)])
    reader.join(60)  # a bound: the report is written by then, or the pipe was replaced and never opened
    assert result.exit_code == 0, result.output
    assert stat.S_ISFIFO(pipe.lstat().st_mode) and received == [whole]


def test_results_latest_stands_for_the_last_sweep(tmp_path: Path) -> None:
    """`fleet sweep` writes results/LATEST naming the last sweep; `fleet report results/LATEST` is
    the report of that sweep (seen on a real H200 host: it was refused as 'not a directory')."""
    shutil.copytree(SWEEP, tmp_path / "results" / "qwen36-x")
    (tmp_path / "results" / "LATEST").write_text("qwen36-x\n")
    assert load_sweep(tmp_path / "results" / "LATEST").sweep_id == load_sweep(SWEEP).sweep_id
    (tmp_path / "results" / "LATEST").write_text("../../etc\n")
    with pytest.raises(ReportError, match=r"LATEST: expected the id of the last sweep \(a folder beside it\)"):
        load_sweep(tmp_path / "results" / "LATEST")


def test_rows_of_a_result_are_its_levels() -> None:
    sweep = load_sweep(SWEEP)
    loaded = next(lo for lo in sweep.results if lo.result.status is RunStatus.ok and lo.result.workload["kind"] == "concurrency" and len(lo.result.extras["levels"]) > 1)
    rows = rows_of(sweep, loaded)
    assert [r.level for r in rows] == [lv["level"] for lv in loaded.result.extras["levels"]]
    assert [r.output_tok_s for r in rows] == [lv["output_tok_s"] for lv in loaded.result.extras["levels"]]
    assert isinstance(rows[0], Row) and isinstance(rows[0].group, GroupKey) and rows[0].group.simulated


def test_matplotlib_is_imported_only_for_html() -> None:
    """Other commands, and the other formats, do not pay for matplotlib's import."""
    code = (
        "import sys; import fleet.cli; from fleet.report import render, report_of; "
        f"r = report_of([{str(SWEEP)!r}]); [render(r, f) for f in ('md', 'csv', 'json')]; "
        "assert 'matplotlib' not in sys.modules, 'matplotlib imported'; render(r, 'html'); assert 'matplotlib' in sys.modules"
    )
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).returncode == 0


def test_repeats_within_a_run_are_its_passes() -> None:
    sweep = load_sweep(SWEEP)
    index, loaded = next((i, lo) for i, lo in enumerate(sweep.results) if lo.result.status is RunStatus.ok and lo.result.workload["kind"] == "short")
    repeats = [{**loaded.result.figures, "repeat": 0, "output_tok_s": 100.0}, {**loaded.result.figures, "repeat": 1, "output_tok_s": 120.0}]
    sweep.results[index] = replace(loaded, result=replace(loaded.result, extras={**loaded.result.extras, "repeats": repeats}))
    (row,) = rows_of(sweep, sweep.results[index])
    assert [(p.key[1], p.tok_s) for p in row.passes] == [(0, 100.0), (1, 120.0)]
    (cell,) = [c for g in build_report([sweep]).groups for c in g.cells if loaded.result.run_id in {r.run_id for r in c.rows}]
    assert cell.tok_s is not None and (cell.tok_s.mean, cell.tok_s.n) == (110.0, 2)
    assert cell.tok_s.interval is not None and cell.tok_s.interval.low < 100.0 and cell.tok_s.interval.high > 120.0  # t(0.975, 1) = 12.7


def test_a_fixed_variant_says_so_next_to_its_figures(report: Report) -> None:
    from fleet.report import text
    from fleet.report.model import Cell

    row = next(r for r in report.rows if r.comparable)
    cell = Cell(row.cell, [replace(row, fix="max_running_requests 4 -> 2")])
    assert text.status(cell) == "ok (fixed variant: max_running_requests 4 -> 2)"
    assert text.status(Cell(row.cell, [row])) == "ok"

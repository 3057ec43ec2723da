"""The `fleet` command line. Thin: parse, call into fleet, print, exit with a meaningful code.

Exit codes: 0 success; 1 the work ran but something failed (a host, a run, a check); 2 bad usage or
a malformed host/playbook file (the message names file, field and expectation).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn, Optional

import typer
from rich.console import Console
from rich.text import Text

from fleet import __version__
from fleet.errors import ConfigError, FleetError, HostSelectionError

# Each command imports what it uses, inside itself: `fleet --help` loads typer and rich only,
# `fleet facts local` no SSH library, `fleet report` no planner (tests/unit/test_cli_imports.py).
if TYPE_CHECKING:
    from fleet.inventory import Inventory
    from fleet.playbook import Playbook

EXIT_FAILED = 1
EXIT_USAGE = 2

app = typer.Typer(
    name="fleet",
    help="Run LLM-serving benchmark sweeps on GPU hosts over SSH, and bring back results that can be trusted.",
    no_args_is_help=True,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    # Plain click help and errors: typer's rich formatting imports markdown-it and pygments,
    # which doubled the start of every command (issue 12).
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)
out = Console()
err = Console(stderr=True)

HostsOpt = Annotated[
    Optional[str],
    typer.Option("--hosts", "-H", help="Host names, groups or `all`, comma-separated. Default: $FLEET_HOSTS or `local`."),
]
PlaybookOpt = Annotated[
    Optional[Path],
    typer.Option(
        "--playbook", "-p", help="Playbook file. Default: $FLEET_PLAYBOOK, else playbooks/default.yaml, else playbooks/demo.yaml."
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print data as JSON instead of tables.")]
MemoryCheckOpt = Annotated[
    bool,
    typer.Option(
        "--memory-check/--no-memory-check",
        help="Predict memory failures with SGLang's formulas before launch (and fix them under auto_fix: apply).",
    ),
]


def _hosts_dir() -> Path:
    return Path(os.environ.get("FLEET_HOSTS_DIR", "hosts"))


def _plain(text: str, style: str = "") -> Text:
    """Text printed as typed: a value such as `'^*$'` or `[/x]` is never read as rich markup."""
    return Text(text, style=style)


def _fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    err.print(_plain("error: ", "bold red") + _plain(message), highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def _load_inventory() -> Inventory:
    from fleet.inventory import load_inventory

    try:
        return load_inventory(_hosts_dir())
    except ConfigError as exc:
        _fail(str(exc))


def _select_hosts(spec: str | None):
    inventory = _load_inventory()
    try:
        return inventory.select(spec or os.environ.get("FLEET_HOSTS") or "local")
    except HostSelectionError as exc:
        _fail(str(exc))


def _default_playbook() -> Path:
    if os.environ.get("FLEET_PLAYBOOK"):
        return Path(os.environ["FLEET_PLAYBOOK"])
    default = Path("playbooks/default.yaml")
    return default if default.exists() else Path("playbooks/demo.yaml")


def _load_playbook(path: Path | None) -> Playbook:
    from fleet.playbook import load_playbook

    try:
        return load_playbook(path or _default_playbook())
    except ConfigError as exc:
        _fail(str(exc))


def _check_engine_flags(book: Playbook, hosts) -> None:
    """The playbook's engine flags against the hosts' releases (as far as known here), exit 2 on a bad one."""
    from fleet.plan import check_engine_flags

    try:
        check_engine_flags(book, hosts, _plan_options(hosts, memory_check=False).hardware)
    except ConfigError as exc:
        _fail(str(exc))


def _quarantine_store():
    from fleet.fixes.quarantine import QuarantineStore

    return QuarantineStore(_results_root() / "quarantine.json")


def _plan_options(hosts, memory_check: bool):
    """What planning knows of each host: its cached facts (`fleet facts`, `fleet provision`) or the
    inventory; and the durations measured by earlier sweeps (results/durations.json), for the ETA."""
    from fleet.connect import facts_cache_dir
    from fleet.facts import FactsCache
    from fleet.host.errors import ContractError
    from fleet.plan import PlanOptions, hardware_of
    from fleet.planning.estimate import DURATIONS_FILE, DurationHistory

    cache = FactsCache(facts_cache_dir())
    hardware = {h.name: hardware_of(h, cache.load(h.name)) for h in hosts}
    try:
        durations = DurationHistory.load(_results_root() / DURATIONS_FILE)
    except ContractError as exc:
        _fail(str(exc))
    return PlanOptions(memory_check=memory_check, quarantine=_quarantine_store(), hardware=hardware, durations=durations)


def _version(value: bool) -> None:
    if value:
        out.print(f"fleet {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version.")] = False,
) -> None:
    """fleet: provision GPU hosts, plan and run benchmark sweeps, diagnose what failed."""


@app.command()
def hosts(
    check: Annotated[bool, typer.Option("--check", help="Also connect to each host and report reachability.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """List the inventory (hosts/*.yaml); with --check, whether each host answers."""
    from fleet.views import hosts_table

    inventory = _load_inventory()
    reach = None
    if check:
        from fleet.connect import check_reachability

        reach = check_reachability(list(inventory))
    if as_json:
        rows = [
            {**h.model_dump(mode="json"), **({"reachable": reach[h.name].ok, "detail": reach[h.name].detail} if reach else {})}
            for h in inventory
        ]
        print(json.dumps({"hosts": rows}, indent=2))
    else:
        out.print(hosts_table(list(inventory), reach))
    if reach and not all(r.ok for r in reach.values()):
        raise typer.Exit(EXIT_FAILED)


@app.command()
def facts(
    hosts_spec: Annotated[Optional[str], typer.Argument(metavar="HOSTS", help="Hosts, groups or `all`.")] = None,
    refresh: Annotated[bool, typer.Option("--refresh", help="Gather everything again, ignoring the cache.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """What each host has: GPUs, driver, CUDA toolkit, the engine's torch/CUDA, disks, RAM, OS, systemd, boot id."""
    from fleet.connect import facts_of
    from fleet.facts import facts_table

    chosen = _select_hosts(hosts_spec)
    outcomes = facts_of(chosen, refresh=refresh)
    if as_json:
        data = {
            name: (o.value.model_dump(mode="json") if o.value is not None else {"error": str(o.error)}) for name, o in outcomes.items()
        }
        print(json.dumps({"facts": data}, indent=2))
    else:
        if outcomes.succeeded:
            out.print(facts_table(outcomes.succeeded))
        for name, error in outcomes.failed.items():
            err.print(_plain(f"{name}: {error}", "red"), highlight=False)
    if outcomes.failed:
        raise typer.Exit(EXIT_FAILED)


@app.command()
def plan(
    playbook: PlaybookOpt = None,
    hosts_spec: HostsOpt = None,
    memory_check: MemoryCheckOpt = True,
    as_json: JsonOpt = False,
) -> None:
    """Expand a playbook into runs, place them on hosts' GPUs, check memory and quarantine, show launch commands and ETA."""
    from fleet.plan import make_plan
    from fleet.views import plan_tables

    book = _load_playbook(playbook)
    chosen = _select_hosts(hosts_spec)
    try:
        result = make_plan(book, chosen, _plan_options(chosen, memory_check))
    except ConfigError as exc:  # an engine flag the hosts' release refuses: the playbook's fault
        _fail(str(exc))
    if as_json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        for renderable in plan_tables(result):
            out.print(renderable)
    if result.unplaceable:
        raise typer.Exit(EXIT_FAILED)


@app.command()
def provision(
    hosts_spec: Annotated[Optional[str], typer.Argument(metavar="HOSTS", help="Hosts, groups or `all`.")] = None,
    playbook: PlaybookOpt = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show what would change (unit diffs, downloads, staging); change nothing.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Make hosts ready: facts, preflight checks, model fetch and staging, service units. Safe to repeat."""
    from fleet.provision.provision import provision as provision_hosts
    from fleet.provision.provision import provision_options
    from fleet.views import provision_table

    chosen = _select_hosts(hosts_spec)
    book_path = playbook or _default_playbook()
    book = _load_playbook(book_path)
    # Same options as `fleet sweep` and its resume: secrets (HF_TOKEN) from this environment.
    options = provision_options(book_path.parent, os.environ, dry_run=dry_run)
    with err.status(f"provisioning {', '.join(h.name for h in chosen)} for {book.name}", spinner="dots"):
        reports = provision_hosts(chosen, book, options)
    if as_json:
        print(json.dumps({"dry_run": dry_run, "hosts": [r.to_json() for r in reports]}, indent=2))
    else:
        out.print(provision_table(reports, dry_run=dry_run))
    if any(r.status == "failed" for r in reports):
        raise typer.Exit(EXIT_FAILED)


def _results_root() -> Path:
    return Path(os.environ.get("FLEET_RESULTS_DIR", "results"))


@app.command()
def sweep(
    playbook: PlaybookOpt = None,
    hosts_spec: HostsOpt = None,
    resume: Annotated[Optional[str], typer.Option("--resume", metavar="SWEEP_ID", help="Reattach to a sweep (its agents may still be running).")] = None,
    poll: Annotated[float, typer.Option("--poll", help="Seconds between polls of each host.")] = 2.0,
    memory_check: MemoryCheckOpt = True,
    as_json: Annotated[
        bool, typer.Option("--json", help="Stream progress as JSON lines on stdout: one object per event (a `type` field), a final `summary` object.")
    ] = False,
    host_lost_after: Annotated[
        Optional[float],
        typer.Option("--host-lost-after", min=1.0, max=7 * 86400.0, metavar="SECONDS",
                     help="A host unreachable this long is declared lost and its runs move to the others (default: the playbook's limits.host_lost_after_s, 600)."),
    ] = None,
    allow_unplaceable: Annotated[
        bool, typer.Option("--allow-unplaceable", help="Run what fits when some server configurations fit on no host (else: exit 2 before anything starts).")
    ] = False,
    cancel: Annotated[Optional[str], typer.Option("--cancel", metavar="SWEEP_ID", help="Slurm sweeps: scancel every job of the sweep.")] = None,
) -> None:
    """Run every run of a playbook on the given hosts, detached from SSH; resumable after drops and reboots.

    Progress: a live table on a terminal; one line per event (elapsed, ETA, host, what happened)
    when stdout is not a terminal; JSON lines with --json. The exit code is the same in all three."""
    import contextlib
    import time

    from rich.live import Live

    from fleet.sweep.controller import resume_sweep, start_sweep
    from fleet.sweep.events import Event
    from fleet.sweep.record import SweepError
    from fleet.views import duration, event_line, provision_table, sweep_table

    root = _results_root()
    interactive = out.is_terminal and not as_json
    live = Live(console=err, refresh_per_second=2, transient=False) if interactive else None
    last: list[Event] = []  # the latest event: the live table's elapsed time and ETA
    host_etas: dict[str, float] = {}

    def on_event(event: Event) -> None:
        if as_json:
            sys.stdout.write(json.dumps(event.to_json()) + "\n")
            sys.stdout.flush()
        elif not interactive:
            sys.stdout.write(event_line(event) + "\n")
            sys.stdout.flush()
        last[:] = [event]
        if event.host and "host_eta_s" in event.data:
            host_etas[event.host] = float(event.data["host_eta_s"])

    from fleet.slurm.cli import slurm_sweep  # a `kind: slurm` entry, or a Slurm sweep's id: fleet.slurm

    code = slurm_sweep(
        hosts=lambda: _select_hosts(hosts_spec), resume=resume, cancel=cancel, playbook=lambda: playbook or _default_playbook(),
        root=root, poll=poll, memory_check=memory_check, say=lambda line: err.print(line, highlight=False, soft_wrap=True),
        # No live table for a cluster: on a terminal its events go to stderr as lines.
        on_event=on_event if not interactive else lambda e: err.print(event_line(e), highlight=False, soft_wrap=True), quarantine=_quarantine_store(),
    )  # fmt: skip
    if code is not None:
        raise typer.Exit(code)

    def watch(statuses) -> None:
        if live is None:
            return
        title = "sweep progress"
        if last:
            # Between events the clock runs on and the ETA counts down.
            since = time.time() - last[0].at
            eta = last[0].eta_s
            title += f": {duration(last[0].elapsed_s + since)} elapsed" + (f", ETA {duration(max(0.0, eta - since))}" if eta is not None else "")
        live.update(sweep_table(statuses, title=title, etas=host_etas))

    try:
        with live if live is not None else contextlib.nullcontext():
            # Secrets for the hosts' model fetch (HF_TOKEN) come from this environment, on a resume too.
            if resume:
                outcome = resume_sweep(
                    resume, root, watch=watch, poll_interval_s=poll, environ=os.environ, on_event=on_event, host_lost_after_s=host_lost_after,
                )  # fmt: skip
            else:
                chosen = _select_hosts(hosts_spec)
                path = playbook or _default_playbook()
                _check_engine_flags(_load_playbook(path), chosen)  # clear errors for a malformed file before anything starts
                outcome = start_sweep(
                    path,
                    chosen,
                    root,
                    on_provisioned=lambda reports: err.print(provision_table(reports)),
                    watch=watch,
                    poll_interval_s=poll,
                    memory_check=memory_check,
                    quarantine=_quarantine_store(),
                    environ=os.environ,
                    on_event=on_event,
                    host_lost_after_s=host_lost_after,
                    allow_unplaceable=allow_unplaceable,
                )
    except ConfigError as exc:  # the playbook asks for what the chosen hosts cannot hold (say, TP16 on 8-GPU hosts)
        _fail(str(exc))
    except (SweepError, FleetError) as exc:
        _fail(str(exc), EXIT_FAILED)
    for fix in outcome.fixes:
        err.print(_plain(f"{fix.host}: {fix.label}: {fix.failure_class} -> {fix.action}: {fix.description}", "yellow"), highlight=False)
    for host, reason in outcome.excluded.items():
        err.print(_plain(f"{host} takes no part: {reason}", "red"), highlight=False)
    # Under --json stdout holds JSON lines only (the summary event names the folder); the rest goes to stderr.
    note = err if as_json else out
    note.print(f"results: {outcome.directory}/<host>/runs/ (summary: {outcome.directory}/summary.json)", highlight=False, soft_wrap=True)
    if outcome.interrupted:
        note.print(f"the agents work on: `fleet status {outcome.sweep_id}`, `fleet sweep --resume {outcome.sweep_id}`", highlight=False, soft_wrap=True)
        raise typer.Exit(130)
    for host, reason in outcome.lost.items():
        err.print(_plain(f"{host} was given up on ({reason}); its runs without a result went to the other hosts, or are counted below as run nowhere", "red"), highlight=False)
    if outcome.not_run:
        reasons = sorted(set(outcome.not_run.values()))
        err.print(_plain(f"{len(outcome.not_run)} runs ran nowhere: " + "; ".join(reasons[:5]), "red"), highlight=False)
    failed_hosts = [s.host for s in outcome.statuses.values() if s.phase != "finished"]
    failed_runs = sum(s.counts.get("failed", 0) + s.counts.get("partial", 0) for s in outcome.statuses.values())
    if failed_hosts or failed_runs or outcome.excluded or outcome.lost or outcome.not_run:
        raise typer.Exit(EXIT_FAILED)


@app.command()
def status(
    sweep_id: Annotated[Optional[str], typer.Argument(metavar="SWEEP_ID", help="Default: the latest sweep.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Progress of a sweep, per host, read from the hosts' agents (the sweep may be running or done)."""
    from fleet.sweep.record import SweepError
    from fleet.sweep.status import sweep_status
    from fleet.views import sweep_table

    try:
        statuses = sweep_status(_results_root(), sweep_id)
    except SweepError as exc:
        _fail(str(exc))
    if as_json:
        print(json.dumps({name: s.__dict__ for name, s in statuses.items()}, indent=2, default=str))
    else:
        out.print(sweep_table(statuses, title="sweep status"))


@app.command("fetch-logs")
def fetch_logs(
    sweep_id: Annotated[Optional[str], typer.Option("--sweep", metavar="SWEEP_ID", help="Default: the latest sweep.")] = None,
    hosts_spec: Annotated[Optional[str], typer.Option("--hosts", "-H", help="Only these hosts of the sweep (comma-separated).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Bring server and agent logs and the complete journald output back into results/<sweep>/<host>/."""
    from fleet.sweep.logs import fetch_logs as fetch
    from fleet.sweep.record import SweepError

    names = [n.strip() for n in hosts_spec.split(",")] if hosts_spec else None
    try:
        fetched = fetch(_results_root(), sweep_id, names)
    except SweepError as exc:
        _fail(str(exc))
    if as_json:
        print(json.dumps({n: {**f.__dict__, "directory": str(f.directory)} for n, f in fetched.items()}, indent=2))
    else:
        for item in fetched.values():
            out.print(f"{item.host}: {item.files} log files in {item.directory}" + (f", {item.journal_units} journals" if item.journal_units else "") + (f" ({item.note})" if item.note else ""), highlight=False, markup=False)
    if any(f.note.startswith("failed") for f in fetched.values()):
        raise typer.Exit(EXIT_FAILED)


@app.command()
def diagnose(
    paths: Annotated[list[Path], typer.Argument(help="Server logs, journald dumps, run or sweep folders.")],
    as_json: JsonOpt = False,
) -> None:
    """Name the cause of each failure from whole logs, with evidence lines and a fix."""
    from fleet.host.diagnose.classify import diagnose_paths, render_diagnoses

    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        _fail(f"no such file or directory: {', '.join(missing)}")
    diagnoses = diagnose_paths(paths)
    if as_json:
        print(json.dumps({"diagnoses": [d.to_json() for d in diagnoses]}, indent=2))
    else:
        typer.echo(render_diagnoses(diagnoses))
    if any(d.failure_class for d in diagnoses):
        raise typer.Exit(EXIT_FAILED)


quarantine_app = typer.Typer(
    help="Configurations skipped on a GPU architecture after a kernel crash.", no_args_is_help=True, rich_markup_mode=None
)
app.add_typer(quarantine_app, name="quarantine")


@quarantine_app.command("list")
def quarantine_list(as_json: JsonOpt = False) -> None:
    """What is quarantined, why, and since which sweep."""
    from fleet.fixes.quarantine import quarantine_table

    entries = _quarantine_store().list()
    if as_json:
        print(json.dumps({"quarantine": [e.to_json() for e in entries]}, indent=2))
    else:
        out.print(quarantine_table(entries))


@quarantine_app.command("lift")
def quarantine_lift(key: Annotated[str, typer.Argument(help="A key as `fleet quarantine list` prints it, or its number.")]) -> None:
    """Run a quarantined configuration again (say, after an engine upgrade that fixes the kernel)."""
    from fleet.fixes.quarantine import QuarantineError

    try:
        entry = _quarantine_store().lift(key)
    except QuarantineError as exc:
        _fail(str(exc))
    out.print(f"lifted {entry.key}", highlight=False, markup=False)


@app.command()
def report(
    results_dirs: Annotated[list[Path], typer.Argument(metavar="RESULTS_DIR", help="Sweep folders (results/<sweep-id>/); several pool as repeats.")],
    baseline: Annotated[Optional[list[Path]], typer.Option("--baseline", help="An earlier sweep folder to compare with (repeatable).")] = None,
    fmt: Annotated[str, typer.Option("--format", "-f", help="md, html (self-contained), csv or json (JSON lines, one row per run and level).")] = "md",
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Write to this file instead of stdout.")] = None,
) -> None:
    """Tables of a sweep's results: speed-ups over the autoregressive baseline of the same workload, host type and TP, curves, failures."""
    from fleet.report import FORMATS, ReportError, render, report_of

    if fmt not in FORMATS:
        _fail(f"--format {fmt!r}: expected one of {', '.join(FORMATS)}")
    try:
        built = report_of(results_dirs, baseline or [])
    except ReportError as exc:
        _fail(str(exc))
    if output is None:
        sys.stdout.write(render(built, fmt, None))
        return
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(render(built, fmt, output.resolve().parent))
    err.print(f"report: {output}", highlight=False, markup=False)


def run() -> None:  # pragma: no cover - console entry for `python -m fleet`
    try:
        app()
    except FleetError as exc:
        err.print(_plain("error: ", "bold red") + _plain(str(exc)), highlight=False)
        sys.exit(EXIT_FAILED)

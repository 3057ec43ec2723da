"""The `fleet` command line. Thin: parse, call into fleet, print, exit with a meaningful code.

Exit codes: 0 success; 1 the work ran but something failed (a host, a run, a check); 2 bad usage or
a malformed host/playbook file (the message names file, field and expectation).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import math
import os
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn, Optional

import typer

from fleet import __version__
from fleet import stdout
from fleet.errors import ConfigError, FleetError, HostSelectionError, without_host

# Each command imports what it uses, inside itself: `fleet --help` loads typer and rich only,
# `fleet facts local` no SSH library, `fleet report` no planner (tests/unit/test_cli_imports.py).
if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

    from fleet.inventory import Inventory
    from fleet.playbook import Playbook
    from fleet.sweep.lock import SweepLock

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


@functools.cache
def _console(stderr: bool = False) -> Console:
    """A console that wraps at the terminal's width on a terminal, and not at all where output is
    piped or written to a file (rich's 80 columns cut messages and paths in the middle). Made on
    first use: `--help` and the commands that print JSON never load rich (30 ms of CPU of their
    start; issue 28)."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    piped = not stream.isatty() and not os.environ.get("COLUMNS")
    return Console(stderr=stderr, width=PIPED_WIDTH if piped else None)


PIPED_WIDTH = 200  # tables; messages are printed unwrapped (soft_wrap) whatever the width


def out() -> Console:
    return _console()


def err() -> Console:
    return _console(stderr=True)


HostsOpt = Annotated[
    Optional[str],
    typer.Option("--hosts", "-H", help="Host names, groups or `all`, comma-separated. Default: $FLEET_HOSTS or `local`."),
]
PlaybookOpt = Annotated[
    Optional[Path],
    typer.Option("--playbook", "-p", help="Playbook file. Default: $FLEET_PLAYBOOK, else playbooks/default.yaml, else playbooks/demo.yaml."),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print data as JSON instead of tables.")]
MemoryCheckOpt = Annotated[
    bool,
    typer.Option(
        "--memory-check/--no-memory-check",
        help="Predict memory failures with SGLang's formulas before launch (and fix them under auto_fix: apply).",
    ),
]


def _env(name: str) -> str | None:
    """An environment setting of fleet's, None where unset. Set but empty is refused: an empty
    FLEET_HOSTS_DIR would read the current directory, an empty FLEET_HOSTS mean `local`."""
    value = os.environ.get(name)
    if value is not None and not value.strip():
        _fail(f"${name}: expected a value or the variable unset, got {value!r}")
    return value


def _hosts_dir() -> Path:
    return Path(_env("FLEET_HOSTS_DIR") or "hosts")


def _plain(text: str, style: str = "") -> Text:
    """Text printed as typed: a value such as `'^*$'` or `[/x]` is never read as rich markup."""
    from rich.text import Text

    return Text(text, style=style)


def _fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    err().print(_plain("error: ", "bold red") + _plain(message), highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def _load_inventory() -> Inventory:
    from fleet.inventory import load_inventory

    try:
        return load_inventory(_hosts_dir())
    except ConfigError as exc:
        _fail(str(exc))


def _select_hosts(spec: str | None):
    if spec is not None and not spec.replace(",", "").strip():  # before the inventory: nothing is read for a typo
        _fail(f"--hosts {spec!r}: expected host names, groups or `all`, comma-separated")
    from fleet.inventory import check_distinct_machines

    inventory = _load_inventory()
    try:
        chosen = inventory.select(spec if spec is not None else _env("FLEET_HOSTS") or "local")
        check_distinct_machines(chosen)
    except (HostSelectionError, ConfigError) as exc:
        _fail(str(exc))
    return chosen


def _default_playbook() -> Path:
    if given := _env("FLEET_PLAYBOOK"):
        return Path(given)
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
    from fleet.errors import QuarantineError
    from fleet.layout import ResultsRoot

    store = QuarantineStore(ResultsRoot(_results_root()).quarantine)
    try:
        store.list()  # a damaged file is refused here, before anything starts, not inside the planner
    except QuarantineError as exc:
        _fail(str(exc))
    return store


def _plan_options(hosts, memory_check: bool):
    """What planning knows of each host: its cached facts (`fleet facts`, `fleet provision`) or the
    inventory; the durations measured by earlier sweeps (results/durations.json), for the ETA; and
    what earlier starts logged of their memory (results/starts.json), for the predictions."""
    from fleet.connect import facts_cache_dir
    from fleet.facts import FactsCache
    from fleet.host.errors import ContractError
    from fleet.plan import PlanOptions, hardware_of
    from fleet.layout import ResultsRoot
    from fleet.planning.estimate import DurationHistory
    from fleet.planning.starts import StartHistory

    cache = FactsCache(facts_cache_dir())
    hardware = {h.name: hardware_of(h, cache.load(h.name)) for h in hosts}
    try:
        durations = DurationHistory.load(ResultsRoot(_results_root()).durations)
        starts = StartHistory.load(ResultsRoot(_results_root()).starts)
    except ContractError as exc:
        _fail(str(exc))
    return PlanOptions(memory_check=memory_check, quarantine=_quarantine_store(), hardware=hardware, durations=durations, starts=starts)


def _show(text: str) -> None:
    """Write progress to stdout as it happens. A stdout that takes no more (its reader gone, a
    full disk) stops the display only: the work goes on and ends with its own exit code (a sweep
    is not given up because nobody reads its progress)."""
    lost = stdout.show(text)
    if lost is not None and lost.errno != errno.EPIPE:  # a closed pipe is the reader's choice; anything else is worth a line
        err().print(_plain(f"error: stdout: expected a writable output, got {lost.strerror!r}; progress is no longer shown"), highlight=False, soft_wrap=True)


def _version(value: bool) -> None:
    if value:
        out().print(f"fleet {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True, help="Show the version.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log what fleet does on stderr: each remote command in full where it fails, each retry.")] = False,
) -> None:
    """fleet: provision GPU hosts, plan and run benchmark sweeps, diagnose what failed."""
    if verbose:  # without it only warnings show (one line each); the remote commands are debug lines
        import logging

        logging.basicConfig(level=logging.DEBUG, stream=sys.stderr, format="%(asctime)s %(name)s %(levelname)s %(message)s")
        for noisy in ("paramiko", "invoke", "fabric", "markdown_it"):
            logging.getLogger(noisy).setLevel(logging.WARNING)


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
        rows = [{**h.model_dump(mode="json"), **({"reachable": reach[h.name].ok, "detail": reach[h.name].detail} if reach else {})} for h in inventory]
        print(json.dumps({"hosts": rows}, indent=2))
    else:
        out().print(hosts_table(list(inventory), reach))
    if reach and not all(r.ok for r in reach.values()):
        raise typer.Exit(EXIT_FAILED)


def _hosts_given(positional: str | None, option: str | None) -> str | None:
    """HOSTS as an argument (the older form) or as --hosts, as the other commands take it; not both."""
    if positional is not None and option is not None and positional != option:
        _fail(f"HOSTS {positional!r} and --hosts {option!r}: expected the hosts once")
    return option if option is not None else positional


@app.command()
def facts(
    hosts_arg: Annotated[Optional[str], typer.Argument(metavar="HOSTS", help="Hosts, groups or `all` (or --hosts).")] = None,
    hosts_spec: HostsOpt = None,
    refresh: Annotated[bool, typer.Option("--refresh", help="Gather everything again, ignoring the cache.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """What each host has: GPUs, driver, CUDA toolkit, the engine's torch/CUDA, disks, RAM, OS, systemd, boot id."""
    from fleet.connect import facts_of

    chosen = _select_hosts(_hosts_given(hosts_arg, hosts_spec))
    outcomes = facts_of(chosen, refresh=refresh)
    if as_json:
        data = {name: (o.value.model_dump(mode="json") if o.value is not None else {"error": str(o.error)}) for name, o in outcomes.items()}
        print(json.dumps({"facts": data}, indent=2))
    else:
        if outcomes.succeeded:
            from fleet.facts import facts_table  # rich's tables only where one is printed

            out().print(facts_table(outcomes.succeeded))
        for name, error in outcomes.failed.items():
            err().print(_plain(f"{name}: {without_host(name, error)}", "red"), highlight=False, soft_wrap=True)
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
        result.write_json(sys.stdout)  # run by run: a 50k-run plan's text is never whole in memory
    else:
        for renderable in plan_tables(result):
            out().print(renderable)
    if result.unplaceable:
        raise typer.Exit(EXIT_FAILED)


@app.command()
def provision(
    hosts_arg: Annotated[Optional[str], typer.Argument(metavar="HOSTS", help="Hosts, groups or `all` (or --hosts).")] = None,
    hosts_spec: HostsOpt = None,
    playbook: PlaybookOpt = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show what would change (unit diffs, downloads, staging); change nothing.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Make hosts ready: facts, preflight checks, model fetch and staging, service units. Safe to repeat."""
    from fleet.provision.provision import provision as provision_hosts
    from fleet.provision.provision import provision_options
    from fleet.views import provision_table

    chosen = _select_hosts(_hosts_given(hosts_arg, hosts_spec))
    book_path = playbook or _default_playbook()
    book = _load_playbook(book_path)
    # Same options as `fleet sweep` and its resume: secrets (HF_TOKEN) from this environment.
    options = provision_options(book_path.parent, os.environ, dry_run=dry_run)
    with err().status(f"provisioning {', '.join(h.name for h in chosen)} for {book.name}", spinner="dots"):
        reports = provision_hosts(chosen, book, options)
    if as_json:
        print(json.dumps({"dry_run": dry_run, "hosts": [r.to_json() for r in reports]}, indent=2))
    else:
        out().print(provision_table(reports, dry_run=dry_run))
    if any(r.status == "failed" for r in reports):
        raise typer.Exit(EXIT_FAILED)


def _results_root() -> Path:
    """$FLEET_RESULTS_DIR, else results/: a directory, or a path where one can be made."""
    from fleet.config import kernel_file_system

    root = Path(_env("FLEET_RESULTS_DIR") or "results")
    if kernel := kernel_file_system(root):
        _fail(f"{root} ($FLEET_RESULTS_DIR): expected a results directory, got a path in the kernel's {kernel} file system")
    if root.exists() and not root.is_dir():
        _fail(f"{root} ($FLEET_RESULTS_DIR): expected a results directory, got a file")
    return root


def _sweep_id(given: str | None, option: str) -> str | None:
    """The sweep a command is about: `given` when it names a folder of the results (never a path),
    else the one results/LATEST names, else None (no sweep yet: the command says so)."""
    from fleet.layout import checked_sweep_id, read_latest

    try:
        return checked_sweep_id(given, option) if given is not None else read_latest(_results_root())
    except ConfigError as exc:
        _fail(str(exc))


def _check_sweep_records(sweep_id: str | None) -> None:
    """Refuse a sweep whose record (sweep.json, hosts/<name>.json) is missing or damaged, with
    the file and the field, before a host is contacted: the commands that read a sweep would
    otherwise fail inside, on a host name such as `../../../etc/passwd` too."""
    from fleet.layout import SWEEP_RECORD
    from fleet.sweep.record import recorded_hosts
    from fleet.errors import SweepError

    if sweep_id is None:
        return  # no sweep recorded yet: the command says so
    directory = _results_root() / sweep_id
    if not (directory / SWEEP_RECORD).exists():
        return  # no such sweep, or a Slurm sweep (its own record): the command names what is missing
    try:
        recorded_hosts(directory)
    except (SweepError, ConfigError) as exc:
        _fail(str(exc))


def _lock_sweep(root: Path, sweep_id: str | None, purpose: str) -> SweepLock | None:
    """The lock of the sweep folder a resume or cancel works on, held for this process's life
    (Slurm's sweeps too), before anything reads the sweep or contacts a host: a second controller
    is refused, exit 1, naming the first (fleet.sweep.lock). None where no such folder exists (the
    command says so)."""
    from fleet.sweep.lock import lock_sweep
    from fleet.errors import SweepBusy

    if sweep_id is None or not (root / sweep_id).is_dir():
        return None
    try:
        return lock_sweep(root / sweep_id, purpose)
    except SweepBusy as exc:
        _fail(str(exc), EXIT_FAILED)
    except OSError as exc:  # a read-only or full results folder: the lock cannot be taken
        _fail(f"{root / sweep_id}: the sweep's lock cannot be taken ({exc.strerror or exc})", EXIT_FAILED)


def _seconds(low: float, high: float):
    """A callback for a duration option: a finite number of seconds from `low` to `high` (`--poll
    0` would poll without a pause; `nan` passes click's range checks, comparing false to both)."""

    def check(value: float | None) -> float | None:
        if value is not None and not (math.isfinite(value) and low <= value <= high):
            raise typer.BadParameter(f"expected a finite number of seconds from {low:g} to {high:g}, got {value}")
        return value

    return check


@app.command()
def sweep(
    playbook: PlaybookOpt = None,
    hosts_spec: HostsOpt = None,
    resume: Annotated[Optional[str], typer.Option("--resume", metavar="SWEEP_ID", help="Reattach to a sweep (its agents may still be running).")] = None,
    poll: Annotated[float, typer.Option("--poll", callback=_seconds(0.01, 3600), help="Seconds between polls of each host.")] = 2.0,
    memory_check: MemoryCheckOpt = True,
    as_json: Annotated[bool, typer.Option("--json", help="Stream progress as JSON lines on stdout: one object per event (a `type` field), a final `summary` object.")] = False,
    host_lost_after: Annotated[
        Optional[float],
        typer.Option(
            "--host-lost-after",
            callback=_seconds(1, 7 * 86400),
            metavar="SECONDS",
            help="A host unreachable this long is declared lost and its runs move to the others (default: the playbook's limits.host_lost_after_s, 600).",
        ),
    ] = None,
    allow_unplaceable: Annotated[bool, typer.Option("--allow-unplaceable", help="Run what fits when some server configurations fit on no host (else: exit 2 before anything starts).")] = False,
    cancel: Annotated[Optional[str], typer.Option("--cancel", metavar="SWEEP_ID", help="Slurm sweeps: scancel every job of the sweep.")] = None,
) -> None:
    """Run every run of a playbook on the given hosts, detached from SSH; resumable after drops and reboots.

    Progress: a live table on a terminal; one line per event (elapsed, ETA, host, what happened)
    when stdout is not a terminal; JSON lines with --json. The exit code is the same in all three."""
    import time

    from rich.live import Live

    from fleet.backend import backend_for_hosts, backend_for_sweep
    from fleet.sweep.events import Event
    from fleet.sweep.interface import SweepRequest
    from fleet.errors import UsageError
    from fleet.views import duration, event_line, provision_table, sweep_table

    if (resume or cancel) and (playbook is not None or hosts_spec is not None):
        # A resume runs the sweep's recorded playbook on its recorded hosts: -p or --hosts would be ignored.
        _fail(f"{'--resume' if resume else '--cancel'}: expected no -p/--playbook nor --hosts (the sweep's own are used)")
    if resume is not None:
        resume = _sweep_id(resume, "--resume")
    if cancel is not None:
        cancel = _sweep_id(cancel, "--cancel")
    _check_sweep_records(resume)
    root = _results_root()
    lock = _lock_sweep(root, resume or cancel, "--resume" if resume else "--cancel")
    with lock if lock is not None else contextlib.nullcontext():  # let go when the command is done
        said = lambda line: err().print(line, highlight=False, soft_wrap=True)  # noqa: E731
        try:
            if cancel is not None:
                said(backend_for_sweep(root / cancel).cancel(root / cancel))
                return
            chosen = _select_hosts(hosts_spec) if resume is None else []
            backend = backend_for_sweep(root / resume) if resume is not None else backend_for_hosts(chosen)
        except UsageError as exc:
            _fail(str(exc))
        except FleetError as exc:
            _fail(str(exc), EXIT_FAILED)
        interactive = out().is_terminal and not as_json
        live = Live(console=err(), refresh_per_second=2, transient=False) if interactive and backend.live_table else None
        last: list[Event] = []  # the latest event: the live table's elapsed time and ETA
        host_etas: dict[str, float] = {}

        def on_event(event: Event) -> None:
            if as_json:
                _show(json.dumps(event.to_json()) + "\n")
            elif not interactive:
                _show(event_line(event) + "\n")
            elif live is None:  # a terminal without a live table: its events as lines on stderr
                said(event_line(event))
            last[:] = [event]
            if event.host and "host_eta_s" in event.data:
                host_etas[event.host] = float(event.data["host_eta_s"])

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

        # Secrets for the hosts' model fetch (HF_TOKEN) come from this environment, on a resume too.
        request = SweepRequest(
            root, poll_interval_s=poll, memory_check=memory_check, quarantine=_quarantine_store(), environ=os.environ, on_event=on_event,
            say=said, watch=watch, on_provisioned=lambda reports: err().print(provision_table(reports)), host_lost_after_s=host_lost_after,
            allow_unplaceable=allow_unplaceable, hosts_dir=_hosts_dir(), lock=lock,
        )  # fmt: skip
        try:
            with live if live is not None else contextlib.nullcontext():
                if resume is not None:
                    outcome = backend.resume(root / resume, request)
                else:
                    path = playbook or _default_playbook()
                    _check_engine_flags(_load_playbook(path), chosen)  # clear errors for a malformed file before anything starts
                    outcome = backend.start(path, chosen, request)
        except (ConfigError, UsageError) as exc:  # the playbook asks for what the chosen hosts cannot hold (say, TP16 on 8-GPU hosts)
            _fail(str(exc))
        except FleetError as exc:
            _fail(str(exc), EXIT_FAILED)
        # Under --json stdout holds JSON lines only (the summary event names the folder); the rest goes to stderr.
        note = err() if as_json else out()
        styles = {"fix": "yellow", "problem": "red"}
        for line in outcome.closing_lines():
            if line.kind == "result":
                note.print(line.text, highlight=False, soft_wrap=True, markup=False)
            elif line.kind == "said":
                said(line.text)
            else:
                err().print(_plain(line.text, styles[line.kind]), highlight=False, soft_wrap=True)
        if outcome.exit_code:
            raise typer.Exit(outcome.exit_code)


@app.command()
def status(
    sweep_id: Annotated[Optional[str], typer.Argument(metavar="SWEEP_ID", help="Default: the latest sweep.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Progress of a sweep, per host, read from the hosts' agents (the sweep may be running or done)."""
    from fleet.backend import sweep_status
    from fleet.errors import SweepError

    sweep_id = _sweep_id(sweep_id, "SWEEP_ID")
    _check_sweep_records(sweep_id)
    try:
        statuses = sweep_status(_results_root(), sweep_id)
    except SweepError as exc:
        _fail(str(exc))
    if as_json:
        print(json.dumps({name: s.__dict__ for name, s in statuses.items()}, indent=2, default=str))
    else:
        from fleet.views import sweep_table  # its tables' rich parts only where a table is printed

        out().print(sweep_table(statuses, title="sweep status"))


@app.command("fetch-logs")
def fetch_logs(
    sweep_id: Annotated[Optional[str], typer.Option("--sweep", metavar="SWEEP_ID", help="Default: the latest sweep.")] = None,
    hosts_spec: Annotated[Optional[str], typer.Option("--hosts", "-H", help="Only these hosts of the sweep (comma-separated).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Bring server and agent logs and the complete journald output back into results/<sweep>/<host>/."""
    from fleet.backend import fetch_logs as fetch
    from fleet.errors import SweepError

    names = [n.strip() for n in hosts_spec.split(",") if n.strip()] if hosts_spec is not None else None
    if names == []:
        _fail(f"--hosts {hosts_spec!r}: expected host names of the sweep, comma-separated")
    sweep_id = _sweep_id(sweep_id, "--sweep")
    _check_sweep_records(sweep_id)
    try:
        fetched = fetch(_results_root(), sweep_id, names, hosts_dir=_hosts_dir())
    except (SweepError, ConfigError) as exc:
        _fail(str(exc))
    if as_json:
        print(json.dumps({n: {**f.__dict__, "directory": str(f.directory)} for n, f in fetched.items()}, indent=2))
    else:
        for item in fetched.values():  # plain lines, as typed (no markup, no wrapping): print, without loading rich
            print(f"{item.host}: {item.files} log files in {item.directory}" + (f", {item.journal_units} journals" if item.journal_units else "") + (f" ({item.note})" if item.note else ""))
    if any(f.note.startswith("failed") for f in fetched.values()):
        raise typer.Exit(EXIT_FAILED)


@app.command()
def diagnose(
    paths: Annotated[list[Path], typer.Argument(help="Server logs, journald dumps, run or sweep folders.")],
    as_json: JsonOpt = False,
) -> None:
    """Name the cause of each failure from whole logs, with evidence lines and a fix."""
    from fleet.host.diagnose.classify import diagnose_paths, render_diagnoses

    from fleet.config import kernel_file_system
    from fleet.host.contract.reader import file_kind

    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        _fail(f"no such file or directory: {', '.join(missing)}")
    for path in paths:
        # A FIFO would block the read, /dev/zero never end, /proc say what this machine holds.
        mode = path.stat().st_mode
        if kernel := kernel_file_system(path):
            _fail(f"{path}: expected a log file or a run or sweep folder, got a path in the kernel's {kernel} file system")
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            _fail(f"{path}: expected a log file or a run or sweep folder, got {file_kind(mode)}")
    diagnoses = diagnose_paths(paths)
    if as_json:
        print(json.dumps({"diagnoses": [d.to_json() for d in diagnoses]}, indent=2))
    else:
        typer.echo(render_diagnoses(diagnoses))
    if any(d.failure_class for d in diagnoses):
        raise typer.Exit(EXIT_FAILED)


quarantine_app = typer.Typer(help="Configurations skipped on a GPU architecture after a kernel crash.", no_args_is_help=True, rich_markup_mode=None)
app.add_typer(quarantine_app, name="quarantine")


@quarantine_app.command("list")
def quarantine_list(as_json: JsonOpt = False) -> None:
    """What is quarantined, why, and since which sweep."""
    from fleet.fixes.quarantine import quarantine_table

    entries = _quarantine_store().list()
    if as_json:
        print(json.dumps({"quarantine": [e.to_json() for e in entries]}, indent=2))
    else:
        out().print(quarantine_table(entries))


@quarantine_app.command("lift")
def quarantine_lift(key: Annotated[str, typer.Argument(help="A key as `fleet quarantine list` prints it, or its number.")]) -> None:
    """Run a quarantined configuration again (say, after an engine upgrade that fixes the kernel)."""
    from fleet.errors import QuarantineError

    try:
        entry = _quarantine_store().lift(key)
    except QuarantineError as exc:
        _fail(str(exc))
    out().print(f"lifted {entry.key}", highlight=False, markup=False)


@app.command()
def report(
    results_dirs: Annotated[list[Path], typer.Argument(metavar="RESULTS_DIR", help="Sweep folders (results/<sweep-id>/); several pool as repeats.")],
    baseline: Annotated[Optional[list[Path]], typer.Option("--baseline", help="An earlier sweep folder to compare with (repeatable).")] = None,
    fmt: Annotated[str, typer.Option("--format", "-f", help="md, html (self-contained), csv or json (JSON lines, one row per run and level).")] = "md",
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Write to this file instead of stdout.")] = None,
) -> None:
    """Tables of a sweep's results: speed-ups over the autoregressive baseline of the same workload, host type and TP, curves, failures."""
    from fleet.host.atomic import write_output
    from fleet.report import FORMATS, ReportError, report_of, stream

    if fmt not in FORMATS:
        _fail(f"--format {fmt!r}: expected one of {', '.join(FORMATS)}")
    try:
        built = report_of(results_dirs, baseline or [])
    except ReportError as exc:
        _fail(str(exc))
    if output is None:
        for piece in stream(built, fmt, None):
            sys.stdout.write(piece)  # a write at a time: fleet.stdout sees a reader that went away
        return
    target = _check_report_output(output, [*results_dirs, *(baseline or [])])
    try:
        write_output(target, stream(built, fmt, target.parent))
    except OSError as exc:
        _fail(f"{output} (-o): expected a file the report can be written to, got {exc.strerror!r}")
    err().print(f"report: {output}", highlight=False, markup=False)


def _check_report_output(output: Path, inputs: list[Path]) -> Path:
    """Refuse an -o that would write into a sweep's folder or over one of the report's inputs: a
    report never changes what it reports on (`-o results/<sweep>/summary.json` overwrote it).
    Returns the file -o names (a link resolved), which is what was checked."""
    from fleet.layout import LATEST, SWEEP_RECORD, ResultsRoot, read_latest
    from fleet.slurm.record import RECORD as SLURM_RECORD

    target = Path(os.path.realpath(output))
    root = Path(os.path.realpath(_results_root()))
    inputs = [Path(os.path.realpath(p)) for p in inputs]
    for given in list(inputs):
        if given.name == LATEST and given.is_file():  # results/LATEST stands for the sweep it names
            try:
                latest = read_latest(given.parent)
            except ConfigError as exc:
                _fail(str(exc))
            if latest is not None:
                inputs.append(given.parent / latest)
    for given in inputs:
        if target == given or given in target.parents:
            _fail(f"{output} (-o): expected a path outside the report's inputs, got one in {given}")
    for folder in target.parents:
        # An SSH sweep's folder holds sweep.json, a Slurm sweep's slurm.json; under the results
        # root, any folder is a sweep's (one whose record is not written yet too).
        record = next((name for name in (SWEEP_RECORD, SLURM_RECORD) if (folder / name).exists()), None)
        if record or folder.parent == root:
            _fail(f"{output} (-o): expected a path outside every sweep folder, got one in {folder}" + (f" (it holds {record})" if record else ""))
    if target.parent == root and target.name in ResultsRoot(root).own_files():
        _fail(f"{output} (-o): expected a path that is not one of fleet's own files in {root}, got {target.name}")
    return target


def run() -> None:  # pragma: no cover - console entry for `python -m fleet`
    stdout.install()
    code: int | str | None = 0
    try:
        app()
    except SystemExit as done:  # how click's standalone mode ends every command
        code = done.code
    except FleetError as exc:
        err().print(_plain("error: ", "bold red") + _plain(str(exc)), highlight=False, soft_wrap=True)
        code = EXIT_FAILED
    except OSError:
        if stdout.Loss.error is None:
            raise  # not stdout's: a bug worth its traceback
    # stdout is flushed here, where a failure can be said in one line, not by the interpreter on
    # its way out ("Exception ignored ...", exit 120 for `> /dev/full`).
    with contextlib.suppress(OSError):
        sys.stdout.flush()
    lost = stdout.Loss.error
    if lost is not None and lost.errno != errno.EPIPE and not stdout.Loss.said:  # a reader gone (`| head`) is its choice
        err().print(_plain("error: ", "bold red") + _plain(f"stdout: expected a writable output, got {lost.strerror!r}"), highlight=False, soft_wrap=True)
        code = EXIT_USAGE
    sys.exit(code)

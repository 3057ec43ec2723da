"""Rich renderings of fleet's data for people (the JSON forms live next to the data)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rich.console import JustifyMethod
from rich.table import Table
from rich.text import Text

from fleet.inventory import Host

if TYPE_CHECKING:  # types only: `fleet status` renders a table and needs no event log (nor its estimates)
    from fleet.sweep.events import Event


def duration(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def hosts_table(hosts: Sequence[Host], reach: Mapping[str, Any] | None = None) -> Table:
    table = Table(title="Inventory", title_justify="left")
    for column in ("host", "target", "GPUs", "engine", "service", "groups"):
        table.add_column(column)
    if reach is not None:
        table.add_column("reachable")
    for host in hosts:
        target = "local" if host.transport.value == "local" else f"{host.user + '@' if host.user else ''}{host.ssh_target_name}:{host.port}"
        gpus = f"{host.gpus.count}x {host.gpus.model}" if host.gpus.model else str(host.gpus.count)
        row: list[str | Text] = [host.name, target, gpus, host.engine.kind.value, host.service_manager.value, ", ".join(host.groups)]
        if reach is not None:
            outcome = reach[host.name]
            row.append(Text("yes", style="green") if outcome.ok else Text(f"no: {outcome.detail}", style="red"))
        table.add_row(*row)
    return table


def _server_notes(server) -> Text:
    if server.skip_reason:
        return Text(f"skipped: {server.skip_reason}", style="yellow")
    notes = [] if server.launch.upstream else ["fork flags"]
    if server.provenance:
        notes.append(f"fixed: {server.provenance.get('fix')}")
    elif server.prediction and "fits" not in server.prediction:
        notes.append(server.prediction)
    return Text("; ".join(notes), style="cyan" if server.provenance else "")


def plan_tables(plan) -> list[Any]:
    """One table per host: its servers in start order, their GPUs, runs and estimated times. The
    GPUs are the plan's: the agent places each server on whichever block frees first."""
    renderables: list[Any] = []
    by_host: dict[str, list] = {}
    for server in plan.servers:
        by_host.setdefault(server.host, []).append(server)
    for host, servers in by_host.items():
        table = Table(
            title=f"{host}: {len(servers)} server configurations",
            title_justify="left",
            caption="GPUs as planned: the agent starts each server on the first block of that size to free up",
            caption_justify="left",
        )
        columns: tuple[tuple[str, JustifyMethod], ...] = (
            ("server", "left"), ("GPUs", "left"), ("port", "right"), ("runs", "right"), ("start", "right"), ("end", "right"), ("notes", "left"),
        )  # fmt: skip
        for column, justify in columns:
            table.add_column(column, justify=justify)
        for server in servers:
            table.add_row(
                server.config.label,
                ",".join(map(str, server.gpus)),
                str(server.port),
                str(len(server.runs)),
                duration(server.start_s),
                duration(server.end_s),
                _server_notes(server),
            )
        renderables.append(table)
    for config, reason in plan.unplaceable:
        renderables.append(Text(f"cannot place {config.label}: {reason}", style="bold red"))
    schedule = plan.schedule
    total_runs = sum(len(s.runs) for s in plan.servers)
    if schedule.lower_bound_s:
        ratio = schedule.makespan_s / schedule.lower_bound_s
        measured = plan.measured_runs
        source = (
            f"{measured} of {total_runs} runs estimated from measured durations (results/durations.json), the rest from priors"
            if measured else "estimates are priors until measured (a sweep records its durations in results/durations.json)"
        )  # fmt: skip
        renderables.append(
            Text(
                f"{total_runs} runs on {len(by_host)} host{'s' if len(by_host) != 1 else ''}; ETA {duration(schedule.makespan_s)} (lower bound {duration(schedule.lower_bound_s)}, {ratio:.2f}x); {source}"
            )
        )
    return renderables


def provision_table(reports, dry_run: bool = False) -> Table:
    """One row per host: ok / changed / failed, what changed and why a host failed."""
    title = "provision (dry run: nothing was changed)" if dry_run else "provision"
    table = Table(title=title, title_justify="left", show_lines=True)
    for column in ("host", "status", "changes", "reason / warnings", "time"):
        table.add_column(column)
    styles = {"ok": "green", "changed": "yellow", "failed": "bold red"}
    for report in reports:
        changes = "\n".join(f"{c.action}: {c.detail}" for c in report.changes) or "-"
        status = "would change" if dry_run and report.status == "changed" else report.status
        reason = Text(report.reason or "", style="red" if report.status == "failed" else "")
        for warning in preflight_warnings(report):
            reason.append(("\n" if reason.plain else "") + warning, style="yellow")
        table.add_row(report.host, Text(status, style=styles[report.status]), changes, reason, duration(report.seconds))
    return table


def preflight_warnings(report) -> list[str]:
    """A host's preflight warnings (a driver older than the toolkit, ...), one line each with its hint."""
    if report.preflight is None:
        return []
    return [f"warning: {c.rule_id}: {c.message}" + (f" (fix: {c.hint})" if c.hint else "") for c in report.preflight.warnings]


def results_lines(directory, hosts: Sequence[str]) -> list[str]:
    """Where a sweep's results are, by host, and the command that reports on them."""
    runs = ", ".join(f"{directory}/{host}/runs/" for host in hosts) or f"{directory}/"
    return [f"results: {runs} (summary: {directory}/summary.json; tables and plots: fleet report {directory})"]


def sweep_table(statuses, title: str = "sweep", etas: Mapping[str, float] | None = None) -> Table:
    """Per host: phase, runs done, (its ETA,) their statuses, what its servers do now, and what went wrong."""
    table = Table(title=title, title_justify="left")
    table.add_column("host")
    table.add_column("phase")
    table.add_column("runs", justify="right")
    if etas is not None:
        table.add_column("ETA", justify="right")
    table.add_column("results")
    table.add_column("now / last event", overflow="fold", ratio=1)
    styles = {
        "finished": "green", "failed": "bold red", "lost": "bold red", "recovering": "yellow", "repairing": "yellow", "detached": "cyan",
        "unreachable": "red", "agent down": "red",
    }  # fmt: skip
    for status in statuses.values():
        counts = status.counts
        results = ", ".join(f"{counts[k]} {k}" for k in ("ok", "not_comparable", "partial", "failed", "skipped") if counts.get(k)) or "-"
        now = "; ".join(f"{s.get('label')} {s.get('phase')}" + (f" {s.get('run').split('/')[-1]}" if s.get("run") else "") for s in status.servers.values())
        events = ", ".join(
            f"{count} {text}{'s' if count > 1 else ''}" for count, text in ((status.reboots, "reboot"), (status.link_drops, "link drop"), (status.agent_restarts, "agent restart")) if count
        )
        detail = Text(now or "-")
        if events:
            detail.append(f"\n{events}", style="yellow")
        if status.last_error:
            detail.append(f"\n{status.last_error[:200]}", style="red")
        eta = [duration(etas[status.host]) if status.host in etas else "-"] if etas is not None else []
        table.add_row(
            status.host,
            Text(str(status.phase), style=styles.get(status.phase, "")),
            f"{status.done}/{status.total}",
            *eta,
            Text(results, style="red" if counts.get("failed") else ""),
            detail,
        )
    return table


def event_line(event: Event) -> str:
    """One plain line per progress event (stdout not a terminal: a file, a pipe, CI): elapsed
    time, ETA, the host and what happened. No colour, no cursor movement."""
    eta = f" | ETA {duration(event.eta_s)}" if event.eta_s is not None else ""
    head = f"[{duration(event.elapsed_s):>6}{eta}]"
    return f"{head} {event.host}: {_event_text(event)}" if event.host else f"{head} {_event_text(event)}"


def _event_text(event: Event) -> str:
    d = event.data
    kind = event.type
    if kind == "provisioned":
        return f"provisioned: {d['status']}" + (f" ({d['reason']})" if d.get("reason") else "")
    if kind == "planned":
        hosts = len(d["hosts"])
        return f"planned {d['runs']} runs of {d['servers']} servers on {hosts} host{'s' if hosts != 1 else ''} ({d['measured_runs']} estimated from measured durations)"
    if kind == "started":
        done = sum(h["done"] for h in d["hosts"].values())
        total = sum(h["total"] for h in d["hosts"].values())
        return f"{'resumed' if d['resumed'] else 'started'} {d['sweep_id']}: {done}/{total} runs done"
    if kind == "phase":
        return f"{d['phase']} ({d['done']}/{d['total']} runs)" + (f": {d['error']}" if d.get("error") else "")
    if kind == "run":
        failure = f" [{d['failure']}]" if d.get("failure") and d["failure"] != d["status"] else ""
        fix = f" (fixed: {d['fix']})" if d.get("fix") else ""
        return f"{d['label']}{fix} {d['status']}{failure} in {d['duration_s']:.1f}s ({d['done']}/{d['total']} runs)"
    if kind == "reboot":
        return f"rebooted (boot id {d['boot_id']}): re-staging, restarting the agent"
    if kind == "link_drop":
        return f"link dropped ({d['count']} so far)"
    if kind == "agent_restart":
        return f"agent restarted ({d['count']} so far)"
    if kind == "repair_round":
        return f"repair round: {d['added']} fixed variants added ({d['total']} runs)"
    if kind == "moved":
        return f"{d['runs']} runs of {d['label']} moved to {d['to']} ({d['why']})"
    if kind == "summary":
        by_status = ", ".join(f"{n} {status}" for status, n in sorted(d["by_status"].items())) or "none"
        error = f": {d['error']}" if d.get("error") else ""
        state = "detached (the agents work on)" if d.get("interrupted") else d["state"]
        return f"sweep {state}{error}: {d['results']} results ({by_status}) in {duration(event.elapsed_s)}; {d['directory']}"
    return kind

"""A sweep backend for tests only (not shipped): what adding a backend takes -- this module and one
line in `fleet.backend.BACKENDS` -- shown by one that runs nothing anywhere. It claims hosts named
`skeleton-*` and sweep folders holding `skeleton.json`, and drives the machinery every backend
shares: the playbook and the plan (`fleet.plan`), the event stream and its summary
(`fleet.sweep.events`), results in the contract's format read back through the ledger
(`fleet.sweep.ledger`), which `fleet report` then reads as it reads any sweep's."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from fleet.host.atomic import write_json_atomic
from fleet.host.contract import RunResult, RunStatus, SweepDir
from fleet.inventory import Host
from fleet.layout import ResultsRoot, SweepFolder
from fleet.plan import PlanOptions, make_plan
from fleet.playbook import load_playbook
from fleet.sweep.events import EventStream
from fleet.sweep.hoststatus import FetchedLogs, HostStatus, Phase
from fleet.sweep.interface import ClosingLine, Connect, SweepBackend, SweepRequest
from fleet.sweep.ledger import read_sweep_results
from fleet.sweep.record import SweepRecord, file_sha256, new_sweep_id

RECORD = "skeleton.json"


@dataclass
class SkeletonOutcome:
    sweep_id: str
    directory: Path
    results: int
    interrupted: bool = False
    lines: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return 0 if self.results else 1

    def closing_lines(self) -> list[ClosingLine]:
        return [ClosingLine("result", f"results: {self.directory} ({self.results} results)"), *(ClosingLine("said", x) for x in self.lines)]


class SkeletonBackend:
    name = "skeleton"
    live_table = False

    def claims_hosts(self, hosts: Sequence[Host]) -> bool:
        return any(h.name.startswith("skeleton-") for h in hosts)

    def claims_sweep(self, directory: Path) -> bool:
        return (directory / RECORD).is_file()

    def start(self, playbook: Path, hosts: Sequence[Host], request: SweepRequest) -> SkeletonOutcome:
        book = load_playbook(playbook)
        plan = make_plan(book, list(hosts), PlanOptions(memory_check=False))
        sweep_id = new_sweep_id(book)
        folder = ResultsRoot(request.results_root).sweep(sweep_id)
        directory = folder.path
        write_json_atomic(directory / RECORD, {"playbook": str(playbook), "hosts": [h.name for h in hosts]})
        # What every backend writes through the sweep folder: the start record, hosts, plan, LATEST.
        SweepRecord(sweep_id, book.name, file_sha256(playbook), [h.name for h in hosts]).save(directory)
        for host in hosts:
            folder.write_host(host)
        folder.write_plan(plan.to_json())
        folder.root.point_latest_at(sweep_id)
        stream = EventStream(request.on_event)
        total = sum(len(server.runs) for server in plan.servers)
        done = 0
        for server in plan.servers:
            for run in server.runs:
                result = RunResult(
                    run_id=run.id, label=run.label, server_id=server.config.id, server_label=server.config.label, sweep_id=sweep_id,
                    host=server.host, status=RunStatus.ok, failure=None, figures={"output_tok_s": 100.0, "requests": {"sent": 1, "ok": 1}},
                    workload={"name": run.workload_name}, started_at=1.8e9, ended_at=1.8e9 + 1,
                )  # fmt: skip
                write_json_atomic(directory / server.host / SweepDir.RUNS / f"{run.id}.json", result.to_json())
                done += 1
                stream.emit(
                    "run", server.host, None, run_id=run.id, label=run.label, status="ok", duration_s=1.0, failure=None, fix=None,
                    done=done, total=total, host_eta_s=0.0,
                )  # fmt: skip
        return self._finish(directory, stream)

    def resume(self, directory: Path, request: SweepRequest) -> SkeletonOutcome:
        return self._finish(directory, EventStream(request.on_event), ["resumed: nothing was left to run"])

    def _finish(self, directory: Path, stream: EventStream, lines: Sequence[str] = ()) -> SkeletonOutcome:
        swept = read_sweep_results(directory)  # the shared ledger: each result validated and parsed once
        SweepFolder(directory).write_summary({"results": len(swept.results), "unreadable": swept.rejected})
        stream.emit(
            "summary", None, 0.0, state="finished", results=len(swept.results), by_status={"ok": len(swept.results)},
            directory=str(directory), interrupted=False,
        )  # fmt: skip
        return SkeletonOutcome(directory.name, directory, len(swept.results), lines=list(lines))

    def cancel(self, directory: Path) -> str:
        return f"cancelled {directory.name}: nothing ran anywhere"

    def status(self, directory: Path, *, connect: Connect) -> dict[str, HostStatus]:
        hosts = json.loads((directory / RECORD).read_text())["hosts"]
        return {h: HostStatus(h, phase=Phase.FINISHED, total=len(list((directory / h / SweepDir.RUNS).glob("*.json")))) for h in hosts}

    def fetch_logs(self, directory: Path, host_names: Sequence[str] | None, *, connect: Connect, hosts_dir: Path | None) -> dict[str, FetchedLogs]:
        hosts = json.loads((directory / RECORD).read_text())["hosts"]
        return {h: FetchedLogs(h, directory / h, 0, 0, "a skeleton keeps no logs") for h in hosts if host_names is None or h in host_names}


BACKEND: SweepBackend = SkeletonBackend()

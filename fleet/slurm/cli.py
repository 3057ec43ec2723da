"""The Slurm side of `fleet sweep`: `--hosts <kind: slurm entry>`, `--resume ID` of a Slurm sweep,
`--cancel ID`. fleet/cli.py asks `slurm_sweep` first; None means "not a Slurm sweep, go on"."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from fleet.errors import FleetError
from fleet.fixes.quarantine import QuarantineStore
from fleet.inventory import Host, HostKind
from fleet.slurm.record import is_slurm_sweep
from fleet.slurm.sweep import SlurmSweepOutcome, cancel_slurm_sweep, resume_slurm_sweep, start_slurm_sweep
from fleet.sweep.events import EventSink

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def slurm_sweep(
    *,
    hosts: Callable[[], Sequence[Host]],
    resume: str | None,
    cancel: str | None,
    playbook: Callable[[], Path],
    root: Path,
    poll: float,
    memory_check: bool,
    say: Callable[[str], None],
    on_event: EventSink | None = None,
    quarantine: QuarantineStore | None = None,
) -> int | None:
    """The exit code of a Slurm sweep command, or None when it is no Slurm sweep. `on_event` gets
    the sweep's progress events (fleet.sweep.events: the vocabulary of an SSH sweep)."""
    sweep_id = cancel or resume
    if sweep_id is not None:
        directory = root / sweep_id
        if not is_slurm_sweep(directory):
            if cancel:
                say(f"--cancel: {directory} is not a Slurm sweep (SSH sweeps stop with their agents' STOP file)")
                return EXIT_USAGE
            return None
        if cancel:
            try:
                ids = cancel_slurm_sweep(directory)
            except FleetError as exc:
                say(str(exc))
                return EXIT_FAILED
            say(f"scancel {' '.join(ids)}")
            return EXIT_OK
        return _watched(
            lambda stop: resume_slurm_sweep(directory, poll_interval_s=poll, stop=stop, say=say, on_event=on_event, quarantine=quarantine), say
        )
    chosen = list(hosts())
    clusters = [h for h in chosen if h.kind is HostKind.slurm]
    if not clusters:
        return None
    if len(chosen) != 1:
        say(f"--hosts: a Slurm entry ({clusters[0].name}) runs a sweep alone, not beside {', '.join(h.name for h in chosen if h is not clusters[0])}")
        return EXIT_USAGE
    return _watched(
        lambda stop: start_slurm_sweep(
            playbook(), clusters[0], root, poll_interval_s=poll, stop=stop, memory_check=memory_check, say=say, on_event=on_event, quarantine=quarantine
        ),
        say,
    )


def _watched(run: Callable[[threading.Event], SlurmSweepOutcome], say: Callable[[str], None]) -> int:
    stop = threading.Event()
    box: list[SlurmSweepOutcome] = []
    errors: list[BaseException] = []

    def target() -> None:
        try:
            box.append(run(stop))
        except BaseException as exc:  # handed to the main thread, which says it
            errors.append(exc)

    worker = threading.Thread(target=target, name="fleet-slurm-sweep", daemon=True)
    worker.start()
    try:
        while worker.is_alive():
            worker.join(0.5)
    except KeyboardInterrupt:
        # Ctrl-C leaves the jobs to Slurm: stop watching, record where things stand.
        stop.set()
        worker.join()
    if errors:
        if isinstance(errors[0], FleetError):
            say(str(errors[0]))
            return EXIT_FAILED
        raise errors[0]
    outcome = box[0]
    say(f"results: {outcome.directory}/{outcome.record.cluster}/runs/ ({outcome.results} results: {outcome.by_status}; summary: {outcome.directory}/summary.json)")
    for fix in outcome.fixes:
        say(f"{fix['host']}: {fix['label']}: {fix['failure_class']} -> {fix['action']}: {fix['description']}")
    for problem in outcome.problems:
        say(problem)
    if outcome.interrupted:
        say(f"the jobs go on under Slurm: `fleet sweep --resume {outcome.sweep_id}`, `fleet sweep --cancel {outcome.sweep_id}`")
        return EXIT_INTERRUPTED
    failed = sum(n for status, n in outcome.by_status.items() if status in ("failed", "partial"))
    return EXIT_FAILED if outcome.problems or failed else EXIT_OK

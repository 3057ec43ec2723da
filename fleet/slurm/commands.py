"""Slurm's own commands, run on the cluster's login host over its transport: sinfo, sbatch,
squeue, scontrol, scancel, and sacct where the cluster keeps accounting. fleet re-implements nothing of Slurm: it asks, submits and cancels."""

from __future__ import annotations

from collections.abc import Sequence

from fleet.slurm.jobs import (
    SACCT_FIELDS,
    SINFO_FORMAT,
    SQUEUE_FORMAT,
    AccountedJob,
    NodeInfo,
    QueueEntry,
    SlurmJob,
    parse_sacct,
    parse_sbatch_parsable,
    parse_scontrol_jobs,
    parse_sinfo_nodes,
    parse_squeue,
)
from fleet.transport.base import CommandResult, Transport, command_text
from fleet.errors import SlurmCommandError

# scontrol's answer for a job slurmctld no longer holds (ended longer than MinJobAge ago).
FORGOTTEN = "Invalid job id specified"
FORGOTTEN_MARK = "fleet-slurm-forgotten:"  # our own line on stderr after such an answer


class SlurmClient:
    def __init__(self, transport: Transport, timeout: float = 60.0) -> None:
        self.transport = transport
        self.timeout = timeout

    def _run(self, argv: Sequence[str]) -> CommandResult:
        result = self.transport.run(list(argv), timeout=self.timeout)
        if not result.ok:
            raise SlurmCommandError(self.transport.host, result)
        return result

    def nodes(self) -> list[NodeInfo]:
        """Every node in every partition (one line each), for feasibility checks at submit."""
        return parse_sinfo_nodes(self._run(["sinfo", "-h", "-N", "-o", SINFO_FORMAT]).stdout)

    def submit(self, script: str, script_path: str) -> str:
        """Write the batch script on the shared fs and submit it; returns the job id. A request
        Slurm refuses (more GPUs than any node, an unknown partition) raises with Slurm's reason."""
        self.transport.put_bytes(script.encode(), script_path, mode=0o755, timeout=self.timeout)
        return parse_sbatch_parsable(self._run(["sbatch", "--parsable", script_path]).stdout)

    def jobs(self, job_ids: Sequence[str]) -> dict[str, SlurmJob]:
        """`scontrol show job -o` of each id, in one round trip; an array job id brings all its
        tasks. A job slurmctld has forgotten is absent from the answer."""
        if not job_ids:
            return {}
        # One call per id (scontrol takes one), each allowed to fail alone: its stderr tells why.
        script = "; ".join(f"{command_text(['scontrol', 'show', 'job', '-o', j])} || echo {FORGOTTEN_MARK}{j} >&2" for j in job_ids)
        result = self.transport.run(script, timeout=self.timeout)
        for line in result.stderr.splitlines():
            if line.startswith(FORGOTTEN_MARK):
                continue
            if line.strip() and FORGOTTEN not in line:
                raise SlurmCommandError(self.transport.host, result)
        return parse_scontrol_jobs(result.stdout)

    def queue(self, job_ids: Sequence[str]) -> dict[str, QueueEntry]:
        """`squeue` of these jobs in every state slurmctld still holds (one line each; cheaper than
        scontrol on a busy cluster, and what `fleet status` shows)."""
        if not job_ids:
            return {}
        result = self.transport.run(["squeue", "-h", "-t", "all", "-j", ",".join(job_ids), "-o", SQUEUE_FORMAT], timeout=self.timeout)
        if not result.ok and FORGOTTEN not in result.stderr:
            raise SlurmCommandError(self.transport.host, result)
        return parse_squeue(result.stdout) if result.ok else {}

    def accounting(self, job_ids: Sequence[str]) -> dict[str, AccountedJob]:
        """`sacct` of these jobs: what accounting (slurmdbd) keeps of jobs slurmctld has forgotten.
        Raises SlurmCommandError with sacct's words where the cluster keeps none."""
        if not job_ids:
            return {}
        argv = ["sacct", "-n", "-P", "-X", "-j", ",".join(job_ids), "-o", ",".join(SACCT_FIELDS)]
        return parse_sacct(self._run(argv).stdout)

    def cancel(self, job_ids: Sequence[str]) -> None:
        if job_ids:
            self._run(["scancel", *job_ids])

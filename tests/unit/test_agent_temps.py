"""An agent killed while writing a result leaves its temporary file (`.<name>.<random>.tmp`,
fleet.host.atomic) in runs/; no writer is left for it and a pull leaves it out, so it stayed for
good (tests/integration/test_agent_local.py's kill-and-resume found one). The next agent, holding
the sweep's lock, removes such files when it starts, and nothing else."""

from __future__ import annotations

from pathlib import Path

from fleet.host.agent.runner import Agent
from fleet.host.contract import SweepDir


def test_a_temp_file_of_a_killed_write_is_removed_when_the_next_agent_starts(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "r1.json").write_text("{}")
    (runs / "r1.json.attempt-1.disturbed").write_text("{}")
    (runs / ".r2.json.k1ll3d.tmp").write_bytes(b"{")  # what a SIGKILL in atomic_file's write leaves
    agent = Agent.__new__(Agent)  # only its folder is needed, not a shard or services
    agent.files = SweepDir(str(tmp_path))
    agent._remove_stale_temps()
    assert sorted(p.name for p in runs.iterdir()) == ["r1.json", "r1.json.attempt-1.disturbed"]

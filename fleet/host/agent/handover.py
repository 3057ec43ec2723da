"""The agent's side of a hand-over (`fleet.host.contract.shard`, "hand-over"): answer the
controller's request for queued servers. Called by the agent's loop before it starts any server,
so that a server is either started here or released, never both."""

from __future__ import annotations

import logging
from collections.abc import Collection
from pathlib import Path

from fleet.host.atomic import write_json_atomic
from fleet.host.contract import ContractError, SweepDir
from fleet.host.contract.shard import HandoverAnswer, HandoverRequest

log = logging.getLogger("fleet.host.agent")


def release_handed_over(files: SweepDir, started: Collection[str]) -> frozenset[str]:
    """The servers this agent must not start: those the controller asks back and this agent had
    not started when it first saw the request. Writes the answer (released and kept, for every
    server still asked for) when it changes."""
    request_path, answer_path = Path(files.handover), Path(files.handover_answer)
    if not request_path.exists():
        return frozenset()
    try:
        request = HandoverRequest.from_json(request_path.read_text(), str(request_path))
        answer = HandoverAnswer.from_json(answer_path.read_text(), str(answer_path)) if answer_path.exists() else HandoverAnswer()
    except (OSError, ContractError) as exc:
        # Written atomically by the controller and this agent: only a hand edit gets here. Keep
        # every server (the controller moves nothing it has no answer for).
        log.error("hand-over: %s; keeping every server", exc)
        return frozenset()
    wanted = set(request.servers)
    new = [sid for sid in request.servers if sid not in answer.answered]
    # A server the controller no longer asks for was given back to this host (its agent was not
    # running then): it is this agent's to start again.
    released = [sid for sid in answer.released if sid in wanted] + [sid for sid in new if sid not in started]
    kept = [sid for sid in answer.kept if sid in wanted] + [sid for sid in new if sid in started]
    updated = HandoverAnswer(tuple(released), tuple(kept))
    if updated != answer:
        write_json_atomic(answer_path, updated.to_json())
        if new:
            log.info("hand-over: released %s, kept %s", [s for s in new if s not in started], [s for s in new if s in started])
    return frozenset(updated.released)

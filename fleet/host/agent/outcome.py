"""What driving a workload produces, before it is a result: the requests sent and their tags, the
measured sections, the workload's departures from its definition. Standard library only.

Below both sides of a kind (fleet.host.agent.kinds): its driver fills a `WorkloadOutcome`, and
fleet.host.agent.results hands its result extras a `Measured` view of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from fleet.host.agent.client import RequestOutcome
from fleet.host.contract import Failure
from fleet.host.contract.results import Deviation

# Kinds of deviation from a workload's definition (each makes a run `not_comparable`).
PROMPT_CUT = "prompt_cut"
OUTPUT_CAPPED = "output_capped"
REQUESTS_DROPPED = "requests_dropped"
AGENT_PAUSED = "agent_paused"  # fleet's agent did not run during the run (fleet.host.agent.pause)
CLIENT_BEHIND = "client_behind"  # the open-loop client sent its requests later than scheduled


@dataclass
class Sent:
    """One measured request and where it belongs in the workload (repeat, level, turn, ...)."""

    outcome: RequestOutcome
    tags: dict[str, Any] = field(default_factory=dict)


@dataclass
class Section:
    """A measured stretch of a workload whose requests share its `key` tags: one repeat, or one
    level of one repeat. `wall_s`: wall seconds from its first send to its last end."""

    key: dict[str, Any]
    wall_s: float = 0.0
    # Figures the server itself stated for this stretch, where its requests do not carry them
    # (vLLM's acceptance length from its /metrics counters): used only where the requests' own are None.
    server: dict[str, Any] = field(default_factory=dict)

    def holds(self, sent: Sent) -> bool:
        return all(sent.tags.get(name) == value for name, value in self.key.items())


@dataclass
class WorkloadOutcome:
    """What running a workload produced: its requests, the wall time of its measured sections,
    kind-specific extras (calibration), departures from its definition and, if it could not
    finish, why."""

    sent: list[Sent] = field(default_factory=list)
    sections: list[Section] = field(default_factory=list)
    extras: dict[str, Any] = field(default_factory=dict)
    failure: Failure | None = None
    deviations: list[Deviation] = field(default_factory=list)
    planned_requests: int = 0  # what the workload meant to send, where known in advance

    @property
    def wall_s(self) -> float:
        return sum(section.wall_s for section in self.sections)

    def measured(self, key: Mapping[str, Any], wall_s: float, server: Mapping[str, Any] | None = None) -> None:
        """Add `wall_s` to the section of `key` (made on first use), with what the server stated of it."""
        for section in self.sections:
            if section.key == dict(key):
                section.wall_s += wall_s
                section.server.update(server or {})
                return
        self.sections.append(Section(dict(key), wall_s, dict(server or {})))


# The figures of some requests over some wall seconds (fleet.host.agent.results.request_figures,
# in the result's time: simulated seconds on a sim host).
FiguresOf = Callable[[Sequence[Sent], float], dict[str, Any]]


@dataclass(frozen=True)
class Measured:
    """A run as its result counts it, what a kind's result extras are made from: its workload, its
    requests (durations in the result's time), its sections and how figures are made of them."""

    workload: Mapping[str, Any]
    sent: Sequence[Sent]
    sections: Sequence[Section]
    figures_of: FiguresOf

    def section_figures(self) -> list[dict[str, Any]]:
        """Each section's key and the figures of its own requests over its own wall time."""
        out = []
        for section in self.sections:
            figures = self.figures_of([s for s in self.sent if section.holds(s)], section.wall_s)
            stated = {name: value for name, value in section.server.items() if figures.get(name) is None}
            out.append({**section.key, **figures, **stated})
        return out


def repeat_extras(measured: Measured) -> dict[str, Any]:
    """Most kinds' result extras: with more than one section (a repeat each), each one's figures."""
    return {"repeats": measured.section_figures()} if len(measured.sections) > 1 else {}

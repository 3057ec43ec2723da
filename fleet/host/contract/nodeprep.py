"""A Slurm node's preparation inside an allocation, before the agent starts (fleet.host.nodeprep).

Two documents:
- `NodeRequirements` (`node-requirements.json` in a Slurm sweep's dir on the shared filesystem),
  written by the controller: what a node must have for the sweep's tasks (the GPUs as granted,
  their model, the CUDA toolkit and driver each GPU architecture needs, the engine, the room to
  stage), the facts script to run there, and the models to stage to node-local storage. The
  thresholds are the controller's preflight tables (fleet.provision.preflight), carried as data,
  so that the node judges by the same figures as an SSH host's provisioning.
- `NodePrep` (`node-prep/<job-id>.<start>.json` in the task's dir), written by the node at every
  start of the task: which node (Slurm's node name, hostname, boot id), each check's verdict with
  its evidence, what was staged, and whether the agent was allowed to start. One file per start
  (a requeue is another start, a resubmission another job id), so a node that refused a task is
  still on record after the task ran elsewhere: the controller excludes it from resubmissions.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from fleet.host.agent.tools import TOOLS
from fleet.host.contract.reader import Reader, read_text

REQUIREMENTS_SCHEMA = "fleet.node_requirements/1"
NODE_PREP_SCHEMA = "fleet.node_prep/1"
REQUIREMENTS_FILE = "node-requirements.json"  # in the sweep's dir on the shared fs, beside its arrays
NODE_PREP_DIR = "node-prep"  # in a task's dir: one NodePrep per start
NODE_FACTS_DIR = "node-facts"  # in a task's dir: the facts script's whole output per start
VERDICTS = ("ok", "warn", "fail", "skip")
# The node's exit status when it refuses to start the agent (a failed check): the batch script
# ends with it, so the job ends FAILED with ExitCode=3:0 and the NodePrep file says why.
REFUSED_EXIT = 3


@dataclass(frozen=True)
class ArchRule:
    """The toolkit one GPU architecture needs (preflight.ARCH_REQUIREMENTS, as data)."""

    major: int
    minor: int | None  # None: every minor of `major`
    min_toolkit: str  # "12.9"
    reason: str


@dataclass(frozen=True)
class ModelToStage:
    name: str  # the model's label, for messages
    source: str  # its complete copy on the shared fs (with fleet's `.fleet-complete.json` marker)
    key: str  # its directory name under the node-local dir


@dataclass(frozen=True)
class ClientToolUse:
    """A workload whose client tool runs in `python` on the node (fleet.host.agent.tools)."""

    workload: str
    tool: str  # a key of fleet.host.agent.tools.TOOLS
    python: str


@dataclass(frozen=True)
class NodeRequirements:
    engine_kind: str  # sglang | sim
    facts_script: str  # the composite facts script (fleet.facts), on the shared fs
    node_local_dir: str | None  # where models are staged; `$TMPDIR` expands on the node; None: no staging
    gpu_model: str | None = None
    arch_rules: list[ArchRule] = field(default_factory=list)
    toolkit_min_driver: dict[str, str] = field(default_factory=dict)  # "12.8" -> "570.26"
    minor_compat_min_driver: dict[str, str] = field(default_factory=dict)  # "12" -> "525.60.13"
    models: list[ModelToStage] = field(default_factory=list)
    # How the facts script prints what the node reads (fleet.facts.commands/parsers, as data).
    gpu_query_fields: list[str] = field(default_factory=list)
    facts_labels: dict[str, str] = field(default_factory=dict)  # nvcc_path, nvcc_absent, engine_probe
    host_file: str = "the cluster's inventory file"  # named in fix hints
    client_tools: list[ClientToolUse] = field(default_factory=list)  # probed on the node: client-tools-installed

    def to_json(self) -> str:
        return json.dumps({"schema": REQUIREMENTS_SCHEMA, **asdict(self)}, indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text_or_data: str | bytes | Mapping[str, Any], source: str = REQUIREMENTS_FILE) -> NodeRequirements:
        r = Reader.of(text_or_data, source)
        r.schema(REQUIREMENTS_SCHEMA)
        return cls(
            engine_kind=r.choice("engine_kind", ("sglang", "sim")),
            facts_script=r.text("facts_script"),
            node_local_dir=r.optional("node_local_dir", str),
            gpu_model=r.optional("gpu_model", str),
            arch_rules=[ArchRule(a.get("major", int), a.optional("minor", int), a.text("min_toolkit"), a.text("reason")) for a in r.children("arch_rules", default=[])],
            toolkit_min_driver={k: r.child("toolkit_min_driver").text(k) for k in r.get("toolkit_min_driver", dict, default={})},
            minor_compat_min_driver={k: r.child("minor_compat_min_driver").text(k) for k in r.get("minor_compat_min_driver", dict, default={})},
            models=[ModelToStage(m.text("name"), m.text("source"), m.text("key")) for m in r.children("models", default=[])],
            gpu_query_fields=r.strings("gpu_query_fields", default=[]),
            facts_labels={k: r.child("facts_labels").text(k) for k in r.get("facts_labels", dict, default={})},
            host_file=r.text("host_file", default="the cluster's inventory file"),
            client_tools=[ClientToolUse(c.text("workload"), c.choice("tool", tuple(TOOLS)), c.text("python")) for c in r.children("client_tools", default=[])],
        )

    @classmethod
    def load(cls, path: Path | str) -> NodeRequirements:
        return cls.from_json(read_text(path), str(path))


@dataclass(frozen=True)
class NodeCheck:
    """One preflight rule's verdict on the node; `rule_id` is the rule's id in fleet.provision.preflight."""

    rule_id: str
    verdict: str  # one of VERDICTS
    message: str
    evidence: str = ""  # the facts' lines it judged, as the node printed them


@dataclass(frozen=True)
class Staged:
    model: str
    path: str  # the node-local copy the servers load
    action: str  # "copied" (this start copied it), "present" (a complete copy of this boot was there)
    bytes: int
    seconds: float


@dataclass(frozen=True)
class NodePrep:
    node: str  # Slurm's node name (SLURMD_NODENAME), else the hostname
    hostname: str
    boot_id: str
    job_id: str  # SLURM_JOB_ID of this start
    start: int  # SLURM_RESTART_COUNT + 1
    at: float
    checks: list[NodeCheck]
    agent_started: bool  # False: refused (a check failed, or staging failed)
    staged: list[Staged] = field(default_factory=list)
    error: str | None = None  # why staging (or reading the facts) failed, when it did
    facts_file: str | None = None  # the facts output, relative to the task's dir
    seconds: float = 0.0  # how long the step took (facts, checks, staging) before the agent could start
    # False where the refusal is not this node's doing (the shared copy of a model is incomplete):
    # another node would refuse too, so resubmissions do not exclude it.
    node_at_fault: bool = True

    @property
    def failures(self) -> list[NodeCheck]:
        return [c for c in self.checks if c.verdict == "fail"]

    def reason(self) -> str:
        """One line: why this node refused the task (empty when it did not)."""
        if self.agent_started:
            return ""
        parts = [f"{c.rule_id}: {c.message}" + (f" [{c.evidence}]" if c.evidence else "") for c in self.failures]
        if self.error:
            parts.append(self.error)
        return f"node {self.node} (boot {self.boot_id[:8]}) refused the task: " + "; ".join(parts or ["no reason recorded"])

    def to_json(self) -> str:
        return json.dumps({"schema": NODE_PREP_SCHEMA, **asdict(self)}, indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text_or_data: str | bytes | Mapping[str, Any], source: str = NODE_PREP_DIR) -> NodePrep:
        r = Reader.of(text_or_data, source)
        r.schema(NODE_PREP_SCHEMA)
        return cls(
            node=r.text("node"),
            hostname=r.text("hostname"),
            boot_id=r.text("boot_id"),
            job_id=r.text("job_id"),
            start=r.get("start", int),
            at=r.number("at"),
            checks=[NodeCheck(c.text("rule_id"), c.choice("verdict", VERDICTS), c.get("message", str), c.get("evidence", str, default="")) for c in r.children("checks")],
            agent_started=r.get("agent_started", bool),
            staged=[
                Staged(s.text("model"), s.text("path"), s.choice("action", ("copied", "present")), s.get("bytes", int), s.number("seconds", positive=False)) for s in r.children("staged", default=[])
            ],
            error=r.optional("error", str),
            facts_file=r.optional("facts_file", str),
            seconds=r.number("seconds", default=0.0, positive=False),
            node_at_fault=r.get("node_at_fault", bool, default=True),
        )

    @classmethod
    def load(cls, path: Path | str) -> NodePrep:
        return cls.from_json(read_text(path), str(path))

    def file_name(self) -> str:
        return posixpath.join(NODE_PREP_DIR, f"{self.job_id}.{self.start}.json")


def load_node_preps(task_dir: Path) -> list[NodePrep]:
    """Every start's NodePrep of a task dir (a pulled copy), oldest first. An unreadable file
    raises ContractError naming it: the node writes them atomically, so one is never half there."""
    directory = task_dir / NODE_PREP_DIR
    if not directory.is_dir():
        return []
    return sorted((NodePrep.load(p) for p in directory.glob("*.json")), key=lambda p: (p.at, p.job_id, p.start))

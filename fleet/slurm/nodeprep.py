"""The controller's side of node preparation inside Slurm allocations (fleet.host.nodeprep runs
on the node): what a node must have, written once per sweep beside its arrays; what the nodes
said, read back from the pulled task dirs.

- `facts_script`: the composite facts script of fleet.facts (the one an SSH host answers in one
  round trip), shipped to the shared dir; the node runs it, not an SSH login to the node.
- `requirements`, `ship`: the sweep's NodeRequirements (the preflight tables of
  fleet.provision.preflight as data, the models to stage to node-local storage, the workloads'
  client tools the node's interpreters must import) to the shared dir.
- `NodeRefusals` (`refusal`, `refused_nodes`): pure readings of the nodes' NodePrep files, for
  fleet.slurm.outcome (a task refused by its node is submitted again), fleet.slurm.sweep
  (`--exclude` those nodes) and summary.json (`nodes_refused`).
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from fleet.facts.gather import gather_script
from fleet.facts.models import FactsRequest
from fleet.facts.parsers import GPU_QUERY_FIELDS, NVCC_ABSENT, NVCC_PATH_LABEL, PROBE_MARK
from fleet.host.contract.nodeprep import REQUIREMENTS_FILE, ArchRule, ClientToolUse, ModelToStage, NodePrep, NodeRequirements, load_node_preps
from fleet.inventory import EngineKind, Host, Target, slugify
from fleet.layout import model_cache_dir
from fleet.playbook import ModelRef, Playbook
from fleet.provision import preflight
from fleet.provision.provision import client_tool_uses, models_of
from fleet.transport.base import Transport

FACTS_SCRIPT = "node-facts.sh"  # in the sweep's root on the shared fs
STAGING_KEY = preflight.STAGING_KEY


def _version_text(version: tuple[int, ...]) -> str:
    return ".".join(map(str, version))


def facts_request(node: Target, node_local_dir: str | None) -> FactsRequest:
    """What the node's facts measure: the node-local dir's disk (where it is a plain path; a
    `$TMPDIR` one is measured by the node itself) and the engine's interpreter."""
    paths = {STAGING_KEY: node_local_dir} if node_local_dir and node_local_dir.startswith("/") else {}
    return FactsRequest(paths=paths, engine_python=node.engine.python)


def facts_script(request: FactsRequest, probe_engine: bool = True) -> str:
    """The same composite script `fleet.facts.gather_facts` runs on an SSH host; without the
    engine probe where no rule reads it (a sim engine: the probe imports torch, seconds at each
    node's first start of a boot, for nothing)."""
    return gather_script(request, engine=probe_engine)


def model_key(model: ModelRef) -> str:
    """A model's directory under the node-local dir (as fleet.layout names a staged copy)."""
    return f"{slugify(model.label)}--{slugify(model.revision)}"


def models_to_stage(models: Iterable[ModelRef], node: Target) -> list[ModelToStage]:
    """Every model fleet copied to the shared dir (with its marker); a model given by `path:` is
    the site's own copy, served where it is."""
    return [ModelToStage(m.label, model_cache_dir(m, node), model_key(m)) for m in models if not m.path]


def requirements(cluster: Host, node: Target, root: str, models: Sequence[ModelToStage], client_tools: Sequence[ClientToolUse] = ()) -> NodeRequirements:
    """A sweep's NodeRequirements; `root`: the sweep's dir on the shared fs (the facts script's);
    `client_tools`: the workloads' tools the node's interpreters must import (client_tools_of)."""
    assert cluster.slurm is not None
    local = cluster.slurm.node_local_dir
    return NodeRequirements(
        engine_kind=node.engine.kind.value,
        facts_script=posixpath.join(root, FACTS_SCRIPT),
        node_local_dir=local,
        gpu_model=cluster.gpus.model,
        arch_rules=[ArchRule(r.major, r.minor, _version_text(r.min_toolkit), r.toolkit_reason) for r in preflight.ARCH_REQUIREMENTS],
        toolkit_min_driver={_version_text(k): v for k, v in preflight.TOOLKIT_MIN_DRIVER.items()},
        minor_compat_min_driver={str(k): v for k, v in preflight.MINOR_COMPAT_MIN_DRIVER.items()},
        models=list(models) if local else [],
        gpu_query_fields=list(GPU_QUERY_FIELDS),
        facts_labels={"nvcc_path": NVCC_PATH_LABEL, "nvcc_absent": NVCC_ABSENT, "engine_probe": PROBE_MARK},
        host_file=str(cluster.source_file),
        client_tools=list(client_tools),
    )


def client_tools_of(node: Target, playbook: Playbook) -> list[ClientToolUse]:
    """The interpreters the SSH preflight would probe on a host (provision.client_tool_uses), for
    the node to probe itself: the interpreter paths are the node's, not the login host's."""
    return [ClientToolUse(workload, tool, python) for python, uses in client_tool_uses(node, playbook).items() for workload, tool in uses]


def requirements_path(root: str) -> str:
    return posixpath.join(root, REQUIREMENTS_FILE)


def ship(t: Transport, cluster: Host, node: Target, root: str, playbook: Playbook, timeout: float = 60.0) -> NodeRequirements:
    """The facts script and the sweep's NodeRequirements to its dir on the shared fs (through the
    login host): every task's batch script reads them before its agent starts."""
    assert cluster.slurm is not None
    req = requirements(cluster, node, root, models_to_stage(models_of(playbook), node), client_tools_of(node, playbook))
    script = facts_script(facts_request(node, cluster.slurm.node_local_dir), probe_engine=node.engine.kind is not EngineKind.sim)
    t.put_bytes(script.encode(), req.facts_script, timeout=timeout)
    t.put_bytes(req.to_json().encode(), requirements_path(root), timeout=timeout)
    return req


# ---------------------------------------------------------------------------------------------
# What the nodes said (pure, on pulled task dirs)


def refusal(preps: Sequence[NodePrep], job_id: str) -> NodePrep | None:
    """The latest start of `job_id` (an array task as `A_i`), where its node refused it."""
    starts = [p for p in preps if p.job_id == job_id]
    if not starts:
        return None
    latest = max(starts, key=lambda p: (p.start, p.at))
    return None if latest.agent_started else latest


def refused_nodes(preps: Iterable[NodePrep]) -> list[str]:
    """Nodes that refused a task of the array for a failed check or a copy that failed there
    (its disk): the array's resubmissions exclude them. A shared copy no node could stage from
    excludes none."""
    return sorted({p.node for p in preps if not p.agent_started and p.node_at_fault})


@dataclass(frozen=True)
class NodeRefusals:
    """The NodePrep files of a Slurm sweep's pulled task dirs (`<mirror>/<array>/task-<i>/`)."""

    preps: Mapping[tuple[str, int], Sequence[NodePrep]]

    @classmethod
    def read(cls, mirror: Path, tasks: Iterable[tuple[str, int]]) -> NodeRefusals:
        return cls({(key, index): load_node_preps(mirror / key / f"task-{index}") for key, index in tasks})

    def reason(self, array: str, index: int, job_id: str | None) -> str | None:
        """Why the task's latest start (job `job_id`) was refused by its node, or None."""
        refused = refusal(self.preps.get((array, index), ()), job_id) if job_id else None
        return refused.reason() if refused else None

    def excluded(self, array: str, fitting: Iterable[str] | None = None) -> list[str]:
        """The nodes any task of the array was refused by: its next submission avoids them. Where
        they are every node that can hold the array (`fitting`, from sinfo), none is left out:
        sbatch refuses a request that excludes them all ("Requested node configuration is not
        available"); the work goes back to a refusing node, and each refusal there counts
        against `max_submissions`, so the task ends reported with the node's reason."""
        refused = refused_nodes(p for (key, _), preps in self.preps.items() if key == array for p in preps)
        if fitting is not None and set(fitting) <= set(refused):
            return []
        return refused

    def summary(self) -> list[dict[str, object]]:
        """Every refusal of the sweep, for summary.json: which node, which start, why."""
        return [
            {"array": key, "task": index, "node": p.node, "boot_id": p.boot_id, "job_id": p.job_id, "start": p.start,
             "failed": [c.rule_id for c in p.failures], "reason": p.reason()}
            for (key, index), preps in sorted(self.preps.items()) for p in preps if not p.agent_started
        ]  # fmt: skip

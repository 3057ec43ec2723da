"""Where fleet keeps things on a host, and on the controller. One place, so that every part agrees.

On a host (under `paths.work_dir`, persistent; survives reboots):
    agent/                 the shipped agent and its state
    sweeps/<sweep-id>/     the shard, runs/<run-id>.json results, logs/, progress.json
On a host (model files):
    <model_cache>/<repo-slug>/<revision>/    persistent copy (fetched once)
    <staging>/<repo-slug>--<revision>/        fast copy (tmpfs), re-staged after a reboot
On the controller (under results/):
    LATEST                                   the id of the last sweep started
    <sweep-id>/sweep.json, plan.json, summary.json
    <sweep-id>/<host>/                       what came back
"""

from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING

from fleet.inventory import Host, slugify

if TYPE_CHECKING:  # for types only: the commands that read a sweep need no playbook model
    from fleet.playbook import ModelRef

BASE_PORT = 30000

# The controller's results folder (results/): the names every reader and writer uses.
LATEST = "LATEST"
SWEEP_RECORD = "sweep.json"
PLAN = "plan.json"
SUMMARY = "summary.json"


def model_cache_dir(model: ModelRef, host: Host) -> str:
    if model.path:
        return model.path
    return posixpath.join(host.paths.model_cache, slugify(model.label), slugify(model.revision))


def model_serve_dir(model: ModelRef, host: Host) -> str:
    """The directory the engine loads from: the staged copy when the host stages, else the cache."""
    if model.path or not host.paths.staging:
        return model_cache_dir(model, host)
    return posixpath.join(host.paths.staging, f"{slugify(model.label)}--{slugify(model.revision)}")


def sweep_dir(host: Host, sweep_id: str) -> str:
    return posixpath.join(host.paths.work_dir, "sweeps", sweep_id)


def agent_dir(host: Host) -> str:
    return posixpath.join(host.paths.work_dir, "agent")


# SGLang binds more than --port (internal sockets near it, an NCCL port): servers side by side on
# one host keep 10 ports apart.
PORT_STRIDE = 10


def server_port(index: int) -> int:
    """The port of a host's index-th server: any of them may run side by side (the agent places
    them as GPUs free up), so each has its own."""
    return BASE_PORT + PORT_STRIDE * index

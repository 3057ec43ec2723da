"""Inside a Slurm allocation, before the agent: bind the job's shard to the GPUs Slurm granted.

The controller writes each job's shard with GPU indexes relative to the allocation (0..N-1), as
`shard.slurm.json`; which GPUs of the node the job gets is Slurm's choice, known only when the
job starts (CUDA_VISIBLE_DEVICES, in the numbering the job's own nvidia-smi uses: the node's
indexes, or 0..N-1 under a device cgroup). This writes `shard.json` from the template with
those indexes, at every start (a requeued job may get other GPUs on another node), so that the
agent's checks of GPU holders look at the job's own GPUs and never at a neighbouring job's.

Standard library only: it runs on the node, so it lives in the shipped package (`fleet.host`) and
runs as `python -m fleet.host.grant SWEEP_DIR`.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Mapping
from typing import Any

TEMPLATE = "shard.slurm.json"
SHARD = "shard.json"


class GrantError(Exception):
    pass


def granted_gpus(env: Mapping[str, str]) -> list[int]:
    text = env.get("CUDA_VISIBLE_DEVICES", "")
    if not text or text == "NoDevFiles":
        raise GrantError(f"CUDA_VISIBLE_DEVICES is {text!r}: the job was granted no GPUs (is --gres set and gres.conf File= on the node?)")
    try:
        return [int(part) for part in text.split(",")]
    except ValueError:
        raise GrantError(f"CUDA_VISIBLE_DEVICES={text!r}: expected GPU indexes, e.g. 2,3") from None


def bind(template: dict[str, Any], granted: list[int]) -> dict[str, Any]:
    """The shard with each server's relative GPU indexes replaced by the granted ones."""
    shard = json.loads(json.dumps(template))
    for server in shard.get("servers", []):
        relative = server.get("gpus", [])
        if any(not isinstance(i, int) or not 0 <= i < len(granted) for i in relative):
            raise GrantError(f"server {server.get('label')!r} wants GPUs {relative} of an allocation of {len(granted)}")
        server["gpus"] = [granted[i] for i in relative]
        server.setdefault("env", {})["CUDA_VISIBLE_DEVICES"] = ",".join(str(granted[i]) for i in relative)
    return shard


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m fleet.slurm.grant SWEEP_DIR", file=sys.stderr)
        return 2
    directory = argv[0]
    try:
        with open(os.path.join(directory, TEMPLATE)) as handle:
            template = json.load(handle)
        shard = bind(template, granted_gpus(os.environ))
    except (OSError, ValueError, GrantError) as exc:
        print(f"fleet slurm grant: {directory}: {exc}", file=sys.stderr)
        return 2
    fd, temp = tempfile.mkstemp(dir=directory, prefix=".shard.", suffix=".tmp")
    with os.fdopen(fd, "w") as handle:
        json.dump(shard, handle, indent=1, sort_keys=True)
    os.replace(temp, os.path.join(directory, SHARD))
    print(f"fleet slurm grant: GPUs {','.join(map(str, granted_gpus(os.environ)))} bound into {SHARD}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

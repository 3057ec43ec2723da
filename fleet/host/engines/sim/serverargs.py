"""Moved: SGLang's argument resolution, per release, is `fleet.host.engines.sglang.args` (planning
and fixes use it without the simulator). This name stays for the simulator's own callers and tests."""

from __future__ import annotations

from fleet.host.engines.sglang.args import (
    DFLASH_FAMILY,
    EAGLE_FAMILY,
    ArgsFailure,
    ArgsWarning,
    ResolvedArgs,
    memory_inputs,
    resolve_server_args,
)

__all__ = ["DFLASH_FAMILY", "EAGLE_FAMILY", "ArgsFailure", "ArgsWarning", "ResolvedArgs", "memory_inputs", "resolve_server_args"]

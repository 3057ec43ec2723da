"""The engine seam: one package per serving engine under `fleet/host/engines/<name>/`, each behind
the `Engine` interface of `fleet.host.engines.base`, chosen by name here.

Adding an engine is adding its package (with an `engine` module that defines `ENGINE`) and its name
to ENGINE_NAMES. `sim` is not an engine: it is how a sim host runs the engine it plays.
"""

from __future__ import annotations

import importlib
from functools import lru_cache
from typing import Protocol, cast

from fleet.host.engines.base import Engine
from fleet.host.errors import UnknownEngineError

ENGINE_NAMES: tuple[str, ...] = ("sglang", "vllm")
# What a host, a sweep or a result that names no engine ran: everything fleet ran before engines
# were an axis was SGLang.
DEFAULT_ENGINE = "sglang"


@lru_cache(maxsize=None)
def engine(name: str = DEFAULT_ENGINE) -> Engine:
    """The engine called `name`; raises UnknownEngineError naming the ones fleet knows."""
    if name not in ENGINE_NAMES:
        raise UnknownEngineError(f"engine {name!r}: expected one of {', '.join(ENGINE_NAMES)}")
    found: Engine = importlib.import_module(f"{__name__}.{name}.engine").ENGINE
    return found


class ReleaseTable(Protocol):
    """An engine's names and known releases: its package's `release` module, the one home of what
    `Engine.title`, `.releases`, `.sim_release` and `.forks` answer."""

    TITLE: str
    KNOWN_RELEASES: tuple[str, ...]  # oldest first
    DEFAULT_SIM_RELEASE: str
    FORKS: tuple[str, ...]  # forks fleet knows by name; the first is what a sim host plays


@lru_cache(maxsize=None)
def release_table(name: str = DEFAULT_ENGINE) -> ReleaseTable:
    """The release table of the engine called `name`, without loading the engine: every command
    that reads a host file checks its release and fork against it, and the engine's flag tables,
    argument resolution and memory planner cost 14 ms of CPU to import (issue 28)."""
    if name not in ENGINE_NAMES:
        raise UnknownEngineError(f"engine {name!r}: expected one of {', '.join(ENGINE_NAMES)}")
    return cast(ReleaseTable, importlib.import_module(f"{__name__}.{name}.release"))

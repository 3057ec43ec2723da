"""The engine seam: one package per serving engine under `fleet/host/engines/<name>/`, each behind
the `Engine` interface of `fleet.host.engines.base`, chosen by name here.

Adding an engine is adding its package (with an `engine` module that defines `ENGINE`) and its name
to ENGINE_NAMES. `sim` is not an engine: it is how a sim host runs the engine it plays.
"""

from __future__ import annotations

import importlib
from functools import lru_cache

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

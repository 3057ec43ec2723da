"""The engine seam: how a server configuration is launched on a host, per engine kind.

`sglang` runs `python -m sglang.launch_server`; `sim` runs fleet's simulator, which takes the same
flags (in the v0.5.13 spelling its command line speaks) under `python -m fleet.host.engines.sim`.
Kept free of pydantic imports at module level: hosts import `fleet.launch.*` with the standard library only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fleet.host.modelcard import load_model_card
from fleet.launch.sglang import SGLANG_MODULE, LaunchSpec, build_launch

if TYPE_CHECKING:
    from fleet.inventory import EngineKind
    from fleet.playbook import ServerConfig

SIM_MODULE = "fleet.host.engines.sim"
# fleet/host/engines/sim/cli.py accepts SGLang v0.5.13 flag names (before the 0.5.14 renames).
SIM_FLAG_VERSION = "0.5.13"


def launch_spec(
    engine: EngineKind,
    server: ServerConfig,
    *,
    python: str,
    model_path: str,
    draft_path: str | None,
    port: int,
    bind_host: str = "127.0.0.1",
    hybrid: bool | None = None,
    served_model_name: str | None = None,
    sglang_version: str | None = None,
) -> LaunchSpec:
    """`hybrid=None`: decided from the playbook's model card when it names one. `sglang_version`
    (the host's, when known) only matters for the real engine."""
    card = load_model_card(server.model.card) if hybrid is None and server.model.card else None
    sim = engine == "sim"  # EngineKind is a str enum; comparing by value keeps fleet.inventory unimported
    return build_launch(
        server,
        python=python,
        model_path=model_path,
        draft_path=draft_path,
        port=port,
        bind_host=bind_host,
        hybrid=hybrid,
        served_model_name=served_model_name,
        card=card,
        sglang_version=SIM_FLAG_VERSION if sim else sglang_version,
        module=SIM_MODULE if sim else SGLANG_MODULE,
    )

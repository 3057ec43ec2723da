"""systemd units for servers and the agent, rendered from jinja2 templates. Pure: data in, unit text out.

Hosts under the `process` service manager get no units; the agent starts the same argv and
environment itself with `setsid`, a pid file and a log file (fleet/host/agent/services.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from fleet.host.agent import AGENT_MODULE
from fleet.host.contract.exits import FINAL

if TYPE_CHECKING:
    import jinja2

UNIT_DIR = "/etc/systemd/system"
_UNIT_NAME = re.compile(r"^[A-Za-z0-9:_.@-]+$")


def systemd_quote(value: str) -> str:
    """One word of ExecStart= or Environment=, exactly as given: no specifier (%) or variable ($) expansion."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%").replace("$", "$$").replace("\n", "\\n")
    return f'"{escaped}"'


def systemd_quote_keep_specifiers(value: str) -> str:
    """Like systemd_quote, but `%i` (the instance name) is left for systemd to fill in."""
    return systemd_quote(value).replace("%%i", "%i")


def systemd_path(value: str) -> str:
    if "\n" in value or not value.startswith("/"):
        raise ValueError(f"a unit path must be absolute and on one line: {value!r}")
    return value.replace("%", "%%")


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    import jinja2  # here: `fleet fetch-logs` and `status` name units without rendering any (40 ms)

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("fleet.provision", "templates"),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["systemd_quote"] = systemd_quote
    env.filters["systemd_path"] = systemd_path
    env.filters["systemd_quote_keep_specifiers"] = systemd_quote_keep_specifiers
    return env


@dataclass(frozen=True)
class Unit:
    name: str  # e.g. fleet-srv-<sweep>-<server>.service
    text: str

    @property
    def path(self) -> str:
        return f"{UNIT_DIR}/{self.name}"


def _check_name(name: str) -> str:
    if not _UNIT_NAME.match(name) or not name.endswith(".service"):
        raise ValueError(f"not a valid unit name: {name!r}")
    return name


def _env_items(env: Mapping[str, str]) -> list[tuple[str, str]]:
    for key in env:
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", key):
            raise ValueError(f"not a valid environment variable name: {key!r}")
    return sorted(env.items())


def server_unit_name(sweep_id: str, server_id: str) -> str:
    return f"fleet-srv-{sweep_id}-{server_id}.service"


AGENT_UNIT = "fleet-agent@.service"


def agent_unit_name(sweep_id: str) -> str:
    """The instance of the agent's template unit that runs the agent on `sweep_id`'s directory."""
    return AGENT_UNIT.replace("@", f"@{sweep_id}", 1)


def render_server_unit(
    *,
    sweep_id: str,
    server_id: str,
    label: str,
    argv: Sequence[str],
    env: Mapping[str, str],
    gpus: Sequence[int],
    working_dir: str,
    log_file: str,
    start_timeout_s: float,
    stop_timeout_s: float = 60,
    gpus_env_file: str | None = None,
) -> Unit:
    """`gpus`: the plan's; `gpus_env_file`: where the agent writes the GPUs it placed the server on."""
    environment = {**env, "CUDA_VISIBLE_DEVICES": ",".join(map(str, gpus)), "FLEET_LOG": log_file}
    text = (
        _environment()
        .get_template("server.service.j2")
        .render(
            sweep_id=sweep_id,
            server_id=server_id,
            label=label,
            argv=list(argv),
            environment=_env_items(environment),
            working_dir=working_dir,
            start_timeout_s=int(start_timeout_s),
            stop_timeout_s=int(stop_timeout_s),
            gpus_env_file=gpus_env_file,
        )
    )
    return Unit(_check_name(server_unit_name(sweep_id, server_id)), text)


def render_agent_unit(*, work_dir: str, agent_dir: str, python: str, stop_timeout_s: float = 120) -> Unit:
    """The agent's template unit; `fleet-agent@<sweep-id>` runs the agent on that sweep's directory."""
    text = (
        _environment()
        .get_template("agent.service.j2")
        .render(
            work_dir=work_dir,
            agent_dir=agent_dir,
            python=python,
            agent_module=AGENT_MODULE,
            stop_timeout_s=int(stop_timeout_s),
            final_exits=[int(code) for code in FINAL],
        )
    )
    return Unit(_check_name(AGENT_UNIT), text)

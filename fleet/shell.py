"""What fleet may put into a remote shell's words. Standard library only, and cheap to import:
host files are checked by these rules (`fleet.config`) and every command line is built by them
(`fleet.transport.base`), so a value a host file accepts is one the shell takes as meant."""

from __future__ import annotations

import re

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def is_env_name(name: str) -> bool:
    """A name a shell can export: letters, digits and _, not starting with a digit."""
    return _ENV_NAME.fullmatch(name) is not None

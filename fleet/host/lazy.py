"""A package's names imported when first asked for (PEP 562), for packages whose `__init__` names
what their modules define: importing one module of such a package runs its `__init__`, and a
command must not pay there for modules it never uses (issue 28: every host file read imports the
contract's reader, every transport module the transport package)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping


def lazy_exports(package: str, homes: Mapping[str, str]) -> Callable[[str], object]:
    """The module `__getattr__` of `package`: each name of `homes` (name -> the module that defines
    it) is imported from its module when first asked for; any other name is an AttributeError."""

    def __getattr__(name: str) -> object:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(home), name)

    return __getattr__

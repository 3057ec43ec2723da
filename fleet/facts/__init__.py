"""Host facts: each a shell command plus a pure parser, gathered in one round trip and cached per boot."""

from typing import TYPE_CHECKING

from fleet.facts.gather import FactsCache, gather_facts, refresh_volatile
from fleet.facts.models import HostFacts
from fleet.errors import FactError
from fleet.host.lazy import lazy_exports

if TYPE_CHECKING:
    from fleet.facts.render import facts_table

# The table (rich) only where one is printed: `fleet facts --json` loads no rich (issue 28).
__getattr__ = lazy_exports(__name__, {"facts_table": "fleet.facts.render"})

__all__ = ["FactError", "FactsCache", "HostFacts", "facts_table", "gather_facts", "refresh_volatile"]

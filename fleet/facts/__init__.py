"""Host facts: each a shell command plus a pure parser, gathered in one round trip and cached per boot."""

from fleet.facts.gather import FactsCache, gather_facts, refresh_volatile
from fleet.facts.models import HostFacts
from fleet.errors import FactError
from fleet.facts.render import facts_table

__all__ = ["FactError", "FactsCache", "HostFacts", "facts_table", "gather_facts", "refresh_volatile"]

"""fleet: run LLM-serving benchmark sweeps on GPU hosts over SSH, and bring back results that can be trusted."""

__version__ = "0.1.0"

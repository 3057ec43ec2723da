"""fleet's workload data (`fleet/workloads/data/`, see its README): the prompt library, the
long-context corpus and the agentic conversation. Runs on the controller."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from fleet.errors import WorkloadError

DATA_DIR = Path(__file__).resolve().parent / "data"
# A generous bound on characters per token (real BPE on English and code: about 3-4.5), so that
# the corpus slice shipped in a shard holds at least the target number of tokens.
MAX_CHARS_PER_TOKEN = 8


@lru_cache(maxsize=None)
def load_data(name: str) -> Any:
    """One JSON file of the data directory, read once."""
    path = DATA_DIR / name
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise WorkloadError(f"{path}: cannot read workload data: {exc}") from exc


@lru_cache(maxsize=None)
def _corpus() -> str:
    return (DATA_DIR / load_data("long_context.json")["corpus_file"]).read_text(encoding="utf-8")


def prompt_names() -> list[str]:
    """The names a playbook may use in `prompts:` (short) and `prompt:` (concurrency)."""
    return sorted(load_data("prompts.json"))


def library_prompt(workload_name: str, name: str) -> dict[str, str]:
    """A prompt of the library as a shard carries it: its name, category and text."""
    library = load_data("prompts.json")
    if name not in library:
        raise WorkloadError(f"workload {workload_name!r}: prompt {name!r} is not in fleet's prompt library ({DATA_DIR / 'prompts.json'}); known: {', '.join(sorted(library))}")
    return {"name": name, "category": library[name]["category"], "text": library[name]["text"]}


def corpus_slice(prompt_tokens: int) -> str:
    """Enough of the corpus for a prompt of `prompt_tokens` (the agent repeats it if the server
    counts fewer tokens than wanted, and shrinks it to size)."""
    return _corpus()[: prompt_tokens * MAX_CHARS_PER_TOKEN]

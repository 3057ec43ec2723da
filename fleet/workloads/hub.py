"""A dataset workload's file from a Hugging Face hub dataset repo, pinned to a commit.

The controller samples a dataset's prompts (fleet.workloads.datasets) and ships the sample with the
sweep, so the file is needed where the controller runs, once: the repo is fetched at its commit into
the controller's cache (`$XDG_CACHE_HOME/fleet/datasets/<org>--<name>/<commit>/`, ~/.cache by
default) by the real `huggingface_hub` client, with the same script and the same words for the
hub's refusals as a host's model fetch (fleet.host.hubfetch); a commit never changes, so a fetched
one is read from the cache from then on, offline. The token, if any, is HF_TOKEN in the
environment, where huggingface_hub reads it (HF_ENDPOINT too, for a mirror): never an argument,
never written. A branch or tag is refused: it moves, and a run's id must mean one sample.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from fleet.host.hubfetch import HUB_FETCH_SCRIPT, HUB_REFUSED, hub_refusal

FETCH_TIMEOUT_S = 1800.0
DATASETS_DIR = "datasets"


def datasets_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(base) / "fleet" / DATASETS_DIR


def cached_path(repo: str, revision: str, path: str) -> Path:
    """Where the file of `repo` at commit `revision` is, once fetched."""
    return datasets_cache_dir() / repo.replace("/", "--") / revision / path


def fetch_dataset_file(repo: str, revision: str, path: str) -> Path:
    """The file `path` of hub dataset repo `repo` at commit `revision`, fetched into the cache if it
    is not there yet. Raises ValueError with what to do (the playbook's validator names the field)."""
    target = cached_path(repo, revision, path)
    if target.is_file():
        return target
    if importlib.util.find_spec("huggingface_hub") is None:
        raise ValueError(f"fetching dataset repo {repo} needs huggingface_hub on this machine (pip install huggingface_hub), or download {path} yourself and give it as `file`")
    folder = cached_path(repo, revision, "")
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([sys.executable, "-c", HUB_FETCH_SCRIPT, repo, revision, str(folder), "dataset"], capture_output=True, text=True, timeout=FETCH_TIMEOUT_S, stdin=subprocess.DEVNULL)
    if done.returncode == HUB_REFUSED:
        said = hub_refusal(repo, revision, "dataset", done.stdout, token_given=bool(os.environ.get("HF_TOKEN")))
        raise ValueError(said or f"the hub refused dataset repo {repo} at {revision}")
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise ValueError(f"fetching dataset repo {repo} at {revision} failed (exit {done.returncode}): {last}")
    if not target.is_file():
        present = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and ".cache" not in p.parts)
        raise ValueError(f"dataset repo {repo} at {revision} has no file {path!r}; it has: {', '.join(present[:20]) or 'no files'}")
    return target

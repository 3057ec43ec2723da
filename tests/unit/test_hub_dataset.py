"""A playbook's dataset from a Hugging Face hub dataset repo at a commit (issue 22): fetched once into
the controller's cache by the real `huggingface_hub` client against a local hub speaking the hub's
API (tests/testfleet/hub.py), sampled like a local file, recorded with its repo and commit; a gated
repo's refusal in words naming HF_TOKEN, the token only in the environment; a branch refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleet.errors import ConfigError
from fleet.playbook import expand_runs, load_playbook
from fleet.workloads import resolve_workload
from tests.testfleet.hub import HubServer

TOKEN = "hf_datasettoken_Q7x"
QUESTIONS = "".join(
    json.dumps({"question_id": i, "category": category, "turns": [f"{category} question {i}: explain step by step.", "and then?"]}) + "\n"
    for i, category in enumerate(["coding", "math", "translation", "coding", "math", "rag"])
)


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    pytest.importorskip("huggingface_hub")
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE", "HF_HUB_CACHE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with HubServer() as server:
        monkeypatch.setenv("HF_ENDPOINT", server.endpoint)  # the fetch's child reads it, as a mirror's
        yield server


def playbook(tmp_path: Path, hub_file: dict[str, Any], **workload: Any) -> Path:
    data = {
        "name": "hubdata",
        "model": {"repo": "meta-llama/Llama-3.1-8B-Instruct", "card": "llama-3.1-8b-instruct"},
        "methods": {"ar": {}},
        "tp": [1],
        "workloads": {"spec": {"kind": "dataset", "format": "spec_bench", "hub": hub_file, "requests": 4, "seed": 3, **workload}},
    }
    path = tmp_path / "book.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_a_dataset_pinned_to_a_commit_is_fetched_once_and_sampled_like_a_file(hub: HubServer, tmp_path: Path) -> None:
    first = hub.add_commit("org/spec-bench", {"question.jsonl": QUESTIONS, "README.md": "# spec"}, repo_type="dataset")
    hub.add_commit("org/spec-bench", {"question.jsonl": "moved on\n"}, repo_type="dataset")  # main moves; the pin holds
    book = load_playbook(playbook(tmp_path, {"repo": "org/spec-bench", "revision": first, "path": "question.jsonl"}))
    [run] = expand_runs(book)
    resolved = resolve_workload(run)
    dataset = resolved["dataset"]
    assert dataset["repo"] == "org/spec-bench" and dataset["revision"] == first and dataset["file"] == "question.jsonl"
    assert dataset["requests"] == 4 and set(dataset["categories"]) <= {"coding", "math", "translation", "rag"}
    assert all(s["prompt"].endswith("explain step by step.") for s in resolved["samples"])  # the first turn, as Spec-Bench's loaders send
    cached = tmp_path / "cache" / "fleet" / "datasets" / "org--spec-bench" / first / "question.jsonl"
    assert cached.read_text() == QUESTIONS
    # Again: read from the cache, the hub not asked; the run's id the same (it means one sample).
    asked = len(hub.requests)
    again = expand_runs(load_playbook(playbook(tmp_path, {"repo": "org/spec-bench", "revision": first, "path": "question.jsonl"})))
    assert len(hub.requests) == asked and again[0].id == run.id


def test_a_gated_dataset_names_hf_token_and_the_token_travels_only_in_the_environment(hub: HubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sha = hub.add_commit("org/gated-bench", {"question.jsonl": QUESTIONS}, repo_type="dataset", gated=True, granted_tokens=(TOKEN,))
    where = {"repo": "org/gated-bench", "revision": sha, "path": "question.jsonl"}
    with pytest.raises(ConfigError) as refused:
        load_playbook(playbook(tmp_path, where))
    text = str(refused.value)
    assert "workloads.spec" in text and "gated" in text and "HF_TOKEN" in text and "no HF_TOKEN was given" in text, text
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    [run] = expand_runs(load_playbook(playbook(tmp_path, where)))
    assert resolve_workload(run)["dataset"]["revision"] == sha
    assert any(r.authorization == f"Bearer {TOKEN}" for r in hub.requests)  # huggingface_hub read it from the environment
    written = [p for p in (tmp_path / "cache").rglob("*") if p.is_file() and TOKEN.encode() in p.read_bytes()]
    assert written == [], "the token is in no file fleet or the fetch wrote"


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        ({"repo": "org/spec-bench", "revision": "main", "path": "question.jsonl"}, "a commit id (40 hex digits)"),
        ({"repo": "org/spec-bench", "revision": "SHA", "path": "../question.jsonl"}, "a file's path inside the repo"),
        ({"repo": "org/spec-bench", "revision": "SHA", "path": "questions.jsonl"}, "has no file 'questions.jsonl'; it has: README.md, question.jsonl"),
        ({"repo": "org/nothing-here", "revision": "SHA", "path": "question.jsonl"}, "the hub has no dataset repo org/nothing-here"),
    ],
    ids=["a-branch", "a-path-out-of-the-repo", "a-file-the-commit-lacks", "a-repo-the-hub-lacks"],
)
def test_bad_hub_datasets_are_refused_naming_the_field(hub: HubServer, tmp_path: Path, where: dict[str, str], expected: str) -> None:
    sha = hub.add_commit("org/spec-bench", {"question.jsonl": QUESTIONS, "README.md": "# spec"}, repo_type="dataset")
    with pytest.raises(ConfigError) as refused:
        load_playbook(playbook(tmp_path, {k: v.replace("SHA", sha) for k, v in where.items()}))
    assert expected in str(refused.value) and "workloads.spec" in str(refused.value), str(refused.value)


def test_one_of_file_or_hub(hub: HubServer, tmp_path: Path) -> None:
    sha = hub.add_commit("org/spec-bench", {"question.jsonl": QUESTIONS}, repo_type="dataset")
    local = tmp_path / "question.jsonl"
    local.write_text(QUESTIONS)
    with pytest.raises(ConfigError, match="one of `file`"):
        load_playbook(playbook(tmp_path, {"repo": "org/spec-bench", "revision": sha, "path": "question.jsonl"}, file=str(local)))


def test_a_relative_file_is_found_beside_the_playbook_and_its_run_id_keeps_the_name_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "campaign"
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "question.jsonl").write_text(QUESTIONS)
    data = {"name": "rel", "model": {"repo": "m/x", "card": "llama-3.1-8b-instruct"}, "methods": {"ar": {}}, "tp": [1],
            "workloads": {"spec": {"kind": "dataset", "format": "spec_bench", "file": "data/question.jsonl", "requests": 2}}}  # fmt: skip
    (folder / "book.yaml").write_text(yaml.safe_dump(data))
    monkeypatch.chdir(tmp_path)  # not the playbook's folder: the file is found beside the playbook
    [run] = expand_runs(load_playbook(folder / "book.yaml"))
    assert resolve_workload(run)["dataset"]["file"] == "question.jsonl"
    monkeypatch.chdir(folder)  # from beside it, as before: the same run
    [again] = expand_runs(load_playbook(Path("book.yaml")))
    assert again.id == run.id

"""Bad dataset, load and SLO input, in test_bad_input.py's way: the real `fleet plan` and `fleet
sweep` refuse each with exit 2 and a message naming the playbook, the field and what was expected
(and, for a dataset file, the file and where in it), before any host is contacted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.test_bad_input import HOST, PLAYBOOK, Workspace, fleet, ws  # noqa: F401 - ws is a fixture

QUESTIONS = [
    {"question_id": 81, "category": "writing", "turns": ["Compose a travel blog post about Hawaii."]},
    {"question_id": 161, "category": "translation", "turns": ["Translate into English: Guten Morgen."]},
]


def dataset_file(folder: Path, name: str, content: str | None = None) -> Path:
    path = folder / name
    path.write_text(content if content is not None else "".join(json.dumps(row) + "\n" for row in QUESTIONS))
    return path


def workload(**fields: Any) -> dict[str, Any]:
    return {"kind": "random", "input_tokens": 128, "max_new_tokens": 32, **fields}


# (id, the workload (a callable of the data folder), the field named, more words of the message)
CASES = [
    ("dataset-wrong-format", lambda d: {"kind": "dataset", "file": str(dataset_file(d, "g.jsonl", '{"question": "q", "answer": "a"}\n')), "format": "spec_bench"},
     "workloads.w.dataset", ["g.jsonl line 1", "`turns`", "question.jsonl"]),
    ("dataset-sharegpt-not-a-list", lambda d: {"kind": "dataset", "file": str(dataset_file(d, "s.json", '{"id": 1}')), "format": "sharegpt"},
     "workloads.w.dataset", ["s.json", "ShareGPT", "top level"]),
    ("dataset-empty", lambda d: {"kind": "dataset", "file": str(dataset_file(d, "e.jsonl", "")), "format": "spec_bench"},
     "workloads.w.dataset", ["e.jsonl", "at least one spec_bench sample"]),
    ("dataset-missing", lambda d: {"kind": "dataset", "file": str(d / "nope.jsonl"), "format": "gsm8k"},
     "workloads.w.dataset", ["nope.jsonl", "exists"]),
    ("dataset-category-unknown", lambda d: {"kind": "dataset", "file": str(dataset_file(d, "q.jsonl")), "format": "spec_bench", "categories": ["coding"]},
     "workloads.w.dataset", ["`categories`", "translation, writing", "not coding"]),
    ("dataset-sha256-other", lambda d: {"kind": "dataset", "file": str(dataset_file(d, "q.jsonl")), "format": "mt_bench", "sha256": "0" * 64},
     "workloads.w.dataset", ["`sha256`", "the file's is"]),
    ("dataset-format-unknown", lambda d: {"kind": "dataset", "file": str(dataset_file(d, "q.jsonl")), "format": "alpaca"},
     "workloads.w.dataset.format", ["sharegpt"]),
    ("rate-zero", lambda d: workload(load={"rate": 0}), "workloads.w.random.load.rate", ["greater than 0"]),
    ("rate-nan", lambda d: workload(load={"rate": float("nan")}), "workloads.w.random.load.rate", ["finite"]),
    ("rate-missing", lambda d: workload(load={"burstiness": 2}), "workloads.w.random.load.rate", ["required"]),
    ("burstiness-zero", lambda d: workload(load={"rate": 2, "burstiness": 0}), "workloads.w.random.load.burstiness", ["greater than 0"]),
    ("search-without-slo", lambda d: workload(load={"rate": 2, "search": {"rates": [1, 16]}}), "workloads.w.random", ["an `slo` beside `load.search`"]),
    ("search-rate-zero", lambda d: workload(load={"rate": 2, "search": {"rates": [0, 16]}}, slo={"tpot": "50ms"}), "workloads.w.random.load.search.rates[0]", ["greater than 0"]),
    ("search-rate-nan", lambda d: workload(load={"rate": 2, "search": {"rates": [1, float("nan")]}}, slo={"tpot": "50ms"}), "workloads.w.random.load.search.rates[1]", ["finite"]),
    ("search-rates-reversed", lambda d: workload(load={"rate": 2, "search": {"rates": [16, 1]}}, slo={"tpot": "50ms"}), "workloads.w.random.load.search", ["lowest below highest"]),
    ("search-start-outside", lambda d: workload(load={"rate": 40, "search": {"rates": [1, 16]}}, slo={"tpot": "50ms"}), "workloads.w.random.load", ["within `search.rates`"]),
    ("search-too-few-probes", lambda d: workload(load={"rate": 2, "search": {"rates": [1, 1000], "tolerance": 0.01}}, slo={"tpot": "50ms"}), "workloads.w.random.load.search", ["`max_probes` of at least 12"]),
    ("slo-without-unit", lambda d: workload(slo={"ttft": 500}), "workloads.w.random.slo.ttft", ["with its unit", "200ms"]),
    ("slo-unit-unknown", lambda d: workload(slo={"tpot": "50 minutes"}), "workloads.w.random.slo.tpot", ["with its unit"]),
    ("slo-empty", lambda d: workload(slo={}), "workloads.w.random.slo", ["at least one of"]),
    ("random-above-context", lambda d: workload(input_tokens=4000, max_new_tokens=200), "(top level)", ["input_tokens + max_new_tokens", "4096"]),
]  # fmt: skip


@pytest.mark.parametrize("command", ["plan", "sweep"])
@pytest.mark.parametrize("case", [pytest.param(c, id=c[0]) for c in CASES])
def test_bad_workload_input_is_refused_before_any_host_is_contacted(ws: Workspace, tmp_path: Path, case: Any, command: str) -> None:  # noqa: F811
    _, make, field, words = case
    data = tmp_path / "data"
    data.mkdir()
    host_file, book = ws.hosts_dir / "ct200.yaml", ws.playbook
    host_file.write_text(yaml.safe_dump(HOST))
    book.write_text(yaml.safe_dump({**PLAYBOOK, "server": {"context_length": 4096}, "workloads": {"w": make(data)}}))
    code, output = fleet(command, "-p", str(book), "--hosts", "ct200")
    flat = " ".join(output.split())
    assert code == 2, output
    assert ws.contacted == []
    assert str(book) in output and field in flat and "expected" in flat and "Traceback" not in output, output
    for word in words:
        assert word in flat, output
    assert not ws.results.exists() or not any(p.name != "quarantine.json" for p in ws.results.iterdir())

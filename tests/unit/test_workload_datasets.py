"""Dataset loaders on files written here in each publisher's exact format (field names and nesting
from the upstream loaders cited in fleet.workloads.datasets), seeded sampling, and what a resolved
dataset workload records. Nothing is downloaded."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from fleet.host.tokens import count_tokens
from fleet.workloads.kinds import DatasetWorkload
from fleet.workloads.datasets import LOADERS, describe, file_sha256, sample_requests
from fleet.errors import DatasetFormatError


def jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def sharegpt(path: Path) -> Path:
    # ShareGPT_V3_unfiltered_cleaned_split.json: a list of {"id", "conversations": [{"from", "value"}]}.
    data = [
        {"id": "QWJhYvA_0", "conversations": [{"from": "human", "value": "Summarize the plot of Hamlet in two lines."},
                                               {"from": "gpt", "value": "A prince avenges his father and everyone dies at the end."}]},
        {"id": "one-turn", "conversations": [{"from": "human", "value": "left out: one turn only"}]},
        {"id": "i6IyJda_0", "conversations": [{"from": "human", "value": "Write a haiku about the sea please"},
                                               {"from": "gpt", "value": "Waves fold into foam, the tide keeps its old promise, salt on the cold stones."},
                                               {"from": "human", "value": "Another one"}]},
    ]  # fmt: skip
    path.write_text(json.dumps(data))
    return path


def questions(path: Path) -> Path:
    # Spec-Bench data/spec_bench/question.jsonl and FastChat's mt_bench/question.jsonl, line for line.
    return jsonl(path, [
        {"question_id": 81, "category": "writing", "turns": ["Compose an engaging travel blog post about Hawaii.", "Rewrite it."]},
        {"question_id": 161, "category": "translation", "turns": ["Translate into English: Guten Morgen, wie geht es?"]},
        {"question_id": 171, "category": "math_reasoning", "turns": ["Janet has 3 apples and buys 4 more. How many?"], "reference": ["7"]},
    ])  # fmt: skip


FILES = {
    "sharegpt": (sharegpt, "sharegpt.json", 2, None),
    "spec_bench": (questions, "question.jsonl", 3, {"writing", "translation", "math_reasoning"}),
    "mt_bench": (questions, "question.jsonl", 3, {"writing", "translation", "math_reasoning"}),
    "gsm8k": (lambda p: jsonl(p, [{"question": "Janet's ducks lay 16 eggs per day. How many?", "answer": "16 - 3 = 13\n#### 13"}]), "test.jsonl", 1, None),
    "humaneval": (lambda p: jsonl(p, [{"task_id": "HumanEval/0", "prompt": "def has_close_elements(numbers, threshold):\n", "canonical_solution": "    return False\n",
                                       "test": "def check(candidate):\n    pass\n", "entry_point": "has_close_elements"}]), "HumanEval.jsonl", 1, None),
    "mbpp": (lambda p: jsonl(p, [{"text": "Write a function to find the minimum cost path.", "code": "def min_cost(c, m, n):\r\n  return 0", "task_id": 1,
                                  "test_setup_code": "", "test_list": ["assert min_cost([[1]], 0, 0) == 1"], "challenge_test_list": []}]), "mbpp.jsonl", 1, None),
    "jsonl": (lambda p: jsonl(p, [{"prompt": "Say hi", "category": "chat", "output_len": 12}, {"prompt": "Sort a list in Python", "category": "code"}]), "prompts.jsonl", 2, {"chat", "code"}),
}  # fmt: skip


def workload(path: Path, format: str, **extra: Any) -> DatasetWorkload:
    return DatasetWorkload.model_validate({"kind": "dataset", "file": str(path), "format": format, **extra})


@pytest.mark.parametrize("format", sorted(FILES))
def test_each_publishers_format_loads(tmp_path: Path, format: str) -> None:
    write, name, count, categories = FILES[format]
    path = write(tmp_path / name)
    samples = LOADERS[format](path)
    assert len(samples) == count
    assert all(s.prompt for s in samples)
    expected: set[str | None] = set(categories) if categories else {None}
    assert {s.category for s in samples} == expected
    assert workload(path, format).sha256 == file_sha256(path)


def test_sharegpt_takes_the_first_turn_and_the_replys_length(tmp_path: Path) -> None:
    samples = LOADERS["sharegpt"](sharegpt(tmp_path / "s.json"))
    assert [s.source_id for s in samples] == ["QWJhYvA_0", "i6IyJda_0"]
    assert samples[0].prompt.startswith("Summarize") and samples[0].output_tokens == count_tokens("A prince avenges his father and everyone dies at the end.")


def test_mbpp_prompt_is_the_papers_and_humaneval_reads_gzip(tmp_path: Path) -> None:
    mbpp = LOADERS["mbpp"](FILES["mbpp"][0](tmp_path / "mbpp.jsonl"))[0]
    assert mbpp.prompt.startswith("You are an expert Python programmer, and here is your task: Write a function")
    assert "assert min_cost" in mbpp.prompt
    plain = FILES["humaneval"][0](tmp_path / "HumanEval.jsonl")
    packed = tmp_path / "HumanEval.jsonl.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert LOADERS["humaneval"](packed)[0].source_id == "HumanEval/0"


@pytest.mark.parametrize(
    "format, content, words",
    [
        ("spec_bench", '{"question_id": 1, "category": "qa", "turns": "not a list"}\n', ["line 1", "`turns`"]),
        ("spec_bench", '{"question": "a GSM8K line"}\n', ["line 1", "`turns`", "missing"]),
        ("sharegpt", '{"conversations": []}', ["ShareGPT", "top level is a dict"]),
        ("sharegpt", '[{"id": "x", "messages": []}]', ["item [0]", "conversations"]),
        ("gsm8k", '{"question": "q"}\n', ["line 1", "`answer`"]),
        ("gsm8k", '{"question": "q", "answer": "#### 1"}\nnot json\n', ["line 2", "not JSON"]),
        ("humaneval", '{"task_id": "HumanEval/0"}\n', ["`prompt`", "missing"]),
        ("mbpp", '{"text": "t", "task_id": "1", "test_list": []}\n', ["`task_id`", "str"]),
        ("jsonl", '{"prompt": "p", "output_len": 0}\n', ["output_len", "at least 1"]),
    ],
)
def test_a_file_in_another_format_names_the_place(tmp_path: Path, format: str, content: str, words: list[str]) -> None:
    path = tmp_path / "data.jsonl"
    path.write_text(content)
    with pytest.raises(DatasetFormatError) as caught:
        LOADERS[format](path)
    for word in [str(path), *words]:
        assert word in str(caught.value)


def test_sampling_is_seeded_and_records_hashes_and_lengths(tmp_path: Path) -> None:
    path = questions(tmp_path / "question.jsonl")
    first = workload(path, "spec_bench", requests=7, seed=3)
    again = sample_requests(first)
    assert [s.prompt for s in sample_requests(first)] == [s.prompt for s in again]
    other = sample_requests(workload(path, "spec_bench", requests=7, seed=4))
    assert [s.prompt for s in other] != [s.prompt for s in again]
    record = describe(first, again)
    assert record["file"] == "question.jsonl" and record["sha256"] == file_sha256(path) and len(record["sample_sha256"]) == 64
    assert sum(record["categories"].values()) == 7 and record["prompt_tokens"]["n"] == 7
    only = sample_requests(workload(path, "spec_bench", categories=["translation"], requests=4))
    assert {s.category for s in only} == {"translation"} and all(s.output_tokens == 256 for s in only)


def test_a_run_id_follows_the_files_contents(tmp_path: Path) -> None:
    path = questions(tmp_path / "question.jsonl")
    before = workload(path, "spec_bench").model_dump()
    path.write_text(path.read_text().replace("Hawaii", "Crete"))
    assert workload(path, "spec_bench").model_dump() != before

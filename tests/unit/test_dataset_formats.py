"""Every dataset format fleet reads, on files written here in each publisher's exact format, through
fleet's own path (the playbook's DatasetWorkload, its resolved shard JSON, the agent's request list).

The field names and nesting of each generated file are those the upstream loaders read, cited per
field (`vllm`: the vLLM 0.33.0 wheel's vllm/benchmarks/datasets/datasets.py; `sglang`: the SGLang
0.5.23 wheel's sglang/benchmark/datasets/). Nothing is downloaded. The same files are run through
the upstream loaders themselves in tests/integration/test_dataset_formats_upstream.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml
from pydantic import ValidationError

from fleet.errors import DatasetFormatError
from fleet.host.agent.kinds.listed import dataset_requests, sample_sha256
from fleet.host.tokens import count_tokens
from fleet.workloads.datasets import LOADERS, load_samples
from fleet.workloads.kinds import DatasetWorkload
from tests.unit.test_bad_input import HOST, PLAYBOOK, Workspace, fleet, ws  # noqa: F401 - ws is a fixture


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


# --- the publishers' formats -------------------------------------------------------------------

SHAREGPT_PAIRS = [
    ("Summarize the plot of Hamlet in two lines.", "A prince avenges his father and everyone dies at the end."),
    ("Write a haiku about the sea, please.", "Waves fold into foam, the tide keeps its old promise, salt on the cold stones."),
    ("What is the capital of Australia and why was it chosen?", "Canberra, a compromise between Sydney and Melbourne."),
]


def sharegpt(path: Path) -> Path:
    # ShareGPT_V3_unfiltered_cleaned_split.json: ONE JSON list (sglang sharegpt.py:79-80 `json.load`,
    # vllm datasets.py:1341-1342) of {"id", "conversations": [{"from", "value"}, ...]}. Read:
    # `conversations` (sglang sharegpt.py:86 also takes `conversation`; vllm datasets.py:1346 only
    # `conversations`), at least 2 turns (sglang :82-87, vllm :1346), the first two turns' `value`
    # (sglang :88-95, vllm :1372-1373) as prompt and reply. `from` is in every real file, read by neither.
    data: list[dict[str, Any]] = [{"id": f"conv_{i}", "conversations": [{"from": "human", "value": prompt}, {"from": "gpt", "value": reply}]} for i, (prompt, reply) in enumerate(SHAREGPT_PAIRS)]
    data.insert(1, {"id": "one_turn", "conversations": [{"from": "human", "value": "Left out: a conversation of one turn."}]})
    data[2]["conversations"].append({"from": "human", "value": "A third turn: never read."})
    path.write_text(json.dumps(data, indent=2))
    return path


SPEC_BENCH = [
    # Spec-Bench data/spec_bench/question.jsonl: {"question_id", "category", "turns"} a line; vllm
    # SpecBench reads `row["category"]` and `row["turns"][0]` (datasets.py:2972-2973), FastChat
    # fastchat/llm_judge/common.py:88-96 the same fields. Its 13 categories include these.
    {"question_id": 81, "category": "writing", "turns": ["Compose an engaging travel blog post about a recent trip to Hawaii.", "Rewrite your previous response."]},
    {"question_id": 161, "category": "translation", "turns": ["Translate into English: Guten Morgen, wie geht es dir?"]},
    {"question_id": 241, "category": "math_reasoning", "turns": ["Janet has 3 apples and buys 4 more. How many does she have?"], "reference": ["7"]},
    {"question_id": 321, "category": "rag", "turns": ["Answer from the passage: the Nile is the longest river. Which river is the longest?"]},
]
MT_BENCH = [
    # FastChat fastchat/llm_judge/data/mt_bench/question.jsonl (philschmid/mt-bench): two turns each,
    # vllm MTBenchDataset reads `item["turns"][0]` (datasets.py:3499); categories as FastChat's 8.
    {"question_id": 81, "category": "writing", "turns": ["Compose an engaging travel blog post about Hawaii.", "Rewrite it starting every sentence with A."]},
    {"question_id": 101, "category": "reasoning", "turns": ["Imagine you are in a race and pass the second person. What position are you in?", "And the last person?"]},
    {"question_id": 121, "category": "coding", "turns": ["Write a Python program that reads all text files in a directory.", "Can you parallelize it?"]},
]
SPEED_BENCH_VLLM = [
    # SPEED-Bench as NeMo-Skills' prepare.py writes it and vllm SpeedBench reads it: `<subset>.jsonl`
    # (datasets.py:4592-4594), a `messages` column (:4598), `row["messages"][0]["content"]` the
    # prompt and `row["category"]` the filter (:4607-4608). Qualitative categories.
    {"category": "coding", "messages": [{"role": "user", "content": "Implement an LRU cache in Python with O(1) operations."}]},
    {"category": "math", "messages": [{"role": "user", "content": "Prove that the square root of 2 is irrational."}]},
    {"category": "summarization", "messages": [{"role": "user", "content": "Summarize: The meeting moved to Tuesday because the room was booked."}]},
]
SPEED_BENCH_SGLANG = [
    # SPEED-Bench's throughput split as sglang SpeedBenchDataset reads it: one JSONL, `row.get("category")`
    # (speed_bench.py:54: low_entropy, mixed, high_entropy, :9) and `turns[0]` (:57-60), a row with
    # no turns skipped (:58-59).
    {"category": "low_entropy", "turns": ["Repeat the list of numbers from one to fifty, separated by commas."]},
    {"category": "mixed", "turns": ["Explain the difference between a process and a thread."]},
    {"category": "high_entropy", "turns": ["Write a surreal short story about a clock that eats time."]},
    {"category": "mixed", "turns": []},
]
GSM8K = [
    # openai/grade-school-math grade_school_math/data/test.jsonl: {"question", "answer"} a line
    # (dataset.py:7-9 read_jsonl, :17 `ex["question"]`; vllm GSM8KDataset `item["question"]`, datasets.py:3619).
    {"question": "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How many clips did Natalia sell altogether?",
     "answer": "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nNatalia sold 48+24 = <<48+24=72>>72 clips altogether.\n#### 72"},
    {"question": "Weng earns $12 an hour for babysitting. Yesterday, she did 50 minutes of babysitting. How much did she earn?",
     "answer": "Weng earns 12/60 = $<<12/60=0.2>>0.2 per minute.\n#### 10"},
]  # fmt: skip
HUMANEVAL = [
    # openai/human-eval data/HumanEval.jsonl.gz: {"task_id", "prompt", "canonical_solution", "test",
    # "entry_point"} (human_eval/data.py:11-29; execution.py:28 `problem["prompt"]`; vllm
    # HumanEvalDataset `item["prompt"]`, datasets.py:3559).
    {"task_id": "HumanEval/0", "prompt": 'from typing import List\n\n\ndef has_close_elements(numbers: List[float], threshold: float) -> bool:\n    """ Check if any two numbers are closer than threshold."""\n',
     "canonical_solution": "    return any(abs(a - b) < threshold for i, a in enumerate(numbers) for b in numbers[i + 1:])\n",
     "test": "def check(candidate):\n    assert candidate([1.0, 2.0], 0.5) is False\n", "entry_point": "has_close_elements"},
]  # fmt: skip
MBPP = [
    # google-research mbpp/mbpp.jsonl: {"text", "code", "task_id", "test_setup_code", "test_list",
    # "challenge_test_list"}; the prompt is the paper's (mbpp/README.md, "Evaluation Details").
    {"text": "Write a function to find the minimum cost path to reach (m, n) from (0, 0).", "code": "def min_cost(cost, m, n):\r\n\treturn 0",
     "task_id": 1, "test_setup_code": "", "test_list": ["assert min_cost([[1, 2], [3, 4]], 1, 1) == 5", "assert min_cost([[1]], 0, 0) == 1"], "challenge_test_list": []},
]  # fmt: skip
MBPP_SANITIZED = [
    # google-research mbpp/sanitized-mbpp.json: ONE JSON list of {"source_file", "task_id", "prompt",
    # "code", "test_imports", "test_list"}: the task is `prompt`, not `text`.
    {"source_file": "Benchmark Questions Verification V2.ipynb", "task_id": 2, "prompt": "Write a function to find the shared elements from the given two lists.",
     "code": "def similar_elements(a, b):\n    return tuple(set(a) & set(b))", "test_imports": [], "test_list": ["assert set(similar_elements((3, 4), (4, 5))) == set((4,))"]},
]  # fmt: skip
PLAIN = [
    # fleet's plain JSONL: {"prompt", "category"?, "output_len"?}; `output_tokens` is vllm's custom
    # dataset's name for the output length (CustomDataset, datasets.py:2429-2431, :2509-2516).
    {"prompt": "Say hi to the reader.", "category": "chat", "output_len": 12},
    {"prompt": "Sort a list of integers in Python.", "category": "code"},
    {"prompt": "What is the capital of India?", "output_tokens": 10},
]


def speed_bench_vllm(path: Path) -> Path:
    return write_jsonl(path, SPEED_BENCH_VLLM)


# format -> (writer, file name, expected (prompt, category, output length) per sample in file order)
Expect = list[tuple[str, str | None, int | None]]
FORMATS: dict[str, tuple[Callable[[Path], Path], str, Expect]] = {
    "sharegpt": (sharegpt, "ShareGPT_V3_unfiltered_cleaned_split.json", [(p, None, count_tokens(r)) for p, r in SHAREGPT_PAIRS]),
    "spec_bench": (lambda p: write_jsonl(p, SPEC_BENCH), "question.jsonl", [(q["turns"][0], q["category"], None) for q in SPEC_BENCH]),
    "mt_bench": (lambda p: write_jsonl(p, MT_BENCH), "question.jsonl", [(q["turns"][0], q["category"], None) for q in MT_BENCH]),
    "speed_bench": (speed_bench_vllm, "qualitative.jsonl", [(r["messages"][0]["content"], r["category"], None) for r in SPEED_BENCH_VLLM]),
    "gsm8k": (lambda p: write_jsonl(p, GSM8K), "test.jsonl", [(r["question"], None, None) for r in GSM8K]),
    "humaneval": (lambda p: write_jsonl(p, HUMANEVAL), "HumanEval.jsonl", [(r["prompt"], None, None) for r in HUMANEVAL]),
    "mbpp": (lambda p: write_jsonl(p, MBPP), "mbpp.jsonl", [
        ("You are an expert Python programmer, and here is your task: Write a function to find the minimum cost path to reach (m, n) from (0, 0). "
         "Your code should pass these tests:\n\nassert min_cost([[1, 2], [3, 4]], 1, 1) == 5\nassert min_cost([[1]], 0, 0) == 1\n", None, None)]),
    "jsonl": (lambda p: write_jsonl(p, PLAIN), "prompts.jsonl", [("Say hi to the reader.", "chat", 12), ("Sort a list of integers in Python.", "code", None), ("What is the capital of India?", None, 10)]),
}  # fmt: skip


def workload(path: Path, format: str, **extra: Any) -> DatasetWorkload:
    return DatasetWorkload.model_validate({"kind": "dataset", "file": str(path), "format": format, **extra})


def test_every_format_of_the_playbook_has_a_loader_and_a_test_here() -> None:
    assert set(FORMATS) == set(LOADERS) == set(DatasetWorkload.model_fields["format"].annotation.__args__)  # type: ignore[union-attr]


@pytest.mark.parametrize("format", sorted(FORMATS))
def test_each_publishers_file_loads_with_its_prompts_categories_and_lengths(tmp_path: Path, format: str) -> None:
    write, name, expected = FORMATS[format]
    path = write(tmp_path / name)
    samples = LOADERS[format](path)
    assert [(s.prompt, s.category, s.output_tokens) for s in samples] == expected


@pytest.mark.parametrize("format", sorted(FORMATS))
def test_the_whole_way_to_the_agent_keeps_prompts_categories_and_lengths(tmp_path: Path, format: str) -> None:
    """Playbook model -> the shard's resolved JSON -> the agent's request list: every sample once
    (no `requests`), each prompt with its category and output length (the sample's own, capped by
    max_new_tokens, else max_new_tokens), and the result's dataset record."""
    write, name, expected = FORMATS[format]
    model = workload(write(tmp_path / name), format, max_new_tokens=64, seed=5)
    resolved = {"name": "w", "kind": "dataset", "max_new_tokens": 64, **model.resolved("w", 1.0)}
    resolved = json.loads(json.dumps(resolved))  # what the shard carries is plain JSON
    plans = dataset_requests(resolved, 0)
    want = sorted((prompt, category, min(length or 64, 64)) for prompt, category, length in expected)
    assert sorted((plan.prompt, plan.tags["category"], plan.max_new_tokens) for plan in plans) == want  # type: ignore[type-var]
    record = resolved["dataset"]
    assert record["file"] == name and record["format"] == format and record["revision"] is None and len(record["sha256"]) == 64
    assert record["requests"] == len(expected) and record["prompt_tokens"]["n"] == len(expected)
    assert record["prompt_tokens"]["max"] == max(count_tokens(p) for p, _, _ in expected)
    categories = [c for _, c, _ in expected if c is not None]
    assert record["categories"] == ({c: categories.count(c) for c in sorted(set(categories))} or None)
    assert record["sample_sha256"] == sample_sha256(plans)  # what the agent records of a one-repeat run


def test_speed_bench_reads_sglangs_turns_as_well_and_skips_a_row_without_turns(tmp_path: Path) -> None:
    samples = LOADERS["speed_bench"](write_jsonl(tmp_path / "throughput_1k.jsonl", SPEED_BENCH_SGLANG))
    assert [(s.prompt, s.category) for s in samples] == [(r["turns"][0], r["category"]) for r in SPEED_BENCH_SGLANG[:3]]
    only = workload(tmp_path / "throughput_1k.jsonl", "speed_bench", categories=["low_entropy"], requests=3).resolved("w", 1.0)
    assert [s["category"] for s in only["samples"]] == ["low_entropy"] * 3 and only["dataset"]["categories"] == {"low_entropy": 3}


def test_sharegpt_names_conversation_as_sglang_does_and_mbpp_reads_the_sanitized_list(tmp_path: Path) -> None:
    old = tmp_path / "old.json"
    old.write_text(json.dumps([{"id": "a", "conversation": [{"from": "human", "value": "Tell me a joke about cats."}, {"from": "gpt", "value": "Cats do not laugh at jokes."}]}]))
    assert [s.prompt for s in LOADERS["sharegpt"](old)] == ["Tell me a joke about cats."]
    sanitized = tmp_path / "sanitized-mbpp.json"
    sanitized.write_text(json.dumps(MBPP_SANITIZED, indent=2))
    (sample,) = LOADERS["mbpp"](sanitized)
    assert sample.prompt.startswith("You are an expert Python programmer, and here is your task: Write a function to find the shared elements")
    assert sample.prompt.endswith("assert set(similar_elements((3, 4), (4, 5))) == set((4,))\n") and sample.source_id == "2"


def test_sampling_is_seeded_per_category_and_the_sample_hash_follows_it(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "question.jsonl", SPEC_BENCH)
    first = workload(path, "spec_bench", requests=9, seed=1).resolved("w", 1.0)
    again = workload(path, "spec_bench", requests=9, seed=1).resolved("w", 1.0)
    other = workload(path, "spec_bench", requests=9, seed=2).resolved("w", 1.0)
    assert first["samples"] == again["samples"] and first["dataset"]["sample_sha256"] == again["dataset"]["sample_sha256"]
    assert other["dataset"]["sample_sha256"] != first["dataset"]["sample_sha256"]
    # 9 requests from 4 samples: every sample twice before any a third time (passes without replacement).
    counts = [sum(1 for s in first["samples"] if s["prompt"] == q["turns"][0]) for q in SPEC_BENCH]
    assert sorted(counts) == [2, 2, 2, 3]
    only = workload(path, "spec_bench", categories=["rag", "translation"], requests=6).resolved("w", 1.0)
    assert {s["category"] for s in only["samples"]} == {"rag", "translation"} and only["dataset"]["categories"] == {"rag": 3, "translation": 3}


# --- bad input: refused when the playbook loads, naming file, line and the field expected ----------

BAD = [
    ("sharegpt", "s.json", '{"conversations": []}', ["top level is a dict", "not a list"]),
    ("sharegpt", "s.json", '[\n  {"id": "a", "conversations": [{"from": "human", "value": "Hello there, friend"}, {"from": "gpt", "value": "Hi, how are you?"}]},\n  {"id": "b", "messages": []}\n]',
     ["line 3 (item [1])", "`conversations`", "missing"]),
    ("sharegpt", "s.json", '[{"id": "a", "conversations": [{"from": "human", "text": "x"}, {"from": "gpt", "value": "y"}]}]', ["line 1", "`conversations[0].value`"]),
    ("sharegpt", "s.json", '[{"id": "a", "conversations": []},\n{"id": "b"', ["line 2", "not JSON"]),
    ("spec_bench", "q.jsonl", '{"question_id": 1, "category": "qa", "turns": ["ok"]}\n{"question": "a GSM8K line", "answer": "1"}\n', ["line 2", "`turns`", "missing"]),
    ("mt_bench", "q.jsonl", '{"question_id": 1, "turns": ["no category"]}\n', ["line 1", "`category`", "missing"]),
    ("speed_bench", "qualitative.jsonl", '{"category": "coding", "prompt": "x"}\n', ["line 1", "`messages` or `turns`"]),
    ("speed_bench", "qualitative.jsonl", '{"category": "coding", "messages": [{"role": "user"}]}\n', ["line 1", "`messages[0].content`"]),
    ("gsm8k", "test.jsonl", '{"question": "q", "answer": "#### 1"}\n{"problem": "a MATH line", "solution": "2"}\n', ["line 2", "`answer`", "missing"]),
    ("humaneval", "HumanEval.jsonl", '{"task_id": "HumanEval/0", "prompt": 7}\n', ["line 1", "`prompt`", "int"]),
    ("mbpp", "mbpp.jsonl", '{"text": "t", "task_id": 1}\n', ["line 1", "`test_list`", "missing"]),
    ("mbpp", "sanitized-mbpp.json", '[\n{"prompt": "p", "task_id": 2, "test_list": []},\n"not an object"\n]', ["line 3", "a JSON object", "str"]),
    ("jsonl", "p.jsonl", '{"prompt": "p", "output_len": 3, "output_tokens": 4}\n', ["line 1", "`output_len` 3 and `output_tokens` 4 differ"]),
    ("jsonl", "p.jsonl", '{"text": "an Alpaca-style line"}\n', ["line 1", "`prompt`", "missing"]),
]  # fmt: skip


@pytest.mark.parametrize("format, name, content, words", BAD)
def test_a_file_in_another_format_names_file_line_and_field(tmp_path: Path, format: str, name: str, content: str, words: list[str]) -> None:
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(DatasetFormatError) as caught:
        LOADERS[format](path)
    for word in [str(path), *words]:
        assert word in str(caught.value)
    with pytest.raises(ValidationError) as refused:  # the playbook's own check: exit 2 before any server starts
        workload(path, format)
    assert str(path) in str(refused.value) and words[0] in str(refused.value)


@pytest.mark.parametrize("format", sorted(FORMATS))
@pytest.mark.parametrize("content", ["", "\n\n", "[]"], ids=["empty", "blank-lines", "empty-list"])
def test_an_empty_file_is_refused_naming_it(tmp_path: Path, format: str, content: str) -> None:
    path = tmp_path / FORMATS[format][1]
    path.write_text(content)
    with pytest.raises(ValidationError) as refused:
        workload(path, format)
    message = str(refused.value)
    assert str(path) in message
    # No samples at all, or (a JSON list in a JSONL format, JSONL in ShareGPT's list) the wrong shape.
    assert any(words in message for words in (f"at least one {format} sample", "one JSON object a line", "top level is a"))


def test_a_file_whose_every_sample_upstream_would_drop_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "sharegpt.json"
    path.write_text(json.dumps([{"id": "x", "conversations": [{"from": "human", "value": "Only one turn here."}]}]))
    with pytest.raises(ValidationError, match="at least one sharegpt sample"):
        workload(path, "sharegpt")


@pytest.mark.parametrize("format", ["spec_bench", "mt_bench", "speed_bench", "jsonl"])
def test_a_category_the_file_lacks_is_refused_naming_those_it_has(tmp_path: Path, format: str) -> None:
    write, name, expected = FORMATS[format]
    path = write(tmp_path / name)
    with pytest.raises(ValidationError) as refused:
        workload(path, format, categories=["no_such_category"])
    known = sorted({c for _, c, _ in expected if c is not None})
    assert "`categories`" in str(refused.value) and ", ".join(known) in str(refused.value) and "not no_such_category" in str(refused.value)


@pytest.mark.parametrize("format", ["sharegpt", "gsm8k", "humaneval", "mbpp"])
def test_a_category_asked_of_a_dataset_without_categories_is_refused(tmp_path: Path, format: str) -> None:
    write, name, _ = FORMATS[format]
    with pytest.raises(ValidationError, match="it has none"):
        workload(write(tmp_path / name), format, categories=["coding"])


def test_load_samples_reads_a_changed_file_again(tmp_path: Path) -> None:
    """The cache is keyed by content hash: a file edited between two loads is read afresh."""
    path = write_jsonl(tmp_path / "question.jsonl", SPEC_BENCH)
    first = workload(path, "spec_bench")
    write_jsonl(path, SPEC_BENCH[:1])
    second = workload(path, "spec_bench")
    assert first.sha256 != second.sha256 and len(load_samples(str(path), "spec_bench", second.sha256)) == 1


# --- through the command line: `fleet plan` and `fleet sweep` refuse with exit 2, no host contacted ---

CLI_CASES = [
    ("speed-bench-vllm-without-messages", "qualitative.jsonl", '{"category": "coding", "text": "x"}\n', "speed_bench", None, ["qualitative.jsonl line 1", "`messages` or `turns`"]),
    ("sharegpt-item-without-conversations", "sg.json", '[\n{"id": "a"}\n]', "sharegpt", None, ["sg.json line 2 (item [0])", "`conversations`"]),
    ("speed-bench-category-unknown", "throughput_1k.jsonl", "".join(json.dumps(r) + "\n" for r in SPEED_BENCH_SGLANG), "speed_bench", ["very_high_entropy"],
     ["`categories`", "high_entropy, low_entropy, mixed", "not very_high_entropy"]),
    ("mbpp-sanitized-empty", "sanitized-mbpp.json", "[]", "mbpp", None, ["sanitized-mbpp.json", "at least one mbpp sample"]),
]  # fmt: skip


@pytest.mark.parametrize("command", ["plan", "sweep"])
@pytest.mark.parametrize("case", [pytest.param(c, id=c[0]) for c in CLI_CASES])
def test_the_command_line_refuses_a_bad_dataset_before_any_host_is_contacted(ws: Workspace, tmp_path: Path, case: Any, command: str) -> None:  # noqa: F811
    _, name, content, format, categories, words = case
    path = tmp_path / name
    path.write_text(content)
    spec: dict[str, Any] = {"kind": "dataset", "file": str(path), "format": format, **({"categories": categories} if categories else {})}
    (ws.hosts_dir / "ct200.yaml").write_text(yaml.safe_dump(HOST))
    ws.playbook.write_text(yaml.safe_dump({**PLAYBOOK, "workloads": {"w": spec}}))
    code, output = fleet(command, "-p", str(ws.playbook), "--hosts", "ct200")
    flat = " ".join(output.split())
    assert code == 2 and ws.contacted == [] and "Traceback" not in output, output
    assert str(ws.playbook) in output and "workloads.w.dataset" in flat, output
    for word in words:
        assert word in flat, output

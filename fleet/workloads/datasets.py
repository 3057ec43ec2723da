"""Dataset files in their publishers' formats, read into prompts. Runs on the controller.

Each loader takes field names and nesting from the publisher's own loader (cited per format):
- `sharegpt`: a JSON list of `{"id", "conversations": [{"from": "human"|"gpt", "value"}, ...]}`.
  As sglang 0.5.23's `sample_sharegpt_requests` (sglang/benchmark/datasets/sharegpt.py:82-93):
  `conversations` (or `conversation`), conversations of fewer than 2 turns left out, the first
  turn's `value` the prompt and the second's the reply, whose length is the request's output
  length (sharegpt.py:127-131); pairs under 2 tokens either way are pruned (sharegpt.py:133).
- `spec_bench` / `mt_bench`: `question.jsonl`, one `{"question_id", "category", "turns": [...]}`
  a line (Spec-Bench data/spec_bench/question.jsonl, read by evaluation/eval.py:35 and
  :100-101 `question["turns"][j]`, `question["category"]` at :237; FastChat
  fastchat/llm_judge/common.py:88-96 `load_questions`, gen_model_answer.py:99 and :109-110).
  fleet sends the first turn: later turns need the model's own answer to the first.
- `gsm8k`: JSONL of `{"question", "answer"}` (openai/grade-school-math
  grade_school_math/dataset.py:7-9 `read_jsonl`, :17 `ex["question"]`); the question is the prompt.
- `humaneval`: JSONL (or .jsonl.gz) of `{"task_id", "prompt", "canonical_solution", "test",
  "entry_point"}` (openai/human-eval human_eval/data.py:11-29 `read_problems`/`stream_jsonl`,
  execution.py:28 `problem["prompt"]`); the prompt is the function stub.
- `mbpp`: JSONL of `{"text", "code", "task_id", "test_setup_code", "test_list",
  "challenge_test_list"}` (google-research mbpp/mbpp.jsonl); the prompt is the paper's,
  `You are an expert Python programmer, and here is your task: {text} Your code should pass
  these tests:\\n\\n{tests}\\n` (google-research mbpp/README.md, "Evaluation Details").
- `jsonl`: fleet's own plain format, `{"prompt", "category"?, "output_len"?}` a line
  (`output_len` as vllm's benchmark datasets name a sample's output length).

Token lengths here are counted by fleet's tokenizer (fleet.host.tokens, the sim's too):
exact on a sim host, an estimate elsewhere (the server's own counts are in every request record).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import random
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from collections.abc import Sequence
from typing import Any, Callable, Protocol

from fleet.host.agent.stats import summary
from fleet.host.tokens import count_tokens
from fleet.errors import DatasetFormatError

# ShareGPT_V3_unfiltered_cleaned_split.json, the largest file anyone benchmarks with, is ~670 MB.
MAX_DATASET_BYTES = 1 << 30
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Sample:
    prompt: str
    category: str | None = None
    output_tokens: int | None = None  # the dataset's own output length, where it gives one
    source_id: str | None = None


class DatasetSpec(Protocol):
    """What these functions read of a dataset workload (fleet.workloads.kinds.DatasetWorkload)."""

    @property
    def file(self) -> str: ...
    @property
    def format(self) -> str: ...
    @property
    def sha256(self) -> str | None: ...
    @property
    def categories(self) -> Sequence[str] | None: ...
    @property
    def requests(self) -> int | None: ...
    @property
    def seed(self) -> int: ...
    @property
    def max_new_tokens(self) -> int: ...


def file_sha256(path: Path) -> str | None:
    """The file's sha256, or None where it cannot be read (the after-validator says why)."""
    digest = hashlib.sha256()
    try:
        with path.expanduser().open("rb") as handle:
            while chunk := handle.read(_CHUNK):
                digest.update(chunk)
    except OSError:
        return None
    return digest.hexdigest()


def _text(path: Path) -> str:
    if not path.is_file():
        raise DatasetFormatError(f"{path}: a dataset file that exists (a regular file on this machine)")
    if path.stat().st_size > MAX_DATASET_BYTES:
        raise DatasetFormatError(f"{path}: a dataset file of at most {MAX_DATASET_BYTES >> 20} MiB")
    raw = path.read_bytes()
    if path.suffix == ".gz":  # human-eval ships HumanEval.jsonl.gz (human_eval/data.py:15-24)
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise DatasetFormatError(f"{path}: a gzip file ({exc})") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DatasetFormatError(f"{path}: UTF-8 text (an invalid byte at offset {exc.start})") from None


def _jsonl(path: Path, what: str) -> list[tuple[int, dict[str, Any]]]:
    rows = []
    for number, line in enumerate(_text(path).splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DatasetFormatError(f"{path} line {number}: {what}, one JSON object a line (not JSON: {exc.msg})") from None
        if not isinstance(row, dict):
            raise DatasetFormatError(f"{path} line {number}: {what}, one JSON object a line (got {type(row).__name__})")
        rows.append((number, row))
    return rows


def _field(path: Path, number: int, row: dict[str, Any], key: str, kind: type | tuple[type, ...], what: str) -> Any:
    value = row.get(key)
    if not isinstance(value, kind) or isinstance(value, bool):
        got = "missing" if key not in row else type(value).__name__
        raise DatasetFormatError(f"{path} line {number}: {what}, field `{key}` ({got})")
    return value


def _sharegpt(path: Path) -> list[Sample]:
    what = 'ShareGPT: a JSON list of {"id", "conversations": [{"from", "value"}, ...]}'
    try:
        data = json.loads(_text(path))
    except json.JSONDecodeError as exc:
        raise DatasetFormatError(f"{path}: {what} (not JSON: {exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, list):
        raise DatasetFormatError(f"{path}: {what} (the top level is a {type(data).__name__})")
    samples = []
    for index, item in enumerate(data):
        turns = item.get("conversations", item.get("conversation")) if isinstance(item, dict) else None
        if not isinstance(turns, list) or not all(isinstance(t, dict) and isinstance(t.get("value"), str) for t in turns):
            raise DatasetFormatError(f"{path} item [{index}]: {what}, each turn with a string `value`")
        if len(turns) < 2:
            continue  # sharegpt.py:82-87
        prompt, reply = turns[0]["value"], turns[1]["value"]
        prompt_len, output_len = count_tokens(prompt), count_tokens(reply)
        if prompt_len < 2 or output_len < 2:
            continue  # sharegpt.py:133-135
        samples.append(Sample(prompt, None, output_len, str(item["id"]) if item.get("id") is not None else str(index)))
    return samples


def _questions(path: Path) -> list[Sample]:
    what = 'question.jsonl: {"question_id", "category", "turns": [...]}'
    samples = []
    for number, row in _jsonl(path, what):
        turns = _field(path, number, row, "turns", list, what)
        if not turns or not all(isinstance(turn, str) for turn in turns):
            raise DatasetFormatError(f"{path} line {number}: {what}, `turns` a non-empty list of strings")
        category = _field(path, number, row, "category", str, what)
        samples.append(Sample(turns[0], category, None, str(row.get("question_id", number))))
    return samples


def _gsm8k(path: Path) -> list[Sample]:
    what = 'GSM8K: {"question", "answer"}'
    samples = []
    for number, row in _jsonl(path, what):
        _field(path, number, row, "answer", str, what)  # not sent, but a file without it is not GSM8K
        samples.append(Sample(_field(path, number, row, "question", str, what), None, None, str(number)))
    return samples


def _humaneval(path: Path) -> list[Sample]:
    what = 'HumanEval: {"task_id", "prompt", "canonical_solution", "test", "entry_point"}'
    return [Sample(_field(path, number, row, "prompt", str, what), None, None, _field(path, number, row, "task_id", str, what)) for number, row in _jsonl(path, what)]


def _mbpp(path: Path) -> list[Sample]:
    what = 'MBPP: {"text", "code", "task_id", "test_list", ...}'
    samples = []
    for number, row in _jsonl(path, what):
        text = _field(path, number, row, "text", str, what)
        tests = _field(path, number, row, "test_list", list, what)
        task = _field(path, number, row, "task_id", int, what)
        prompt = f"You are an expert Python programmer, and here is your task: {text} Your code should pass these tests:\n\n" + "\n".join(str(test) for test in tests) + "\n"
        samples.append(Sample(prompt, None, None, str(task)))
    return samples


def _plain(path: Path) -> list[Sample]:
    what = 'prompts JSONL: {"prompt", "category" (optional), "output_len" (optional)}'
    samples = []
    for number, row in _jsonl(path, what):
        prompt = _field(path, number, row, "prompt", str, what)
        category = _field(path, number, row, "category", str, what) if "category" in row else None
        output = _field(path, number, row, "output_len", int, what) if "output_len" in row else None
        if output is not None and output < 1:
            raise DatasetFormatError(f"{path} line {number}: {what}, `output_len` at least 1 (got {output})")
        samples.append(Sample(prompt, category, output, str(number)))
    return samples


LOADERS: dict[str, Callable[[Path], list[Sample]]] = {
    "sharegpt": _sharegpt,
    "spec_bench": _questions,
    "mt_bench": _questions,
    "gsm8k": _gsm8k,
    "humaneval": _humaneval,
    "mbpp": _mbpp,
    "jsonl": _plain,
}


@lru_cache(maxsize=8)
def load_samples(file: str, format: str, sha256: str | None) -> tuple[Sample, ...]:
    """Every usable sample of the file, in file order; cached by content hash (validation and
    resolution read a file once)."""
    samples = LOADERS[format](Path(file).expanduser())
    if not samples:
        raise DatasetFormatError(f"{file}: at least one {format} sample (the file has none)")
    return tuple(samples)


def check_dataset(workload: DatasetSpec) -> None:
    """Raise ValueError (a playbook error: exit 2) for a file that is unreadable, in another
    format, empty, pinned to another sha256, or without a category the workload names."""
    digest = file_sha256(Path(workload.file))
    if digest is None:
        raise ValueError(f"`file` {workload.file}: a dataset file that exists and can be read")
    if workload.sha256 != digest:
        raise ValueError(f"`sha256` {workload.sha256} of {workload.file} (the file's is {digest})")
    try:
        samples = load_samples(workload.file, workload.format, digest)
    except DatasetFormatError as exc:
        raise ValueError(f"`file` in format {workload.format}: {exc}") from None
    if workload.categories:
        known = sorted({s.category for s in samples if s.category is not None})
        missing = [c for c in workload.categories if c not in known]
        if missing:
            raise ValueError(f"`categories` of {workload.file} ({', '.join(known) or 'it has none'}); not {', '.join(missing)}")


def sample_requests(workload: DatasetSpec) -> list[Sample]:
    """The requests of one repeat: seeded, without replacement while the samples last (then
    another seeded pass), each with its output length (the sample's own, capped at max_new_tokens)."""
    population = [s for s in load_samples(workload.file, workload.format, workload.sha256) if not workload.categories or s.category in workload.categories]
    rng = random.Random(workload.seed)
    wanted = workload.requests or len(population)
    chosen: list[Sample] = []
    while len(chosen) < wanted:
        chosen.extend(rng.sample(population, min(len(population), wanted - len(chosen))))
    return [Sample(s.prompt, s.category, min(s.output_tokens or workload.max_new_tokens, workload.max_new_tokens), s.source_id) for s in chosen]


def describe(workload: DatasetSpec, samples: list[Sample]) -> dict[str, Any]:
    """What a result records of the dataset: its file, hash, the sample's hash and lengths, categories."""
    canonical = json.dumps([[s.prompt, s.output_tokens, s.category] for s in samples], ensure_ascii=True, separators=(",", ":"))
    categories: dict[str, int] = {}
    for s in samples:
        if s.category is not None:
            categories[s.category] = categories.get(s.category, 0) + 1
    return {
        "file": Path(workload.file).name,
        "format": workload.format,
        "sha256": workload.sha256,
        "sample_sha256": hashlib.sha256(canonical.encode()).hexdigest(),
        "seed": workload.seed,
        "requests": len(samples),
        "categories": dict(sorted(categories.items())) or None,
        "tokenizer": "fleet's (fleet.host.tokens, the sim's too); the server's own counts are in each request",
        "prompt_tokens": summary([count_tokens(s.prompt) for s in samples]),
        "output_tokens": summary([s.output_tokens or 0 for s in samples]),
    }

"""Dataset files in their publishers' formats, read into prompts. Runs on the controller.

Each loader takes field names and nesting from the upstream loaders (cited per format; `vllm` is
the vLLM 0.33.0 wheel's vllm/benchmarks/datasets/datasets.py, `sglang` the SGLang 0.5.23 wheel's
sglang/benchmark/datasets/):
- `sharegpt`: a JSON list of `{"id", "conversations": [{"from": "human"|"gpt", "value"}, ...]}`.
  As sglang's `sample_sharegpt_requests` (sharegpt.py:82-95): `conversations` (or `conversation`),
  conversations of fewer than 2 turns left out, the first turn's `value` the prompt and the
  second's the reply, whose length is the request's output length (sharegpt.py:125-131); pairs
  under 2 tokens either way are pruned (sharegpt.py:133-135). vllm reads the same two `value`s
  (datasets.py:1346, :1372-1373) but prunes harder (`is_valid_sequence`, :340-364: 4 tokens at
  least, prompts of 1024 at most); fleet keeps sglang's rule and leaves long prompts to `max_new_tokens`
  and the server's context. Neither reads `from`: the first turn is the prompt whoever speaks it.
- `spec_bench` / `mt_bench`: `question.jsonl`, one `{"question_id", "category", "turns": [...]}`
  a line (Spec-Bench data/spec_bench/question.jsonl; vllm `SpecBench` datasets.py:2972-2973
  `row["category"]`, `row["turns"][0]`; vllm `MTBenchDataset` :3499 `item["turns"][0]`; FastChat
  fastchat/llm_judge/common.py:88-96 `load_questions`). fleet sends the first turn, as both do:
  later turns need the model's own answer to the first.
- `speed_bench`: SPEED-Bench (nvidia/SPEED-Bench), one `{"category", "messages": [{"role",
  "content"}, ...]}` a line as vllm's `SpeedBench` reads the files NeMo-Skills' prepare.py writes
  (`<subset>.jsonl`, subsets qualitative and throughput_1k/2k/8k/16k/32k, datasets.py:1846-1857;
  `row["messages"][0]["content"]` and `row["category"]`, :4598-4609), or `{"category", "turns":
  [...]}` as sglang's `SpeedBenchDataset` reads prepare_speed_bench.sh's throughput file
  (speed_bench.py:52-60: `row.get("category")`, `turns[0]`, a row without turns skipped). Point
  `file` at the subset's own JSONL. Categories: the qualitative split's 11 (coding, math, ...),
  the throughput splits' entropy tiers (low_entropy, mixed, high_entropy; speed_bench.py:9).
- `gsm8k`: JSONL of `{"question", "answer"}` (openai/grade-school-math
  grade_school_math/dataset.py:7-9 `read_jsonl`, :17 `ex["question"]`; vllm `GSM8KDataset`
  datasets.py:3619 `item["question"]`); the question is the prompt.
- `humaneval`: JSONL (or .jsonl.gz) of `{"task_id", "prompt", "canonical_solution", "test",
  "entry_point"}` (openai/human-eval human_eval/data.py:11-29 `read_problems`/`stream_jsonl`,
  execution.py:28 `problem["prompt"]`; vllm `HumanEvalDataset` datasets.py:3559 `item["prompt"]`);
  the prompt is the function stub.
- `mbpp`: JSONL of `{"text", "code", "task_id", "test_setup_code", "test_list",
  "challenge_test_list"}` (google-research mbpp/mbpp.jsonl), or the sanitized set, whose task is
  `prompt` instead of `text` (mbpp/sanitized-mbpp.json, a JSON list of `{"source_file", "task_id",
  "prompt", "code", "test_imports", "test_list"}`); the prompt is the paper's,
  `You are an expert Python programmer, and here is your task: {text} Your code should pass
  these tests:\\n\\n{tests}\\n` (google-research mbpp/README.md, "Evaluation Details").
- `jsonl`: a plain JSONL of prompts, `{"prompt", "category"?, "output_len"?}` a line; `output_tokens`
  is read as `output_len` (vllm's `--dataset-name custom` file, `CustomDataset`
  datasets.py:2429-2431, :2503, :2509-2516), so such a file loads as it is.

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

from fleet.host.agent.kinds.listed import Planned, sample_sha256
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


class HubFile(Protocol):
    """What these functions read of a hub dataset file (fleet.workloads.kinds.HubDataset)."""

    @property
    def repo(self) -> str: ...
    @property
    def revision(self) -> str: ...
    @property
    def path(self) -> str: ...


class DatasetSpec(Protocol):
    """What these functions read of a dataset workload (fleet.workloads.kinds.DatasetWorkload)."""

    @property
    def source(self) -> Path: ...  # the file read: a local one, or a hub file in the controller's cache
    @property
    def file(self) -> str | None: ...  # as the playbook gave it (None for a hub file)
    @property
    def hub(self) -> HubFile | None: ...
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


def _json_list(path: Path, text: str, what: str) -> list[tuple[int, Any]]:
    """The items of a file that is one JSON list, each with the line it starts on (so that an error
    names the line, as for JSONL); raw_decode reads item by item with json's own scanner."""
    decoder = json.JSONDecoder()
    if not text.strip():
        return []  # an empty file: load_samples says it has no sample
    at = len(text) - len(text.lstrip())
    if not text.startswith("[", at):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DatasetFormatError(f"{path} line {exc.lineno}: {what} (not JSON: {exc.msg})") from None
        raise DatasetFormatError(f"{path}: {what} (the top level is a {type(data).__name__}, not a list)")
    items: list[tuple[int, Any]] = []
    line, counted = 1, 0
    at += 1
    while True:
        while at < len(text) and text[at] in " \t\r\n":
            at += 1
        if text.startswith("]", at) and not items and not text[at + 1 :].strip():
            return items  # an empty list: load_samples says the file has no sample
        line += text.count("\n", counted, at)
        counted = at
        try:
            item, at = decoder.raw_decode(text, at)
        except json.JSONDecodeError as exc:
            raise DatasetFormatError(f"{path} line {exc.lineno}: {what} (not JSON: {exc.msg})") from None
        items.append((line, item))
        while at < len(text) and text[at] in " \t\r\n":
            at += 1
        if text.startswith(",", at):
            at += 1
        elif text.startswith("]", at) and not text[at + 1 :].strip():
            return items
        else:
            line += text.count("\n", counted, at)
            raise DatasetFormatError(f"{path} line {line}: {what} (not JSON: a `,` or the closing `]` of the list expected)")


def _records(path: Path, what: str) -> list[tuple[int, dict[str, Any]]]:
    """JSONL, or one JSON list of objects (sanitized-mbpp.json): each record with its line."""
    text = _text(path)
    if not text.lstrip().startswith("["):
        return _jsonl(path, what)
    records = []
    for number, item in _json_list(path, text, what):
        if not isinstance(item, dict):
            raise DatasetFormatError(f"{path} line {number}: {what}, a JSON object (got {type(item).__name__})")
        records.append((number, item))
    return records


def _field(path: Path, number: int, row: dict[str, Any], key: str, kind: type | tuple[type, ...], what: str) -> Any:
    value = row.get(key)
    if not isinstance(value, kind) or isinstance(value, bool):
        got = "missing" if key not in row else type(value).__name__
        raise DatasetFormatError(f"{path} line {number}: {what}, field `{key}` ({got})")
    return value


def _optional(path: Path, number: int, row: dict[str, Any], key: str, kind: type, what: str) -> Any:
    return _field(path, number, row, key, kind, what) if row.get(key) is not None else None


def _sharegpt(path: Path) -> list[Sample]:
    what = 'ShareGPT: a JSON list of {"id", "conversations": [{"from", "value"}, ...]}'
    samples = []
    for index, (number, item) in enumerate(_json_list(path, _text(path), what)):
        where = f"{path} line {number} (item [{index}])"
        if not isinstance(item, dict):
            raise DatasetFormatError(f"{where}: {what}, each item an object (got {type(item).__name__})")
        key = "conversation" if "conversation" in item and "conversations" not in item else "conversations"  # sglang sharegpt.py:86
        turns = item.get(key)
        if not isinstance(turns, list):
            raise DatasetFormatError(f"{where}: {what}, field `{key}` a list ({'missing' if key not in item else type(turns).__name__})")
        if len(turns) < 2:
            continue  # sharegpt.py:82-87, vllm datasets.py:1346
        # Only the first two turns are read (sharegpt.py:88-95, vllm :1372-1373): a later turn may be anything.
        for position, turn in enumerate(turns[:2]):
            if not isinstance(turn, dict) or not isinstance(turn.get("value"), str):
                raise DatasetFormatError(f"{where}: {what}, field `{key}[{position}].value` (a string)")
        prompt, reply = turns[0]["value"], turns[1]["value"]
        prompt_len, output_len = count_tokens(prompt), count_tokens(reply)
        if prompt_len < 2 or output_len < 2:
            continue  # sharegpt.py:133-135
        samples.append(Sample(prompt, None, output_len, str(item["id"]) if item.get("id") is not None else f"line {number}"))
    return samples


def _questions(path: Path) -> list[Sample]:
    what = 'question.jsonl: {"question_id", "category", "turns": [...]}'
    samples = []
    for number, row in _jsonl(path, what):
        turns = _field(path, number, row, "turns", list, what)
        if not turns or not all(isinstance(turn, str) for turn in turns):
            raise DatasetFormatError(f"{path} line {number}: {what}, field `turns` (a non-empty list of strings)")
        category = _field(path, number, row, "category", str, what)
        samples.append(Sample(turns[0], category, None, str(row.get("question_id", number))))
    return samples


def _speed_bench(path: Path) -> list[Sample]:
    what = 'SPEED-Bench: {"category", "messages": [{"role", "content"}, ...]} (vLLM\'s) or {"category", "turns": [...]} (SGLang\'s)'
    samples = []
    for number, row in _jsonl(path, what):
        category = _optional(path, number, row, "category", str, what)
        if "messages" in row:
            messages = _field(path, number, row, "messages", list, what)
            first = messages[0] if messages else None
            if not isinstance(first, dict) or not isinstance(first.get("content"), str):
                raise DatasetFormatError(f"{path} line {number}: {what}, field `messages[0].content` (a string)")
            prompt = first["content"]  # vllm datasets.py:4608
        elif "turns" in row:
            turns = _field(path, number, row, "turns", list, what)
            if not turns:
                continue  # speed_bench.py:57-59
            if not isinstance(turns[0], str):
                raise DatasetFormatError(f"{path} line {number}: {what}, field `turns[0]` (a string)")
            prompt = turns[0]  # speed_bench.py:60
        else:
            raise DatasetFormatError(f"{path} line {number}: {what}, field `messages` or `turns` (missing)")
        samples.append(Sample(prompt, category, None, str(row.get("question_id", number))))
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
    what = 'MBPP: {"text" (or the sanitized set\'s "prompt"), "code", "task_id", "test_list", ...}'
    samples = []
    for number, row in _records(path, what):
        text = _field(path, number, row, "text" if "text" in row or "prompt" not in row else "prompt", str, what)
        tests = _field(path, number, row, "test_list", list, what)
        task = _field(path, number, row, "task_id", int, what)
        prompt = f"You are an expert Python programmer, and here is your task: {text} Your code should pass these tests:\n\n" + "\n".join(str(test) for test in tests) + "\n"
        samples.append(Sample(prompt, None, None, str(task)))
    return samples


def _plain(path: Path) -> list[Sample]:
    what = 'prompts JSONL: {"prompt", "category" (optional), "output_len" (optional; or vLLM\'s "output_tokens")}'
    samples = []
    for number, row in _jsonl(path, what):
        prompt = _field(path, number, row, "prompt", str, what)
        category = _optional(path, number, row, "category", str, what)
        output = _optional(path, number, row, "output_len", int, what)
        given = _optional(path, number, row, "output_tokens", int, what)  # vllm datasets.py:2509-2516
        if output is not None and given is not None and output != given:
            raise DatasetFormatError(f"{path} line {number}: {what}, one output length (`output_len` {output} and `output_tokens` {given} differ)")
        output = output if output is not None else given
        if output is not None and output < 1:
            raise DatasetFormatError(f"{path} line {number}: {what}, `output_len` at least 1 (got {output})")
        samples.append(Sample(prompt, category, output, str(number)))
    return samples


LOADERS: dict[str, Callable[[Path], list[Sample]]] = {
    "sharegpt": _sharegpt,
    "spec_bench": _questions,
    "mt_bench": _questions,
    "speed_bench": _speed_bench,
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
    field, shown = ("file", workload.file) if workload.hub is None else ("hub.path", f"{workload.hub.repo}@{workload.hub.revision[:12]}:{workload.hub.path}")
    digest = file_sha256(workload.source)
    if digest is None:
        raise ValueError(f"`{field}` {shown}: a dataset file that exists and can be read")
    if workload.sha256 != digest:
        raise ValueError(f"`sha256` {workload.sha256} of {shown} (the file's is {digest})")
    try:
        samples = load_samples(str(workload.source), workload.format, digest)
    except DatasetFormatError as exc:
        raise ValueError(f"`{field}` in format {workload.format}: {exc}") from None
    if workload.categories:
        known = sorted({s.category for s in samples if s.category is not None})
        missing = [c for c in workload.categories if c not in known]
        if missing:
            raise ValueError(f"`categories` of {shown} ({', '.join(known) or 'it has none'}); not {', '.join(missing)}")


def sample_requests(workload: DatasetSpec) -> list[Sample]:
    """The requests of one repeat: seeded, without replacement while the samples last (then
    another seeded pass), each with its output length (the sample's own, capped at max_new_tokens)."""
    population = [s for s in load_samples(str(workload.source), workload.format, workload.sha256) if not workload.categories or s.category in workload.categories]
    rng = random.Random(workload.seed)
    wanted = workload.requests or len(population)
    chosen: list[Sample] = []
    while len(chosen) < wanted:
        chosen.extend(rng.sample(population, min(len(population), wanted - len(chosen))))
    return [Sample(s.prompt, s.category, min(s.output_tokens or workload.max_new_tokens, workload.max_new_tokens), s.source_id) for s in chosen]


def describe(workload: DatasetSpec, samples: list[Sample]) -> dict[str, Any]:
    """What a result records of the dataset: its file, hash, the sample's hash and lengths, categories."""
    categories: dict[str, int] = {}
    for s in samples:
        if s.category is not None:
            categories[s.category] = categories.get(s.category, 0) + 1
    return {
        "file": workload.source.name,
        "format": workload.format,
        # The file is pinned by its content (`sha256`); a hub file also by its repo and commit, which
        # a local file has none of (null: nothing behind it, ARCHITECTURE.md's habits).
        "repo": workload.hub.repo if workload.hub else None,
        "revision": workload.hub.revision if workload.hub else None,
        "sha256": workload.sha256,
        # The agent's own hash of what it asked (fleet.host.agent.kinds.listed.sample_sha256), over one
        # repeat: a one-repeat run's result carries the same value in extras["sample_sha256"].
        "sample_sha256": sample_sha256([Planned(s.prompt, s.output_tokens or workload.max_new_tokens, {"category": s.category}) for s in samples]),
        "seed": workload.seed,
        "requests": len(samples),
        "categories": dict(sorted(categories.items())) or None,
        "tokenizer": "fleet's (fleet.host.tokens, the sim's too); the server's own counts are in each request",
        "prompt_tokens": summary([count_tokens(s.prompt) for s in samples]),
        "output_tokens": summary([s.output_tokens or 0 for s in samples]),
    }

"""The differential of fleet's dataset loaders: the files tests/unit/test_dataset_formats.py writes in
each publisher's format, read by the REAL upstream loaders (SGLang 0.5.23's sglang/benchmark/datasets/,
vLLM 0.33.0's vllm/benchmarks/datasets/datasets.py, from the installed wheels) and by fleet
(fleet.workloads.datasets): the same prompts, the same categories where upstream filters by one, the
same output lengths where upstream takes them from the file.

Both sides count tokens with fleet's stand-in tokenizer (fleet.host.tokens), handed to upstream as a
tokenizer object, so that upstream's length rules (SGLang's 2-token pruning of ShareGPT) prune the
same samples; chat templates are off on both sides (fleet sends the dataset's text; the server
applies its own template). What upstream does that fleet deliberately does not is asserted as a
difference: vLLM prunes ShareGPT pairs under 4 tokens (`is_valid_sequence`, datasets.py:340-364).

Where an upstream loader reads a Hugging Face dataset (vLLM's MT-Bench, HumanEval and GSM8K classes,
through `datasets.load_dataset`), the child replaces only that read (`load_data`) with the rows of the
generated file, and runs the class's own `sample`. Upstream runs in a child interpreter (this file
is its script, see the bottom): importing the wheels is slow and sets state the test session must
not inherit. The upstream that is not installed is skipped, naming what to install.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _files(folder: Path) -> dict[str, str]:
    """The generated files, by case name (written with the unit test's writers: one definition of each format)."""
    from tests.unit.test_dataset_formats import FORMATS, SPEC_BENCH, SPEED_BENCH_SGLANG, write_jsonl

    paths = {name: str(FORMATS[name][0](folder / f"{name}-{FORMATS[name][1]}")) for name in ("sharegpt", "spec_bench", "mt_bench", "gsm8k", "humaneval")}
    speed = folder / "speed-bench"  # vLLM reads a directory of <subset>.jsonl (datasets.py:4582, :4592-4594)
    speed.mkdir()
    paths["speed_bench_vllm"] = str(FORMATS["speed_bench"][0](speed / "qualitative.jsonl"))
    paths["speed_bench_sglang"] = str(write_jsonl(folder / "throughput_1k.jsonl", SPEED_BENCH_SGLANG))
    paths["spec_bench_more"] = str(write_jsonl(folder / "question-more.jsonl", SPEC_BENCH + [{**SPEC_BENCH[1], "question_id": 162, "turns": ["Translate into English: Bonjour."]}]))
    # vLLM's custom dataset wants `output_tokens` on every row when no output length is given (datasets.py:2507-2516).
    paths["custom"] = str(write_jsonl(folder / "custom.jsonl", [{"prompt": "What is the capital of India?", "output_tokens": 10}, {"prompt": "Name three prime numbers.", "output_tokens": 1520}]))
    short = folder / "short.json"  # a 3-token prompt: SGLang keeps it (>= 2), vLLM prunes it (< 4)
    short.write_text(json.dumps([{"id": "s", "conversations": [{"from": "human", "value": "Hi there!"}, {"from": "gpt", "value": "Hello, how can I help you today?"}]}]))
    paths["sharegpt_short"] = str(short)
    return paths


def _upstream(which: str, files: dict[str, str]) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "TOKENIZERS_PARALLELISM": "false", "VLLM_LOGGING_LEVEL": "ERROR"}
    proc = subprocess.run([sys.executable, __file__, "--child", which], input=json.dumps(files), capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.rsplit("\n@@RESULTS@@\n", 1)[1])


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return _files(tmp_path_factory.mktemp("datasets"))


@pytest.fixture(scope="module")
def sglang(files: dict[str, str]) -> dict[str, Any]:
    if not _installed("sglang"):
        pytest.skip("SGLang is not installed (pip install --no-deps sglang==0.5.23, with transformers and numpy)")
    return _upstream("sglang", files)


@pytest.fixture(scope="module")
def vllm(files: dict[str, str]) -> dict[str, Any]:
    if not _installed("vllm") or not _installed("pandas"):
        pytest.skip("vLLM is not installed (pip install -r tests/requirements-vllm.txt && pip install --no-deps vllm==0.33.0; its datasets need pandas)")
    return _upstream("vllm", files)


def fleet(path: str, format: str, category: str | None = None) -> list[tuple[str, int | None]]:
    from fleet.workloads.datasets import LOADERS

    return [(s.prompt, s.output_tokens) for s in LOADERS[format](Path(path)) if category is None or s.category == category]


def test_sglang_sharegpt_gives_fleets_prompts_and_reply_lengths(files: dict[str, str], sglang: dict[str, Any]) -> None:
    # sample_sharegpt_requests shuffles (sharegpt.py:98): the same multiset.
    assert sorted(map(tuple, sglang["sharegpt"])) == sorted(fleet(files["sharegpt"], "sharegpt"))  # type: ignore[arg-type]
    assert sorted(map(tuple, sglang["sharegpt_short"])) == fleet(files["sharegpt_short"], "sharegpt") != []


@pytest.mark.parametrize("category", [None, "mixed"])
def test_sglang_speed_bench_gives_fleets_prompts(files: dict[str, str], sglang: dict[str, Any], category: str | None) -> None:
    assert sorted(sglang[f"speed_bench_sglang:{category}"]) == sorted(p for p, _ in fleet(files["speed_bench_sglang"], "speed_bench", category))


def test_vllm_sharegpt_gives_fleets_prompts_and_reply_lengths_but_prunes_harder(files: dict[str, str], vllm: dict[str, Any]) -> None:
    assert [tuple(x) for x in vllm["sharegpt"]] == fleet(files["sharegpt"], "sharegpt")
    # Deliberate: fleet keeps SGLang's 2-token floor; vLLM drops the 3-token prompt.
    assert vllm["sharegpt_short"] == [] and len(fleet(files["sharegpt_short"], "sharegpt")) == 1


@pytest.mark.parametrize("category", [None, "translation"])
def test_vllm_spec_bench_gives_fleets_prompts(files: dict[str, str], vllm: dict[str, Any], category: str | None) -> None:
    assert vllm[f"spec_bench_more:{category}"] == [p for p, _ in fleet(files["spec_bench_more"], "spec_bench", category)]


@pytest.mark.parametrize("category", [None, "math"])
def test_vllm_speed_bench_gives_fleets_prompts(files: dict[str, str], vllm: dict[str, Any], category: str | None) -> None:
    assert vllm[f"speed_bench_vllm:{category}"] == [p for p, _ in fleet(files["speed_bench_vllm"], "speed_bench", category)]


@pytest.mark.parametrize("name, format", [("mt_bench", "mt_bench"), ("humaneval", "humaneval"), ("gsm8k", "gsm8k")])
def test_vllm_hub_datasets_give_fleets_prompts(files: dict[str, str], vllm: dict[str, Any], name: str, format: str) -> None:
    assert vllm[name] == [p for p, _ in fleet(files[name], format)]


def test_vllm_custom_jsonl_gives_fleets_prompts_and_output_lengths(files: dict[str, str], vllm: dict[str, Any]) -> None:
    assert [tuple(x) for x in vllm["custom"]] == fleet(files["custom"], "jsonl")


# --- the child: the upstream loaders themselves ---------------------------------------------------


class _Tokenizer:
    """fleet's stand-in tokenizer in the shape upstream calls: `encode` (SGLang), `__call__(...).input_ids`
    (vLLM); no chat template (SGLang's speed-bench falls back to the raw text, speed_bench.py:80-82)."""

    bos_token = None

    def encode(self, text: str) -> list[int]:
        from fleet.host.tokens import tokenize

        return list(range(len(tokenize(text))))

    def __call__(self, text: str) -> Any:
        from types import SimpleNamespace

        return SimpleNamespace(input_ids=self.encode(text))

    def apply_chat_template(self, *args: Any, **kwargs: Any) -> Any:
        raise ValueError("no chat template: fleet sends the dataset's text")


def _child_sglang(files: dict[str, str]) -> dict[str, Any]:
    import types

    import sglang.benchmark

    # The package's __init__ imports every dataset module, MMMU's needs HF `datasets`: load the two read here alone.
    package = types.ModuleType("sglang.benchmark.datasets")
    package.__path__ = [str(Path(sglang.benchmark.__file__).parent / "datasets")]
    sys.modules["sglang.benchmark.datasets"] = package
    from sglang.benchmark.datasets.sharegpt import sample_sharegpt_requests
    from sglang.benchmark.datasets.speed_bench import SpeedBenchDataset

    tokenizer = _Tokenizer()
    out: dict[str, Any] = {}
    for name in ("sharegpt", "sharegpt_short"):
        rows = sample_sharegpt_requests(dataset_path=files[name], num_requests=10_000, tokenizer=tokenizer)
        out[name] = [[row.prompt, row.output_len] for row in rows]
    for category in (None, "mixed"):
        # num_requests: the rows there are, so that random.sample returns each once (speed_bench.py:94-95).
        count = sum(1 for line in open(files["speed_bench_sglang"]) if (row := json.loads(line)).get("turns") and category in (None, row.get("category")))
        rows = SpeedBenchDataset(dataset_path=files["speed_bench_sglang"], category=category, output_len=512, num_requests=count).load(tokenizer)
        out[f"speed_bench_sglang:{category}"] = [row.prompt for row in rows]
    return out


def _child_vllm(files: dict[str, str]) -> dict[str, Any]:
    from vllm.benchmarks.datasets import datasets as vd

    tokenizer = _Tokenizer()
    common = {"num_requests": 10_000, "no_oversample": True}
    out: dict[str, Any] = {}
    for name in ("sharegpt", "sharegpt_short"):
        rows = vd.ShareGPTDataset(dataset_path=files[name], disable_shuffle=True).sample(tokenizer=tokenizer, **common)
        out[name] = [[row.prompt, row.expected_output_len] for row in rows]
    for category in (None, "translation"):
        rows = vd.SpecBench(dataset_path=files["spec_bench_more"], category=category, disable_shuffle=True).sample(tokenizer=tokenizer, skip_chat_template=True, output_len=256, **common)
        out[f"spec_bench_more:{category}"] = [row.prompt for row in rows]
    for category in (None, "math"):
        speed = vd.SpeedBench(dataset_path=str(Path(files["speed_bench_vllm"]).parent), dataset_subset="qualitative", category=category, disable_shuffle=True)
        out[f"speed_bench_vllm:{category}"] = [row.prompt for row in speed.sample(tokenizer=tokenizer, skip_chat_template=True, output_len=256, **common)]
    rows = vd.CustomDataset(dataset_path=files["custom"], disable_shuffle=True).sample(tokenizer=tokenizer, skip_chat_template=True, output_len=None, **common)
    out["custom"] = [[row.prompt, row.expected_output_len] for row in rows]
    for name, cls, repo in (("mt_bench", vd.MTBenchDataset, "philschmid/mt-bench"), ("humaneval", vd.HumanEvalDataset, "openai/openai_humaneval"), ("gsm8k", vd.GSM8KDataset, "openai/gsm8k")):
        local_rows = [json.loads(line) for line in open(files[name]) if line.strip()]

        class FromFile(cls):  # type: ignore[misc, valid-type]
            def load_data(self) -> None:  # the hub read (HuggingFaceDataset.load_data, datasets.py:3118-3129), replaced by the file's rows
                self.data = local_rows

        rows = FromFile(dataset_path=repo, dataset_split="test", disable_shuffle=True).sample(tokenizer=tokenizer, skip_chat_template=True, **common)
        out[name] = [row.prompt for row in rows]
    return out


def _child(which: str) -> None:
    files = json.loads(sys.stdin.read())
    results = _child_sglang(files) if which == "sglang" else _child_vllm(files)
    sys.stdout.write("\n@@RESULTS@@\n" + json.dumps(results))


if __name__ == "__main__" and sys.argv[1:2] == ["--child"]:
    _child(sys.argv[2])

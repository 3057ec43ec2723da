"""The simulator's HTTP surface against SGLang 0.5.23's own definitions (issue 26, must-show 5).

A sim server playing 0.5.23 (a DFLASH launch, so speculative fields exist, with --enable-metrics and
--enable-cache-report) answers every endpoint it serves; each answer is checked against the wheel:

- OpenAI answers (/v1/completions, /v1/chat/completions, streamed and not, with include_usage and
  continuous_usage_stats, with return_spec_tokens_details; /v1/models, /v1/models/{id}; error bodies)
  are validated by the wheel's pydantic models (sglang/srt/entrypoints/openai/protocol.py) and must
  equal what that model serializes back (`model_dump`, with exclude_none where 0.5.23 dumps so:
  serving_completions.py:495), so a missing key, an extra key or a wrong type fails. Chat content
  chunks, which 0.5.23 builds with msgspec (sse_utils.py:52 build_sse_content), must equal what
  that function builds from the same values.
- /model_info has exactly the keys of http_server.py's model_info dict; /server_info has the keys
  server_info and build_server_info add (launch_command, startup_time, kv_events, internal_states,
  version, frontend) and otherwise ServerArgs fields or the scheduler's get_init_info keys; /generate's
  meta_info keys are ones tokenizer_manager.py sets. These dicts have no model, so their keys are read
  from the wheel's source with `ast`.
- /metrics: every family's name, type and label names are those of a metric the wheel defines
  (sglang/srt/observability/metrics_collector.py, read with `ast`: each Counter/Gauge/Histogram call's
  name and labelnames, the base labels from the collectors' label dicts).
- /health, /health_generate and /ready answer 200 with an empty body once the server is up.

Needs the sglang 0.5.23 wheel (tests/requirements-sglang.txt); the pydantic checks run in a child
interpreter (this file is its script), as the parser differential does, so that importing sglang does
not leak into the test session.
"""

from __future__ import annotations

import ast
import http.client
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

from fleet.host.engines.sglang.launch import SGLANG_VERSION_TESTED
from fleet.host.engines.sim.harness import SimProcess, start_sim
from tests.testfleet.gpu_tools import local_gpu_env

ROOT = Path(__file__).resolve().parents[2]
INSTALL = "pip install -r tests/requirements-sglang.txt && pip install --no-deps sglang==" + SGLANG_VERSION_TESTED
ARGS = [
    "--model-path", "qwen3.6-27b", "--context-length", "32768", "--mem-fraction-static", "0.75",
    "--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "qwen3.6-27b-dflash", "--speculative-num-draft-tokens", "16",
    "--trust-remote-code",
    "--enable-metrics", "--enable-cache-report",
]  # fmt: skip


def _wheel_dir() -> Path:
    spec = importlib.util.find_spec("sglang")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip(f"sglang is not installed; CI installs it with: {INSTALL}")
    return Path(list(spec.submodule_search_locations)[0])


# --- the sim, and what it answers ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimProcess]:
    _wheel_dir()
    base = tmp_path_factory.mktemp("conformance")
    env = local_gpu_env(base / "gpu", os.environ)
    env.update(FLEET_SIM_SPEED="0.01", FLEET_SIM_SGLANG_VERSION=SGLANG_VERSION_TESTED, CUDA_VISIBLE_DEVICES="0")
    server = start_sim(ARGS, base / "server.log", env=env)
    try:
        assert server.wait_ready(60), server.log()[-3000:]
        yield server
    finally:
        server.stop()


def call(server: SimProcess, method: str, path: str, body: Any = None) -> tuple[int, str, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        connection.request(method, path, body=None if body is None else json.dumps(body), headers={"content-type": "application/json"})
        response = connection.getresponse()
        return response.status, response.getheader("content-type") or "", response.read()
    finally:
        connection.close()


def events(raw: bytes) -> list[Any]:
    out = []
    for line in raw.decode().splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            out.append(json.loads(line[len("data: ") :]))
    return out


PROMPT = "Write a short story about a lighthouse keeper who finds a message in a bottle."
MESSAGES = [{"role": "user", "content": PROMPT}]


@pytest.fixture(scope="module")
def answers(sim: SimProcess) -> dict[str, Any]:
    """Every answer of the sim, by name."""
    got: dict[str, Any] = {}
    for path in ("/health", "/health_generate", "/ready", "/model_info", "/get_model_info", "/server_info", "/get_server_info", "/v1/models", "/metrics", "/flush_cache"):
        got[path] = call(sim, "GET", path)
    name = json.loads(got["/v1/models"][2])["data"][0]["id"]
    got["/v1/models/{id}"] = call(sim, "GET", f"/v1/models/{name}")
    completions = {"model": name, "prompt": PROMPT, "max_tokens": 12}
    chat = {"model": name, "messages": MESSAGES, "max_tokens": 12}
    got["completion"] = call(sim, "POST", "/v1/completions", completions)
    got["completion+spec"] = call(sim, "POST", "/v1/completions", {**completions, "return_spec_tokens_details": True})
    got["chat"] = call(sim, "POST", "/v1/chat/completions", chat)
    got["chat+spec"] = call(sim, "POST", "/v1/chat/completions", {**chat, "return_spec_tokens_details": True})
    for label, options in (("plain", None), ("usage", {"include_usage": True}), ("continuous", {"include_usage": True, "continuous_usage_stats": True})):
        extra: dict[str, Any] = {"stream": True, "return_spec_tokens_details": True}
        if options:
            extra["stream_options"] = options
        got[f"completion-stream:{label}"] = call(sim, "POST", "/v1/completions", {**completions, **extra})
        got[f"chat-stream:{label}"] = call(sim, "POST", "/v1/chat/completions", {**chat, **extra})
    got["generate"] = call(sim, "POST", "/generate", {"text": PROMPT, "sampling_params": {"max_new_tokens": 12}})
    got["generate-stream"] = call(sim, "POST", "/generate", {"text": PROMPT, "sampling_params": {"max_new_tokens": 12}, "stream": True})
    got["error:too-long"] = call(sim, "POST", "/v1/completions", {"model": name, "prompt": PROMPT, "max_tokens": 10**6})
    got["/metrics:after"] = call(sim, "GET", "/metrics")
    return got


# --- the wheel's definitions, read from its source ----------------------------------------------------------


def _function(tree: ast.AST, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef:
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return node
    raise AssertionError(f"no function {name} in the wheel")


def _dict_keys(node: ast.AST) -> list[str]:
    return [k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)] if isinstance(node, ast.Dict) else []


def _subscript_keys(tree: ast.AST, target: str) -> set[str]:
    """Keys of every `target["key"] = ...` and of every dict literal assigned to or merged into `target`."""
    keys: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id == target and isinstance(t.slice, ast.Constant):
                    keys.add(t.slice.value)
                if isinstance(t, ast.Name) and t.id == target:
                    keys.update(_dict_keys(node.value))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "update" and isinstance(node.func.value, ast.Name) and node.func.value.id == target:
            for arg in node.args:
                keys.update(_dict_keys(arg))
    return keys


def model_info_keys(wheel: Path) -> list[str]:
    """http_server.py model_info: the `result = {...}` dict (an embedding model adds `embedding`)."""
    function = _function(ast.parse((wheel / "srt/entrypoints/http_server.py").read_text()), "model_info")
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "result" for t in node.targets):
            return _dict_keys(node.value)
    raise AssertionError("model_info builds no result dict")


def server_info_keys(wheel: Path) -> set[str]:
    """The keys /server_info adds to the ServerArgs fields: http_server.py server_info, utils/common.py
    build_server_info (its result["..."] keys) and the scheduler's get_init_info (scheduler.py)."""
    keys: set[str] = set()
    server_info = _function(ast.parse((wheel / "srt/entrypoints/http_server.py").read_text()), "server_info")
    for node in ast.walk(server_info):
        keys.update(_dict_keys(node))
    keys |= _subscript_keys(_function(ast.parse((wheel / "srt/utils/common.py").read_text()), "build_server_info"), "result")
    keys |= _subscript_keys(_function(ast.parse((wheel / "srt/managers/scheduler.py").read_text()), "get_init_info"), "result_dict")
    return keys


def meta_info_keys(wheel: Path) -> set[str]:
    """Every key tokenizer_manager.py sets on a request's meta_info."""
    return _subscript_keys(ast.parse((wheel / "srt/managers/tokenizer_manager.py").read_text()), "meta_info")


def metric_definitions(wheel: Path) -> dict[str, tuple[str, tuple[str, ...]]]:
    """name -> (type, label names) of every metric the Scheduler and Tokenizer collectors define."""
    tree = ast.parse((wheel / "srt/observability/metrics_collector.py").read_text())
    tokenizer_base = tuple(_subscript_keys(_function(tree, "tokenizer_metric_labels"), "labels") & {"model_name", "engine_type"})
    scheduler_base: tuple[str, ...] = ()
    for node in ast.walk(tree):  # the scheduler's label dict: the one with tp_rank
        keys = _dict_keys(node)
        if "tp_rank" in keys and "model_name" in keys:
            scheduler_base = tuple(keys)
    assert tokenizer_base and scheduler_base
    definitions: dict[str, tuple[str, tuple[str, ...]]] = {}
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name in ("SchedulerMetricsCollector", "TokenizerMetricsCollector")):
        base = scheduler_base if cls.name.startswith("Scheduler") else tokenizer_base
        for call in ast.walk(cls):
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in ("Counter", "Gauge", "Histogram", "Summary")):
                continue
            kw = {k.arg: k.value for k in call.keywords}
            if not isinstance(kw.get("name"), ast.Constant):
                continue
            labels_expr = kw.get("labelnames")
            extra = tuple(n.value for n in ast.walk(labels_expr) if isinstance(n, ast.Constant) and isinstance(n.value, str)) if labels_expr is not None else ()
            uses_base = labels_expr is not None and "labels" in {n.id for n in ast.walk(labels_expr) if isinstance(n, ast.Name)}
            definitions[kw["name"].value] = (call.func.id.lower(), (base if uses_base else ()) + extra)
    return definitions


def parse_metrics(text: str) -> dict[str, tuple[str, list[tuple[str, set[str]]]]]:
    """family -> (type, [(sample name, label names)])."""
    families: dict[str, tuple[str, list[tuple[str, set[str]]]]] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            current = name
            families[name] = (kind, [])
        elif line and not line.startswith("#"):
            sample, _, _ = line.rpartition(" ")
            name, _, labels = sample.partition("{")
            label_names = {part.split("=", 1)[0] for part in labels.rstrip("}").split(",") if part} if labels else set()
            assert current is not None, line
            families[current][1].append((name, label_names))
    return families


# --- the checks -----------------------------------------------------------------------------------------------


def test_health_and_ready_answer_200_with_no_body(answers: dict[str, Any]) -> None:
    for path in ("/health", "/health_generate", "/ready"):
        status, _, body = answers[path]
        assert (status, body) == (200, b""), path  # http_server.py:714-800: Response(status_code=200)


def test_model_info_has_exactly_the_wheels_keys(answers: dict[str, Any]) -> None:
    for path in ("/model_info", "/get_model_info"):  # http_server.py:802: the deprecated path answers the same
        status, _, body = answers[path]
        assert status == 200
        assert list(json.loads(body)) == model_info_keys(_wheel_dir()), path


def test_flush_cache_answers_the_wheels_text(answers: dict[str, Any]) -> None:
    """http_server.py:1025-1040: an idle server's flush answers 200 with the success text."""
    function = _function(ast.parse((_wheel_dir() / "srt/entrypoints/http_server.py").read_text()), "flush_cache")
    texts = [n.value for n in ast.walk(function) if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.startswith("Cache flushed")]
    status, _, body = answers["/flush_cache"]
    assert status == 200 and len(texts) == 1
    assert body.decode() == texts[0]


def test_server_info_has_the_wheels_keys_and_no_others(answers: dict[str, Any], checked: dict[str, Any]) -> None:
    wheel = _wheel_dir()
    status, _, body = answers["/server_info"]
    info = json.loads(body)
    assert status == 200
    assert set(json.loads(answers["/get_server_info"][2])) == set(info)  # http_server.py:853: the same answer
    added = server_info_keys(wheel)
    assert {"launch_command", "startup_time", "internal_states", "version", "frontend", "kv_events"} <= added
    missing = {"launch_command", "startup_time", "internal_states", "version", "frontend", "kv_events", "status", "max_total_num_tokens", "max_req_input_len"} - set(info)
    assert missing == set()
    fields = set(checked["server_args_fields"])
    strangers = set(info) - fields - added
    assert strangers == set(), f"keys 0.5.23's /server_info does not have: {sorted(strangers)}"
    assert info["version"] == SGLANG_VERSION_TESTED
    assert set(info["startup_time"]) == {"load_weight", "kv_cache_allocation", "scheduler_e2e", "cuda_graph", "tokenizer_e2e"}  # metrics_collector.py:2076-2090


def test_generate_meta_info_keys_are_ones_the_wheel_sets(answers: dict[str, Any]) -> None:
    allowed = meta_info_keys(_wheel_dir())
    base = {"id", "finish_reason", "prompt_tokens", "weight_version", "num_retractions", "reasoning_tokens", "completion_tokens", "cached_tokens"}
    assert base <= allowed
    status, _, body = answers["generate"]
    assert status == 200
    metas = [json.loads(body)["meta_info"]] + [e["meta_info"] for e in events(answers["generate-stream"][2])]
    for meta in metas:
        assert base <= set(meta), sorted(base - set(meta))
        assert set(meta) <= allowed, f"meta_info keys 0.5.23 never sets: {sorted(set(meta) - allowed)}"
    final = metas[-1]
    assert {"e2e_latency", "spec_verify_ct", "spec_accept_rate", "spec_accept_length"} <= set(final)  # a finished DFLASH request


def test_metric_names_types_and_labels_are_the_wheels(answers: dict[str, Any]) -> None:
    definitions = metric_definitions(_wheel_dir())
    assert len(definitions) > 100
    problems = []
    for key in ("/metrics", "/metrics:after"):
        status, _, body = answers[key]
        assert status == 200
        families = parse_metrics(body.decode())
        assert len(families) >= 15
        for family, (kind, samples) in families.items():
            name = family.removeprefix("")
            if name not in definitions:
                problems.append(f"{name}: no such metric in 0.5.23")
                continue
            want_kind, want_labels = definitions[name]
            if kind != want_kind:
                problems.append(f"{name}: type {kind}, 0.5.23 {want_kind}")
            for sample, labels in samples:
                labels = labels - ({"le"} if sample.endswith("_bucket") else set())
                if labels != set(want_labels):
                    problems.append(f"{sample}: labels {sorted(labels)}, 0.5.23 {sorted(want_labels)}")
    assert problems == []
    streaming = [s for s in parse_metrics(answers["/metrics:after"][2].decode())["sglang:num_requests_total"][1]]
    assert len(streaming) == 2  # is_streaming="false" and "true"


# The OpenAI answers go to the child, which checks them with the wheel's models.


@pytest.fixture(scope="module")
def checked(answers: dict[str, Any]) -> dict[str, Any]:
    items = []
    for key in ("completion", "completion+spec"):
        items.append({"name": key, "model": "CompletionResponse", "body": json.loads(answers[key][2])})
    for key in ("chat", "chat+spec"):
        items.append({"name": key, "model": "ChatCompletionResponse", "body": json.loads(answers[key][2])})
    items.append({"name": "/v1/models", "model": "ModelList", "body": json.loads(answers["/v1/models"][2])})
    items.append({"name": "/v1/models/{id}", "model": "ModelCard", "body": json.loads(answers["/v1/models/{id}"][2])})
    items.append({"name": "error:too-long", "model": "ErrorResponse", "body": json.loads(answers["error:too-long"][2])})
    for label in ("plain", "usage", "continuous"):
        for n, chunk in enumerate(events(answers[f"completion-stream:{label}"][2])):
            final_usage = not chunk["choices"] and chunk.get("usage") is not None
            items.append({"name": f"completion-stream:{label}:{n}", "model": "CompletionStreamResponse", "body": chunk, "exclude_none": final_usage})
        for n, chunk in enumerate(events(answers[f"chat-stream:{label}"][2])):
            model = "ChatCompletionStreamResponse" if not chunk["choices"] else "build_sse_content"
            items.append({"name": f"chat-stream:{label}:{n}", "model": model, "body": chunk})
    # The child runs this file as a script: its own folder leads sys.path, so the checkout's root
    # goes on it for `tests.` (CI's checkout has no PYTHONPATH set).
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-W", "ignore", __file__], input=json.dumps(items), capture_output=True, text=True, timeout=300, cwd=ROOT, env=env)
    assert done.returncode == 0, done.stderr[-4000:]
    answer = json.loads(done.stdout)
    return {"items": items, "results": answer["results"], "server_args_fields": answer["server_args_fields"]}


def test_openai_answers_are_what_the_wheels_models_serialize(checked: dict[str, Any]) -> None:
    differences = {name: result for name, result in checked["results"].items() if result is not None}
    assert differences == {}
    assert len(checked["items"]) >= 30


def test_continuous_usage_stats_puts_usage_in_every_content_chunk(answers: dict[str, Any]) -> None:
    """0.5.23 serving_completions.py:395-401, serving_chat.py:985-1000: the running usage on every content
    chunk; the chat role and finish chunks never carry it (serving_chat.py:2586, :2655)."""
    completion = events(answers["completion-stream:continuous"][2])
    content = [c for c in completion if c["choices"]]
    assert content and all(c["usage"] is not None for c in content)
    assert [c["usage"]["completion_tokens"] for c in content] == sorted(c["usage"]["completion_tokens"] for c in content)
    assert all(c["usage"] is None for c in events(answers["completion-stream:usage"][2]) if c["choices"])
    chat = [c for c in events(answers["chat-stream:continuous"][2]) if c["choices"]]
    middle = [c for c in chat if "content" in c["choices"][0]["delta"] and c["choices"][0]["delta"].get("role") is None]
    assert middle and all("usage" in c for c in middle)
    assert "usage" not in chat[0] and "usage" not in chat[-1]
    last = events(answers["chat-stream:continuous"][2])[-1]
    assert last["choices"] == [] and last["usage"]["completion_tokens"] == middle[-1]["usage"]["completion_tokens"]


def test_non_streamed_answers_carry_sglext_when_spec_details_are_asked(answers: dict[str, Any]) -> None:
    for key in ("completion+spec", "chat+spec"):
        body = json.loads(answers[key][2])
        assert set(body["sglext"]) == {"spec_tokens_details"}, key
        assert body["sglext"]["spec_tokens_details"]["spec_verify_ct"] > 0
    assert "sglext" not in json.loads(answers["completion"][2])


# ---------------------------------------------------------------------------------------------
# The child: each answer through the installed wheel's models.


def _check_all(items: list[dict[str, Any]]) -> dict[str, Any]:
    from sglang.srt.entrypoints.openai import protocol
    from sglang.srt.entrypoints.openai.sse_utils import build_sse_content
    from sglang.srt.server_args import ServerArgs

    results: dict[str, Any] = {}
    for item in items:
        body = item["body"]
        try:
            if item["model"] == "build_sse_content":
                choice = body["choices"][0]
                delta = choice["delta"]
                rebuilt = build_sse_content(
                    chunk_id=body["id"],
                    created=body["created"],
                    model=body["model"],
                    index=choice["index"],
                    role=delta.get("role"),
                    content=delta.get("content"),
                    reasoning_content=delta.get("reasoning_content"),
                    finish_reason=choice.get("finish_reason"),
                    logprobs=choice.get("logprobs"),
                    matched_stop=choice.get("matched_stop"),
                    usage=body.get("usage"),
                )
                expected = json.loads(rebuilt[len("data: ") :])
                protocol.ChatCompletionStreamResponse.model_validate(body)
                if body.get("usage") is not None:
                    protocol.UsageInfo.model_validate(body["usage"])
                    assert body["usage"] == protocol.UsageInfo.model_validate(body["usage"]).model_dump(mode="json")
            else:
                model = getattr(protocol, item["model"])
                expected = model.model_validate(body).model_dump(mode="json", exclude_none=bool(item.get("exclude_none")))
            results[item["name"]] = None if expected == body else {"sim": body, "0.5.23": expected}
        except Exception as exc:  # a validation error: the answer is not what the model accepts
            results[item["name"]] = f"{type(exc).__name__}: {exc}"
    # /server_info's resolved fields are ServerArgs' (server_args.py:316 resolved_dict over record_fields).
    return {"results": results, "server_args_fields": list(ServerArgs.__struct_fields__)}


if __name__ == "__main__":
    json.dump(_check_all(json.load(sys.stdin)), sys.stdout)

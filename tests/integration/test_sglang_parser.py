"""Every launch argv fleet renders from the shipped playbooks is accepted by the REAL SGLang argument
parser (`ServerArgs.add_cli_args` of the pinned release), and parses to what fleet meant.

Needs `pip install -r tests/requirements-sglang.txt && pip install --no-deps sglang==0.5.23`
(CPU torch; no GPU). The parsing runs in a child interpreter, as `python -m sglang.launch_server`
would: importing sglang sets cache variables in os.environ and loads torch, which must not leak
into the rest of the test session. This file is that child's script too (see the bottom).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleet.host.modelcard import load_model_card
from fleet.inventory import EngineKind
from fleet.launch import launch_spec
from fleet.launch.sglang import FORK_ALGORITHMS, SGLANG_VERSION_TESTED, LaunchSpec
from fleet.playbook import Playbook, ServerConfig, load_playbook, server_configs

pytestmark = pytest.mark.sglang_parser

ROOT = Path(__file__).resolve().parents[2]
INSTALL = "pip install -r tests/requirements-sglang.txt && pip install --no-deps sglang==" + SGLANG_VERSION_TESTED
MODEL_PATH = "/dev/shm/fleet/model"
DRAFT_PATH = "/dev/shm/fleet/draft"
PORT = 30011


@dataclass(frozen=True)
class Case:
    name: str
    server: ServerConfig
    spec: LaunchSpec

    @property
    def args(self) -> list[str]:
        assert self.spec.argv[1:3] == ["-m", "sglang.launch_server"], self.spec.argv
        return self.spec.argv[3:]


def case(name: str, server: ServerConfig, **kwargs: Any) -> Case:
    spec = launch_spec(
        EngineKind.sglang,
        server,
        python=sys.executable,
        model_path=MODEL_PATH,
        draft_path=DRAFT_PATH if server.draft else None,
        port=PORT,
        **kwargs,
    )
    return Case(name, server, spec)


def playbook_cases() -> list[Case]:
    cases = []
    for path in sorted((ROOT / "playbooks").glob("*.yaml")):
        for server in server_configs(load_playbook(path)):
            cases.append(case(f"{path.name}:{server.label}", server))
    return cases


def coverage_cases() -> list[Case]:
    """Every setting fleet can render, so each of its flags meets the real parser, not only those the
    shipped playbooks happen to use."""
    data = yaml.safe_load((ROOT / "playbooks" / "demo.yaml").read_text())
    data["drafts"]["eagle"] = {"repo": "example/eagle3-draft"}
    data["methods"] = {
        "dflash": {"algorithm": "DFLASH", "draft": "dflash", "num_draft_tokens": 16},
        "eagle3": {"algorithm": "EAGLE3", "draft": "eagle", "num_steps": 3, "eagle_topk": 1, "num_draft_tokens": 4,
                   "flags": {"speculative-attention-mode": "decode"}},
    }
    data["server"].update(
        max_total_tokens=200000,
        chunked_prefill_size=8192,
        cuda_graph_max_bs=8,
        draft_attention_backend="flashinfer",
        disable_radix_cache=False,
        mamba_scheduler_strategy="extra_buffer",
        page_size=1,
        kv_cache_dtype="bf16",
        flags={"cuda-graph-bs-decode": [1, 2, 4], "enable-mixed-chunk": False, "decode-log-interval": 20,
               "skip-server-warmup": True, "mamba-track-interval": 64},
        env={"NCCL_DEBUG": "WARN"},
    )
    playbook = Playbook.model_validate(data)
    return [case(f"coverage:{server.label}", server) for server in server_configs(playbook)]


def meant(case: Case) -> dict[str, Any]:
    """ServerArgs fields as fleet intends them, from the configuration (not from the argv)."""
    server, settings = case.server, case.server.settings
    expected: dict[str, Any] = {
        "model_path": MODEL_PATH,
        "served_model_name": server.model.label,
        "host": "127.0.0.1",
        "port": PORT,
        "tp_size": server.tp,
        "trust_remote_code": settings.trust_remote_code,
        "enable_metrics": settings.enable_metrics,
        "speculative_algorithm": server.algorithm,
        "speculative_draft_model_path": DRAFT_PATH if server.draft else None,
        "disable_radix_cache": bool(settings.disable_radix_cache),
    }
    hybrid = server.model.card is not None and load_model_card(server.model.card).is_hybrid
    if hybrid and server.algorithm and settings.disable_radix_cache is None and settings.mamba_scheduler_strategy in (None, "auto", "no_buffer"):
        # SGLang refuses speculative decoding on a hybrid model with the radix cache in no_buffer mode.
        expected["disable_radix_cache"] = True
    renamed = {"cuda_graph_max_bs": "cuda_graph_max_bs_decode", "mamba_scheduler_strategy": "mamba_radix_cache_strategy"}
    for name in ("context_length", "mem_fraction_static", "max_running_requests", "max_total_tokens",
                 "chunked_prefill_size", "cuda_graph_max_bs", "attention_backend", "page_size", "kv_cache_dtype",
                 "mamba_scheduler_strategy"):
        if getattr(settings, name) is not None:
            expected[renamed.get(name, name)] = getattr(settings, name)
    for name in ("num_draft_tokens", "num_steps", "eagle_topk"):
        if getattr(server, name) is not None:
            expected[f"speculative_{name}"] = getattr(server, name)
    if server.algorithm and settings.draft_attention_backend:
        expected["speculative_draft_attention_backend"] = settings.draft_attention_backend
    for key, value in {**settings.flags, **server.method_flags}.items():
        if value is not None:
            expected[key.replace("-", "_")] = value
    return expected


@pytest.fixture(scope="module")
def parsed() -> dict[str, Any]:
    if importlib.util.find_spec("sglang") is None:
        pytest.skip(f"sglang is not installed; CI installs it with: {INSTALL}")
    cases = playbook_cases() + coverage_cases()
    request = [{"name": c.name, "args": c.args} for c in cases]
    done = subprocess.run(
        [sys.executable, "-W", "ignore", __file__],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 0, f"the sglang parser child failed:\n{done.stderr[-4000:]}"
    answer = json.loads(done.stdout)
    return {"version": answer["version"], "cases": {c.name: c for c in cases}, "results": answer["results"]}


def test_the_pinned_sglang_release_is_the_one_installed(parsed: dict[str, Any]) -> None:
    assert parsed["version"] == SGLANG_VERSION_TESTED


def test_every_upstream_argv_of_every_playbook_parses_to_what_fleet_meant(parsed: dict[str, Any]) -> None:
    upstream = [c for c in parsed["cases"].values() if c.spec.upstream]
    assert len([c for c in upstream if c.name.startswith("qwen36-specdec.yaml:")]) == 6  # TP1/4/8 x AR, DFlash
    assert any(c.name.startswith("coverage:") for c in upstream)
    for c in upstream:
        result = parsed["results"][c.name]
        assert result["error"] is None and result["unknown"] == [], f"{c.name}: {result}"
        assert result["record"] is not None, f"{c.name}: ServerArgs.from_cli_args failed: {result['record_error']}"
        record = result["record"]
        for field_name, value in meant(c).items():
            assert record[field_name] == value, f"{c.name}: {field_name} parsed as {record[field_name]!r}, fleet meant {value!r}"


def test_ddtree_argvs_are_marked_fork_and_the_real_parser_rejects_the_budget_flag(parsed: dict[str, Any]) -> None:
    forks = [c for c in parsed["cases"].values() if c.server.algorithm in FORK_ALGORITHMS]
    assert len([c for c in forks if c.name.startswith("qwen36-specdec.yaml:")]) == 3 * 6
    for c in forks:
        assert not c.spec.upstream
        result = parsed["results"][c.name]
        # Strict parsing fails, and the only thing the released parser does not know is the fork's budget flag.
        assert "unrecognized arguments: --speculative-ddtree-budget" in result["error"], f"{c.name}: {result}"
        assert result["unknown"] == ["--speculative-ddtree-budget", str(c.server.ddtree_budget)]


# ---------------------------------------------------------------------------------------------
# The child: parse each argv with the installed sglang, answer JSON on stdout.


def _parse_all(request: list[dict[str, Any]]) -> dict[str, Any]:
    import argparse
    import contextlib
    import io
    from importlib.metadata import version

    from sglang.srt.server_args import ServerArgs

    def plain(value: Any) -> Any:
        return value if isinstance(value, (str, int, float, bool, type(None), list)) else repr(value)

    results = {}
    for item in request:
        # As sglang.srt.server_args.prepare_server_args builds it.
        parser = argparse.ArgumentParser(prog="sglang serve")
        ServerArgs.add_cli_args(parser)
        errors = io.StringIO()
        error, namespace, unknown = None, None, None
        with contextlib.redirect_stderr(errors):
            try:
                namespace = parser.parse_args(item["args"])
            except SystemExit:
                error = errors.getvalue().strip().splitlines()[-1]
            try:
                unknown = parser.parse_known_args(item["args"])[1]
            except SystemExit:
                pass  # not only unknown flags: `error` says what
        record, record_error = None, None
        if namespace is not None:
            try:
                server_args = ServerArgs.from_cli_args(namespace)
                record = {name: plain(getattr(server_args, name)) for name in vars(namespace) if hasattr(server_args, name)}
            except Exception as exc:  # noqa: BLE001 - reported to the test, which names the case
                record_error = f"{type(exc).__name__}: {exc}"
        results[item["name"]] = {"error": error, "unknown": unknown, "record": record, "record_error": record_error}
    return {"version": version("sglang"), "results": results}


if __name__ == "__main__":
    json.dump(_parse_all(json.load(sys.stdin)), sys.stdout)

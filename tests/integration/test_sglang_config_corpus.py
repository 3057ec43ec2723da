"""`--config` files as SGLang 0.5.23 reads them (issue 26, must-show 3): a corpus of YAML files, written
here, each through the REAL `sglang.srt.server_args.prepare_server_args` of the installed wheel and
through fleet's reader (`fleet.host.engines.sglang.flags.parse_argv`, which the planner and the
simulator use): the same outcome for every file.

0.5.23 reads the file in ConfigArgumentMerger (sglang/srt/utils/server_args_config_parser.py): the
suffix and existence checks (:155-162), `yaml.safe_load` (:141, PyYAML 6, YAML 1.1 scalars), a root
that is not a mapping refused (:150), then `_convert_config_to_args` (:164-183): `key.replace` (:169,
so a non-string key dies with AttributeError), booleans to a bare store_true flag or `true`/`false`,
lists spread (empty ones dropped), mappings to `json.dumps` (:179), everything else `str()`; the
flags go before the command line's and argparse parses the whole (abbreviations, types, choices).

Outcomes compared: accepted (every ServerArgs field with a flag equal), argparse's exit 2 (the same
error line), the merger's ValueError (the same message), PyYAML's refusal (fleet's YamlError), any
other exception (the same type and message). A file fleet cannot read (YamlUnsupported) fails the test
wherever SGLang starts.

Needs `pip install -r tests/requirements-sglang.txt && pip install --no-deps sglang==0.5.23`; the real
parser runs in a child interpreter (this file is its script, see the bottom), as test_sglang_parser does.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fleet.host.engines import yaml11
from fleet.host.engines.sglang.flags import parse_argv
from fleet.host.engines.sglang.launch import SGLANG_VERSION_TESTED
from fleet.host.errors import ArgvError, ConfigFileError

pytestmark = pytest.mark.sglang_parser

ROOT = Path(__file__).resolve().parents[2]
INSTALL = "pip install -r tests/requirements-sglang.txt && pip install --no-deps sglang==" + SGLANG_VERSION_TESTED
RELEASE = SGLANG_VERSION_TESTED
MODEL_PATH = "/dev/shm/fleet/model"

# name -> file text. Generated here, never downloaded.
CORPUS: dict[str, str] = {
    # --- plain files
    "flat": "tp-size: 2\nmax-running-requests: 8\nmem-fraction-static: 0.81\ntrust-remote-code: true\n",
    "underscore-keys-are-flags-as-written": "max_running_requests: 8\n",
    "empty-file": "",
    "only-comments": "# nothing here\n   # still nothing\n",
    "document-start": "---\ntp-size: 2\n",
    "two-documents": "tp-size: 2\n---\ntp-size: 4\n",
    "comments-and-hash-in-values": "served-model-name: a#b  # trailing comment\nchat-template: 'x # y'\n",
    "quoted-strings": 'served-model-name: "my \\"model\\"\\tA\\u00e9"\ntokenizer-mode: \'auto\'\nkv-cache-dtype: "auto"\n',
    "duplicate-key-last-wins": "tp-size: 2\nmax-running-requests: 4\ntp-size: 4\n",
    "root-list": "- tp-size\n- 2\n",
    "root-scalar": "just words\n",
    # --- YAML 1.1 scalars
    "bool-yes-on-store-true": "trust-remote-code: yes\nenable-metrics: on\nskip-server-warmup: Yes\n",
    "bool-no-off-store-true": "trust-remote-code: no\nenable-metrics: OFF\n",
    "bool-yes-for-int-flag": "tp-size: yes\n",
    "bool-for-boolean-optional": "enable-tf32-matmul: false\n",
    "null-tilde-for-int": "max-running-requests: ~\n",
    "null-empty-for-str": "served-model-name:\n",
    "null-word-for-float": "mem-fraction-static: null\n",
    "octal-0o-is-a-string": "max-running-requests: 0o17\n",
    "octal-leading-zero": "max-running-requests: 017\n",
    "hex-int": "max-running-requests: 0x10\n",
    "binary-int": "chunked-prefill-size: 0b1000000000\n",
    "underscored-int": "chunked-prefill-size: 8_192\n",
    "sexagesimal-int": "max-running-requests: 1:30\n",
    "exponent-without-dot-is-a-string": "max-total-tokens: 1e3\n",
    "exponent-with-dot": "max-total-tokens: 1.0e+3\n",
    "float-for-int-flag": "max-running-requests: 8.0\n",
    "float-leading-dot": "mem-fraction-static: .85\n",
    "float-inf": "mem-fraction-static: .inf\n",
    "human-readable-int": "context-length: 32k\nmax-total-tokens: 1Mi\n",
    "date-as-str": "served-model-name: 2024-01-02\n",
    "timestamp-as-str": "served-model-name: 2024-01-02 10:11:12.5+02:00\n",
    "quoted-number-is-str": "tp-size: '2'\nmem-fraction-static: \"0.7\"\n",
    "negative-int": "random-seed: -5\n",
    # --- lists
    "flow-list-ints": "cuda-graph-bs-decode: [1, 2, 4, 8]\n",
    "block-list-ints": "cuda-graph-bs-decode:\n  - 1\n  - 2\n  - 16\n",
    "block-list-same-indent": "cuda-graph-bs-decode:\n- 1\n- 3\ntp-size: 2\n",
    "empty-flow-list-skipped": "cuda-graph-bs-decode: []\ntp-size: 2\n",
    "list-for-single-value-flag": "tp-size: [2, 4]\n",
    "list-with-bad-item": "cuda-graph-bs-decode: [1, two]\n",
    "list-of-strings": "allowed-media-domains: [example.com, 'b.org']\n",
    # --- mappings: JSON for dict-typed flags
    "nested-mapping-loads": 'preferred-sampling-params:\n  temperature: 0.7\n  top_p: 0.9\n  stop: ["a", b]\n',
    "flow-mapping-loads": "default-chat-template-kwargs: {enable_thinking: false}\n",
    "json-text-loads": 'extra-metric-labels: \'{"team": "a"}\'\n',
    "json-flow-mapping": 'json-model-override-args: {"rope_scaling": {"type": "yarn", "factor": 4.0}}\n',
    "nested-mapping-for-str-flag": "json-model-override-args:\n  max_position_embeddings: 65536\n  rope_theta: 1000000.0\n",
    "nested-mapping-for-int-flag": "tp-size:\n  a: 1\n",
    "mapping-with-yes-and-null-keys": "preferred-sampling-params:\n  yes: 1\n  ~: 2\n  3: x\n",
    "mapping-with-date-value": "preferred-sampling-params:\n  when: 2024-01-02\n",
    "cuda-graph-config": "cuda-graph-config:\n  decode:\n    max_bs: 16\n",
    "cuda-graph-config-unknown-key": "cuda-graph-config:\n  decode:\n    no_such_key: 3\n",
    "mapping-in-list": "allowed-media-domains:\n  - a: 1\n  - b\n",
    "deeply-nested": "preferred-sampling-params:\n  a:\n    b:\n      c: [1, {d: e}]\n",
    # --- anchors, aliases, merge keys
    "anchor-alias-scalar": "tp-size: &n 2\ndp-size: *n\n",
    "anchor-alias-mapping": "preferred-sampling-params: &p\n  temperature: 0.5\ndefault-chat-template-kwargs: *p\n",
    "merge-key": "preferred-sampling-params:\n  <<: &base {temperature: 0.2, top_k: 5}\n  top_k: 10\n",
    "merge-list": "preferred-sampling-params:\n  <<: [&a {x: 1, y: 1}, &b {y: 2, z: 2}]\n",
    "undefined-alias": "tp-size: *nope\n",
    "anchor-on-list": "cuda-graph-bs-decode: &l [1, 2]\ncuda-graph-bs-prefill: *l\n",
    # --- keys: deprecated, abbreviated, unknown, unsupported
    "deprecated-store-true": "disable-cuda-graph: true\n",
    "deprecated-store-true-false": "enable-dp-attention: false\n",
    "alias-spelling": "tensor-parallel-size: 2\n",
    "alias-with-underscores": "tensor_parallel_size: 2\n",
    "abbreviated-key": "mem-fraction: 0.8\n",
    "ambiguous-abbreviation": "enable-metrics-for: true\ncuda-graph-bs: [1]\n",
    "unknown-key": "no-such-flag: 3\n",
    "unsupported-boolean-optional": "enable-tf32-matmul: true\n",
    "unsupported-lora-paths": "lora-paths: [a, b]\n",
    "int-key": "1: 2\n",
    "bool-key": "yes: 2\n",
    "null-key": "~: 2\n",
    # --- wrong types and choices
    "wrong-type-int": "tp-size: two\n",
    "wrong-type-float": "mem-fraction-static: lots\n",
    "bad-choice": "kv-cache-dtype: fp7\n",
    "bool-for-str-flag": "served-model-name: true\n",
    "bool-for-choice": "load-format: true\n",
    "flow-list-over-lines": "cuda-graph-bs-decode: [1, 2,\n   4, 8]  # four sizes\ntp-size: 2\n",
    "flow-mapping-over-lines": "preferred-sampling-params: {temperature: 0.1,\n  top_p: 0.5}\n",
    "cuda-graph-config-prefill-max-seq-len": "cuda-graph-config: {prefill: {max_seq_len: 4096, backend: breakable}}\n",
    "cuda-graph-config-retired-backend": "cuda-graph-config: {decode: {backend: tc_piecewise}}\n",
    "json-list-nan-orjson-refuses": "forward-hooks: '[NaN]'\n",
    "json-list-big-int": "forward-hooks: '[18446744073709551616]'\n",
    "crlf-line-ends": "tp-size: 2\r\nmax-running-requests: 4\r\n",
    "byte-order-mark": "\ufefftp-size: 2\n",
    "quoted-keys": "\"tp-size\": 2\n'max-running-requests': 4\n",
    "space-before-colon": "tp-size : 2\n",
    "tab-after-colon": "tp-size:\t2\n",
    "single-quote-escape": "served-model-name: 'it''s'\n",
    "apostrophe-in-plain": "served-model-name: it's mine\n",
    "url-value": "served-model-name: http://example.com:8080/x\n",
    "nested-sequences": "preferred-sampling-params:\n  stop:\n    - - a\n      - b\n    - c\n",
    "list-of-mappings-nested": "preferred-sampling-params:\n  items:\n    - name: a\n      value: 1\n    - name: b\n",
    "anchor-on-block-mapping-merged": "preferred-sampling-params: &base\n  temperature: 0.3\ndefault-chat-template-kwargs:\n  <<: *base\n  enable_thinking: no\n",
    "empty-block-list-entry": "cuda-graph-bs-decode:\n  -\n  - 2\n",
    # --- malformed YAML
    "tab-indent": "tp-size: 2\n\tdp-size: 2\n",
    "bad-indent": "tp-size: 2\n  dp-size: 2\n",
    "colon-in-plain-value": "served-model-name: a: b\n",
    "unclosed-flow": "cuda-graph-bs-decode: [1, 2\n",
    "reserved-indicator": "served-model-name: @x\n",
}

# Files whose outcome the corpus must show, so that it cannot pass by refusing everything.
MUST_START = ("flat", "nested-mapping-loads", "merge-key", "anchor-alias-mapping", "octal-leading-zero", "block-list-ints", "bool-yes-on-store-true", "empty-flow-list-skipped")


def _files(directory: Path) -> dict[str, list[str]]:
    argvs = {}
    for name, text in CORPUS.items():
        path = directory / f"{name}.yaml"
        path.write_text(text)
        argvs[name] = ["--model-path", MODEL_PATH, "--config", str(path)]
    return argvs


def fleet_outcome(args: list[str]) -> dict[str, Any]:
    try:
        parsed = parse_argv(RELEASE, args)
    except ArgvError as exc:
        return {"outcome": "exit 2", "error": exc.text.strip().splitlines()[-1]}
    except yaml11.YamlUnsupported as exc:
        return {"outcome": "fleet cannot read", "error": str(exc)}
    except yaml11.YamlError as exc:
        return {"outcome": "YAMLError", "error": str(exc)}
    except ConfigFileError as exc:
        text = str(exc)
        kind, _, message = text.partition(": ")
        if kind in ("AttributeError", "TypeError"):
            return {"outcome": kind, "error": message}
        return {"outcome": "ValueError", "error": text}
    return {"outcome": "ok", "record": json.loads(json.dumps(parsed.values, default=repr))}


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if importlib.util.find_spec("sglang") is None:
        pytest.skip(f"sglang is not installed; CI installs it with: {INSTALL}")
    argvs = _files(tmp_path_factory.mktemp("config-corpus"))
    done = subprocess.run([sys.executable, "-W", "ignore", __file__], input=json.dumps(argvs), capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, f"the sglang child failed:\n{done.stderr[-4000:]}"
    answer = json.loads(done.stdout)
    return {"version": answer["version"], "argvs": argvs, "results": answer["results"]}


def test_the_installed_release_is_the_pinned_one(real: dict[str, Any]) -> None:
    assert real["version"] == RELEASE


def test_the_corpus_has_every_kind_of_outcome(real: dict[str, Any]) -> None:
    outcomes = {result["outcome"] for result in real["results"].values()}
    assert {"ok", "exit 2", "ValueError", "YAMLError", "AttributeError"} <= outcomes
    for name in MUST_START:
        assert real["results"][name]["outcome"] == "ok", (name, real["results"][name])


def test_every_config_file_has_the_same_outcome_in_fleet_as_in_sglang(real: dict[str, Any]) -> None:
    mismatches = []
    for name, args in real["argvs"].items():
        upstream = real["results"][name]
        ours = fleet_outcome(args)
        if ours["outcome"] != upstream["outcome"]:
            mismatches.append(f"{name}: sglang {upstream['outcome']} {upstream.get('error')!r}, fleet {ours['outcome']} {ours.get('error')!r}")
        elif ours["outcome"] == "ok":
            record = upstream["record"]
            differ = {k: (record[k], ours["record"].get(k, "<no such field>")) for k in record if record[k] != ours["record"].get(k, "<no such field>")}
            if differ:
                mismatches.append(f"{name}: fields differ (sglang, fleet): {differ}")
        elif ours["outcome"] != "YAMLError" and ours.get("error") != upstream.get("error"):  # PyYAML's own texts are not rebuilt
            mismatches.append(f"{name}: sglang says {upstream.get('error')!r}, fleet {ours.get('error')!r}")
    assert mismatches == []


def test_fleets_yaml_builds_the_objects_pyyaml_builds(tmp_path: Path) -> None:
    """Below the merger: every corpus file PyYAML reads, loaded by fleet.host.engines.yaml11, is the same
    Python object (types included: True is not 1, a date is not a str)."""
    yaml = pytest.importorskip("yaml")
    compared = 0
    for name, text in CORPUS.items():
        path = tmp_path / f"{name}.yaml"
        path.write_text(text)
        try:
            expected = yaml.safe_load(text)
        except yaml.YAMLError:
            with pytest.raises(yaml11.YamlError):
                yaml11.safe_load(path)
            continue
        got = yaml11.safe_load(path)
        assert repr(got) == repr(expected), name
        compared += 1
    assert compared >= 60


# ---------------------------------------------------------------------------------------------
# The child: each argv through the installed sglang's prepare_server_args, answered as JSON.


def _parse_all(argvs: dict[str, list[str]]) -> dict[str, Any]:
    import argparse
    import contextlib
    import io
    import logging
    from importlib.metadata import version

    import yaml
    from sglang.srt.server_args import ServerArgs, prepare_server_args

    parser = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    dests = {action.dest for action in parser._actions}
    results: dict[str, Any] = {}
    for name, args in argvs.items():
        errors = io.StringIO()
        with contextlib.redirect_stderr(errors):
            try:
                server_args = prepare_server_args(args)
            except SystemExit as exc:
                lines = errors.getvalue().strip().splitlines()
                results[name] = {"outcome": f"exit {exc.code}", "error": lines[-1] if lines else None}
                continue
            except yaml.YAMLError as exc:
                results[name] = {"outcome": "YAMLError", "error": f"{type(exc).__name__}: {exc}"}
                continue
            except Exception as exc:  # the merger's ValueError, or whatever else kills the launch
                results[name] = {"outcome": type(exc).__name__, "error": str(exc)}
                continue
            finally:
                logging.disable(logging.CRITICAL)
        fields = [f for f in type(server_args).__struct_fields__ if f in dests]
        results[name] = {"outcome": "ok", "record": {f: json.loads(json.dumps(getattr(server_args, f), default=repr)) for f in fields}}
    return {"version": version("sglang"), "results": results}


if __name__ == "__main__":
    json.dump(_parse_all(json.load(sys.stdin)), sys.stdout)

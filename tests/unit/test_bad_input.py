"""The bad-input suite: hostile and malformed host files and playbooks, each refused by the real
`fleet` CLI with exit 2 and a message naming the file, the field and what was expected -- before
any host is contacted.

Every case mutates one valid host file or playbook (the baseline test shows the unmutated pair
plans cleanly, so each refusal is the mutation's). "No host contacted" is enforced, not assumed:
both transports and the socket layer raise if anything tries to reach a host, and the test
fails if any of them was called. `fleet sweep` cases also leave no sweep folder behind. A few
cases run `python -m fleet` as a real subprocess, for the console entry's exit code.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from fleet.cli import app
from fleet.config import MAX_FILE_BYTES
from fleet.transport.local import LocalTransport
from fleet.transport.ssh import SSHTransport

REPO = Path(__file__).resolve().parents[2]
DELETE = object()  # a mutation value: remove the key

PLAYBOOK: dict[str, Any] = {
    "name": "bad-input",
    "model": {"repo": "Qwen/Qwen3.6-27B", "revision": "main", "card": "qwen3.6-27b"},
    "methods": {"autoregressive": {}},
    "tp": [1],
    "workloads": {"short": {"kind": "short", "prompts": ["fib"]}},
}
HOST: dict[str, Any] = {
    "name": "ct200",
    "address": "10.0.0.1",
    "user": "root",
    "gpus": {"count": 8, "model": "NVIDIA H200"},
    "engine": {"kind": "sglang", "python": "/usr/bin/python3"},
}


@dataclass(frozen=True)
class Case:
    id: str
    file: str  # "host" or "playbook"
    path: str  # dotted key path of the mutation ("" for a raw file)
    value: Any  # the new value, DELETE, or bytes for a raw file
    field: str  # what the message must name
    also: tuple[str, ...] = ()  # more words the message must carry (what was expected)

    @property
    def param(self) -> Any:
        return pytest.param(self, id=self.id)


def H(id: str, path: str, value: Any, field: str | None = None, *also: str) -> Case:
    return Case(id, "host", path, value, field if field is not None else path, also)


def P(id: str, path: str, value: Any, field: str | None = None, *also: str) -> Case:
    return Case(id, "playbook", path, value, field if field is not None else path, also)


HOST_CASES = [
    H("name-uppercase", "name", "CT200"),
    H("name-space", "name", "ct 200"),
    H("name-missing", "name", DELETE),
    H("address-leading-dash-option", "address", "-oProxyCommand=touch /tmp/p", "address", "not starting with -"),
    H("address-semicolon", "address", "10.0.0.1;touch /tmp/p"),
    H("address-command-substitution", "address", "$(touch /tmp/p)"),
    H("address-backticks", "address", "`touch /tmp/p`"),
    H("address-space", "address", "10.0.0.1 -p 2"),
    H("address-newline", "address", "10.0.0.1\ntouch /tmp/p", "address", "control characters"),
    H("address-quote", "address", "h'x"),
    H("address-unicode", "address", "hôst"),
    H("address-and-alias", "ssh_alias", "ct200", "(top level)", "not both"),
    H("address-nor-alias", "address", DELETE, "(top level)", "`address` or `ssh_alias`"),
    H("alias-leading-dash", "ssh_alias", "-oProxyCommand=x", "ssh_alias"),
    H("user-leading-dash", "user", "-oProxyCommand=x"),
    H("user-semicolon", "user", "root;id"),
    H("user-command-substitution", "user", "$(id)"),
    H("user-space", "user", "ro ot"),
    H("port-true", "port", True, "port", "integer"),
    H("port-zero", "port", 0),
    H("port-too-big", "port", 70000),
    H("port-float", "port", 22.5),
    H("port-shell", "port", "22; id"),
    H("identity-leading-dash", "identity_file", "-oProxyCommand=x"),
    H("known-hosts-leading-dash", "known_hosts", "-x"),
    H("work-dir-relative", "paths.work_dir", "var/lib/fleet", "paths.work_dir", "absolute"),
    H("work-dir-traversal", "paths.work_dir", "/var/lib/../../etc", "paths.work_dir", ".."),
    H("work-dir-command-substitution", "paths.work_dir", "/var/lib/fleet/$(touch /tmp/p)"),
    H("work-dir-semicolon", "paths.work_dir", "/var/lib/fleet;rm -rf /"),
    H("work-dir-space", "paths.work_dir", "/var/lib/fl eet"),
    H("model-cache-backticks", "paths.model_cache", "/srv/`id`"),
    H("model-cache-root-traversal", "paths.model_cache", "/srv/models/.."),
    H("model-cache-unicode", "paths.model_cache", "/srv/mödels"),
    H("staging-newline", "paths.staging", "/dev/shm/fleet\n/etc"),
    H("python-semicolon", "engine.python", "python3; touch /tmp/p"),
    H("python-with-arguments", "engine.python", "/usr/bin/python3 -c x"),
    H("python-leading-dash", "engine.python", "-c"),
    H("engine-kind-unknown", "engine.kind", "docker"),
    H("engine-release-unknown", "engine.release", "9.9.9"),
    H("sim-speed-infinite", "engine.sim_speed", float("inf"), "engine.sim_speed", "finite"),
    H("sim-speed-zero", "engine.sim_speed", 0),
    H("gpu-count-negative", "gpus.count", -1),
    H("gpu-count-true", "gpus.count", True),
    H("gpu-count-string", "gpus.count", "8"),
    H("gpus-not-a-mapping", "gpus", "eight"),
    H("gpu-model-bidi-override", "gpus.model", "NVIDIA \u202eH200", "gpus.model", "control characters"),
    H("transport-unknown", "transport", "telnet"),
    H("unknown-key", "adress", "10.0.0.2", "adress", "unknown key"),
    H("group-with-space", "groups", ["Bad Group"], "groups[0]"),
    H("service-manager-unknown", "service_manager", "init"),
    H("host-key-policy-unknown", "host_key_policy", "yes"),
    H("address-10000-characters", "address", "a" * 10_000, "address", "at most 253 characters"),
    H("alias-too-long", "ssh_alias", "a" * 300, "ssh_alias", "at most 253 characters"),
    H("user-too-long", "user", "u" * 100, "user", "at most 32 characters"),
    H("work-dir-too-long", "paths.work_dir", "/srv" + "/x" * 300, "paths.work_dir", "at most 512 characters"),
    H("group-too-long", "groups", ["g" * 65], "groups[0]", "at most 64 characters"),
]

PLAYBOOK_CASES = [
    P("repo-dotdot", "model.repo", "..", "model.repo", ".."),
    P("repo-traversal", "model.repo", "../../etc"),
    P("repo-inner-traversal", "model.repo", "Qwen/../x"),
    P("repo-space", "model.repo", "Qwen/Qwen 3"),
    P("repo-leading-dash", "model.repo", "-rf"),
    P("repo-three-parts", "model.repo", "a/b/c"),
    P("revision-dotdot", "model.revision", ".."),
    P("revision-semicolon", "model.revision", "main; rm -rf /"),
    P("revision-command-substitution", "model.revision", "$(id)"),
    P("revision-newline", "model.revision", "main\n"),
    P("path-relative", "model.path", "models/qwen", "model.path", "absolute"),
    P("path-traversal", "model.path", "/srv/../etc"),
    P("mirror-leading-dash", "model.mirror", "-e sh"),
    P("mirror-remote-substitution", "model.mirror", "host:/srv/$(id)"),
    P("card-traversal", "model.card", "../../../../etc/passwd", "model.card", "shipped model card"),
    P("card-unknown", "model.card", "no-such-card", "model.card", "qwen3.6-27b"),
    P("model-missing", "model", DELETE),
    P("model-both-sources", "model.path", "/srv/models/q", "model", "exactly one of"),
    P("name-space", "name", "My Book"),
    P("name-semicolon", "name", "x;y"),
    P("tp-true", "tp", [True], "tp[0]", "integer"),
    P("tp-float", "tp", [1.5], "tp[0]"),
    P("tp-zero", "tp", [0], "tp[0]"),
    P("tp-empty", "tp", []),
    P("tp-missing", "tp", DELETE),
    P("tp-duplicate", "tp", [1, 1]),
    P("methods-missing", "methods", DELETE),
    P("method-name-space", "methods", {"auto regressive": {}}, "methods"),
    P("context-1e15-int", "server.context_length", 10**15),
    P("context-1e15-float", "server.context_length", 1e15),
    P("context-too-small", "server.context_length", 100),
    P("draft-tokens-1e12", "methods.ngram", {"algorithm": "NGRAM", "num_draft_tokens": 10**12}, "methods.ngram.num_draft_tokens"),
    P("algorithm-shell", "methods.ngram", {"algorithm": "NGRAM; id"}, "methods.ngram.algorithm"),
    P("mem-fraction-above-one", "server.mem_fraction_static", 1.5),
    P("timeout-infinite", "limits.server_start_timeout_s", float("inf"), "limits.server_start_timeout_s", "finite"),
    P("timeout-nan", "limits.no_token_timeout_s", float("nan")),
    P("timeout-negative", "limits.request_timeout_s", -1),
    P("timeout-a-year", "limits.request_timeout_s", 3.2e7),
    P("env-name-space", "server.env", {"MY VAR": "1"}, "server.env", "environment variable name"),
    P("env-name-semicolon", "server.env", {"X;id": "1"}, "server.env"),
    P("env-value-newline", "server.env", {"X": "a\nExecStartPre=/bin/sh"}, "server.env.X", "control characters"),
    P("flag-key-shell", "server.flags", {"x; touch /tmp/p": 1}, "server.flags", "engine flag name"),
    P("flag-key-leading-dashes", "server.flags", {"--enable-mixed-chunk": True}, "server.flags", "without the leading --"),
    P("flag-unknown", "server.flags", {"no-such-flag": 1}, "server.flags.no-such-flag", "unrecognized arguments"),
    P("flag-fork-only-on-upstream", "methods.autoregressive.flags", {"speculative-ddtree-budget": 3}, "methods.autoregressive.flags.speculative-ddtree-budget", "unrecognized arguments"),
    P("flag-bad-value", "server.flags", {"page-size": "x"}, "server.flags.page-size", "invalid"),
    P("flag-missing-value", "server.flags", {"page-size": True}, "server.flags.page-size", "expected one argument"),
    P("override-flag-unknown", "overrides", [{"tp": 1, "server": {"flags": {"bogus-flag": 1}}}], "overrides[0].server.flags.bogus-flag"),
    P("override-tp-not-planned", "overrides", [{"tp": 4, "server": {"page_size": 1}}], "overrides", "overrides[0].tp"),
    P("override-method-unknown", "overrides", [{"method": "nope", "server": {"page_size": 1}}], "overrides", "overrides[0].method"),
    P("prompt-unknown", "workloads.short.prompts", ["haiku"], "workloads.short.short.prompts[0]", "fleet's library"),
    P("prompt-traversal", "workloads.short.prompts", ["../etc/passwd"], "workloads.short.short.prompts[0]"),
    P("concurrency-prompt-unknown", "workloads.c", {"kind": "concurrency", "prompt": "nope"}, "workloads.c.concurrency.prompt"),
    P("max-new-tokens-above-context", "server.context_length", 256, "(top level)", "workloads.short.max_new_tokens"),
    P("max-new-tokens-true", "workloads.short.max_new_tokens", True, "workloads.short.short.max_new_tokens"),
    P("max-new-tokens-huge", "workloads.short.max_new_tokens", 10**12, "workloads.short.short.max_new_tokens"),
    P("workload-kind-unknown", "workloads.short.kind", "medium", "workloads.short"),
    P("workload-kind-missing", "workloads.short.kind", DELETE, "workloads.short"),
    P("long-context-prompt-huge", "workloads.long", {"kind": "long_context", "prompt_tokens": 10**15}, "workloads.long.long_context.prompt_tokens"),
    P("repeats-zero", "repeats", 0),
    P("repeats-string", "repeats", "3"),
    P("auto-fix-unknown", "auto_fix", "maybe"),
    P("isolation-unknown", "isolation", "private"),
    P("description-nul", "description", "a\x00b", "description", "control characters"),
    P("draft-name-space", "drafts", {"Bad Name": {"repo": "z-lab/x"}}, "drafts"),
    P("draft-missing", "methods.df", {"algorithm": "DFLASH", "draft": "nope"}, "methods", "a key of `drafts`"),
    P("unknown-top-key", "workload", {}, "workload", "unknown key"),
    P("attention-backend-shell", "server.attention_backend", "fa3 --x"),
    P("kv-cache-dtype-substitution", "server.kv_cache_dtype", "$(id)"),
    P("page-size-true", "server.page_size", True),
    P("name-300-characters", "name", "a" * 300, "name", "at most 64 characters"),
    P("workload-name-too-long", "workloads", {"w" * 100: {"kind": "short", "prompts": ["fib"]}}, "workloads", "at most 64 characters"),
]

ALIAS_BOMB = b"a0: &a0 [x, x, x, x, x, x, x, x, x]\n" + b"".join(b"a%d: &a%d [%s]\n" % (i, i, b", ".join([b"*a%d" % (i - 1)] * 9)) for i in range(1, 10))
NUL_YAML = b"name: ct200\naddress: 10.0.0.1\n\x00\x01\x02"
RAW_CASES = [
    Case("host-binary", "host", "", NUL_YAML, "", ("a YAML text file", "binary")),
    Case("host-not-utf8", "host", "", "name: ct200\naddress: h\u00e9\n".encode("latin-1"), "", ("UTF-8",)),
    Case("host-huge", "host", "", b"name: ct200\naddress: 10.0.0.1\n" + b"# padding\n" * (MAX_FILE_BYTES // 10 + 10), "", ("KiB",)),
    Case("host-duplicate-key", "host", "", b"name: ct200\naddress: 10.0.0.1\naddress: 10.0.0.2\n", "line 3", ("given twice", "line 2")),
    Case("host-nested-duplicate-key", "host", "", b"name: ct200\naddress: h\ngpus:\n  count: 1\n  count: 8\n", "line 5", ("given twice",)),
    Case("host-invalid-yaml", "host", "", b"name: ct200\naddress: [10.0.0.1\n", "line", ("valid YAML",)),
    Case("host-empty", "host", "", b"", "", ("an empty file",)),
    Case("host-a-list", "host", "", b"- ct200\n- 10.0.0.1\n", "(top level)", ("Host",)),
    Case("host-alias-bomb", "host", "", b"name: ct200\naddress: h\na: &a [x]\n" + b"".join(b"k%d: *a\n" % i for i in range(120)), "line", ("aliases",)),
    Case("host-control-in-key", "host", "", b'name: ct200\naddress: h\n"ad\\x1bdress": x\n', "ad\x1bdress", ("control characters",)),
    Case("playbook-binary", "playbook", "", b"name: x\n\x00\xff\xfe", "", ("binary",)),
    Case("playbook-not-utf8", "playbook", "", b"name: caf\xe9\n", "", ("UTF-8",)),
    Case("playbook-huge", "playbook", "", b"name: x\ndescription: '" + b"x" * (MAX_FILE_BYTES + 1) + b"'\n", "", ("KiB",)),
    Case("playbook-duplicate-key", "playbook", "", yaml.safe_dump(PLAYBOOK).encode() + b"tp: [2]\n", "line", ("given twice",)),
    Case("playbook-invalid-yaml", "playbook", "", b"name: x\nmodel: {repo: \n", "line", ("valid YAML",)),
    # 81 aliases, under the alias count, that expand to 9^9 values: bounded by the expansion.
    Case("playbook-alias-bomb-under-the-count", "playbook", "", ALIAS_BOMB, "line", ("values with every alias", "expanded")),
    Case("host-alias-bomb-under-the-count", "host", "", b"name: ct200\naddress: h\n" + ALIAS_BOMB, "line", ("values with every alias",)),
    Case("host-recursive-alias", "host", "", b"name: ct200\naddress: h\na: &a [x, *a]\n", "line", ("finished anchor", "cycle")),
    Case("playbook-nested-deep", "playbook", "", b"name: x\nmodel: " + b"[" * 5000 + b"]" * 5000 + b"\n", "line", ("nested at most",)),
]


def mutated(base: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    data = yaml.safe_load(yaml.safe_dump(base))  # a deep copy
    parts = path.split(".")
    node = data
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    if value is DELETE:
        node.pop(parts[-1], None)
    else:
        node[parts[-1]] = value
    return data


@dataclass
class Workspace:
    hosts_dir: Path
    playbook: Path
    results: Path
    contacted: list[str]

    def write(self, case: Case | None) -> tuple[Path, Path]:
        """The host file and the playbook, one of them broken by `case`; returns both paths."""
        host_file, book = self.hosts_dir / "ct200.yaml", self.playbook
        host = HOST if case is None or case.file != "host" or case.path == "" else mutated(HOST, case.path, case.value)
        playbook = PLAYBOOK if case is None or case.file != "playbook" or case.path == "" else mutated(PLAYBOOK, case.path, case.value)
        host_file.write_text(yaml.safe_dump(host))
        book.write_text(yaml.safe_dump(playbook))
        if case is not None and case.path == "":
            (host_file if case.file == "host" else book).write_bytes(case.value)
        return host_file, book


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Workspace:
    contacted: list[str] = []

    def refuse(what: str):
        def contact(*args: Any, **kwargs: Any) -> Any:
            contacted.append(what)
            raise AssertionError(f"a host was contacted ({what}) for bad input")

        return contact

    # Any attempt to reach a host -- a transport made, a socket connected -- is recorded and fails.
    monkeypatch.setattr(SSHTransport, "__init__", refuse("ssh transport"))
    monkeypatch.setattr(LocalTransport, "__init__", refuse("local transport"))
    monkeypatch.setattr(socket.socket, "connect", refuse("socket connect"))
    monkeypatch.setattr(socket, "create_connection", refuse("socket create_connection"))
    hosts_dir = tmp_path / "hosts"
    hosts_dir.mkdir()
    monkeypatch.setenv("FLEET_HOSTS_DIR", str(hosts_dir))
    monkeypatch.setenv("FLEET_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    for name in ("FLEET_HOSTS", "FLEET_PLAYBOOK"):
        monkeypatch.delenv(name, raising=False)
    return Workspace(hosts_dir, tmp_path / "book.yaml", tmp_path / "results", contacted)


def fleet(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args), catch_exceptions=False)
    return result.exit_code, result.output + (result.stderr if result.stderr_bytes is not None and result.stderr not in result.output else "")


def assert_refused(case: Case, code: int, output: str, host_file: Path, book: Path) -> None:
    named = host_file if case.file == "host" else book
    assert code == 2, output
    assert str(named) in output, output  # the file
    assert case.field in output, output  # the field
    assert "expected" in output, output  # what was expected
    for words in case.also:
        assert words in output, output
    assert "Traceback" not in output


def test_the_unbroken_inputs_plan_cleanly(ws: Workspace) -> None:
    """Every case below breaks exactly one thing of this pair."""
    host_file, book = ws.write(None)
    code, output = fleet("plan", "-p", str(book), "--hosts", "ct200", "--no-memory-check")
    assert code == 0, output
    assert ws.contacted == []


ALL_CASES = HOST_CASES + PLAYBOOK_CASES + RAW_CASES


def test_the_suite_covers_at_least_80_cases_of_every_class() -> None:
    assert len(ALL_CASES) >= 80
    ids = " ".join(c.id for c in ALL_CASES)
    for word in (
        "semicolon",
        "substitution",
        "backticks",
        "newline",
        "unicode",
        "traversal",
        "space",
        "leading-dash",
        "huge",
        "binary",
        "not-utf8",
        "duplicate",
        "true",
        "missing",
        "unknown",
        "infinite",
        "quote",
    ):
        assert word in ids, word


@pytest.mark.timeout(60)  # an alias bomb hung here
@pytest.mark.parametrize("case", [c.param for c in ALL_CASES])
def test_fleet_plan_refuses_bad_input_before_any_host_is_contacted(ws: Workspace, case: Case) -> None:
    host_file, book = ws.write(case)
    code, output = fleet("plan", "-p", str(book), "--hosts", "ct200")
    assert ws.contacted == []
    assert_refused(case, code, output, host_file, book)


SWEEP_CASES = [
    c
    for c in ALL_CASES
    if c.id
    in {
        "address-leading-dash-option",
        "work-dir-command-substitution",
        "port-true",
        "python-semicolon",
        "host-duplicate-key",
        "repo-dotdot",
        "card-traversal",
        "flag-unknown",
        "flag-key-shell",
        "prompt-unknown",
        "timeout-infinite",
        "env-name-space",
        "path-relative",
        "playbook-binary",
        "max-new-tokens-above-context",
        "name-300-characters",
    }
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", [c.param for c in SWEEP_CASES])
def test_fleet_sweep_refuses_bad_input_and_leaves_no_sweep_behind(ws: Workspace, case: Case) -> None:
    host_file, book = ws.write(case)
    code, output = fleet("sweep", "-p", str(book), "--hosts", "ct200")
    assert ws.contacted == []
    assert_refused(case, code, output, host_file, book)
    assert not ws.results.exists() or not any(p.name != "quarantine.json" for p in ws.results.iterdir())  # no sweep folder, no LATEST


def test_error_text_is_printed_as_typed_never_as_markup(ws: Workspace) -> None:
    """A value holding `[/x]` crashed rich's markup parser; `[...]` in a message vanished."""
    host_file, book = ws.write(P("markup", "model.revision", "[/x][bold]'^*$'", "model.revision"))
    code, output = fleet("plan", "-p", str(book), "--hosts", "ct200")
    assert code == 2 and "MarkupError" not in output
    assert "[/x][bold]'^*$'" in output.replace('\\"', '"'), output
    ws.write(None)
    (ws.hosts_dir / "ct200.yaml").write_text(yaml.safe_dump({**HOST, "name": "[red]x"}))
    code, output = fleet("plan", "-p", str(book), "--hosts", "ct200")
    assert code == 2 and "[red]x" in output and "'^[a-z0-9][a-z0-9_-]*$'" in output, output


def test_two_files_naming_one_host_are_refused(ws: Workspace) -> None:
    host_file, book = ws.write(None)
    (ws.hosts_dir / "ct200.yml").write_text(yaml.safe_dump({**HOST, "address": "10.0.0.9"}))
    code, output = fleet("plan", "-p", str(book), "--hosts", "ct200")
    assert code == 2 and "one host file per host" in output and "ct200.yml" in output and "ct200.yaml" in output, output
    assert ws.contacted == []


@pytest.mark.parametrize("case", [c.param for c in ALL_CASES if c.id in {"address-semicolon", "repo-dotdot", "flag-unknown"}])
def test_the_console_entry_exits_2_too(tmp_path: Path, case: Case) -> None:
    """`python -m fleet`, a real process; its hosts' addresses are unroutable, and nothing is tried."""
    hosts_dir = tmp_path / "hosts"
    hosts_dir.mkdir()
    w = Workspace(hosts_dir, tmp_path / "book.yaml", tmp_path / "results", [])
    host_file, book = w.write(case)
    env = {**os.environ, "FLEET_HOSTS_DIR": str(hosts_dir), "FLEET_RESULTS_DIR": str(w.results), "XDG_CACHE_HOME": str(tmp_path / "c"), "COLUMNS": "400"}
    done = subprocess.run([sys.executable, "-m", "fleet", "plan", "-p", str(book), "--hosts", "ct200"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert_refused(case, done.returncode, done.stdout + done.stderr, host_file, book)


# ---------------------------------------------------------------------------------------------
# Issue 29: files that are not small regular files, CLI values, damaged sweep records, outputs.
# Each is refused with exit 2 and one line naming the file or option and what was expected, in
# bounded time, before any host is contacted.

SWEEP_ID = "bad-input-20260101-000000-abcd"


def refused(ws: Workspace, args: list[str], *words: str, expected: str = "expected") -> str:
    code, output = fleet(*args)
    assert ws.contacted == []
    assert code == 2, output
    assert expected in output and "Traceback" not in output, output
    for word in words:
        assert word in output, output
    return output


@pytest.mark.timeout(30)  # a FIFO blocked the open for good
@pytest.mark.parametrize("which", ["host", "playbook"])
@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "proc"])
def test_a_host_file_or_playbook_that_is_no_regular_file_is_refused_unread(ws: Workspace, which: str, kind: str) -> None:
    host_file, book = ws.write(None)
    target = host_file if which == "host" else book
    target.unlink()
    if kind == "fifo":
        os.mkfifo(target)
    else:  # a link: the host file must keep its name in hosts/
        target.symlink_to("/dev/zero" if kind == "dev-zero" else "/proc/self/status")
    expected = {"fifo": "FIFO", "dev-zero": "character device", "proc": "proc"}[kind]
    refused(ws, ["plan", "-p", str(book), "--hosts", "ct200"], str(target), "a regular file", expected)


def test_yaml_nested_deeper_than_libyaml_can_compose_is_refused_not_a_crash(tmp_path: Path) -> None:
    """200,000 brackets overflowed the C composer's stack: the process died (SIGSEGV)."""
    book = tmp_path / "book.yaml"
    book.write_bytes(b"name: x\nmodel: " + b"[" * 200_000 + b"\n")
    done = subprocess.run([sys.executable, "-m", "fleet", "plan", "-p", str(book)], cwd=REPO, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "FLEET_HOSTS_DIR": str(tmp_path), "FLEET_RESULTS_DIR": str(tmp_path / "r")})  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert str(book) in done.stderr and "expected YAML nested at most" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "args, words",
    [
        pytest.param(["--poll", "0"], ["--poll", "finite number of seconds"], id="poll-zero"),
        pytest.param(["--poll", "-1"], ["--poll"], id="poll-negative"),
        pytest.param(["--poll", "nan"], ["--poll", "nan"], id="poll-nan"),
        pytest.param(["--poll", "inf"], ["--poll", "inf"], id="poll-inf"),
        pytest.param(["--poll", "1e9"], ["--poll", "3600"], id="poll-31-years"),
        pytest.param(["--host-lost-after", "nan"], ["--host-lost-after"], id="host-lost-after-nan"),
        pytest.param(["--host-lost-after", "0"], ["--host-lost-after"], id="host-lost-after-zero"),
        pytest.param(["--resume", SWEEP_ID], ["--resume", "-p/--playbook"], id="resume-with-playbook"),
        pytest.param(["--hosts", ""], ["--hosts ''", "host names"], id="hosts-empty"),
        pytest.param(["--hosts", " , "], ["--hosts", "host names"], id="hosts-only-commas"),
    ],
)
def test_sweep_options_are_validated_before_anything_starts(ws: Workspace, args: list[str], words: list[str]) -> None:
    _, book = ws.write(None)
    hosts = [] if "--hosts" in args else ["--hosts", "ct200"]
    refused(ws, ["sweep", "-p", str(book), *hosts, *args], *words)
    assert not ws.results.exists() or not any(p.name != "quarantine.json" for p in ws.results.iterdir())


def test_resume_with_hosts_is_refused(ws: Workspace) -> None:
    refused(ws, ["sweep", "--resume", SWEEP_ID, "--hosts", "ct200"], "--resume", "--hosts")


@pytest.mark.parametrize("name", ["FLEET_HOSTS_DIR", "FLEET_HOSTS", "FLEET_RESULTS_DIR", "FLEET_PLAYBOOK"])
def test_an_empty_setting_is_refused_not_read_as_a_default(ws: Workspace, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """FLEET_HOSTS_DIR='' read the current directory; FLEET_HOSTS='' meant `local`."""
    _, book = ws.write(None)
    monkeypatch.setenv(name, "")
    args = [*([] if name == "FLEET_PLAYBOOK" else ["-p", str(book)]), *([] if name == "FLEET_HOSTS" else ["--hosts", "ct200"])]
    refused(ws, ["plan", *args], f"${name}", "unset")


def test_two_host_files_for_one_machine_and_work_dir_are_refused(ws: Workspace) -> None:
    host_file, book = ws.write(None)
    twin = ws.hosts_dir / "ct201.yaml"
    twin.write_text(yaml.safe_dump({**HOST, "name": "ct201", "address": "10.0.0.1"}))
    refused(ws, ["plan", "-p", str(book), "--hosts", "ct200,ct201"], str(twin), str(host_file), "one host file per machine and work_dir")
    refused(ws, ["sweep", "-p", str(book), "--hosts", "ct200,ct201"], "one host file per machine")
    # Another work dir on the same machine is another place to work: planned.
    twin.write_text(yaml.safe_dump({**HOST, "name": "ct201", "paths": {"work_dir": "/var/lib/fleet2"}}))
    code, output = fleet("plan", "-p", str(book), "--hosts", "ct200,ct201", "--no-memory-check")
    assert code == 0, output


def make_sweep(ws: Workspace, hosts: Any = ("ct200",)) -> Path:
    """A sweep folder as `fleet sweep` records it, before any host answered."""
    from fleet.inventory import Host

    directory = ws.results / SWEEP_ID
    (directory / "hosts").mkdir(parents=True)
    record = {"sweep_id": SWEEP_ID, "playbook_name": "bad-input", "playbook_sha256": "0", "hosts": list(hosts) if isinstance(hosts, tuple) else hosts}
    (directory / "sweep.json").write_text(json.dumps(record))
    (directory / "hosts" / "ct200.json").write_text(json.dumps(Host.model_validate(HOST).model_dump(mode="json")))
    (ws.results / "LATEST").write_text(SWEEP_ID + "\n")
    return directory


SWEEP_COMMANDS = [["sweep", "--resume", SWEEP_ID], ["status", SWEEP_ID], ["fetch-logs", "--sweep", SWEEP_ID], ["status"]]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("command", SWEEP_COMMANDS, ids=lambda c: "-".join(c[:2]))
@pytest.mark.parametrize(
    "damage",
    ["host-named-a-path", "host-record-missing", "host-record-garbage", "host-record-empty-object", "host-record-a-fifo",
     "hosts-not-a-list", "sweep-record-garbage"],
)  # fmt: skip
def test_a_sweep_whose_records_are_damaged_is_refused_naming_the_file(ws: Workspace, command: list[str], damage: str) -> None:
    directory = make_sweep(ws, ["../../../etc/passwd"] if damage == "host-named-a-path" else "ct200" if damage == "hosts-not-a-list" else ("ct200",))
    host_record = directory / "hosts" / "ct200.json"
    if damage == "host-record-missing":
        host_record.unlink()
    elif damage == "host-record-garbage":
        host_record.write_bytes(b"\xff\xfe{garbage")
    elif damage == "host-record-empty-object":
        host_record.write_text("{}")
    elif damage == "host-record-a-fifo":
        host_record.unlink()
        os.mkfifo(host_record)
    elif damage == "sweep-record-garbage":
        (directory / "sweep.json").write_text("{not json")
    named = directory / "sweep.json" if damage in ("host-named-a-path", "hosts-not-a-list", "sweep-record-garbage") else host_record
    # sweep.json's own reader (fleet.sweep.record) words it "not a readable sweep record".
    refused(ws, command, str(named), expected="not a readable sweep record" if damage == "sweep-record-garbage" else "expected")


@pytest.mark.parametrize("command", [["status"], ["fetch-logs"]], ids=lambda c: c[0])
@pytest.mark.parametrize("latest", [b"\xa0" * 1_000_000, b"../../etc\n", b"\x00\x01 garbage\n", b""], ids=["1MB-garbage", "a-path", "binary", "empty"])
def test_a_garbage_latest_is_refused_naming_it(ws: Workspace, command: list[str], latest: bytes) -> None:
    ws.results.mkdir()
    (ws.results / "LATEST").write_bytes(latest)
    refused(ws, command, str(ws.results / "LATEST"), "sweep")


@pytest.mark.parametrize("given", ["../../etc", "a/b", "x" * 300, ".."])
def test_a_sweep_id_that_is_a_path_is_refused(ws: Workspace, given: str) -> None:
    refused(ws, ["status", given], "a sweep id")
    refused(ws, ["sweep", "--resume", given], "--resume", "a sweep id")


@pytest.mark.parametrize("where", ["a-file", "in-proc"])
def test_a_results_dir_that_is_a_file_or_in_proc_is_refused(ws: Workspace, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, where: str) -> None:
    _, book = ws.write(None)
    root = tmp_path / "results-file" if where == "a-file" else Path("/proc/self")
    if where == "a-file":
        root.write_text("not a directory\n")
    monkeypatch.setenv("FLEET_RESULTS_DIR", str(root))
    refused(ws, ["sweep", "-p", str(book), "--hosts", "ct200"], str(root), "results directory")
    refused(ws, ["status"], str(root), "results directory")


@pytest.mark.timeout(30)
@pytest.mark.parametrize("name", ["quarantine.json", "durations.json"])
@pytest.mark.parametrize("content", ["binary", "nested", "fifo", "a-list"])
def test_a_garbage_quarantine_or_durations_file_is_refused_naming_it(ws: Workspace, name: str, content: str) -> None:
    _, book = ws.write(None)
    ws.results.mkdir()
    path = ws.results / name
    if content == "fifo":
        os.mkfifo(path)
    else:
        path.write_bytes({"binary": b"\xff\xfe\x00garbage", "nested": b"[" * 100_000, "a-list": b"[1, 2]"}[content])
    refused(ws, ["plan", "-p", str(book), "--hosts", "ct200"], str(path))
    if name == "quarantine.json":
        refused(ws, ["quarantine", "list"], str(path))


@pytest.mark.timeout(30)  # /dev/zero never ends, a FIFO never opens
@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "proc"])
def test_diagnose_refuses_what_is_no_log_nor_folder(ws: Workspace, tmp_path: Path, kind: str) -> None:
    path = tmp_path / "server.log"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path = Path("/dev/zero" if kind == "dev-zero" else "/proc/self/environ")
    refused(ws, ["diagnose", str(path)], str(path), "a log file or a run or sweep folder")


REPORT_SWEEP = REPO / "tests" / "fixtures" / "report" / "sweep"


@pytest.fixture
def reported(ws: Workspace) -> Path:
    """A finished sweep in the results, as `fleet report` reads one."""
    import shutil

    directory = ws.results / SWEEP_ID
    shutil.copytree(REPORT_SWEEP, directory)
    (ws.results / "LATEST").write_text(SWEEP_ID + "\n")
    return directory


@pytest.mark.parametrize(
    "target",
    ["summary.json", "sweep.json", "ct200/runs/x.json", "report.md", "../LATEST", "../durations.json", "../other-sweep/report.md"],
)
def test_report_never_writes_into_a_sweep_folder_or_over_an_input(ws: Workspace, reported: Path, tmp_path: Path, target: str) -> None:
    """`-o results/<sweep>/summary.json` overwrote the sweep's own summary, exit 0 (issue 29, item 8)."""
    output = reported / target
    before = {p: p.read_bytes() for p in ws.results.rglob("*") if p.is_file()}
    refused(ws, ["report", str(reported), "-o", str(output)], str(output), "-o")
    assert {p: p.read_bytes() for p in ws.results.rglob("*") if p.is_file()} == before
    # Through results/LATEST and a link to the sweep: the same folder.
    (tmp_path / "link").symlink_to(reported)
    refused(ws, ["report", str(ws.results / "LATEST"), "-o", str(tmp_path / "link" / "summary.json")], "-o")
    code, output_text = fleet("report", str(reported), "-o", str(tmp_path / "out" / "report.md"))
    assert code == 0 and (tmp_path / "out" / "report.md").stat().st_size > 100, output_text


def test_report_to_a_full_device_is_one_line(ws: Workspace, reported: Path) -> None:
    refused(ws, ["report", str(reported), "-o", "/dev/full"], "/dev/full", "No space left on device")


def console(args: list[str], tmp_path: Path, stdout: Any, script: str = "") -> subprocess.CompletedProcess[str]:
    """`fleet ARGS` through the console entry, in a process of its own; `script` runs first."""
    env = {**os.environ, "FLEET_HOSTS_DIR": str(tmp_path / "hosts"), "FLEET_RESULTS_DIR": str(tmp_path / "results"),
           "XDG_CACHE_HOME": str(tmp_path / "cache"), "PYTHONPATH": str(REPO)}  # fmt: skip
    code = script + "\nimport sys\nsys.argv = ['fleet', *sys.argv[1:]]\nfrom fleet.cli import run\nrun()\n"
    return subprocess.run([sys.executable, "-c", code, *args], cwd=tmp_path, env=env, stdout=stdout, stderr=subprocess.PIPE,
                          text=True, timeout=60)  # fmt: skip


@pytest.mark.parametrize("args", [["hosts", "--json"], ["hosts"], ["report", str(REPORT_SWEEP)]], ids=" ".join)
def test_a_stdout_that_cannot_be_written_is_one_line_and_exit_2(tmp_path: Path, args: list[str]) -> None:
    Workspace(tmp_path / "hosts", tmp_path / "book.yaml", tmp_path / "results", []).hosts_dir.mkdir()
    Workspace(tmp_path / "hosts", tmp_path / "book.yaml", tmp_path / "results", []).write(None)
    with open("/dev/full", "w") as full:
        done = console(args, tmp_path, full)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == ["error: stdout: expected a writable output, got 'No space left on device'"], done.stderr


# A sweep whose work is done by a stand-in: events as fast as it can make them, no host.
FAKE_SWEEP = """
import types
import fleet.sweep.controller as controller
from fleet.sweep.events import EventStream

def start_sweep(path, chosen, root, *, on_event, **kwargs):
    stream = EventStream(on_event)
    for _ in range(20):
        stream.emit("provisioned", "ct200", status="ok", reason="")
    return Outcome(fixes=[], directory=root / "s", sweep_id="s", interrupted=False)

class Outcome(types.SimpleNamespace):
    def __getattr__(self, name):  # what else an outcome says (lost hosts, runs not run, ...): nothing
        return {}

    def closing_lines(self):
        return []

controller.start_sweep = start_sweep
"""


@pytest.mark.parametrize("as_json", [False, True], ids=["lines", "json"])
def test_a_sweep_whose_reader_went_away_ends_quietly_with_its_own_exit_code(tmp_path: Path, as_json: bool) -> None:
    """`fleet sweep ... | head -1` printed a BrokenPipe traceback per event (issue 29, item 10)."""
    w = Workspace(tmp_path / "hosts", tmp_path / "book.yaml", tmp_path / "results", [])
    w.hosts_dir.mkdir()
    w.write(None)
    reader, writer = os.pipe()
    os.close(reader)  # the reader is gone before the first event
    with os.fdopen(writer, "w") as closed:
        done = console(["sweep", "-p", str(w.playbook), "--hosts", "ct200", *(["--json"] if as_json else [])], tmp_path, closed, FAKE_SWEEP)
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr
    assert done.returncode == 0, done.stderr  # every (no) run has its result: the sweep's own code
    with open("/dev/full", "w") as full:
        done = console(["sweep", "-p", str(w.playbook), "--hosts", "ct200"], tmp_path, full, FAKE_SWEEP)
    assert "Traceback" not in done.stderr and done.returncode == 0, done.stderr
    assert done.stderr.count("stdout: expected a writable output") == 1, done.stderr

"""fleet's hub fetch run for real: the job fleet starts on a host (here a `transport: local` host,
detached under flock like on any host) runs the real huggingface_hub against a local hub
(tests/testfleet/hub.py) that speaks the hub's HTTP API, for models and datasets alike.

Each test runs with huggingface_hub 2.x (this interpreter's) and 1.33.0 (the last 1.x,
installed by pip into /var/tmp once; skipped where pip cannot reach a package index)."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from fleet.errors import FleetError
from fleet.inventory import Host
from fleet.playbook import ModelRef
from fleet.provision.models import (
    ModelError,
    ensure_cached,
    fetch_hub_snapshot,
    hub_refusal,
    read_state,
)
from fleet.transport.local import LocalTransport
from tests.testfleet.hub import HubServer, hub_client_python

TOKEN = "hf_testtoken_Zq81x"
CLIENTS = [None, "1.33.0"]  # None: this interpreter's huggingface_hub


@pytest.fixture(params=CLIENTS, ids=lambda v: f"hub-{v or 'installed'}")
def client(request: pytest.FixtureRequest) -> str:
    pytest.importorskip("huggingface_hub")
    try:
        return hub_client_python(request.param)
    except RuntimeError as exc:
        pytest.skip(str(exc))


@pytest.fixture
def hub():
    with HubServer() as server:
        yield server


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No token nor hub settings of this machine's: HF_HOME of the test's own."""
    home = tmp_path / "hf-home"
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_ENDPOINT", "HF_HUB_OFFLINE", "HF_HUB_CACHE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HOME", str(home))
    return home


def local_host(tmp_path: Path, python: str) -> Host:
    return Host.model_validate(
        {"name": "local", "transport": "local", "paths": {"work_dir": str(tmp_path / "work"), "model_cache": str(tmp_path / "models")}, "engine": {"kind": "sglang", "python": python}}
    )


def fetch(t: LocalTransport, model: ModelRef, host: Host, tmp_path: Path, secrets: dict[str, str]):
    return ensure_cached(t, model, host, read_state(t, model, host), dry_run=False, mirror_root=tmp_path, transfer=lambda action: action(), timeout=240, secrets=secrets)


def files_under(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in directory.rglob("*") if p.is_file() and ".cache" not in p.parts and ".fleet-" not in p.name}


MODEL_V1 = {"config.json": '{"model_type": "qwen3", "v": 1}', "model.safetensors": os.urandom(300_000), "tokenizer/vocab.txt": "a\nb\n"}
MODEL_V2 = {"config.json": '{"model_type": "qwen3", "v": 2}', "model.safetensors": os.urandom(200_000)}


def test_a_model_pinned_to_a_tag_is_fetched_at_the_commit_the_tag_names(client: str, hub: HubServer, env: Path, tmp_path: Path) -> None:
    v1 = hub.add_commit("org/tiny", MODEL_V1, refs=("main", "v1"))
    v2 = hub.add_commit("org/tiny", MODEL_V2, refs=("main",))  # main moved on: the tag did not
    host, t = local_host(tmp_path, client), LocalTransport("local")
    model = ModelRef(repo="org/tiny", revision="v1")
    changes = fetch(t, model, host, tmp_path, {"HF_ENDPOINT": hub.endpoint})
    assert [c.action for c in changes] == ["fetch"] and changes[0].bytes == sum(len(str(v).encode()) if isinstance(v, str) else len(v) for v in MODEL_V1.values())
    state = read_state(t, model, host)
    assert state.cached is not None and state.cached.revision == v1 != v2 and state.cached.source == "hf:org/tiny@v1"
    assert files_under(Path(state.cache_dir)) == {k: v.encode() if isinstance(v, str) else v for k, v in MODEL_V1.items()}
    # The tag was resolved once, by the metadata call; every file came from the commit.
    downloads = [r for r in hub.requests if "/resolve/" in r.path]
    assert downloads and all(f"/resolve/{v1}/" in r.path for r in downloads)
    assert any(r.path == "/api/models/org/tiny/revision/v1" for r in hub.requests)
    assert any(r.cdn for r in hub.gets("")), "the LFS file came through the CDN redirect"
    # Fetched once: a second provisioning finds it complete and asks the hub nothing.
    asked = len(hub.requests)
    assert fetch(t, model, host, tmp_path, {"HF_ENDPOINT": hub.endpoint}) == [] and len(hub.requests) == asked


def test_a_dataset_repo_is_fetched_pinned_to_its_commit(client: str, hub: HubServer, env: Path, tmp_path: Path) -> None:
    questions = "".join(f'{{"question_id": {i}, "category": "coding", "turns": ["q{i}"]}}\n' for i in range(50))
    sha = hub.add_commit("org/spec-bench", {"data/question.jsonl": questions, "README.md": "# spec bench\n"}, repo_type="dataset", refs=("main", "v0.1"))
    hub.add_commit("org/spec-bench", {"data/question.jsonl": "changed\n"}, repo_type="dataset", refs=("main",))
    hub.add_commit("org/spec-bench", {"config.json": "{}"}, repo_type="model")  # a model of the same name is another repo
    t = LocalTransport("local")
    dest = str(tmp_path / "datasets" / "org--spec-bench" / "v0.1")
    marker = fetch_hub_snapshot(
        t, client, "org/spec-bench", "v0.1", dest, "hf-dataset:org/spec-bench@v0.1", repo_type="dataset",
        poll=lambda action: action(), timeout=120, secrets={"HF_ENDPOINT": hub.endpoint},
    )  # fmt: skip
    assert marker.revision == sha and marker.files == {"data/question.jsonl": len(questions), "README.md": 13}
    assert (Path(dest) / "data" / "question.jsonl").read_text() == questions
    paths = [r.path for r in hub.requests if r.path != "/api/agent-harnesses"]
    assert "/api/datasets/org/spec-bench/revision/v0.1" in paths
    assert all(p.startswith(("/api/datasets/org/spec-bench", f"/datasets/org/spec-bench/resolve/{sha}/")) for p in paths), paths


class CmdlineWatch:
    """Every process's command line on this machine, read while a fetch runs: the token must be in none."""

    def __init__(self, needle: str) -> None:
        self.needle, self.seen, self.hits = needle.encode(), 0, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self._stop.is_set():
            for entry in os.scandir("/proc"):
                if entry.name.isdigit():
                    try:
                        cmdline = Path(entry.path, "cmdline").read_bytes()
                    except OSError:
                        continue
                    if b"fleet-fetch" in cmdline or b"huggingface_hub" in cmdline:
                        self.seen += 1
                    if self.needle in cmdline:
                        self.hits.append(cmdline)
            time.sleep(0.01)

    def __enter__(self) -> CmdlineWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def test_a_gated_repo_is_a_clear_message_and_the_token_travels_only_in_the_environment(client: str, hub: HubServer, env: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    sha = hub.add_commit("org/gated", MODEL_V1, gated=True, granted_tokens=(TOKEN,))
    host, t = local_host(tmp_path, client), LocalTransport("local")
    model = ModelRef(repo="org/gated", revision="main")
    with pytest.raises(ModelError) as refused:
        fetch(t, model, host, tmp_path, {"HF_ENDPOINT": hub.endpoint})
    message = str(refused.value)
    assert "\n" not in message and "Traceback" not in message, message
    assert message.startswith("local: the hub refused model repo org/gated (HTTP 401, gated): no HF_TOKEN was given; set HF_TOKEN"), message
    with pytest.raises(ModelError, match=r"HTTP 403, gated\): HF_TOKEN was given, but its account has no access"):
        fetch(t, model, host, tmp_path, {"HF_ENDPOINT": hub.endpoint, "HF_TOKEN": "hf_someone_else"})
    assert read_state(t, model, host).cached is None  # nothing counts as fetched

    with CmdlineWatch(TOKEN) as watch:
        fetch(t, model, host, tmp_path, {"HF_ENDPOINT": hub.endpoint, "HF_TOKEN": TOKEN})
    assert watch.seen > 0, "the watch saw the fetch's processes"
    assert watch.hits == []  # no argv held the token
    state = read_state(t, model, host)
    assert state.cached is not None and state.cached.revision == sha
    on_hub = [r for r in hub.requests if "/resolve/" in r.path and r.status == 200]
    assert on_hub and all(r.authorization == f"Bearer {TOKEN}" for r in on_hub)  # the hub got it, from the environment
    assert all(r.authorization is None for r in hub.requests if r.cdn)  # and it never left the hub for the CDN
    for path in tmp_path.rglob("*"):  # the cache, its .cache/huggingface, the fetch log, HF_HOME
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes(), path
    assert TOKEN not in caplog.text and "hf_someone_else" not in caplog.text


def test_the_hub_refusals_each_get_their_sentence() -> None:
    assert hub_refusal("o/r", "main", "model", "x\nfleet-exit=1\n", token_given=False) is None
    missing = hub_refusal("o/r", "main", "dataset", "fleet-hub-refused 401 RepoNotFound\n", token_given=False)
    assert missing is not None and missing.startswith("the hub has no dataset repo o/r, or it is private (HTTP 401; no HF_TOKEN was given)")
    revision = hub_refusal("o/r", "v9", "model", "fleet-hub-refused 404 RevisionNotFound\n", token_given=True)
    assert revision == "the hub has no revision 'v9' of model repo o/r (HTTP 404): name a branch, tag or commit it has"


def test_an_unknown_revision_and_repo_are_named(client: str, hub: HubServer, env: Path, tmp_path: Path) -> None:
    hub.add_commit("org/tiny", MODEL_V2)
    host, t = local_host(tmp_path, client), LocalTransport("local")
    with pytest.raises(ModelError, match=r"^local: the hub has no revision 'v7' of model repo org/tiny \(HTTP 404\)"):
        fetch(t, ModelRef(repo="org/tiny", revision="v7"), host, tmp_path, {"HF_ENDPOINT": hub.endpoint})
    with pytest.raises(ModelError, match=r"^local: the hub has no model repo org/nope, or it is private \(HTTP 401; no HF_TOKEN was given\)"):
        fetch(t, ModelRef(repo="org/nope", revision="main"), host, tmp_path, {"HF_ENDPOINT": hub.endpoint})


def test_a_connection_cut_mid_file_is_resumed_with_a_range_request(client: str, hub: HubServer, env: Path, tmp_path: Path) -> None:
    # huggingface_hub counts what it kept in chunks of 10 MiB (constants.DOWNLOAD_CHUNK_SIZE): a cut
    # after the first chunk resumes from there; one before it starts the file over.
    weights = os.urandom(12 << 20)
    hub.add_commit("org/big", {"config.json": "{}", "model.safetensors": weights})
    hub.cut_after("model.safetensors", 11 << 20)
    host, t = local_host(tmp_path, client), LocalTransport("local")
    model = ModelRef(repo="org/big", revision="main")
    fetch(t, model, host, tmp_path, {"HF_ENDPOINT": hub.endpoint})
    gets = hub.gets("/blobs/" + hashlib.sha256(weights).hexdigest())
    assert [(g.range, g.status) for g in gets] == [(None, 200), (f"bytes={10 << 20}-", 206)]
    assert (Path(read_state(t, model, host).cache_dir) / "model.safetensors").read_bytes() == weights


def lock_holders(path: str) -> list[int]:
    """The processes with `path` open (a lock file a job holds)."""
    pids = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if any(os.readlink(fd.path) == path for fd in os.scandir(f"/proc/{entry.name}/fd")):
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def fetch_processes(dest: str) -> list[int]:
    pids = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                cmdline = Path(entry.path, "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if dest.encode() in cmdline and any(b"snapshot_download" in part for part in cmdline):
                pids.append(int(entry.name))
    return pids


def test_a_fetch_killed_mid_file_keeps_the_files_it_completed_and_its_leftovers_go(client: str, hub: HubServer, env: Path, tmp_path: Path) -> None:
    """A power cut kills the fetch with no chance to clean up. The next fetch (fleet starts it again)
    downloads only what was not complete: huggingface_hub resumes per file across processes (a
    file cut mid-way starts over), and the cut file's partial bytes are removed first."""
    slow = os.urandom(14 << 20)  # huggingface_hub writes in chunks of 10 MiB: the first lands on disk before the cut
    files = {"config.json": "{}", "a.safetensors": os.urandom(200_000), "b.safetensors": slow}
    hub.add_commit("org/cut", files)
    release = hub.hold_after("b.safetensors", 11 << 20)  # the download waits there until the cut
    host, t = local_host(tmp_path, client), LocalTransport("local")
    model = ModelRef(repo="org/cut", revision="main")
    dest = read_state(t, model, host).cache_dir
    outcome: list[BaseException | None] = []

    def first() -> None:
        try:
            fetch(t, model, host, tmp_path, {"HF_ENDPOINT": hub.endpoint})
            outcome.append(None)
        except (FleetError, AssertionError) as exc:
            outcome.append(exc)

    thread = threading.Thread(target=first, daemon=True)
    thread.start()
    download = Path(dest) / ".cache" / "huggingface" / "download"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        partial = [p for p in download.rglob("*.incomplete") if p.stat().st_size >= 10 << 20] if download.is_dir() else []
        if partial and (Path(dest) / "a.safetensors").is_file():
            break
        time.sleep(0.02)
    else:
        pytest.fail("the fetch never got half-way through the big file")
    groups = set()
    for pid in fetch_processes(dest):
        try:
            groups.add(os.getpgid(pid))
        except ProcessLookupError:
            pass
    assert groups
    # The power cut: everything of the job at once, no cleanup -- and whatever else holds the job's
    # lock (a child of the fetch in another process group), as a power cut spares nothing. The job
    # is frozen before its lock's holders are listed, and killed only then: killed first, fleet may
    # see its lock free and start it again, and the listing would take the new job for the old.
    for group in groups:
        os.killpg(group, signal.SIGSTOP)
    holders = lock_holders(dest + ".lock")
    for group in groups:
        os.killpg(group, signal.SIGKILL)
    for pid in holders:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    release.set()
    thread.join(timeout=120)
    # fleet saw the job end without an exit status and started it again (run_detached_started)
    assert outcome == [None], outcome
    state = read_state(t, model, host)
    assert state.cached is not None and files_under(Path(dest)) == {k: v.encode() if isinstance(v, str) else v for k, v in files.items()}
    a_sha = hashlib.sha256(files["a.safetensors"]).hexdigest()
    assert len(hub.gets(a_sha)) == 1  # complete before the cut: not fetched again
    assert len(hub.gets(hashlib.sha256(slow).hexdigest())) == 2  # cut mid-way: fetched again, whole
    assert list(download.rglob("*.incomplete")) == []  # the cut file's partial bytes did not stay

"""The hub fetch on a real SSH test host: fleet starts its fetch job over SSH, the host's Python
(this interpreter, read-only inside the host, with its huggingface_hub 2.x, or the same with
huggingface_hub 1.33.0) downloads from a local hub
(tests/testfleet/hub.py) listening on the machine's side of the host's link: a model and a dataset
pinned to revisions, a gated repo's refusal, the token's path, and a fetch cut by a reboot."""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
import threading
import time
from pathlib import Path

import pytest

from fleet.connect import transport_for
from fleet.errors import FleetError
from fleet.inventory import load_inventory
from fleet.playbook import ModelRef
from fleet.provision.models import ModelError, ensure_cached, fetch_hub_snapshot, read_state
from fleet.retry import CONNECT, TRANSFER, retrying
from tests.testfleet.hub import HubServer, hub_client_python

pytestmark = pytest.mark.testfleet

# Made at each run: a token spelled out here would be found by the grep below wherever this file
# lies on a path the test host sees (a checkout under /tmp, as CI's).
TOKEN = "hf_integration_" + secrets.token_hex(8)


@pytest.fixture(params=[None, "1.33.0"], ids=lambda v: f"hub-{v or 'installed'}")
def setup(test_fleet_factory, tmp_path: Path, request: pytest.FixtureRequest):
    """The host's engine Python: this interpreter (huggingface_hub 2.x here), or a wrapper of it
    with huggingface_hub 1.33.0 (in /var/tmp, which the test hosts share)."""
    pytest.importorskip("huggingface_hub")
    try:
        python = hub_client_python(request.param)
    except RuntimeError as exc:
        pytest.skip(str(exc))
    fleet = test_fleet_factory(["ct200"])
    host = fleet["ct200"]
    (inventory_host,) = load_inventory(fleet.write_inventory(tmp_path / "hosts", engine={"python": python}))
    assert inventory_host.engine.python == python
    transport = transport_for(inventory_host)
    with HubServer(host=host.gateway) as hub:
        try:
            yield fleet, host, inventory_host, transport, hub
        finally:
            transport.close()


def provision_model(transport, model: ModelRef, inventory_host, secrets: dict[str, str], tmp_path: Path):
    """ensure_cached as `fleet provision` calls it, with its retry policies."""
    name = inventory_host.name
    return ensure_cached(
        transport, model, inventory_host, read_state(transport, model, inventory_host), dry_run=False, mirror_root=tmp_path,
        transfer=lambda action: retrying(TRANSFER, name, action, idempotent=True), timeout=180, secrets=secrets,
    )  # fmt: skip


def host_file(fleet, host, path: str) -> bytes:
    done = fleet.exec(host, ["base64", "-w0", path])
    assert done.returncode == 0, done.stderr
    import base64

    return base64.b64decode(done.stdout)


def test_a_model_and_a_dataset_pinned_to_revisions_and_a_gated_repo_with_the_token_only_in_the_environment(setup, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="fleet")
    began = time.time()
    fleet, host, inventory_host, transport, hub = setup
    weights = os.urandom(2 << 20)
    v1 = hub.add_commit("org/gated-model", {"config.json": '{"v": 1}', "model.safetensors": weights}, refs=("main", "v1"), gated=True, granted_tokens=(TOKEN,))
    hub.add_commit("org/gated-model", {"config.json": '{"v": 2}', "model.safetensors": b"later"}, refs=("main",))
    questions = "".join(f'{{"question_id": {i}, "category": "math", "turns": ["q{i}"]}}\n' for i in range(20))
    d1 = hub.add_commit("org/prompts", {"question.jsonl": questions}, repo_type="dataset", refs=("main", "v0.1"))
    hub.add_commit("org/prompts", {"question.jsonl": "moved on\n"}, repo_type="dataset", refs=("main",))
    model = ModelRef(repo="org/gated-model", revision="v1")

    with pytest.raises(ModelError) as refused:
        provision_model(transport, model, inventory_host, {"HF_ENDPOINT": hub.endpoint}, tmp_path)
    assert str(refused.value).startswith("ct200: the hub refused model repo org/gated-model (HTTP 401, gated): no HF_TOKEN was given; set HF_TOKEN")
    assert "\n" not in str(refused.value)

    argv_hits: list[str] = []
    seen: list[int] = []
    stop = threading.Event()

    def watch() -> None:  # every process on the host while it fetches
        while not stop.is_set():
            commands = fleet.processes(host)
            seen.append(sum("snapshot_download" in c for c in commands.values()))
            argv_hits.extend(c for c in commands.values() if TOKEN in c)
            time.sleep(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    hub.rate = 2 << 20  # a second of download: long enough to be watched
    watcher.start()
    try:
        changes = provision_model(transport, model, inventory_host, {"HF_ENDPOINT": hub.endpoint, "HF_TOKEN": TOKEN}, tmp_path)
    finally:
        stop.set()
        watcher.join()
    hub.rate = None
    assert [c.action for c in changes] == ["fetch"]
    assert max(seen) > 0 and argv_hits == []
    state = read_state(transport, model, inventory_host)
    assert state.cached is not None and state.cached.revision == v1
    assert host_file(fleet, host, state.cache_dir + "/model.safetensors") == weights
    assert host_file(fleet, host, state.cache_dir + "/config.json") == b'{"v": 1}'

    dest = "/srv/models/datasets/org--prompts/v0.1"
    marker = fetch_hub_snapshot(
        transport, inventory_host.engine.python, "org/prompts", "v0.1", dest, "hf-dataset:org/prompts@v0.1", repo_type="dataset",
        poll=lambda action: retrying(CONNECT, "ct200", action, idempotent=True), timeout=120, secrets={"HF_ENDPOINT": hub.endpoint, "HF_TOKEN": TOKEN},
    )  # fmt: skip
    assert marker.revision == d1 and host_file(fleet, host, dest + "/question.jsonl") == questions.encode()

    resolved = [r for r in hub.requests if "/resolve/" in r.path and r.status in (200, 302)]
    assert resolved and all(f"/resolve/{v1}/" in r.path or f"/resolve/{d1}/" in r.path for r in resolved)
    assert all(r.authorization == f"Bearer {TOKEN}" for r in resolved) and all(r.authorization is None for r in hub.requests if r.cdn)
    # No file on the host holds the token: the caches, their .cache/huggingface, the fetch logs,
    # HF_HOME under /root, the work dir, /tmp and /dev/shm; nor the host's own folder here (sshd's log).
    # The files written since the test began, on the host's own file systems: a test host may see
    # the machine's /tmp, where a checkout and other tests' folders make a whole grep take minutes.
    written = f"find /srv/models /var/lib/fleet /root /tmp /dev/shm -xdev -type f -newermt @{int(began) - 1} -print0 2>/dev/null"
    grep = fleet.exec(host, ["sh", "-c", f"{written} | xargs -0 -r grep -lF -- {TOKEN}"])
    assert grep.returncode in (0, 1, 123) and grep.stdout == "", grep.stdout + grep.stderr  # 0: no file written at all
    for path in Path(host.base).rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert TOKEN.encode() not in path.read_bytes(), path
    assert TOKEN not in caplog.text


def test_a_fetch_cut_by_a_reboot_resumes_without_fetching_again_what_was_complete(setup, tmp_path: Path) -> None:
    fleet, host, inventory_host, transport, hub = setup
    small, big = os.urandom(300_000), os.urandom(14 << 20)  # the big one: past huggingface_hub's first 10 MiB write
    files = {"config.json": b"{}", "a.safetensors": small, "b.safetensors": big}
    sha = hub.add_commit("org/cut", files, refs=("main", "r1"))
    release = hub.hold_after("b.safetensors", 11 << 20)  # the download waits there until the cut
    model = ModelRef(repo="org/cut", revision="r1")
    cache_dir = read_state(transport, model, inventory_host).cache_dir
    download = host.persistent_path(cache_dir) / ".cache" / "huggingface" / "download"
    boot = host.boot_id()
    outcome: list[BaseException | None] = []

    def provision_it() -> None:
        try:
            provision_model(transport, model, inventory_host, {"HF_ENDPOINT": hub.endpoint}, tmp_path)
            outcome.append(None)
        except FleetError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=provision_it, daemon=True)
    thread.start()
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        partial = [p for p in download.rglob("*.incomplete") if p.stat().st_size >= 10 << 20] if download.is_dir() else []
        if partial and (host.persistent_path(cache_dir) / "a.safetensors").is_file():
            break
        time.sleep(0.05)
    else:
        pytest.fail("the fetch never got past 10 MiB of the big file")
    fleet.reboot(host)  # power cut: the fetch dies mid-file, with no chance to clean up
    release.set()
    thread.join(timeout=300)
    if outcome != [None]:  # what the host's job and the hub saw, for a failure that is never timing's
        job_log = fleet.exec(host, ["sh", "-c", f"cat {cache_dir}.fetch.log; ls -la {cache_dir} {cache_dir}/..; ps -eo pid,ppid,pgid,stat,args"])
        pytest.fail(f"{outcome}\nthe job's log:\n{job_log.stdout}{job_log.stderr}\nthe hub's requests:\n" + "\n".join(map(str, hub.requests)))
    assert host.boot_id() != boot
    state = read_state(transport, model, inventory_host)
    assert state.cached is not None and state.cached.revision == sha and state.cached.files == {k: len(v) for k, v in files.items()}
    assert host_file(fleet, host, cache_dir + "/b.safetensors") == big
    assert len(hub.gets(hashlib.sha256(small).hexdigest())) == 1  # complete before the cut: kept
    assert len(hub.gets(hashlib.sha256(big).hexdigest())) == 2  # cut mid-way: fetched again, whole
    assert list(download.rglob("*.incomplete")) == []  # the cut file's partial bytes went

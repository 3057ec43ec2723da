"""Model weights on a host: fetched once into the persistent cache, staged to the fast dir when asked.

A copy is complete only when its marker file (`.fleet-complete.json`) is present and the files on
disk match the marker's listing (every file, every size). The marker is written last, so an
interrupted fetch or copy is never mistaken for a complete one. Staging copies into
`<staged>.partial` and renames it into place, so a reader never sees half a model.

After a reboot wipes the fast dir, staging runs again from the cache: nothing is downloaded twice.
Long copies run detached on the host (under `flock`, so a second caller waits instead of racing)
and are polled with short calls, so a dropped link only delays them.
"""

from __future__ import annotations

import contextlib
import json
import logging
import posixpath
import shlex
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from fleet.errors import FleetError
from fleet.inventory import Target
from fleet.layout import model_cache_dir, model_serve_dir
from fleet.transport.base import Transport
from fleet.errors import ModelError
from fleet.host.hubfetch import HUB_FETCH_SCRIPT, HUB_REFUSED, hub_refusal

if TYPE_CHECKING:  # types only: `fleet.provision.lease` imports this module on the commands that read a sweep
    from fleet.playbook import ModelRef

log = logging.getLogger("fleet.provision")

MARKER = ".fleet-complete.json"
_IGNORED_PREFIXES = (".fleet-", ".rsync-partial", ".cache")
QUICK_S = 30.0
# Polls are short, so that a dropped link is noticed (and retried) quickly.
POLL_S = 8.0


# ---------------------------------------------------------------------------------------------
# Listings: pure


def listing_command(directory: str) -> str:
    """Every regular file under `directory` with its size, one `path<TAB>size` per line (GNU find)."""
    return f"cd {shlex.quote(directory)} && find . -type f -printf '%P\\t%s\\n'"


def parse_listing(text: str) -> dict[str, int]:
    files: dict[str, int] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        path, _, size = line.rpartition("\t")
        if not path or not size.isdigit():
            raise ValueError(f"not a `path<TAB>size` line: {line!r}")
        if not path.startswith(_IGNORED_PREFIXES) and "/.rsync-partial/" not in path:
            files[path] = int(size)
    return files


def local_listing(directory: Path) -> dict[str, int]:
    return {str(p.relative_to(directory)): p.stat().st_size for p in sorted(directory.rglob("*")) if p.is_file() and not str(p.relative_to(directory)).startswith(_IGNORED_PREFIXES)}


@dataclass(frozen=True)
class ListingDiff:
    missing: tuple[str, ...] = ()
    wrong_size: tuple[tuple[str, int, int], ...] = ()  # path, expected, found

    @property
    def ok(self) -> bool:
        return not self.missing and not self.wrong_size

    def describe(self) -> str:
        parts = []
        if self.missing:
            parts.append(f"{len(self.missing)} missing ({', '.join(self.missing[:3])}{', ...' if len(self.missing) > 3 else ''})")
        for path, want, got in self.wrong_size[:3]:
            parts.append(f"{path}: {got} bytes, expected {want}")
        return "; ".join(parts) or "complete"


def compare_listing(expected: Mapping[str, int], actual: Mapping[str, int]) -> ListingDiff:
    return ListingDiff(
        missing=tuple(sorted(p for p in expected if p not in actual)),
        wrong_size=tuple(sorted((p, s, actual[p]) for p, s in expected.items() if p in actual and actual[p] != s)),
    )


@dataclass(frozen=True)
class Marker:
    source: str
    revision: str
    files: dict[str, int]

    @property
    def total_bytes(self) -> int:
        return sum(self.files.values())

    def to_bytes(self) -> bytes:
        return json.dumps({"source": self.source, "revision": self.revision, "files": self.files}, sort_keys=True, indent=1).encode()

    @classmethod
    def parse(cls, text: str) -> Marker | None:
        try:
            data = json.loads(text)
            return cls(str(data["source"]), str(data["revision"]), {str(k): int(v) for k, v in data["files"].items()})
        except (ValueError, KeyError, TypeError, AttributeError):
            return None


# ---------------------------------------------------------------------------------------------
# Host state: one cheap call reads both markers


@dataclass(frozen=True)
class ModelState:
    cache_dir: str
    serve_dir: str
    cached: Marker | None
    staged: Marker | None

    @property
    def needs_staging(self) -> bool:
        return self.serve_dir != self.cache_dir and (self.staged is None or self.staged != self.cached)


def _read_marker_command(directory: str) -> str:
    path = shlex.quote(posixpath.join(directory, MARKER))
    return f"cat {path} 2>/dev/null; echo; echo '--fleet--'"


def read_state(t: Transport, model: ModelRef, host: Target) -> ModelState:
    return read_states(t, [model], host)[0]


def read_states(t: Transport, models: Sequence[ModelRef], host: Target) -> list[ModelState]:
    """Every model's cache and serve markers in one round trip, in the order given."""
    dirs = [(model_cache_dir(model, host), model_serve_dir(model, host)) for model in models]
    if not dirs:
        return []
    result = t.run("; ".join(f"{_read_marker_command(cache)}; {_read_marker_command(serve)}" for cache, serve in dirs), timeout=QUICK_S)
    texts = (result.stdout.split("--fleet--\n") + [""] * (2 * len(dirs)))[: 2 * len(dirs)]
    return [ModelState(cache, serve, Marker.parse(texts[2 * i].strip()), Marker.parse(texts[2 * i + 1].strip())) for i, (cache, serve) in enumerate(dirs)]


def remote_listing(t: Transport, directory: str, timeout: float = QUICK_S) -> dict[str, int]:
    result = t.run(listing_command(directory), timeout=timeout)
    if not result.ok:
        return {}
    return parse_listing(result.stdout)


def verify_copy(t: Transport, directory: str, marker: Marker) -> ListingDiff:
    return compare_listing(marker.files, remote_listing(t, directory))


# ---------------------------------------------------------------------------------------------
# Fetching into the cache


@dataclass
class Change:
    """What provisioning did (or, in a dry run, would do) to one host."""

    action: str
    detail: str
    bytes: int = 0


def mirror_dir(model: ModelRef, mirror_root: Path) -> Path:
    """The controller directory a model is copied from; relative mirrors are relative to the playbook."""
    assert model.mirror is not None
    mirror = Path(model.mirror)
    return mirror if mirror.is_absolute() else (mirror_root / mirror).resolve()


def _source_label(model: ModelRef) -> str:
    if model.path:
        return f"path:{model.path}"
    if model.mirror:
        return f"mirror:{model.mirror}"
    return f"hf:{model.repo}@{model.revision}"


def mirror_listing(model: ModelRef, mirror_root: Path) -> dict[str, int] | None:
    """The files a mirror holds now (path -> size), or None: not a mirror, or not a folder on this controller."""
    if model.mirror is None:
        return None
    source = mirror_dir(model, mirror_root)
    return local_listing(source) if source.is_dir() else None


def current_cache(model: ModelRef, state: ModelState, mirror_files: Mapping[str, int] | None) -> Marker | None:
    """The cached copy, if it is a copy of what the playbook asks for now: from the same source
    (the mirror, or the hub's repo at the requested revision) and, for a mirror this controller
    reads, of the files the mirror holds now. None: the cache is fetched (again), and the copy
    there says nothing about what will be fetched and staged -- an older fetch of a refreshed
    mirror, or a copy from another source, is not sized as the model."""
    cached = state.cached
    if cached is None or cached.source != _source_label(model):
        return None
    if mirror_files is not None and cached.files != dict(mirror_files):
        return None
    return cached


def ensure_cached(
    t: Transport,
    model: ModelRef,
    host: Target,
    state: ModelState,
    *,
    dry_run: bool,
    mirror_root: Path,
    transfer: Callable[[Callable[[], object]], object],
    timeout: float,
    secrets: Mapping[str, str] = {},
) -> list[Change]:
    """Make the cache hold a complete, verified copy. Returns what changed (nothing when it was there)."""
    if model.path:
        check = t.run(["test", "-f", posixpath.join(model.path, "config.json")], timeout=QUICK_S)
        if not check.ok:
            raise ModelError(f"{t.host}: model path {model.path} has no config.json (is it mounted on this host?)")
        return []
    files = mirror_listing(model, mirror_root)
    current = current_cache(model, state, files)
    if current is not None:
        diff = verify_copy(t, state.cache_dir, current)
        if diff.ok:
            return []
        detail = f"cached copy is damaged: {diff.describe()}"
    elif state.cached is not None:
        detail = f"the cached copy ({state.cached.source}, {len(state.cached.files)} files) is not the one asked for"
    else:
        detail = "not cached"
    if model.mirror is None:
        return _fetch_from_hub(t, model, host, state, detail, dry_run=dry_run, poll=transfer, timeout=timeout, secrets=secrets)
    source = mirror_dir(model, mirror_root)
    if files is None:
        raise ModelError(f"mirror {source} of {model.label} is not a directory on this controller")
    change = Change("fetch", f"{model.label} from {source} ({detail})", sum(files.values()))
    if dry_run:
        return [change]
    marker_path = posixpath.join(state.cache_dir, MARKER)
    # An old marker must go first: a copy being replaced is not complete until the new marker lands.
    t.run(["rm", "-f", marker_path], timeout=QUICK_S, check=True)
    transfer(lambda: t.rsync_push(source, state.cache_dir + "/", timeout=timeout, delete=True).check())
    return [_seal(t, state.cache_dir, Marker(_source_label(model), model.revision, files), change)]


def _seal(t: Transport, directory: str, marker: Marker, change: Change) -> Change:
    """Verify a fresh copy against its expected listing, then write the marker that makes it complete."""
    diff = verify_copy(t, directory, marker)
    if not diff.ok:
        raise ModelError(f"{t.host}: copy in {directory} does not match its source: {diff.describe()}")
    t.put_bytes(marker.to_bytes(), posixpath.join(directory, MARKER), timeout=QUICK_S)
    return change


def hub_fetch_job(python: str, model: ModelRef, dest: str) -> DetachedJob:
    return hub_repo_fetch_job(python, model.repo or "", model.revision, dest)


def hub_repo_fetch_job(python: str, repo: str, revision: str, dest: str, repo_type: str = "model") -> DetachedJob:
    """The fetch of a model repo, or with `repo_type` "dataset" of a dataset repo (its 4th argument)."""
    args = (repo, revision, dest) + (() if repo_type == "model" else (repo_type,))
    script = f"exec {shlex.quote(python)} -c {shlex.quote(HUB_FETCH_SCRIPT)} " + " ".join(f'"${i}"' for i in range(1, len(args) + 1))
    return DetachedJob("fleet-fetch", script, args, dest + ".lock", dest + ".fetch.log")


def _fetch_from_hub(
    t: Transport,
    model: ModelRef,
    host: Target,
    state: ModelState,
    detail: str,
    *,
    dry_run: bool,
    poll: Callable[[Callable[[], object]], object],
    timeout: float,
    secrets: Mapping[str, str],
) -> list[Change]:
    change = Change("fetch", f"{model.label}@{model.revision} from the Hugging Face hub ({detail})")
    if dry_run:
        return [change]
    marker = fetch_hub_snapshot(t, host.engine.python, model.repo or "", model.revision, state.cache_dir, _source_label(model), poll=poll, timeout=timeout, secrets=secrets)
    change.bytes = marker.total_bytes
    return [_seal(t, state.cache_dir, marker, change)]


def fetch_hub_snapshot(
    t: Transport,
    python: str,
    repo: str,
    revision: str,
    dest: str,
    source: str,
    *,
    repo_type: str = "model",
    poll: Callable[[Callable[[], object]], object],
    timeout: float,
    secrets: Mapping[str, str],
) -> Marker:
    """Fetch a hub repo (a model's or a dataset's) pinned to the commit `revision` resolves to,
    into `dest` on the host, with huggingface_hub from `python`; returns the marker that seals it
    (not yet written). Its old marker goes first: a copy being replaced is not complete."""
    t.run(["rm", "-f", posixpath.join(dest, MARKER)], timeout=QUICK_S, check=True)
    job = hub_repo_fetch_job(python, repo, revision, dest, repo_type)

    # The token rides in the environment of the starting call (delivered by the transport, never on
    # a command line); the detached job inherits it and huggingface_hub reads HF_TOKEN itself.
    def start() -> None:
        t.run(job.start_command(), timeout=QUICK_S, env=dict(secrets), check=True)

    def explain(exit_code: int, text: str) -> str | None:
        if exit_code != HUB_REFUSED:
            return None
        message = hub_refusal(repo, revision, repo_type, text, token_given=bool(secrets.get("HF_TOKEN")))
        return f"{t.host}: {message}" if message else None

    start()
    run_detached_started(t, job, poll=poll, timeout=timeout, restart=start, explain=explain)
    expected_text = poll(lambda: t.run(["cat", dest + ".fleet-expected.json"], timeout=QUICK_S, check=True).stdout)
    expected = json.loads(str(expected_text))
    return Marker(source, str(expected["sha"]), {k: int(v) for k, v in expected["files"].items()})


# What a detached job's log says, line by line: its pid once it is queued for its lock (before it
# takes it), that it started once it holds the lock, and how it ended; and what a poll prints where
# the log is gone (a reboot wipes a fast dir's lock and log together).
JOB_QUEUED = "fleet-queued"
JOB_STARTED = "fleet-started"
JOB_EXIT = "fleet-exit="
JOB_NO_LOG = "fleet-no-log"
# Starts of a job that vanished (a reboot, a kill) before it is given up on.
JOB_RESTARTS = 3


@dataclass(frozen=True)
class DetachedJob:
    """A shell job that runs on the host under `flock`, detached from the SSH session that started it.

    Its log starts with its pid (`fleet-queued PID`, the process that waits for the lock and then
    holds it until the job ends) and ends with `fleet-exit=N`; a second start waits on the lock
    instead of racing the first.
    """

    name: str
    script: str  # POSIX sh; sees its arguments as $1, $2, ...
    args: tuple[str, ...]
    lock: str
    log: str

    def start_command(self) -> str:
        body = f"echo {JOB_STARTED}; ( {self.script} ); echo {JOB_EXIT}$?"
        # `exec` keeps the pid written: flock waits for the lock as that process and lives until
        # the job ends, so a poll can tell a job still queued from one killed before it took the
        # lock (its log would otherwise say nothing, and look queued until the timeout).
        queued = f'echo {JOB_QUEUED} $$; exec flock {shlex.quote(self.lock)} sh -c {shlex.quote(body)} {shlex.quote(self.name)} "$@"'
        return (
            f"mkdir -p {shlex.quote(posixpath.dirname(self.lock))} && setsid -f sh -c {shlex.quote(queued)} {shlex.quote(self.name)} {shlex.join(self.args)} >{shlex.quote(self.log)} 2>&1 </dev/null"
        )

    def poll_command(self) -> str:
        """First line: the lock `free` or `busy`, then whether the queued pid is `alive`; then the log.

        The log is read before and after the lock and the process are looked at, and a log that
        changed meanwhile makes the lock `busy`: the three facts are read at different moments,
        and a job that ended normally (its exit line written after the first read), or another
        start of the same job (its start empties the log) would otherwise look vanished."""
        log = shlex.quote(self.log)
        return (
            f"a=$(cat {log} 2>/dev/null) || a={JOB_NO_LOG}; "
            f"if flock -n {shlex.quote(self.lock)} true; then l=free; else l=busy; fi; "
            f"p=$(printf '%s\\n' \"$a\" | sed -n 's/^{JOB_QUEUED} \\([0-9][0-9]*\\)$/\\1/p' | head -n 1); "
            # A zombie is gone too: an init that reaps late (a container's) would keep it listed.
            f'if [ -n "$p" ] && kill -0 "$p" 2>/dev/null && ! grep -q "^State:[[:space:]]*Z" /proc/"$p"/status 2>/dev/null; then s=alive; else s=gone; fi; '
            f"b=$(cat {log} 2>/dev/null) || b={JOB_NO_LOG}; "
            '[ "$a" = "$b" ] || l=busy; '
            'echo "$l $s"; [ -z "$b" ] || printf \'%s\\n\' "$b"'
        )


@dataclass(frozen=True)
class JobPoll:
    """One poll of a detached job, parsed (DetachedJob.poll_command)."""

    free: bool  # nothing holds the job's lock
    alive: bool  # the process the log names as queued for the lock still runs
    exit_code: int | None  # how the job ended, if its log says
    log: str

    @classmethod
    def parse(cls, stdout: str) -> JobPoll:
        first, _, log = stdout.partition("\n")
        exit_code = None
        for line in reversed(log.splitlines()):
            if line.startswith(JOB_EXIT):
                exit_code = int(line.removeprefix(JOB_EXIT))
                break
        lock, _, process = first.partition(" ")
        return cls(lock == "free", process == "alive", exit_code, log)

    @property
    def vanished(self) -> bool:
        """The job is gone without saying how it ended: its log is gone (the host rebooted: the log is
        made before the job starts, and only a reboot or a hand wipes it); or its lock is free while
        the process its log names is gone (killed while queued, or under its lock with every
        child). An empty log is a job not yet queued: it writes its pid before anything else."""
        lines = self.log.splitlines()
        if self.exit_code is not None or not lines:
            return False
        # A reboot wipes the fast dir: no log, and no lock file to take either (`flock -n` fails: "busy").
        if lines[0] == JOB_NO_LOG:
            return True
        # A log that starts at JOB_STARTED is a job an older fleet started, before jobs said their pid.
        return self.free and not self.alive and lines[0].partition(" ")[0] in (JOB_QUEUED, JOB_STARTED)


def run_detached(t: Transport, job: DetachedJob, *, poll: Callable[[Callable[[], object]], object], timeout: float, interval_s: float = 0.3) -> None:
    """Start `job` and wait for it with short polls; `poll` wraps each poll in a retry policy."""

    def start() -> None:
        t.run(job.start_command(), timeout=QUICK_S, check=True)

    start()
    run_detached_started(t, job, poll=poll, timeout=timeout, interval_s=interval_s, restart=start)


def run_detached_started(
    t: Transport,
    job: DetachedJob,
    *,
    poll: Callable[[Callable[[], object]], object],
    timeout: float,
    interval_s: float = 0.3,
    restart: Callable[[], None] | None = None,
    explain: Callable[[int, str], str | None] | None = None,
) -> None:
    """Wait for a started job. One that vanished (the host rebooted under it, or it was killed) is
    started again by `restart` (the jobs are idempotent), up to JOB_RESTARTS times: never waited
    on until the timeout. `explain(exit code, log)` may word a failure (None: the log's tail)."""
    deadline = time.monotonic() + timeout
    restarts = 0
    while True:
        state = JobPoll.parse(str(poll(lambda: t.run(job.poll_command(), timeout=POLL_S).stdout)))
        if state.free and state.exit_code is not None:
            if state.exit_code != 0:
                if explain is not None and (message := explain(state.exit_code, state.log)):
                    raise ModelError(message)
                raise ModelError(f"{t.host}: {job.name} failed (exit {state.exit_code}): {state.log.strip()[-4000:]}")
            return
        if state.vanished:
            if restart is None or restarts >= JOB_RESTARTS:
                raise ModelError(f"{t.host}: {job.name} ended without an exit status {restarts + 1} times (host rebooted, or the job was killed); log {job.log}")
            restarts += 1
            log.warning("%s: %s vanished without an exit status (a reboot or a kill); starting it again", t.host, job.name)
            restart()
            continue
        if time.monotonic() > deadline:
            queued = "its process alive" if state.alive else "its process gone"
            lock = f"lock busy, {queued}" if not state.free else f"lock free, {queued}"
            raise ModelError(f"{t.host}: {job.name} did not finish within {timeout:.0f} s ({lock}; it may still run; log {job.log})")
        time.sleep(interval_s)


# ---------------------------------------------------------------------------------------------
# Staging to the fast dir, detached on the host

# The fast dir is RAM: a copy that fails (no space, a signal) is removed on the way out, and a
# copy that could not run its trap (SIGKILL, OOM) is removed by the next start, or by
# `ensure_staged` once it gives up. The stale staged copy goes before the copy (it is not the one
# asked for, and its room is needed); `$3` is the size of the copy, checked against the room
# left before a byte is written.
STAGE_SCRIPT = r"""
set -eu
src=$1; dst=$2; need=$3
if cmp -s "$src/.fleet-complete.json" "$dst/.fleet-complete.json" 2>/dev/null; then exit 0; fi
trap 'rm -rf "$dst.partial"' EXIT
trap 'exit 129' HUP; trap 'exit 130' INT; trap 'exit 143' TERM
rm -rf "$dst.partial"
rm -f "$dst/.fleet-complete.json"
rm -rf "$dst"
free=$(df -P -B1 "${dst%/*}" | awk 'NR == 2 { print $4 }')
if [ "$free" -lt "$need" ]; then
  echo "fleet-stage: $src holds $need bytes, ${dst%/*} has $free free: not staged" >&2
  exit 28  # ENOSPC's number
fi
cp -a "$src" "$dst.partial"
rm -f "$dst.partial/.fleet-complete.json"
sync
mv "$dst.partial" "$dst"
cp "$src/.fleet-complete.json" "$dst/.fleet-complete.json.tmp"
mv "$dst/.fleet-complete.json.tmp" "$dst/.fleet-complete.json"
"""


def staging_job(state: ModelState, need_bytes: int) -> DetachedJob:
    return DetachedJob("fleet-stage", STAGE_SCRIPT, (state.cache_dir, state.serve_dir, str(need_bytes)), state.serve_dir + ".lock", state.serve_dir + ".stage.log")


def stage_cleanup_command(job: DetachedJob, serve_dir: str, *, unverified: bool) -> str:
    """Remove what a failed stage left in the fast dir, unless a stage still holds the lock (it
    removes its own on the way out): its partial copy, and with `unverified` the marker of a
    copy that did not match its listing, so that it is never served."""
    doomed = [serve_dir + ".partial"] + ([posixpath.join(serve_dir, MARKER)] if unverified else [])
    return f"flock -n {shlex.quote(job.lock)} rm -rf {shlex.join(doomed)} || true"


def ensure_staged(
    t: Transport,
    state: ModelState,
    *,
    dry_run: bool,
    poll: Callable[[Callable[[], object]], object],
    timeout: float,
) -> list[Change]:
    """Copy cache -> fast dir when the fast copy is missing or stale (after a reboot: always)."""
    if not state.needs_staging:
        return []
    assert state.cached is not None
    change = Change("stage", f"{state.cache_dir} -> {state.serve_dir}", state.cached.total_bytes)
    if dry_run:
        return [change]
    job = staging_job(state, state.cached.total_bytes)
    unverified = False
    try:
        run_detached(t, job, poll=poll, timeout=timeout)
        diff = verify_copy(t, state.serve_dir, state.cached)
        if not diff.ok:
            unverified = True
            raise ModelError(f"{t.host}: staged copy in {state.serve_dir} is incomplete: {diff.describe()}")
    except ModelError:
        with contextlib.suppress(FleetError):  # the failure is the news; a cleanup that cannot run is the next start's
            t.run(stage_cleanup_command(job, state.serve_dir, unverified=unverified), timeout=QUICK_S)
        raise
    return [change]

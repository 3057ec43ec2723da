"""A local Hugging Face hub for tests: the HTTP API that `huggingface_hub`'s downloads call, so
that the real client code (`snapshot_download`, `repo_info`) runs against repos the tests make.

Written against huggingface_hub 2.4.0 (installed here) and 1.33.0 (the last 1.x), whose download
paths call the same endpoints (file:line in huggingface_hub 2.4.0, [1.33.0] where it differs):

- `GET /api/{models|datasets}/{repo}[/revision/{rev}]` (`?blobs=true` for sizes): repo metadata,
  `sha` the commit the revision resolves to, `siblings` the files
  (hf_api.py:3202-3213 `model_info`, :3273-3282 `dataset_info` [3310-3321, 3381-3390]).
  `snapshot_download` resolves a branch or tag to a commit through it
  (_snapshot_download.py `api.repo_info(...)`, `commit_hash = repo_info.sha`).
- `GET /api/{models|datasets}/{repo}/tree/{rev}[/{path}]?recursive=true`: the file listing
  (hf_api.py:4019-4025 `_iter_repo_tree_pages`; entries parsed by `RepoFile`, hf_api.py:711-723:
  `path`, `size`, `oid`, `lfs {oid, size, pointerSize}`, `xetHash`). One page: no `Link` header.
- `HEAD /{repo}/resolve/{rev}/{file}` (datasets under `/datasets/{repo}/...`; hf_hub_url,
  file_download.py:281-290, the revision and file URL-quoted): `X-Repo-Commit`, `ETag` (a git
  blob's sha1, or an LFS file's sha256), `Content-Length`. An LFS file answers 302 to a second
  origin (this server's "CDN" port, see `HubServer.cdn`) with `X-Linked-Size` and `X-Linked-Etag`, as the hub
  redirects to its CDN: the client stops there (utils/_http.py:735-784, the redirect is off the
  hub's origin) and downloads from the Location without the Authorization header
  (file_download.py `_get_metadata_or_catch_error`: `headers.pop("authorization")`).
- `GET` of a file, from the hub or the CDN, with `Range: bytes=N-` (and `N-M`) answered 206
  with `Content-Range`: `http_get` resumes a cut body so (file_download.py `http_get`,
  `headers["Range"] = _adjust_range_header(...)`).
- Errors as the hub signals them, with `X-Error-Code` (utils/_http.py:871-945
  `hf_raise_for_status`): an unknown repo 401 `RepoNotFound`; an unknown revision 404
  `RevisionNotFound`; an unknown file 404 `EntryNotFound`; a gated repo's files 401 `GatedRepo`
  without a token and 403 `GatedRepo` with a token not granted (its metadata stays public,
  `"gated": "manual"`, as on the hub).
- Xet storage is off: no `X-Xet-Hash` header (utils/_xet.py `parse_xet_file_data_from_response`)
  and no `xetHash` in listings, so the client downloads over plain HTTP whether or not `hf_xet`
  is installed.

Faults for resume tests: `cut_after(path, n)` sends the first n bytes of the next GET of a file
and drops the connection; `hold_after(path, n)` sends n bytes and waits for the test's event;
`rate` (bytes/s) makes every body slow enough to reboot a host under.
Every request is recorded (`requests`): method, path, Range, and the Authorization header.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, quote, unquote, urlsplit

LFS_THRESHOLD = 64 << 10  # files from this size on are served as LFS files, through the "CDN"
_CHUNK = 16 << 10
_TYPES = {"models": "model", "datasets": "dataset"}


def git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass(frozen=True)
class HubFile:
    path: str
    data: bytes

    @property
    def lfs(self) -> bool:
        return len(self.data) >= LFS_THRESHOLD

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    @property
    def oid(self) -> str:
        """The git blob's sha1: of the LFS pointer for an LFS file, as on the hub."""
        return git_blob_sha1(self.pointer if self.lfs else self.data)

    @property
    def pointer(self) -> bytes:
        return f"version https://git-lfs.github.com/spec/v1\noid sha256:{self.sha256}\nsize {len(self.data)}\n".encode()

    @property
    def etag(self) -> str:
        return self.sha256 if self.lfs else self.oid


@dataclass
class HubRepo:
    repo_id: str
    repo_type: str  # "model" | "dataset"
    commits: dict[str, dict[str, HubFile]] = field(default_factory=dict)  # sha -> files
    refs: dict[str, str] = field(default_factory=dict)  # branch or tag -> sha
    gated: bool = False
    granted_tokens: frozenset[str] = frozenset()

    def resolve(self, revision: str) -> str | None:
        if revision in self.commits:
            return revision
        return self.refs.get(revision)


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    range: str | None
    authorization: str | None
    status: int
    cdn: bool


class HubServer:
    """`with HubServer() as hub:`; `hub.endpoint` is HF_ENDPOINT. `host` is the address both
    listeners bind (a test host's gateway for hosts to reach it; loopback by default)."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.repos: dict[tuple[str, str], HubRepo] = {}
        self.requests: list[Request] = []
        self.rate: float | None = None  # bytes per second of every body, None: as fast as it goes
        self._cuts: dict[str, int] = {}
        self._holds: dict[str, tuple[int, threading.Event]] = {}
        self._lock = threading.Lock()
        self._hub = _Server((host, 0), self, cdn=False)
        self._cdn = _Server((host, 0), self, cdn=True)
        self._threads = [threading.Thread(target=s.serve_forever, daemon=True, name=f"hub-{i}") for i, s in enumerate((self._hub, self._cdn))]
        for thread in self._threads:
            thread.start()
        self.host = host

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self._hub.server_address[1]}"

    @property
    def cdn(self) -> str:
        """The "CDN" origin: the same address written as one number (http://2130706433:port for
        127.0.0.1), so that its host name differs from the hub's, as the hub's CDN's does:
        huggingface_hub 1.x compares host names only (utils/_http.py:777-780 in 1.33.0) and 2.x
        origins (2.4.0 utils/_http.py:790-810) when deciding whether a redirect leaves the hub."""
        return f"http://{int(ipaddress.IPv4Address(self.host))}:{self._cdn.server_address[1]}"

    def close(self) -> None:
        for server in (self._hub, self._cdn):
            server.shutdown()
            server.server_close()

    def __enter__(self) -> HubServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- repos ----------------------------------------------------------------------------------

    def add_commit(
        self,
        repo_id: str,
        files: Mapping[str, bytes | str],
        *,
        repo_type: str = "model",
        refs: tuple[str, ...] = ("main",),
        gated: bool | None = None,
        granted_tokens: tuple[str, ...] = (),
    ) -> str:
        """A commit of `files` (path -> content) to the repo, which the refs (branches, tags) then
        name; returns its sha. The repo is made at its first commit."""
        content = {path: HubFile(path, data.encode() if isinstance(data, str) else bytes(data)) for path, data in sorted(files.items())}
        with self._lock:
            repo = self.repos.setdefault((repo_type, repo_id), HubRepo(repo_id, repo_type))
            parent = repo.refs.get(refs[0], "") if refs else ""
            listing = "".join(f"{f.path}\0{f.oid}\n" for f in content.values())
            sha = hashlib.sha1(f"{repo_type}/{repo_id}\n{parent}\n{len(repo.commits)}\n{listing}".encode()).hexdigest()
            repo.commits[sha] = content
            for ref in refs:
                repo.refs[ref] = sha
            if gated is not None:
                repo.gated = gated
            repo.granted_tokens = repo.granted_tokens | frozenset(granted_tokens)
        return sha

    def add_folder(self, repo_id: str, folder: Path, **kwargs: object) -> str:
        """A commit of every file under `folder` (see `add_commit`)."""
        files = {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
        return self.add_commit(repo_id, files, **kwargs)  # type: ignore[arg-type]

    def cut_after(self, path: str, nbytes: int) -> None:
        """The next GET of the file whose repo path ends with `path` sends `nbytes` of its body, then
        the connection is dropped (a link cut mid-download)."""
        with self._lock:
            self._cuts[path] = nbytes

    def hold_after(self, path: str, nbytes: int) -> threading.Event:
        """The next GET of the file whose repo path ends with `path` sends `nbytes` of its body, then
        waits until the returned event is set (or 120 s): a download caught half-way, for as long
        as a test needs to cut it (kill the client, reboot its host)."""
        release = threading.Event()
        with self._lock:
            self._holds[path] = (nbytes, release)
        return release

    def gets(self, suffix: str = "") -> list[Request]:
        """The GETs of file bodies (from the hub or the CDN) whose path ends with `suffix`."""
        return [r for r in self.requests if r.method == "GET" and ("/resolve/" in r.path or r.cdn) and r.path.endswith(suffix)]

    # -- internals ------------------------------------------------------------------------------

    def _take_hold(self, path: str) -> tuple[int, threading.Event] | None:
        with self._lock:
            for suffix, hold in list(self._holds.items()):
                if path.endswith(suffix):
                    del self._holds[suffix]
                    return hold
        return None

    def _take_cut(self, path: str) -> int | None:
        with self._lock:
            for suffix, nbytes in list(self._cuts.items()):
                if path.endswith(suffix):
                    del self._cuts[suffix]
                    return nbytes
        return None

    def _record(self, request: Request) -> None:
        with self._lock:
            self.requests.append(request)

    def _blob(self, sha256: str) -> HubFile | None:
        with self._lock:
            for repo in self.repos.values():
                for files in repo.commits.values():
                    for f in files.values():
                        if f.lfs and f.sha256 == sha256:
                            return f
        return None


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], hub: HubServer, *, cdn: bool) -> None:
        self.hub = hub
        self.cdn = cdn
        super().__init__(address, _Handler)


_API = re.compile(r"^/api/(models|datasets)/([^/]+/[^/]+)(?:/(revision|tree)/([^/]+)(?:/(.*))?)?$")
_RESOLVE = re.compile(r"^(?:/(datasets))?/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: object) -> None:  # quiet: requests are recorded
        pass

    def do_HEAD(self) -> None:
        self._serve(head=True)

    def do_GET(self) -> None:
        self._serve(head=False)

    # -- answers --------------------------------------------------------------------------------

    def _serve(self, *, head: bool) -> None:
        url = urlsplit(self.path)
        path = url.path
        status = 500
        try:
            if self.server.cdn:
                status = self._cdn_blob(path, head)
            elif path == "/api/agent-harnesses":  # huggingface_hub 2.x asks once a day (utils/_detect_agent.py)
                status = self._json({"standardEnvVars": [], "harnesses": {}})
            elif m := _API.match(path):
                status = self._api(_TYPES[m[1]], m[2], m[3], unquote(m[4]) if m[4] else "main", m[5], parse_qs(url.query))
            elif m := _RESOLVE.match(path):
                status = self._resolve("dataset" if m[1] else "model", m[2], unquote(m[3]), unquote(m[4]), head)
            else:
                status = self._error(404, None, f"no route {path}")
        finally:
            self.server.hub._record(Request(self.command, path, self.headers.get("Range"), self.headers.get("Authorization"), status, self.server.cdn))

    def _repo(self, repo_type: str, repo_id: str) -> HubRepo | None:
        return self.server.hub.repos.get((repo_type, repo_id))

    def _error(self, status: int, code: str | None, message: str, extra: Mapping[str, str] = {}) -> int:
        body = json.dumps({"error": message}).encode()
        self.send_response(status)
        if code:
            self.send_header("X-Error-Code", code)
        self.send_header("X-Error-Message", message)
        for name, value in extra.items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        return status

    def _json(self, value: object) -> int:
        body = json.dumps(value).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        return 200

    def _not_found(self, repo_type: str, repo_id: str) -> int:
        # The hub answers an unknown (or private) repo 401 RepoNotFound, never 404: it will not say which.
        return self._error(401, "RepoNotFound", "Repository not found")

    def _api(self, repo_type: str, repo_id: str, kind: str | None, revision: str, sub: str | None, query: dict[str, list[str]]) -> int:
        repo = self._repo(repo_type, repo_id)
        if repo is None:
            return self._not_found(repo_type, repo_id)
        sha = repo.resolve(revision)
        if sha is None:
            return self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
        files = repo.commits[sha]
        if kind == "tree":
            prefix = (unquote(sub).rstrip("/") + "/") if sub else ""
            recursive = query.get("recursive", ["false"])[0].lower() == "true"
            entries: list[dict[str, object]] = []
            folders: set[str] = set()
            for f in files.values():
                if not f.path.startswith(prefix):
                    continue
                rest = f.path[len(prefix) :]
                if "/" in rest and not recursive:
                    folders.add(prefix + rest.split("/", 1)[0])
                    continue
                if recursive:
                    parts = rest.split("/")[:-1]
                    folders.update(prefix + "/".join(parts[: i + 1]) for i in range(len(parts)))
                entry: dict[str, object] = {"type": "file", "oid": f.oid, "size": len(f.data), "path": f.path}
                if f.lfs:
                    entry["lfs"] = {"oid": f.sha256, "size": len(f.data), "pointerSize": len(f.pointer)}
                entries.append(entry)
            entries += [{"type": "directory", "oid": hashlib.sha1(d.encode()).hexdigest(), "size": 0, "path": d} for d in sorted(folders)]
            return self._json(sorted(entries, key=lambda e: str(e["path"])))
        blobs = query.get("blobs", ["false"])[0].lower() == "true"
        siblings = []
        for f in files.values():
            sibling: dict[str, object] = {"rfilename": f.path}
            if blobs:
                sibling.update({"size": len(f.data), "blobId": f.oid})
                if f.lfs:
                    sibling["lfs"] = {"sha256": f.sha256, "size": len(f.data), "pointerSize": len(f.pointer)}
            siblings.append(sibling)
        info = {
            "_id": hashlib.sha1(repo_id.encode()).hexdigest()[:24],
            "id": repo_id,
            "author": repo_id.split("/")[0],
            "sha": sha,
            "private": False,
            "gated": "manual" if repo.gated else False,
            "disabled": False,
            "downloads": 0,
            "likes": 0,
            "tags": [],
            "createdAt": "2026-01-01T00:00:00.000Z",
            "lastModified": "2026-01-01T00:00:00.000Z",
            "siblings": siblings,
        }
        return self._json(info)

    def _resolve(self, repo_type: str, repo_id: str, revision: str, filename: str, head: bool) -> int:
        repo = self._repo(repo_type, repo_id)
        if repo is None:
            return self._not_found(repo_type, repo_id)
        if repo.gated:
            auth = self.headers.get("Authorization") or ""
            token = auth[len("Bearer ") :] if auth.startswith("Bearer ") else None
            if token is None:
                return self._error(401, "GatedRepo", f"Access to {repo_type} {repo_id} is restricted. You must have access to it and be authenticated to access it. Please log in.")
            if token not in repo.granted_tokens:
                return self._error(
                    403, "GatedRepo", f"Access to {repo_type} {repo_id} is restricted and you are not in the authorized list. Visit {self.server.hub.endpoint}/{repo_id} to ask for access."
                )
        sha = repo.resolve(revision)
        if sha is None:
            return self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
        f = repo.commits[sha].get(filename)
        if f is None:
            return self._error(404, "EntryNotFound", f'{filename} does not exist on "{revision}"', {"X-Repo-Commit": sha})
        common = {"X-Repo-Commit": sha, "Accept-Ranges": "bytes"}
        if f.lfs:
            location = f"{self.server.hub.cdn}/blobs/{f.sha256}?name={quote(f.path.rsplit('/', 1)[-1])}"
            self.send_response(302)
            for name, value in {**common, "Location": location, "X-Linked-Size": str(len(f.data)), "X-Linked-Etag": f'"{f.sha256}"', "ETag": f'"{f.oid}"'}.items():
                self.send_header(name, value)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return 302
        return self._body(f.data, f'"{f.etag}"', common, head, f.path)

    def _cdn_blob(self, path: str, head: bool) -> int:
        m = re.fullmatch(r"/blobs/([0-9a-f]{64})", path)
        blob = self.server.hub._blob(m[1]) if m else None
        if blob is None:
            return self._error(404, None, "no such blob")
        return self._body(blob.data, f'"{blob.sha256}"', {"Accept-Ranges": "bytes"}, head, blob.path)

    def _body(self, data: bytes, etag: str, headers: Mapping[str, str], head: bool, repo_path: str) -> int:
        start, end, status = 0, len(data), 200
        wanted = self.headers.get("Range")
        if wanted:
            m = re.fullmatch(r"bytes=(\d+)-(\d*)", wanted.strip())
            if not m or int(m[1]) >= len(data) and len(data) > 0:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return 416
            start = int(m[1])
            end = min(len(data), int(m[2]) + 1) if m[2] else len(data)
            status = 206
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("ETag", etag)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(end - start))
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{len(data)}")
        self.end_headers()
        if head:
            return status
        cut = self.server.hub._take_cut(repo_path)
        hold = self.server.hub._take_hold(repo_path)
        limit = end if cut is None else min(end, start + cut)
        position = start
        began = time.monotonic()
        while position < limit:
            if hold is not None and position - start >= hold[0]:
                self.wfile.flush()
                hold[1].wait(120)
                hold = None
            chunk = data[position : min(limit, position + _CHUNK)]
            self.wfile.write(chunk)
            position += len(chunk)
            rate = self.server.hub.rate
            if rate:
                ahead = (position - start) / rate - (time.monotonic() - began)
                if ahead > 0:
                    time.sleep(ahead)
        if cut is not None and limit < end:
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(2)  # the rest of the body never comes
        return status


# ---------------------------------------------------------------------------------------------
# Interpreters with a given huggingface_hub

CLIENTS_DIR = Path("/var/tmp/fleet-test-hub-clients")  # shared with the test hosts (not a private /tmp)


def hub_client_python(version: str | None, directory: Path = CLIENTS_DIR) -> str:
    """An interpreter (a small wrapper of this one) whose huggingface_hub is `version`, installed
    once with pip into `directory/<version>` (its dependencies too: 1.x needs httpx, 2.x httpx2);
    None: this interpreter, with whatever huggingface_hub it has. Raises RuntimeError where pip
    cannot install it (no package index reachable). The wrapper and the packages live outside
    /tmp, so a test host (which has a /tmp of its own) runs the same files."""
    import fcntl
    import shutil
    import subprocess
    import sys

    if version is None:
        return sys.executable
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / version
    wrapper = directory / f"python-hub-{version}"
    with open(directory / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # pytest workers install once between them
        if not (target / "huggingface_hub").is_dir():
            partial = directory / f".{version}.partial"
            shutil.rmtree(partial, ignore_errors=True)
            done = subprocess.run(
                [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-warn-conflicts", "--target", str(partial), f"huggingface_hub=={version}"],
                capture_output=True, text=True, timeout=600,
            )  # fmt: skip
            if done.returncode != 0:
                shutil.rmtree(partial, ignore_errors=True)
                raise RuntimeError(f"pip could not install huggingface_hub=={version}: {done.stderr.strip()[-600:]}")
            shutil.rmtree(target, ignore_errors=True)
            partial.rename(target)
        if not wrapper.exists():
            tmp = wrapper.with_suffix(".tmp")
            tmp.write_text(f'#!/bin/sh\nPYTHONPATH={target}${{PYTHONPATH:+:$PYTHONPATH}} exec {sys.executable} "$@"\n')
            tmp.chmod(0o755)
            tmp.rename(wrapper)
    return str(wrapper)

"""An in-memory `Transport` for tests: scripted commands, a file system, faults and a call log.

In the manner of pyinfra's `FakeConnector` and httpx's `MockTransport`: nothing runs, every call
is recorded (`calls`), and what a command prints is whatever the test scripted for it.

- Commands: `script(command, reply)` answers one exact command (an argv matches its argv, a
  str matches the shell text); `on(predicate, handler)` answers every call the predicate
  accepts, with a reply or a handler `(transport, call) -> Reply | str | int | None` (None:
  not mine, ask the next rule). Later rules are asked first, so a test can override an earlier
  answer (say, what the agent says after a reboot). A few argv commands act on the in-memory
  file system without a script (`cat`, `mkdir -p`, `rm -f`, `test -e/-f/-d`): enough for boot
  ids, markers and directories. Shell text is never interpreted. Anything else raises
  `UnscriptedCommand` -- an AssertionError, so the code under test cannot mistake it for a
  host failure and hide it in a report.
- Files: `put`, `put_bytes`, `get` and rsync both ways work on `files` (path -> bytes); rsync
  copies between it and real local directories, with rsync's trailing-slash rule, `--delete`
  and `--exclude` patterns. Relative remote paths are relative to `home`, as over SSH.
- Faults: `drop_link(n)` makes the next n calls raise a transient `ConnectionLost` (nothing
  runs), `time_out(n)` a `CommandTimeout`, and `reboot()` draws a new boot id at `BOOT_ID_PATH`,
  empties the volatile directories (`/dev/shm` by default, like a tmpfs) and runs the
  `on_reboot` hooks (a fake agent dies there).

The env of a call is recorded in its `Call` only, never in a `CommandResult`; that lets a test check
that a secret travelled in an environment and nowhere else (`secret_leaks`).
"""

from __future__ import annotations

import fnmatch
import posixpath
import shlex
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal, Union

from fleet.errors import CommandFailed, CommandTimeout, ConnectionLost
from fleet.host.atomic import atomic_file
from fleet.transport.base import BOOT_ID_PATH, CommandResult, command_text

CallKind = Literal["run", "put", "put_bytes", "get", "rsync_pull", "rsync_push"]


class UnscriptedCommand(AssertionError):
    """A command the test did not script: the message names it, so the test can add it."""


@dataclass(frozen=True)
class Call:
    """One call on the transport, as the code under test made it."""

    kind: CallKind
    command: str  # the shell text of a run; `<kind> <path>` for the file and rsync calls
    argv: tuple[str, ...] | None = None  # a run given as an argv
    env: Mapping[str, str] = field(default_factory=dict)
    stdin: bytes | None = None
    path: str | None = None  # the remote path of a file or rsync call
    data: bytes | None = None  # what a put wrote
    timeout: float = 0.0
    shared_login: bool = False  # made inside the transport's `shared_login()` block

    def words(self) -> list[str]:
        """The argv, or the shell text split like a shell would (best effort, for predicates)."""
        if self.argv is not None:
            return list(self.argv)
        try:
            return shlex.split(self.command)
        except ValueError:
            return self.command.split()


@dataclass(frozen=True)
class Reply:
    stdout: str = ""
    stderr: str = ""
    exit_code: int = 0


HandlerResult = Union[Reply, str, int, None]
Handler = Callable[["FakeTransport", Call], HandlerResult]


@dataclass
class _Rule:
    matches: Callable[[Call], bool]
    handler: Handler
    times: int | None  # uses left; None: unlimited
    name: str


@dataclass(frozen=True)
class Fault:
    kind: Literal["drop", "timeout"]
    when: Callable[[Call], bool] | None = None


class FakeTransport:
    """One fake host. Safe to inspect from a test's thread while a driver thread calls it."""

    def __init__(
        self,
        host: str = "fake",
        *,
        home: str = "/root",
        boot_id: str | None = None,
        volatile_dirs: Sequence[str] = ("/dev/shm",),
        builtins: bool = True,
    ) -> None:
        self.host = host
        self.home = home
        self.volatile_dirs = tuple(volatile_dirs)
        self.builtins = builtins
        self.files: dict[str, bytes] = {}
        self.modes: dict[str, int] = {}
        self.dirs: set[str] = {"/"}
        self.calls: list[Call] = []
        self.reboots = 0
        self.closed = 0
        self.on_reboot: list[Callable[[FakeTransport], None]] = []
        self._rules: list[_Rule] = []
        self._faults: list[Fault] = []
        self._lock = threading.RLock()
        self._shared_logins = 0  # `shared_login()` blocks open now
        self.write(BOOT_ID_PATH, (boot_id or str(uuid.uuid4())) + "\n")

    # ----------------------------------------------------------------------------- scripting

    def script(self, command: str | Sequence[str], reply: Reply | str | int | Handler = "", *, times: int | None = None) -> None:
        """Answer exactly `command` (an argv, or shell text) with `reply` (or a handler's)."""
        if isinstance(command, str):
            text = command

            def matches(call: Call) -> bool:
                return call.kind == "run" and call.command == text

            name = text
        else:
            argv = tuple(command)

            def matches(call: Call) -> bool:
                return call.kind == "run" and call.argv == argv

            name = shlex.join(argv)
        self.on(matches, reply, times=times, name=name)

    def on(
        self,
        predicate: Callable[[Call], bool],
        reply: Reply | str | int | Handler,
        *,
        times: int | None = None,
        name: str = "",
    ) -> None:
        """Answer the `run` calls `predicate` accepts; `reply` may be a handler. Later rules win."""
        if callable(reply):
            handler: Handler = reply
        else:
            fixed: HandlerResult = reply

            def handler(_transport: FakeTransport, _call: Call) -> HandlerResult:
                return fixed

        with self._lock:
            self._rules.insert(0, _Rule(predicate, handler, times, name or getattr(predicate, "__name__", "rule")))

    def drop_link(self, calls: int = 1, when: Callable[[Call], bool] | None = None) -> None:
        """The next `calls` calls (that `when` accepts) fail with a transient ConnectionLost; nothing runs."""
        with self._lock:
            self._faults += [Fault("drop", when)] * calls

    def time_out(self, calls: int = 1, when: Callable[[Call], bool] | None = None) -> None:
        """The next `calls` calls (that `when` accepts) raise CommandTimeout; nothing runs."""
        with self._lock:
            self._faults += [Fault("timeout", when)] * calls

    def reboot(self, boot_id: str | None = None) -> str:
        """A power cycle: a new boot id, the volatile directories emptied, the reboot hooks run."""
        with self._lock:
            new = boot_id or str(uuid.uuid4())
            for directory in self.volatile_dirs:
                self._remove_tree(directory, keep_root=True)
            self.write(BOOT_ID_PATH, new + "\n")
            self.reboots += 1
            hooks = list(self.on_reboot)
        for hook in hooks:
            hook(self)
        return new

    @property
    def boot_id(self) -> str:
        return self.read_text(BOOT_ID_PATH).strip()

    # ----------------------------------------------------------------------- file system (test side)

    def abspath(self, remote: str) -> str:
        path = remote if remote.startswith("/") else posixpath.join(self.home, remote[2:] if remote.startswith("~/") else remote)
        return posixpath.normpath(path)

    def write(self, remote: str, data: bytes | str, mode: int = 0o644) -> None:
        path = self.abspath(remote)
        with self._lock:
            self.files[path] = data.encode() if isinstance(data, str) else data
            self.modes[path] = mode
            self._add_parents(path)

    def read_text(self, remote: str) -> str:
        return self.read(remote).decode()

    def read(self, remote: str) -> bytes:
        with self._lock:
            return self.files[self.abspath(remote)]

    def is_file(self, remote: str) -> bool:
        with self._lock:
            return self.abspath(remote) in self.files

    def exists(self, remote: str) -> bool:
        path = self.abspath(remote)
        with self._lock:
            return path in self.files or path in self.dirs

    def listdir(self, remote: str) -> list[str]:
        """Names directly under a directory (files and directories), sorted."""
        base = self.abspath(remote).rstrip("/") + "/"
        with self._lock:
            names = {p[len(base) :].split("/")[0] for p in [*self.files, *self.dirs] if p.startswith(base) and p != base}
        return sorted(names)

    def tree(self, remote: str) -> dict[str, bytes]:
        """Every file under a directory, by path relative to it."""
        base = self.abspath(remote).rstrip("/") + "/"
        with self._lock:
            return {p[len(base) :]: data for p, data in self.files.items() if p.startswith(base)}

    def remove(self, remote: str) -> None:
        with self._lock:
            self._remove_tree(self.abspath(remote), keep_root=False)

    # ------------------------------------------------------------------------ what tests assert on

    def runs(self) -> list[Call]:
        return [c for c in self.calls if c.kind == "run"]

    def secret_leaks(self, secret: str) -> list[str]:
        """Where `secret` appears other than in a call's env: argv/shell text, stdin, file content, paths."""
        leaks = []
        with self._lock:
            calls = list(self.calls)
            files = dict(self.files)
        for number, call in enumerate(calls):
            places = {"command": call.command, "path": call.path or ""}
            places["stdin"] = (call.stdin or b"").decode(errors="replace")
            places["data"] = (call.data or b"").decode(errors="replace")
            leaks += [f"call {number} ({call.kind}) {where}" for where, text in places.items() if secret in text]
        leaks += [f"host file {path}" for path, data in files.items() if secret.encode() in data or secret in path]
        return leaks

    # ----------------------------------------------------------------------------- Transport API

    def run(
        self,
        command: str | Sequence[str],
        *,
        timeout: float,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
        check: bool = False,
    ) -> CommandResult:
        text = command_text(command)
        argv = None if isinstance(command, str) else tuple(command)
        call = Call("run", text, argv, dict(env or {}), stdin, timeout=timeout)
        self._enter(call)
        reply = self._answer(call)
        result = CommandResult(self.host, text, reply.exit_code, reply.stdout, reply.stderr, 0.0)
        return result.check() if check else result

    def query(self, command: str | Sequence[str], *, timeout: float) -> CommandResult:
        """Answered as `run` answers the same command (scripted the same way), with no stderr."""
        return replace(self.run(command, timeout=timeout), stderr="")

    def put(self, local: Path, remote: str, *, mode: int | None = None, timeout: float) -> None:
        data = local.read_bytes()
        file_mode = local.stat().st_mode & 0o7777 if mode is None else mode
        self._enter(Call("put", f"put {remote}", path=remote, data=data, timeout=timeout))
        self.write(remote, data, file_mode)

    def put_bytes(self, data: bytes, remote: str, *, mode: int | None = None, timeout: float) -> None:
        self._enter(Call("put_bytes", f"put {remote}", path=remote, data=bytes(data), timeout=timeout))
        self.write(remote, bytes(data), 0o644 if mode is None else mode)

    def get(self, remote: str, local: Path, *, timeout: float) -> None:
        self._enter(Call("get", f"get {remote}", path=remote, timeout=timeout))
        path = self.abspath(remote)
        with self._lock:
            data = self.files.get(path)
        if data is None:
            raise CommandFailed(self.host, f"get {remote}", 1, "", f"cat: {remote}: No such file or directory")
        with atomic_file(local) as handle:
            handle.write(data)

    def rsync_pull(
        self,
        remote: str,
        local: Path,
        *,
        timeout: float,
        delete: bool = False,
        excludes: Sequence[str] = (),
        ignore_existing: bool = False,
        list_written: bool = False,
    ) -> CommandResult:
        command = f"rsync {remote} {local}"
        self._enter(Call("rsync_pull", command, path=remote, timeout=timeout))
        source = self.abspath(remote)
        with self._lock:
            if source in self.files and not remote.endswith("/"):
                if local.is_dir():  # rsync file dir/ puts the file into the directory
                    local = local / posixpath.basename(source)
                local.parent.mkdir(parents=True, exist_ok=True)
                local.write_bytes(self.files[source])
                return CommandResult(self.host, command, 0, f"{posixpath.basename(source)}\n" if list_written else "", "", 0.0)
            if source not in self.dirs:
                return CommandResult(self.host, command, 23, "", f"rsync: change_dir {remote} failed: No such file or directory", 0.0)
            tree = self.tree(source)
        # `dir/` copies the directory's contents; `dir` copies the directory itself into `local`.
        wanted = tree if remote.endswith("/") else {f"{posixpath.basename(source)}/{p}": d for p, d in tree.items()}
        wanted = {p: d for p, d in wanted.items() if not _excluded(p, excludes)}
        target = local
        target.mkdir(parents=True, exist_ok=True)
        written = []
        for relative, data in wanted.items():
            path = target / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            if not path.exists() or (not ignore_existing and path.read_bytes() != data):
                path.write_bytes(data)
                written.append(relative)
        if delete:
            for path in sorted(target.rglob("*"), reverse=True):
                relative = str(path.relative_to(target))
                if path.is_file() and relative not in wanted and not _excluded(relative, excludes):
                    path.unlink()
        return CommandResult(self.host, command, 0, "".join(f"{relative}\n" for relative in written) if list_written else "", "", 0.0)

    def rsync_push(self, local: Path, remote: str, *, timeout: float, delete: bool = False) -> CommandResult:
        command = f"rsync {local} {remote}"
        self._enter(Call("rsync_push", command, path=remote, timeout=timeout))
        dest = self.abspath(remote)
        if local.is_dir():
            wanted = {str(p.relative_to(local)): p for p in local.rglob("*") if p.is_file()}
            with self._lock:
                if delete:
                    for relative in list(self.tree(dest)):
                        if relative not in wanted:
                            del self.files[posixpath.join(dest, relative)]
                self.dirs.add(dest)
                self._add_parents(dest)
            for relative, path in wanted.items():
                self.write(posixpath.join(dest, relative), path.read_bytes(), path.stat().st_mode & 0o7777)
        else:
            target = posixpath.join(dest, local.name) if remote.endswith("/") else dest
            self.write(target, local.read_bytes(), local.stat().st_mode & 0o7777)
        return CommandResult(self.host, command, 0, "", "", 0.0)

    @contextmanager
    def shared_login(self) -> Iterator[None]:
        """Calls made inside say so (`Call.shared_login`)."""
        with self._lock:
            self._shared_logins += 1
        try:
            yield
        finally:
            with self._lock:
                self._shared_logins -= 1

    def close(self) -> None:
        self.closed += 1

    # ----------------------------------------------------------------------------- internals

    def _enter(self, call: Call) -> None:
        """Log the call, then raise the first pending fault it meets (a dropped call never ran)."""
        with self._lock:
            call = replace(call, shared_login=self._shared_logins > 0)
            self.calls.append(call)
            for index, fault in enumerate(self._faults):
                if fault.when is None or fault.when(call):
                    del self._faults[index]
                    break
            else:
                return
        if fault.kind == "drop":
            raise ConnectionLost(self.host, f"{call.command}: the fake link is down")
        raise CommandTimeout(self.host, f"`{call.command}` did not finish within {call.timeout:g}s (fake timeout)")

    def _answer(self, call: Call) -> Reply:
        with self._lock:
            rules = list(self._rules)
        for rule in rules:
            if not rule.matches(call):
                continue
            outcome = rule.handler(self, call)
            if outcome is None:
                continue
            with self._lock:
                if rule.times is not None:
                    rule.times -= 1
                    if rule.times <= 0 and rule in self._rules:
                        self._rules.remove(rule)
            return _as_reply(outcome)
        if self.builtins and call.argv is not None:
            reply = self._builtin(list(call.argv))
            if reply is not None:
                return reply
        raise UnscriptedCommand(f"{self.host}: no scripted reply for {call.command!r} (env {sorted(call.env)})")

    def _builtin(self, argv: list[str]) -> Reply | None:
        name, args = argv[0], argv[1:]
        if name == "cat" and args:
            paths = [a for a in args if a != "--"]
            out, missing = [], []
            with self._lock:
                for p in paths:
                    data = self.files.get(self.abspath(p))
                    (out.append(data.decode(errors="replace")) if data is not None else missing.append(p))
            if missing:
                return Reply("".join(out), "".join(f"cat: {p}: No such file or directory\n" for p in missing), 1)
            return Reply("".join(out))
        if name == "mkdir" and args[:1] == ["-p"]:
            with self._lock:
                for p in args[1:]:
                    path = self.abspath(p)
                    self.dirs.add(path)
                    self._add_parents(path)
            return Reply()
        if name == "rm" and args[:1] in (["-f"], ["-rf"]):
            for p in args[1:]:
                self.remove(p)
            return Reply()
        if name == "test" and len(args) == 2 and args[0] in ("-e", "-f", "-d"):
            path = self.abspath(args[1])
            with self._lock:
                found = {"-e": path in self.files or path in self.dirs, "-f": path in self.files, "-d": path in self.dirs}[args[0]]
            return Reply(exit_code=0 if found else 1)
        return None

    def _add_parents(self, path: str) -> None:
        parent = posixpath.dirname(path)
        while parent not in self.dirs:
            self.dirs.add(parent)
            parent = posixpath.dirname(parent)

    def _remove_tree(self, path: str, *, keep_root: bool) -> None:
        prefix = path.rstrip("/") + "/"
        for p in [p for p in self.files if p.startswith(prefix) or p == path]:
            del self.files[p]
            self.modes.pop(p, None)
        self.dirs -= {d for d in self.dirs if d.startswith(prefix)}
        if not keep_root:
            self.dirs.discard(path)


def _as_reply(outcome: HandlerResult) -> Reply:
    if isinstance(outcome, Reply):
        return outcome
    if isinstance(outcome, str):
        return Reply(outcome)
    if isinstance(outcome, int):
        return Reply(exit_code=outcome)
    raise TypeError(f"a fake handler returned {outcome!r}; expected a Reply, a str (stdout) or an int (exit code)")


def _excluded(relative: str, patterns: Sequence[str]) -> bool:
    """rsync's --exclude, for the patterns fleet uses: `name/` (a directory anywhere), a glob
    without a slash (any path component), a glob with one (the path, anchored with a leading /), `/name/`
    (a directory at the top)."""
    parts = relative.split("/")
    for pattern in patterns:
        if pattern.startswith("/") and pattern.endswith("/"):  # a directory at the top
            if fnmatch.fnmatchcase(parts[0], pattern.strip("/")) and len(parts) > 1:
                return True
        elif pattern.endswith("/"):
            if any(fnmatch.fnmatchcase(part, pattern[:-1]) for part in parts[:-1]):
                return True
        elif "/" not in pattern:
            if any(fnmatch.fnmatchcase(part, pattern) for part in parts):
                return True
        elif fnmatch.fnmatchcase(relative, pattern.lstrip("/")):
            return True
    return False

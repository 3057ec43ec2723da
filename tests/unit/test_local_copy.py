"""The `local` transport copies in Python, with rsync's semantics, and needs no rsync (issue 25).

Each case runs the local transport's rsync_pull/rsync_push with no `rsync` on PATH; where the
machine has rsync, the same case through rsync itself (fleet.transport.rsync) must leave the same
tree, so the two cannot drift apart.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from fleet.transport.local import LocalTransport
from fleet.transport.rsync import push_source, rsync_transfer


def tree(root: Path) -> dict[str, object]:
    """Every entry below `root`: a file's bytes and mode, a link's target, a folder."""
    found: dict[str, object] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            found[rel] = ("link", os.readlink(path))
        elif path.is_dir():
            found[rel] = "dir"
        else:
            found[rel] = (path.read_bytes(), stat.S_IMODE(path.stat().st_mode))
    return found


def make_source(root: Path) -> Path:
    src = root / "src"
    (src / "runs").mkdir(parents=True)
    (src / "logs" / "deep").mkdir(parents=True)
    (src / "attempts").mkdir()
    (src / "runs" / "a.json").write_text("a")
    (src / "runs" / "b.json").write_text("b")
    (src / "logs" / "server.log").write_text("log")
    (src / "logs" / "deep" / "x.lock").write_text("lock")
    (src / "logs" / "run.sh").write_text("#!/bin/sh\n")
    os.chmod(src / "logs" / "run.sh", 0o755)
    (src / "attempts" / "1").write_text("attempt")
    (src / "shard.json").write_text("{}")
    (src / ".state.json.abc.tmp").write_text("half")
    (src / "STOP").write_text("")
    (src / "link").symlink_to("/etc/passwd")
    os.mkfifo(src / "fifo")
    return src


@pytest.fixture
def no_rsync(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> LocalTransport:
    """A local transport on a PATH without rsync, home at tmp_path."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("sh", "bash", "cat"):
        if found := shutil.which(tool):
            (bin_dir / tool).symlink_to(found)
    monkeypatch.setenv("PATH", str(bin_dir))
    assert shutil.which("rsync") is None
    transport = LocalTransport("local")
    transport._home = tmp_path  # noqa: SLF001 - relative paths below the test's folder
    return transport


EXCLUDES = ["attempts/", "*.lock", "STOP", ".*.tmp", "/shard.json"]


def test_pull_copies_regular_files_only_with_excludes_and_no_rsync(no_rsync: LocalTransport, tmp_path: Path) -> None:
    src = make_source(tmp_path)
    dest = tmp_path / "out" / "deeper"
    result = no_rsync.rsync_pull(f"{src}/", dest, timeout=30, excludes=EXCLUDES)
    assert result.ok, result.stderr
    got = tree(dest)
    assert set(got) == {"runs", "runs/a.json", "runs/b.json", "logs", "logs/deep", "logs/server.log", "logs/run.sh"}
    assert got["logs/run.sh"] == (b"#!/bin/sh\n", 0o755)
    assert (dest / "runs" / "a.json").stat().st_mtime == (src / "runs" / "a.json").stat().st_mtime


def test_pull_ignore_existing_keeps_a_file_and_delete_keeps_excluded(no_rsync: LocalTransport, tmp_path: Path) -> None:
    src = make_source(tmp_path)
    dest = tmp_path / "out"
    (dest / "runs").mkdir(parents=True)
    (dest / "runs" / "a.json").write_text("kept")
    (dest / "stale.txt").write_text("gone")
    (dest / "STOP").write_text("excluded, so kept")
    assert no_rsync.rsync_pull(f"{src}/", dest, timeout=30, excludes=EXCLUDES, ignore_existing=True, delete=True).ok
    assert (dest / "runs" / "a.json").read_text() == "kept"
    assert not (dest / "stale.txt").exists()
    assert (dest / "STOP").exists()
    # Without ignore_existing a changed file is replaced.
    assert no_rsync.rsync_pull(f"{src}/", dest, timeout=30, excludes=EXCLUDES).ok
    assert (dest / "runs" / "a.json").read_text() == "a"


def test_pull_of_a_missing_folder_is_rsyncs_exit_23(no_rsync: LocalTransport, tmp_path: Path) -> None:
    result = no_rsync.rsync_pull(f"{tmp_path}/nothing/", tmp_path / "out", timeout=30)
    assert result.exit_code == 23 and "nothing" in result.stderr


def test_push_mirrors_a_folder_and_a_file(no_rsync: LocalTransport, tmp_path: Path) -> None:
    src = tmp_path / "bundle"
    (src / "sub").mkdir(parents=True)
    (src / "agent.py").write_text("print()")
    (src / "sub" / "x").write_text("x")
    (tmp_path / "remote" / "agent").mkdir(parents=True)
    (tmp_path / "remote" / "agent" / "old.py").write_text("old")
    assert no_rsync.rsync_push(src, "remote/agent/", timeout=30, delete=True).ok
    assert set(tree(tmp_path / "remote" / "agent")) == {"agent.py", "sub", "sub/x"}
    single = tmp_path / "one.txt"
    single.write_text("1")
    assert no_rsync.rsync_push(single, "remote/into/", timeout=30).ok
    assert (tmp_path / "remote" / "into" / "one.txt").read_text() == "1"
    assert no_rsync.rsync_push(single, "remote/named.txt", timeout=30).ok
    assert (tmp_path / "remote" / "named.txt").read_text() == "1"


def test_each_file_lands_by_rename(no_rsync: LocalTransport, tmp_path: Path) -> None:
    """A reader holding the old file keeps the old inode: the new one was renamed over it."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "f").write_text("new contents")
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "f").write_text("old")
    with (dest / "f").open() as held:
        assert no_rsync.rsync_pull(f"{src}/", dest, timeout=30).ok
        assert held.read() == "old"
    assert (dest / "f").read_text() == "new contents"
    assert not [p for p in dest.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.skipif(shutil.which("rsync") is None, reason="no rsync here to compare with")
@pytest.mark.parametrize("trailing", [True, False])
@pytest.mark.parametrize("delete", [True, False])
def test_same_tree_as_rsync(tmp_path: Path, trailing: bool, delete: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    src = make_source(tmp_path)
    excludes = [*EXCLUDES, "/runs/b.json", "logs/deep/"]
    trees, written = [], []
    for how in ("rsync", "python"):
        dest = tmp_path / how
        (dest / "leftover").mkdir(parents=True)
        (dest / "leftover" / "f").write_text("?")
        (dest / "STOP").write_text("kept")
        source = f"{src}/" if trailing else str(src)
        if how == "rsync":
            done = rsync_transfer("local", source, dest, ssh=None, timeout=30, delete=delete, excludes=excludes, regular_only=True, list_written=True)
        else:
            done = LocalTransport("local").rsync_pull(source, dest, timeout=30, delete=delete, excludes=excludes, list_written=True)
            assert done.ok
        trees.append(tree(dest))
        # The files it names as written (rsync also names the folders it touched, with a `/`, and
        # says what it skipped and deleted: `skipping non-regular file "src/fifo"`, `deleting x`).
        written.append(sorted(line for line in done.stdout.splitlines() if not line.endswith(("/", '"')) and not line.startswith("deleting ")))
    assert trees[0] == trees[1]
    assert written[0] == written[1] and any(path.endswith("a.json") for path in written[0]), written
    # and a push (links kept as links, no FIFO)
    pushed = []
    for how in ("rsync", "python"):
        dest = tmp_path / f"push-{how}"
        if how == "rsync":
            rsync_transfer("local", push_source(src), dest, ssh=None, timeout=30, delete=delete)
        else:
            assert LocalTransport("local").rsync_push(src, str(dest), timeout=30, delete=delete).ok
        pushed.append(tree(dest))
    assert pushed[0] == pushed[1]

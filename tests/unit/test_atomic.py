"""The one atomic writer: a reader sees the old file or the new one, and a failed write leaves
neither a torn file nor a temp file behind."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from fleet.host.atomic import atomic_file, write_json_atomic


def test_write_json_atomic_replaces_whole_files(tmp_path: Path) -> None:
    target = tmp_path / "runs" / "r1.json"
    write_json_atomic(target, {"status": "partial"})
    write_json_atomic(target, {"status": "ok"})
    assert json.loads(target.read_text()) == {"status": "ok"}
    assert os.listdir(target.parent) == ["r1.json"]
    with pytest.raises(TypeError):
        write_json_atomic(target, {"status": object()})
    assert json.loads(target.read_text()) == {"status": "ok"} and os.listdir(target.parent) == ["r1.json"]


def test_atomic_file_keeps_the_old_content_when_the_writer_fails(tmp_path: Path) -> None:
    target = tmp_path / "LATEST"
    target.write_text("old\n")
    with pytest.raises(RuntimeError):
        with atomic_file(target, 0o600) as handle:
            handle.write(b"half")
            raise RuntimeError("died mid-write")
    assert target.read_text() == "old\n" and os.listdir(tmp_path) == ["LATEST"]
    with atomic_file(target, 0o600) as handle:
        handle.write(b"new\n")
    assert target.read_text() == "new\n" and (target.stat().st_mode & 0o777) == 0o600

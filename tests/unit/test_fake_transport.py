"""The in-memory transport itself: scripted replies, files, rsync both ways, faults, the call log."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.errors import CommandFailed, CommandTimeout, ConnectionLost, FleetError
from fleet.retry import CONNECT, retrying
from fleet.transport.base import BOOT_ID_PATH
from fleet.transport.fake import Call, FakeTransport, Reply, UnscriptedCommand
from fleet.transport.reboot import read_boot_id, wait_for_reboot


def test_exact_argv_and_shell_text_are_scripted_and_later_rules_win() -> None:
    t = FakeTransport("h")
    t.script(["nvidia-smi", "-L"], "GPU 0: fake\n")
    t.script("echo $HOME", Reply("/root\n"))
    assert t.run(["nvidia-smi", "-L"], timeout=5).stdout == "GPU 0: fake\n"
    assert t.run("echo $HOME", timeout=5).stdout == "/root\n"
    t.script(["nvidia-smi", "-L"], 9)
    assert t.run(["nvidia-smi", "-L"], timeout=5).exit_code == 9  # the later rule answers
    with pytest.raises(CommandFailed):
        t.run(["nvidia-smi", "-L"], timeout=5, check=True)


def test_a_rule_used_up_falls_back_to_the_earlier_one() -> None:
    t = FakeTransport()
    t.script(["date"], "first\n")
    t.script(["date"], "once\n", times=1)
    assert [t.run(["date"], timeout=1).stdout for _ in range(3)] == ["once\n", "first\n", "first\n"]


def test_a_handler_sees_the_call_and_none_passes_to_the_next_rule() -> None:
    t = FakeTransport()
    t.on(lambda c: c.words()[0] == "greet", lambda _t, c: f"hello {c.words()[1]}\n")
    t.on(lambda c: c.words()[0] == "greet", lambda _t, c: None if c.words()[1] != "bob" else "hi bob\n")
    assert t.run(["greet", "ann"], timeout=1).stdout == "hello ann\n"
    assert t.run("greet bob", timeout=1).stdout == "hi bob\n"


def test_an_unscripted_command_fails_the_test_loudly_naming_it() -> None:
    t = FakeTransport("h")
    with pytest.raises(UnscriptedCommand, match="systemctl daemon-reload"):
        t.run(["systemctl", "daemon-reload"], timeout=5)
    with pytest.raises(UnscriptedCommand):
        t.run("cat /etc/hostname", timeout=5)  # shell text is never interpreted, even a plain cat
    # Not a FleetError: code under test that reports host failures cannot swallow it.
    assert issubclass(UnscriptedCommand, AssertionError) and not issubclass(UnscriptedCommand, FleetError)


def test_builtin_argv_commands_act_on_the_in_memory_files() -> None:
    t = FakeTransport()
    t.write("/srv/m/config.json", "{}")
    assert t.run(["cat", "/srv/m/config.json"], timeout=1).stdout == "{}"
    missing = t.run(["cat", "/nope"], timeout=1)
    assert missing.exit_code == 1 and "No such file" in missing.stderr
    assert t.run(["test", "-f", "/srv/m/config.json"], timeout=1).ok
    assert t.run(["test", "-d", "/srv/m"], timeout=1).ok
    assert not t.run(["test", "-d", "/srv/m/config.json"], timeout=1).ok
    t.run(["mkdir", "-p", "/var/lib/fleet/sweeps/s/runs"], timeout=1, check=True)
    assert t.exists("/var/lib/fleet/sweeps") and t.listdir("/var/lib/fleet/sweeps") == ["s"]
    t.run(["rm", "-f", "/srv/m/config.json"], timeout=1, check=True)
    assert not t.exists("/srv/m/config.json")


def test_put_get_and_relative_paths_under_home(tmp_path: Path) -> None:
    t = FakeTransport(home="/home/u")
    local = tmp_path / "x.bin"
    local.write_bytes(b"\x00\x01")
    local.chmod(0o750)
    t.put(local, "bin/x", timeout=5)
    assert t.read("/home/u/bin/x") == b"\x00\x01" and t.modes["/home/u/bin/x"] == 0o750
    t.put_bytes(b"data", "~/f.txt", timeout=5)
    t.get("/home/u/f.txt", tmp_path / "back" / "f.txt", timeout=5)
    assert (tmp_path / "back" / "f.txt").read_bytes() == b"data"
    with pytest.raises(CommandFailed):
        t.get("/missing", tmp_path / "m", timeout=5)
    assert [c.kind for c in t.calls] == ["put", "put_bytes", "get", "get"]
    assert t.calls[1].data == b"data" and t.calls[1].path == "~/f.txt"


def test_rsync_push_mirrors_a_directory_and_delete_removes_the_rest(tmp_path: Path) -> None:
    t = FakeTransport()
    src = tmp_path / "bundle"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "a.py").write_text("a")
    (src / "b.py").write_text("b")
    t.write("/w/agent/old.py", "stale")
    t.rsync_push(src, "/w/agent/", timeout=5).check()
    assert t.tree("/w/agent") == {"old.py": b"stale", "pkg/a.py": b"a", "b.py": b"b"}
    t.rsync_push(src, "/w/agent/", timeout=5, delete=True).check()
    assert t.tree("/w/agent") == {"pkg/a.py": b"a", "b.py": b"b"}


def test_rsync_pull_copies_contents_with_a_trailing_slash_and_honours_excludes(tmp_path: Path) -> None:
    t = FakeTransport()
    for path in ("runs/r1.json", "logs/s.log", "attempts/r1.json", "services/agent.json", "agent.lock", "STOP", "runs/.r2.json.abc.tmp"):
        t.write(f"/w/sweeps/s/{path}", path)
    excludes = ("attempts/", "services/", "*.lock", "STOP", ".*.tmp")
    t.rsync_pull("/w/sweeps/s/", tmp_path / "s", timeout=5, excludes=excludes).check()
    got = sorted(str(p.relative_to(tmp_path / "s")) for p in (tmp_path / "s").rglob("*") if p.is_file())
    assert got == ["logs/s.log", "runs/r1.json"]
    t.rsync_pull("/w/sweeps/s", tmp_path / "into", timeout=5).check()  # no slash: the directory itself
    assert (tmp_path / "into" / "s" / "runs" / "r1.json").read_text() == "runs/r1.json"
    assert t.rsync_pull("/w/none/", tmp_path / "n", timeout=5).exit_code == 23  # rsync's "some files not transferred"


def test_a_dropped_link_fails_the_next_calls_transiently_and_a_retry_rides_it_out() -> None:
    t = FakeTransport("h")
    t.script(["uptime"], "up\n")
    t.drop_link(2)
    with pytest.raises(ConnectionLost) as caught:
        t.run(["uptime"], timeout=5)
    assert caught.value.transient
    assert retrying(CONNECT, "h", lambda: t.run(["uptime"], timeout=5), idempotent=True, sleep=lambda s: None).stdout == "up\n"
    assert len(t.calls) == 3  # the two dropped calls are in the log too: they were attempted


def test_a_timeout_fault_and_a_fault_aimed_at_one_kind_of_call(tmp_path: Path) -> None:
    t = FakeTransport()
    t.script(["true"], 0)
    t.time_out(1, when=lambda c: c.kind == "rsync_pull")
    assert t.run(["true"], timeout=1).ok  # not aimed at a run
    with pytest.raises(CommandTimeout):
        t.rsync_pull("/x/", tmp_path, timeout=3)
    assert t.rsync_pull("/", tmp_path / "root", timeout=3).ok


def test_a_reboot_draws_a_new_boot_id_empties_tmpfs_keeps_disks_and_runs_hooks() -> None:
    t = FakeTransport(boot_id="11111111-1111-1111-1111-111111111111")
    t.write("/dev/shm/fleet/model/w.bin", b"w")
    t.write("/srv/models/model/w.bin", b"w")
    died = []
    t.on_reboot.append(lambda fake: died.append(fake.boot_id))
    assert read_boot_id(t) == "11111111-1111-1111-1111-111111111111"
    new = t.reboot()
    assert new != "11111111-1111-1111-1111-111111111111" and read_boot_id(t) == new == t.read_text(BOOT_ID_PATH).strip()
    assert t.tree("/dev/shm") == {} and t.exists("/dev/shm") and t.tree("/srv/models") == {"model/w.bin": b"w"}
    assert died == [new] and t.reboots == 1
    assert wait_for_reboot(t, "11111111-1111-1111-1111-111111111111", sleep=lambda s: None) == new


def test_the_call_log_keeps_env_apart_and_secret_leaks_finds_a_token_anywhere_else() -> None:
    t = FakeTransport()
    t.script(["fetch"], "ok\n")
    t.run(["fetch"], timeout=1, env={"HF_TOKEN": "hf_secret"})
    assert t.calls[0] == Call("run", "fetch", ("fetch",), {"HF_TOKEN": "hf_secret"}, None, timeout=1)
    assert "hf_secret" not in repr(t.run(["fetch"], timeout=1, env={"HF_TOKEN": "hf_secret"}))  # CommandResult has no env
    assert t.secret_leaks("hf_secret") == []
    t.on(lambda c: True, "")
    t.run("echo hf_secret", timeout=1)
    t.put_bytes(b"token=hf_secret", "/etc/x", timeout=1)
    t.run(["login"], timeout=1, stdin=b"hf_secret")
    leaks = t.secret_leaks("hf_secret")
    assert leaks == ["call 2 (run) command", "call 3 (put_bytes) data", "call 4 (run) stdin", "host file /etc/x"]

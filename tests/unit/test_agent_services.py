"""Service lifecycle with real processes (ProcessServices), port and GPU holders, and the pure
parsers of nvidia-smi and systemctl output."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fleet.host.procfs import cmdline
from fleet.host.agent.services import (
    SERVICE_ENV_MARKER,
    ProcessServices,
    ServiceSpec,
    clear_stale,
    exit_description,
    group_members,
    kill_group,
    parse_systemctl_show,
    pid_alive,
    port_listeners,
    started_by_fleet,
    systemd_status,
    wait_free,
)
from fleet.host.errors import ServiceError
from fleet.host.engines.sim.gpu import register_process
from fleet.host.engines.sim.harness import free_port
from tests.testfleet.gpu_tools import local_gpu_env

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real-tool-output" / "h200-driver580-cuda13.0"
LISTEN = "import socket,sys,time; s=socket.socket(); s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen(); time.sleep(60)"


def spec(tmp_path: Path, name: str, argv: list[str], **env: str) -> ServiceSpec:
    return ServiceSpec(name, argv, dict(env), str(tmp_path / f"{name}.log"))


def wait(predicate, timeout: float = 5.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def test_start_status_stop_and_the_log(tmp_path: Path) -> None:
    services = ProcessServices(tmp_path / "state")
    started = services.start(spec(tmp_path, "srv", ["sh", "-c", "echo hello $GREETING; sleep 60"], GREETING="world"))
    assert started.running and started.pid is not None
    assert os.getsid(started.pid) == started.pid  # a session of its own: the agent's signals do not reach it
    assert wait(lambda: "hello world" in (tmp_path / "srv.log").read_text())
    with pytest.raises(ServiceError, match="already running"):
        services.start(spec(tmp_path, "srv", ["sleep", "1"]))
    stopped = services.stop("srv", grace_s=5)
    assert stopped.state == "exited" and not pid_alive(started.pid)
    assert services.status("srv").state == "absent"


def test_exit_codes_are_recorded(tmp_path: Path) -> None:
    services = ProcessServices(tmp_path / "state")
    services.start(spec(tmp_path, "three", ["sh", "-c", "exit 3"]))
    services.start(spec(tmp_path, "killed", ["sh", "-c", "kill -9 $$"]))
    # Its wrapper records the exit a moment after the process is gone (the agent waits for it, as here).
    assert wait(lambda: all(services.status(name).state == "exited" and services.status(name).exit_code is not None for name in ("three", "killed")))
    assert services.status("three").exit_code == 3
    # The shell reports 128 + SIGKILL (137); read back as systemd's managers say it: -9.
    assert services.status("killed").exit_code == -9
    assert exit_description(-9) == "was killed by signal 9 (SIGKILL; exit status 137)"
    assert exit_description(3) == "exited with code 3" and exit_description(None) == "exited (its exit code is unknown)"


def test_a_service_killed_with_sigkill_is_dead_at_once_though_its_children_linger(tmp_path: Path) -> None:
    """As SGLang's scheduler processes outlive a SIGKILLed launch_server for a while: the service
    is its own process, not its group, and its exit code is the signal's."""
    services = ProcessServices(tmp_path / "state")
    started = services.start(spec(tmp_path, "srv", ["sh", "-c", "sleep 60 & exec sleep 61"]))
    main_file = tmp_path / "state" / "srv.main"
    assert wait(lambda: main_file.exists() and main_file.read_text().strip() != "")
    main = int(main_file.read_text())
    assert main != started.pid and services.status("srv").running
    # The background `sleep 60` is forked by the service's shell once it runs: on a loaded machine
    # the main process's pid can be written before that, and a kill then would leave nothing behind.
    assert wait(lambda: any(cmdline(pid) == "sleep 60" for pid in group_members(started.pid)))
    group = group_members(started.pid)
    os.kill(main, signal.SIGKILL)
    assert wait(lambda: not services.status("srv").running, timeout=1.0)
    assert wait(lambda: services.status("srv").exit_code == -9)
    lingering = group_members(started.pid)
    assert lingering and lingering < group  # the orphaned `sleep 60` is still there...
    services.stop("srv", grace_s=2)
    assert group_members(started.pid) == set()  # ...until the stop takes the group


def test_a_service_read_while_its_main_process_starts_is_running(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The race a loaded machine hit (a healthy server's start read as a death at 0.03 s): the
    group's listing of /proc is taken, then the main process forks and writes its pid, then the
    pid is read -- a pid missing from the listing. Played back on a real service: its pid file is
    put aside, and the listing writes it back and leaves its pid out, as a listing taken a
    moment before the fork would."""
    from fleet.host.agent import services as module

    services = ProcessServices(tmp_path / "state")
    services.start(spec(tmp_path, "srv", ["sleep", "60"]))
    main_file = tmp_path / "state" / "srv.main"
    assert wait(lambda: main_file.exists() and main_file.read_text().strip() != "")
    main = main_file.read_text()
    real_listing = module.group_members

    def listing_before_the_fork(pgid: int) -> set[int]:
        listed = real_listing(pgid)
        main_file.write_text(main)
        return listed - {int(main)}

    main_file.unlink()
    monkeypatch.setattr(module, "group_members", listing_before_the_fork)
    try:
        assert services.status("srv").running
    finally:
        monkeypatch.undo()
        services.stop("srv", grace_s=5)
    assert not pid_alive(int(main))


def test_a_restarted_agent_finds_its_server_by_the_pid_file(tmp_path: Path) -> None:
    first = ProcessServices(tmp_path / "state")
    pid = first.start(spec(tmp_path, "srv", ["sleep", "60"])).pid
    again = ProcessServices(tmp_path / "state")  # a new agent process: no Popen handle, only the pid file
    assert again.status("srv").running and again.status("srv").pid == pid
    assert pid is not None and pid in group_members(pid)
    again.stop("srv", grace_s=5)
    assert not pid_alive(pid) and again.status("srv").state == "absent"


def test_a_pid_file_from_another_boot_is_ignored(tmp_path: Path) -> None:
    services = ProcessServices(tmp_path / "state")
    record = {"pid": os.getpid(), "start_ticks": 1, "boot_id": "not-this-boot", "argv": ["x"], "log_path": "x", "started_at": 0}
    (tmp_path / "state" / "old.pid").write_text(json.dumps(record))
    assert services.status("old").state == "absent"
    assert not (tmp_path / "state" / "old.pid").exists()


def test_stop_kills_the_whole_group_and_escalates_to_sigkill(tmp_path: Path) -> None:
    services = ProcessServices(tmp_path / "state")
    stubborn = "import signal,time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(60)"
    services.start(spec(tmp_path, "srv", ["sh", "-c", f'sleep 60 & {sys.executable} -c "{stubborn}"']))
    assert wait(lambda: "ready" in (tmp_path / "srv.log").read_text())
    leader = services.status("srv").pid
    assert leader is not None
    members = group_members(leader)
    assert len(members) >= 3  # the wrapper, sh, the background sleep, python
    began = time.monotonic()
    services.stop("srv", grace_s=0.5)
    assert 0.4 < time.monotonic() - began < 5
    assert not [pid for pid in members if pid_alive(pid)]


def test_stale_fleet_servers_on_the_port_are_cleared_strangers_are_not(tmp_path: Path) -> None:
    port = free_port()
    earlier = ProcessServices(tmp_path / "earlier-sweep")
    stale = earlier.start(spec(tmp_path, "stale", [sys.executable, "-c", LISTEN, str(port)])).pid
    assert stale is not None
    assert wait(lambda: bool(port_listeners(port)))
    assert started_by_fleet(next(iter(port_listeners(port))))
    killed, blockers = clear_stale(port, [], grace_s=5)
    assert [h.holds for h in killed] == [f"port {port}"] and blockers == []
    assert wait(lambda: not pid_alive(stale))

    stranger = subprocess.Popen([sys.executable, "-c", LISTEN, str(port)], env={k: v for k, v in os.environ.items() if k != SERVICE_ENV_MARKER})
    try:
        assert wait(lambda: stranger.pid in port_listeners(port))
        killed, blockers = clear_stale(port, [], grace_s=5)
        assert killed == [] and [h.pid for h in blockers] == [stranger.pid] and stranger.poll() is None
        assert [h.pid for h in wait_free(port, [], timeout_s=0.3)] == [stranger.pid]
    finally:
        stranger.kill()
        stranger.wait()
    assert wait_free(port, [], timeout_s=5) == []


def test_a_stale_server_holding_the_port_and_a_gpu_is_killed_once_and_not_called_a_stranger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Listed twice (port and GPU): once the first listing killed it, its environ is unreadable;
    # read as "not fleet's", the GPU listing would fail the new server as busy (seen on a real sweep).
    for key, value in local_gpu_env(tmp_path / "gpu-tools", os.environ).items():
        monkeypatch.setenv(key, value)
    port = free_port()
    earlier = ProcessServices(tmp_path / "earlier-sweep")
    stale = earlier.start(spec(tmp_path, "stale", [sys.executable, "-c", LISTEN, str(port)])).pid
    assert stale is not None
    assert wait(lambda: bool(port_listeners(port)))
    server_pid = next(iter(port_listeners(port)))
    register_process(os.environ["FLEET_FAKE_GPU_DIR"], server_pid, [3], 2048)
    killed, blockers = clear_stale(port, [3], grace_s=5)
    assert [(h.pid, h.holds) for h in killed] == [(server_pid, f"port {port}")] and blockers == []
    assert not pid_alive(server_pid)
    earlier.status("stale")  # reaps the wrapper


def test_systemd_status_from_show_properties() -> None:
    # `systemctl show -p ...` prints Key=Value lines (systemctl(1)); ExecMainCode is a CLD_* code.
    running = parse_systemctl_show("LoadState=loaded\nActiveState=active\nSubState=running\nMainPID=4242\nExecMainPID=4242\nExecMainCode=0\nExecMainStatus=0\n")
    assert systemd_status("u", running).running and systemd_status("u", running).pid == 4242
    exited = parse_systemctl_show("LoadState=loaded\nActiveState=failed\nSubState=failed\nMainPID=0\nExecMainPID=4242\nExecMainCode=1\nExecMainStatus=1\n")
    assert systemd_status("u", exited).state == "exited" and systemd_status("u", exited).exit_code == 1
    killed = parse_systemctl_show("LoadState=loaded\nActiveState=failed\nMainPID=0\nExecMainPID=4242\nExecMainCode=2\nExecMainStatus=9\n")
    assert systemd_status("u", killed).exit_code == -9
    never = parse_systemctl_show("LoadState=loaded\nActiveState=inactive\nMainPID=0\nExecMainPID=0\nExecMainCode=0\nExecMainStatus=0\n")
    assert systemd_status("u", never).exit_code is None
    assert systemd_status("u", parse_systemctl_show("LoadState=not-found\nActiveState=inactive\n")).state == "absent"


def test_a_stopped_server_ends_by_its_sigterm_not_by_the_sigkill_after_the_grace() -> None:
    """A hung server may be a stopped one (SIGSTOP): its TERM stays pending until it runs again.
    kill_group wakes it (SIGCONT, as systemd does), so it ends by the TERM, not after the grace."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        os.kill(proc.pid, signal.SIGSTOP)
        kill_group(proc.pid, grace_s=30.0, reap=lambda: proc.poll() and None)
        assert proc.wait(timeout=5) == -signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()

"""SystemdServices' readers on what a real systemd printed (tests/fixtures/systemd/, captured by
capture.py on a systemd test host from units rendered by fleet's templates), and the journal
dump's unit selection run by a real shell on real `journalctl -F` output shapes."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fleet.host.agent.services import (
    UNIT_PROCESS_EXIT_MESSAGE_ID,
    UNIT_SUCCESS_MESSAGE_ID,
    SystemdServices,
    journal_exit_code,
    parse_systemctl_show,
    systemd_status,
)
from fleet.host.diagnose.classify import diagnose_file
from fleet.provision.units import render_agent_unit, render_server_unit

CAPTURED = Path(__file__).resolve().parents[1] / "fixtures" / "systemd"


def captured_status(name: str):  # type: ignore[no-untyped-def]
    return systemd_status("u", parse_systemctl_show((CAPTURED / name).read_text()))


def test_captured_show_output_has_exactly_the_properties_asked_for() -> None:
    asked = set(SystemdServices.PROPERTIES.split(","))
    for path in CAPTURED.glob("show-p-*.txt"):
        assert set(parse_systemctl_show(path.read_text())) == asked, path.name


@pytest.mark.parametrize(
    ("fixture", "state", "pid", "exit_code"),
    [
        ("show-p-running.txt", "running", "MainPID", None),  # the pid is the capture's own
        ("show-p-exit3.txt", "exited", None, 3),  # ActiveState=failed, ExecMainCode=1 (CLD_EXITED)
        ("show-p-killed.txt", "exited", None, -9),  # ExecMainCode=2 (CLD_KILLED): the wrapper passed the signal on
        ("show-p-auto-restart.txt", "running", None, None),  # activating/auto-restart: coming back
        # The agent on a sweep dir without a shard: exit 2, and RestartPreventExitStatus keeps it down.
        ("show-p-agent-bad-shard.txt", "exited", None, 2),
        ("show-p-absent.txt", "absent", None, None),  # LoadState=not-found
        # An inactive unit systemd unloaded (a clean end, a stop) shows ExecMainPID=0: the code is in the journal.
        ("show-p-clean.txt", "exited", None, None),
        ("show-p-stopped.txt", "exited", None, None),
    ],
)
def test_status_from_real_systemctl_show(fixture: str, state: str, pid: int | str | None, exit_code: int | None) -> None:
    status = captured_status(fixture)
    if pid == "MainPID":
        pid = int(parse_systemctl_show((CAPTURED / fixture).read_text())["MainPID"])
        assert pid > 1
    assert (status.state, status.pid, status.exit_code) == (state, pid, exit_code)


def test_the_full_show_of_a_killed_unit_names_result_and_signal() -> None:
    show = parse_systemctl_show((CAPTURED / "show-killed.txt").read_text())
    assert (show["Result"], show["ExecMainCode"], show["ExecMainStatus"], show["ActiveState"]) == ("signal", "2", "9", "failed")
    assert systemd_status("u", show).exit_code == -9


@pytest.mark.parametrize(("fixture", "exit_code"), [("journal-json-clean.txt", 0), ("journal-json-stopped.txt", 0), ("journal-json-killed.txt", -9)])
def test_exit_code_from_the_journal_once_systemd_unloaded_the_unit(fixture: str, exit_code: int) -> None:
    entry = json.loads((CAPTURED / fixture).read_text())
    assert entry["MESSAGE_ID"] in (UNIT_SUCCESS_MESSAGE_ID, UNIT_PROCESS_EXIT_MESSAGE_ID)
    assert journal_exit_code(entry) == exit_code


def test_journal_exit_code_of_other_entries_is_unknown() -> None:
    assert journal_exit_code({"MESSAGE_ID": "39f53479d3a045ac8e11786248231fbf", "MESSAGE": "Started x."}) is None
    assert journal_exit_code({"MESSAGE_ID": UNIT_PROCESS_EXIT_MESSAGE_ID, "EXIT_CODE": "exited"}) is None
    assert journal_exit_code({"MESSAGE_ID": UNIT_PROCESS_EXIT_MESSAGE_ID, "EXIT_CODE": "exited", "EXIT_STATUS": "3"}) == 3


def test_captured_journal_format_is_what_the_classifier_reads(tmp_path: Path) -> None:
    text = (CAPTURED / "journal-killed.txt").read_text()
    # `-o short-iso`: ISO time, host, identifier[pid] -- SyslogIdentifier=fleet-server for the
    # server's own lines, systemd[1] for its verdict on the unit.
    prefix = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4} sd200 (fleet-server|systemd)\[\d+\]: ")
    assert all(prefix.match(line) for line in text.splitlines()), text
    assert "Main process exited, code=killed, status=9/KILL" in text
    assert "Failed with result 'signal'." in text
    # The seed's failure wrapped in that real format is still diagnosed.
    seed = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "seed-max-running-request-zero.journal.txt"
    head = text.splitlines()[0].split(": ", 1)[0].replace("systemd[1]", "fleet-server[85]")
    lines = [f"{head}: {line.split(': ', 1)[1]}" for line in seed.read_text().splitlines() if ": " in line]
    rewrapped = tmp_path / "seed.journal.log"
    rewrapped.write_text("\n".join([text.splitlines()[0], *lines, *text.splitlines()[2:]]) + "\n")
    assert diagnose_file(rewrapped).failure_class == "max_running_requests_zero"


def test_an_agent_with_a_bad_shard_fails_once_with_its_own_exit_code() -> None:
    text = (CAPTURED / "journal-agent-bad-shard.txt").read_text()
    assert "No such file or directory: '/var/lib/fleet/sweeps/noshard/shard.json'" in text
    assert text.count("Started fleet-agent@noshard.service") == 1  # and show-p-agent-bad-shard.txt: failed, not auto-restart
    assert "Main process exited, code=exited, status=2/INVALIDARGUMENT" in text  # the agent's 2, not tee's 1


def test_a_stopped_servers_shutdown_lines_are_in_the_journal() -> None:
    lines = (CAPTURED / "journal-stopped.txt").read_text().splitlines()
    said = [line.split(": ", 1)[1] for line in lines]
    assert said.index("shutting down") > next(i for i, t in enumerate(said) if t.startswith("Stopping fleet-srv-"))


def test_burst_of_20000_lines_is_all_in_the_journal() -> None:
    # LogRateLimitIntervalSec=0 in the server unit: journald's default (10000 per 30 s) would have dropped half.
    assert (CAPTURED / "burst-line-count.txt").read_text().strip() == "20000"
    assert "LogRateLimitIntervalSec=0" in (CAPTURED / "cat-server-killed.txt").read_text()


def test_captured_server_unit_is_what_the_template_renders_today() -> None:
    """The capture is of today's template: re-run capture.py when the template changes."""
    key = "killed"
    argv = ["/usr/bin/python3", "-c", "import os, signal; print('scheduler died', flush=True); os.kill(os.getpid(), signal.SIGKILL)"]
    unit = render_server_unit(sweep_id="capture-20261201-1", server_id=key, label=f"tp1-{key}", argv=argv, env={"FLEET_SERVICE": key},
                              gpus=[0], working_dir="/var/lib/fleet", log_file=f"/var/lib/fleet/{key}.log", start_timeout_s=60)  # fmt: skip
    assert (CAPTURED / "cat-server-killed.txt").read_text() == f"# {unit.path}\n{unit.text}"


def unit_wrapper(text: str, identifier: str) -> str:
    """The ExecStart script of a rendered unit, unescaped as systemd does."""
    exec_start = next(line for line in text.splitlines() if line.startswith("ExecStart="))
    script = re.match(rf'ExecStart=/bin/bash -c "(.*)" {identifier} ', exec_start)
    assert script, exec_start
    return script.group(1).replace('\\"', '"').replace("$$", "$")


def test_the_server_units_wrapper_in_a_real_bash(tmp_path: Path) -> None:
    """The server is exec'd (its exit code or signal is the unit's), every line reaches both the
    output and the log file."""
    body = unit_wrapper(render_server_unit(sweep_id="s", server_id="x", label="l", argv=["true"], env={}, gpus=[0], working_dir="/",
                                           log_file="/x", start_timeout_s=1).text, "fleet-server")  # fmt: skip
    log = tmp_path / "server.log"
    for argv, expected in (
        (["sh", "-c", "echo one; echo two; kill -KILL $$"], -9),
        (["sh", "-c", "echo one; echo two; exit 3"], 3),
        (["sh", "-c", "echo one; echo two"], 0),
    ):
        log.unlink(missing_ok=True)
        done = subprocess.run(["bash", "-c", body, "fleet-server", *argv], env={"FLEET_LOG": str(log), "PATH": "/usr/bin:/bin"},
                              capture_output=True, text=True, timeout=30)  # fmt: skip
        assert done.returncode == expected, (argv, done)
        deadline = time.monotonic() + 10  # tee writes the file as it reads; it may finish just after
        while log.read_text() != "one\ntwo\n" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert done.stdout == "one\ntwo\n" and log.read_text() == "one\ntwo\n"


def test_a_stop_of_the_whole_group_keeps_the_servers_last_lines(tmp_path: Path) -> None:
    """systemd stops a unit by SIGTERM to every process of its control group: tee must outlive it,
    or the lines a server prints while it shuts down are lost (seen on a real systemd, with the
    earlier `"$@" | tee` wrapper: only `up` reached the journal and the file)."""
    body = unit_wrapper(render_agent_unit(work_dir="/w", agent_dir="/a", python="/p").text, "fleet-agent")
    # The handler writes with os.write: the TERM may land while `print('up')` is still flushing, and a
    # print from the handler would then fail as a reentrant call on stdout (exit 1).
    program = ("import os, signal, sys, time\ndef bye(*_):\n    time.sleep(0.2)\n    os.write(1, b'shutting down\\n')\n    sys.exit(0)\n"
               "signal.signal(signal.SIGTERM, bye)\nprint('up', flush=True)\ntime.sleep(60)")  # fmt: skip
    log = tmp_path / "agent.log"
    unit = subprocess.Popen(["bash", "-c", body, "fleet-agent", sys.executable, "-c", program], env={"FLEET_LOG": str(log), "PATH": "/usr/bin:/bin"},
                            stdout=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip
    assert unit.stdout is not None and unit.stdout.readline() == "up\n"
    os.killpg(unit.pid, signal.SIGTERM)  # what KillMode=control-group does
    rest = unit.stdout.read()
    assert unit.wait(timeout=30) == 0  # the program itself is the main process: its exit, not a wrapper's
    assert rest == "shutting down\n"
    assert log.read_text() == "up\nshutting down\n"

"""SSH failures say their cause in one line, with the host file field to check (issue 25)."""

from __future__ import annotations

import errno
import socket
from pathlib import Path

import paramiko
import pytest

from fleet.errors import CommandFailed, short_command, without_host
from fleet.transport.ssh import SSHTransport, _Call
from fleet.transport.sshlink import connect_failure
from fleet.transport.target import SSHTarget

TARGET = SSHTarget(address="10.201.9.2", port=2222, user="root", identity_file=Path("/keys/id"), known_hosts=Path("/kh"))
SCRIPT = "sh -c 'if command -v timeout; then x=1; fi\n" + "echo section\n" * 250 + "'"


def no_valid(code: int) -> paramiko.ssh_exception.NoValidConnectionsError:
    return paramiko.ssh_exception.NoValidConnectionsError({("10.201.9.2", 2222): OSError(code, "x")})


@pytest.mark.parametrize(
    ("exc", "words", "fields"),
    [
        (no_valid(errno.ECONNREFUSED), "connection refused", ("port", "address")),
        (no_valid(errno.EHOSTUNREACH), "no route", ("address",)),
        (TimeoutError("timed out"), "timed out", ("address", "port")),
        (socket.gaierror(-2, "Name or service not known"), "cannot resolve", ("address", "ssh_alias")),
        (paramiko.AuthenticationException("Authentication failed."), "authentication failed for user root with /keys/id", ("user", "identity_file")),
        (paramiko.SSHException("Error reading SSH protocol banner"), "banner", ("port", "address")),
    ],
)
def test_each_cause_in_words_with_the_fields_to_check(exc: BaseException, words: str, fields: tuple[str, ...]) -> None:
    cause, named = connect_failure(exc, TARGET)
    assert words in cause and named == fields


def test_a_connect_failure_is_one_line_without_the_command(tmp_path: Path) -> None:
    transport = SSHTransport("ct200", TARGET, tmp_path / "ct200.yaml")
    error = transport._translate(no_valid(errno.ECONNREFUSED), f"`{short_command(SCRIPT)}`", _Call(started=False))
    text = str(error)
    assert "\n" not in text and "echo section" not in text
    assert text.startswith("ct200: cannot connect to root@10.201.9.2:2222: connection refused")
    assert f"check `port`, `address` in {tmp_path / 'ct200.yaml'}" in text


def test_a_failed_command_names_its_first_line_only() -> None:
    error = CommandFailed("ct200", SCRIPT, 1, "", "boom")
    assert "\n" not in str(error) and "echo section" not in str(error) and "boom" in str(error)
    assert short_command("echo hi") == "echo hi"
    assert without_host("ct200", error).startswith("`sh -c")

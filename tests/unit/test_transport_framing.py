"""The framing of remote output (fleet.transport.framing): the parser on noisy output, the
wrapper and its environment on stdin through real shells, and the local transport under a shell
whose startup file talks. The SSH transport on a real test host: tests/integration/test_noisy_shell.py."""

from __future__ import annotations

import logging
import os
import pwd
import subprocess
from pathlib import Path

import pytest

from fleet.transport import LocalTransport
from fleet.transport.base import env_exports
from fleet.transport.framing import STARTUP_FILES, Frame, Unframer, cut, noise_message, warn_noise
from fleet.transport.rsync import classify_rsync_failure

FRAME = Frame("0123456789abcdef0123456789abcdef")


def framed(frame: Frame, output: bytes, status: int) -> bytes:
    """A stream as the wrapper prints it."""
    return frame.begin + output + frame.end + f"{status}\n".encode()


# ------------------------------------------------------------------------------ the parser

NOISY = [
    # (noise before, the command's output, noise after)
    (b"", b"", b""),
    (b"Welcome to the shared GPU box\n", b"hello\n", b""),
    (b"banner without a newline", b"no final newline", b"logout noise\n"),
    (b"\x1b[1mMOTD\x1b[0m\n" * 50, b"\x00\xff binary \n\n", b"bye\n"),
    # Marker-like text everywhere: another call's markers, this call's token alone, its printf
    # pieces (what `ps` shows of the wrapper's command line), a bare end prefix.
    (Frame("f" * 32).begin, b"@@fleet:" + FRAME.token.encode() + b":begi\n" + Frame("e" * 32).end + b"0\n", Frame("f" * 32).end + b"1\n"),
    (b"@@fleet:%s:begin " + FRAME.token.encode() + b"\n", b"printf '@@fleet:%s:end %s\\n' " + FRAME.token.encode() + b"\n", b"@@fleet:\n"),
]


@pytest.mark.parametrize(("before", "output", "after"), NOISY)
def test_cut_keeps_only_the_commands_own_output_and_status(before: bytes, output: bytes, after: bytes) -> None:
    got = cut(FRAME, before + framed(FRAME, output, 3) + after)
    assert (got.output, got.exit_code) == (output, 3)
    assert got.noise == (before + after)[:512]


@pytest.mark.parametrize(("before", "output", "after"), NOISY)
def test_the_stream_cut_byte_by_byte_is_the_same(before: bytes, output: bytes, after: bytes) -> None:
    parts: list[bytes] = []
    unframer = Unframer(FRAME, parts.append)
    for byte in before + framed(FRAME, output, 42) + after:
        unframer.feed(bytes([byte]))
    unframer.close()
    assert (b"".join(parts), unframer.exit_code, unframer.framed) == (output, 42, True)


def test_output_without_markers_passes_as_it_came() -> None:
    """No begin marker: the wrapper did not run (a forced command, a shell that is not POSIX)."""
    got = cut(FRAME, b"This account is currently not available.\n")
    assert (got.output, got.exit_code, got.noise) == (b"This account is currently not available.\n", None, b"")


def test_a_shell_killed_midway_leaves_what_came_after_the_begin_marker() -> None:
    got = cut(FRAME, b"banner\n" + FRAME.begin + b"partial output")
    assert (got.output, got.exit_code, got.noise) == (b"partial output", None, b"banner\n")


def test_a_mangled_status_line_is_noise_not_a_status() -> None:
    got = cut(FRAME, FRAME.begin + b"out" + FRAME.end + b"banner text\n")
    assert (got.output, got.exit_code, got.noise) == (b"out", None, b"banner text")


# ------------------------------------------------------------------ the wrapper, in real shells

SHELLS = [shell for shell in ("/bin/sh", "/bin/bash", "/bin/dash") if os.access(shell, os.X_OK)]


def run_wrapped(shell: str, script: str, *, noise: bool = True, env: dict[str, str] | None = None, stdin: bytes = b"") -> tuple[bytes, bytes, int, int]:
    """`script` wrapped and run by `shell` the way a talking login shell would: startup noise on
    both streams before it, and after it. Returns its cut stdout and stderr, its status from the
    frame and the shell's own."""
    frame = Frame.new()
    wrapped = frame.wrap(script, env_on_stdin=env is not None)
    if noise:  # what ~/.bashrc and an EXIT trap of it would print
        wrapped = "echo 'Welcome!'; echo 'mesg: ttyname failed' >&2; trap 'echo logout; echo bye >&2' EXIT\n" + wrapped
    data = (frame.env_input(env_exports(env)) if env is not None else b"") + stdin
    done = subprocess.run([shell, "-c", wrapped], input=data, capture_output=True, timeout=30)
    out, err = cut(frame, done.stdout), cut(frame, done.stderr)
    if noise:
        assert out.noise and err.noise
    assert out.exit_code is not None
    return out.output, err.output, out.exit_code, done.returncode


@pytest.mark.parametrize("shell", SHELLS)
def test_the_wrapper_keeps_output_status_and_exec_through_noise(shell: str) -> None:
    assert run_wrapped(shell, "echo out; echo err >&2; exit 3") == (b"out\n", b"err\n", 3, 3)
    assert run_wrapped(shell, "printf 'no newline'") == (b"no newline", b"", 0, 0)
    assert run_wrapped(shell, "exec printf %s done") == (b"done", b"", 0, 0)  # exec replaces the subshell only
    assert run_wrapped(shell, "# a comment as the last line") == (b"", b"", 0, 0)
    assert run_wrapped(shell, "cat <<'EOF'\n$HOME\nEOF") == (b"$HOME\n", b"", 0, 0)
    assert run_wrapped(shell, "kill -9 $(sh -c 'echo $PPID')")[2] == 128 + 9  # the subshell, killed


@pytest.mark.parametrize("shell", SHELLS)
def test_a_command_that_prints_its_own_command_line_cannot_fake_a_marker(shell: str) -> None:
    # -ww: ps cuts args at $COLUMNS otherwise, which a test run before this one may have set
    out, _, code, _ = run_wrapped(shell, "tr '\\0' ' ' < /proc/$$/cmdline; echo; ps -ww -o args= -p $$")
    formats = out.count(b"@@fleet:%s:begin")  # the wrapper's own text names the format, never a token's marker
    assert code == 0 and formats >= 2 and formats % 2 == 0  # its text, printed twice in full, cut around intact


@pytest.mark.parametrize("shell", SHELLS)
def test_the_environment_arrives_on_stdin_ahead_of_the_commands_own(shell: str) -> None:
    secret = "it's a $ecret\nwith `two` lines and a \\ backslash"
    out, _, code, _ = run_wrapped(shell, 'printf %s "$HF_TOKEN"; printf "|"; cat', env={"HF_TOKEN": secret, "OTHER": ""}, stdin=b"stdin\x00kept")
    assert (out, code) == (secret.encode() + b"|stdin\x00kept", 0)
    assert FRAME.token not in FRAME.wrap("true", env_on_stdin=True).split("@@fleet:%s")[0]
    assert secret not in Frame.new().wrap('printf %s "$HF_TOKEN"', env_on_stdin=True)
    for bad in ("BAD-NAME", "HF_TOKEN\n", "1ST"):  # a trailing newline once slipped past `^...$`
        with pytest.raises(ValueError, match="not a shell identifier"):
            env_exports({bad: "x"})


@pytest.mark.parametrize("shell", SHELLS)
def test_without_its_environment_the_command_does_not_run(shell: str) -> None:
    frame = Frame.new()
    done = subprocess.run([shell, "-c", frame.wrap("echo ran", env_on_stdin=True)], input=b"export HF_TOKEN=x\n", capture_output=True, timeout=30)
    got = cut(frame, done.stdout)
    assert (got.output, got.exit_code) == (b"", 125)
    assert b"did not arrive" in cut(frame, done.stderr).output


def test_the_joined_markers_are_never_on_the_command_line() -> None:
    frame = Frame.new()
    text = frame.wrap("echo hi", env_on_stdin=True)
    assert frame.begin.strip() not in text.encode() and frame.end.strip() not in text.encode()
    assert Frame.new().token != frame.token


# ------------------------------------------- queries, written into one long-lived shell in turn


class LongLivedShell:
    """A shell reading commands on its stdin, as `Transport.query` keeps one on the host (`exec sh`
    after a talking login shell's startup files), asked one query line at a time."""

    def __init__(self, shell: str) -> None:
        self.process = subprocess.Popen([shell], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.write(b"echo 'Welcome!'\n")  # what ~/.bashrc printed before the first query

    def write(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def ask(self, script: str) -> tuple[bytes, int | None, bytes]:
        """The query's stdout and exit status, cut from the shared stream, and the noise before it."""
        assert self.process.stdout is not None
        frame = Frame.new()
        parts: list[bytes] = []
        unframer = Unframer(frame, parts.append)
        self.write(frame.query_line(script).encode())
        while unframer.exit_code is None:
            data = os.read(self.process.stdout.fileno(), 65536)
            assert data, "the shell closed before it answered"
            unframer.feed(data)
        return b"".join(parts), unframer.exit_code, unframer.noise

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)


@pytest.mark.parametrize("shell", SHELLS)
def test_queries_answer_in_turn_through_one_long_lived_shell(shell: str) -> None:
    asked = LongLivedShell(shell)
    try:
        assert asked.ask("echo first") == (b"first\n", 0, b"Welcome!\n")  # the banner is noise, once
        assert asked.ask("printf 'a\\n\\n\\n'")[:2] == (b"a\n\n\n", 0)  # trailing newlines kept
        assert asked.ask("printf 'no newline'")[:2] == (b"no newline", 0)
        assert asked.ask("echo out; echo err >&2; exit 3")[:2] == (b"out\n", 3)  # stderr is not kept
        assert asked.ask("printf '%s|' 'it''s' \"$HOME\" '@@fleet:'")[:2] == (f"its|{os.environ['HOME']}|@@fleet:|".encode(), 0)
        assert asked.ask("kill -9 $$")[1] == 128 + 9
        # A query cannot eat the next ones: its stdin is not the shell's, and a syntax error or an
        # unclosed quote stays in its own `sh -c`.
        assert asked.ask("cat; echo read-nothing")[:2] == (b"read-nothing\n", 0)
        assert asked.ask("echo 'unclosed")[1] == 2
        assert asked.ask("if then fi")[1] == 2
        assert asked.ask("exit 0; )")[1] == 2
        # Many writes come back as one (the reason for the capture: one SSH packet, not one per write).
        assert asked.ask("for i in 1 2 3; do echo $i; done")[:2] == (b"1\n2\n3\n", 0)
        assert asked.ask("echo a\necho b")[:2] == (b"a\nb\n", 0)  # a script of many lines, one query line
        assert asked.ask("echo last") == (b"last\n", 0, b"")
    finally:
        asked.close()
    assert asked.process.returncode == 0


def test_a_query_line_never_holds_its_joined_markers() -> None:
    frame = Frame.new()
    line = frame.query_line("ps -ww -o args= -p $$; echo hi")
    assert frame.begin.strip() not in line.encode() and frame.end.strip() not in line.encode()
    assert line.count("\n") == 1 and line.endswith("\n")  # one line, whatever the script holds
    assert frame.query_line("echo a\necho b").count("\n") == 2  # its newline is inside the quotes


# ------------------------------------------------------------------ the message and its users


def test_the_noise_message_names_the_startup_files_once_per_host(caplog: pytest.LogCaptureFixture) -> None:
    message = noise_message("ct200", b"Welcome to the shared GPU box\n\x1b[0m\n", b"")
    assert "Welcome to the shared GPU box" in message and "\x1b" not in message
    assert "~/.bashrc" in message and "/etc/bash.bashrc" in message and "~/.profile" in message and "rsync" in message
    assert "rsync" not in noise_message("ct200", b"", b"mesg: ttyname failed\n")
    with caplog.at_level(logging.WARNING, logger="fleet.transport"):
        warn_noise("framing-test-host", b"", b"")
        for _ in range(3):
            warn_noise("framing-test-host", b"banner\n", b"")
    assert [r.getMessage().count("~/.bashrc") for r in caplog.records] == [1]


def test_rsyncs_protocol_mismatch_names_the_startup_files() -> None:
    stderr = "protocol version mismatch -- is your shell clean?\n(see the rsync manpage for an explanation)\n"
    failure = classify_rsync_failure(2, stderr)
    assert failure is not None and STARTUP_FILES in failure[1] and "~/.bashrc" in failure[1]


@pytest.mark.skipif(not pwd.getpwuid(os.getuid()).pw_shell.endswith("/bash"), reason="the login shell is not bash")
def test_the_local_transport_skips_what_a_talking_shell_prints(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """BASH_ENV is bash's startup file for non-interactive shells: what ~/.bashrc is over SSH."""
    rc = tmp_path / "bashrc"
    rc.write_text("echo 'Welcome to the shared GPU box'; echo 'locale warning' >&2\n")
    transport = LocalTransport("local-noisy")
    with caplog.at_level(logging.WARNING, logger="fleet.transport"):
        result = transport.run('printf %s "$HF_TOKEN"; echo err >&2; exit 4', env={"BASH_ENV": str(rc), "HF_TOKEN": "hf_x"}, timeout=30)
    assert (result.stdout, result.stderr, result.exit_code) == ("hf_x", "err\n", 4)
    assert "Welcome to the shared GPU box" in caplog.text and "~/.bashrc" in caplog.text

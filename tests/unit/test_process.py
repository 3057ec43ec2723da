"""fleet.transport.process: a program missing on the controller is a named error, not a traceback."""

from __future__ import annotations

import pytest

from fleet.errors import PermanentTransportError, ToolMissing
from fleet.transport.process import run_process


def test_a_program_missing_on_this_machine_is_named_with_what_to_install() -> None:
    # Seen on a GPU machine without rsync: `fleet sweep --hosts local` ended in a FileNotFoundError
    # traceback from subprocess.
    with pytest.raises(ToolMissing, match=r"local: `fleet-no-such-tool` is not installed on this machine \(the controller\); install it") as caught:
        run_process("local", ["fleet-no-such-tool", "--version"], timeout=5)
    assert isinstance(caught.value, PermanentTransportError)  # no retry can mend it


def test_a_present_program_runs() -> None:
    outcome = run_process("local", ["sh", "-c", "echo up; exit 3"], timeout=5)
    assert (outcome.exit_code, outcome.stdout) == (3, b"up\n")

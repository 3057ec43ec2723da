"""systemd units rendered from templates, checked by the real `systemd-analyze verify`."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from fleet.provision.units import render_agent_unit, render_server_unit, systemd_quote

ANALYZE = shutil.which("systemd-analyze")
needs_analyze = pytest.mark.skipif(ANALYZE is None, reason="systemd-analyze is not installed")

ARGV = [
    "/opt/sglang/.venv/bin/python",
    "-m",
    "sglang.launch_server",
    "--model-path",
    "/dev/shm/fleet/Qwen--Qwen3.6-27B--main",
    "--tp-size",
    "4",
    "--served-model-name",
    'odd name with spaces, 100% "quotes" and $HOME',
]


def server_unit(**changes):
    args = dict(
        sweep_id="qwen36-20261129-1",
        server_id="0a1b2c3d4e5f",
        label="tp4-ddtree-b15",
        argv=ARGV,
        env={"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "1", "ODD": "a b %n $X"},
        gpus=[4, 5, 6, 7],
        working_dir="/var/lib/fleet/sweeps/qwen36-20261129-1",
        log_file="/var/lib/fleet/sweeps/x/logs/tp4.log",
        start_timeout_s=1200,
    )
    args.update(changes)
    return render_server_unit(**args)


def verify(tmp_path: Path, name: str, text: str) -> subprocess.CompletedProcess:
    path = tmp_path / name
    path.write_text(text)
    return subprocess.run([ANALYZE, "verify", str(path)], capture_output=True, text=True, timeout=60)


@needs_analyze
def test_server_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    unit = server_unit()
    result = verify(tmp_path, unit.name, unit.text)
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == "", result.stderr


@needs_analyze
def test_agent_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    unit = render_agent_unit(work_dir="/var/lib/fleet", agent_dir="/var/lib/fleet/host/agent", python="/usr/bin/python3")
    assert unit.name == "fleet-agent@.service"
    # verify wants an instance of a template unit.
    result = verify(tmp_path, "fleet-agent@qwen36-20261129-1.service", unit.text)
    assert result.returncode == 0 and not result.stderr.strip(), result.stderr
    assert "Restart=on-failure" in unit.text
    assert '"--sweep-dir" "/var/lib/fleet/sweeps/%i"' in unit.text


@needs_analyze
def test_verify_really_rejects_a_broken_unit(tmp_path: Path) -> None:
    """The check above is only worth something if verify fails on a bad unit."""
    text = server_unit().text.replace("ExecStart=/bin/bash", "ExecStart=bin/bash")
    assert verify(tmp_path, "fleet-broken.service", text).returncode != 0


def test_server_unit_content() -> None:
    text = server_unit().text
    assert 'Environment="CUDA_VISIBLE_DEVICES=4,5,6,7"' in text
    assert 'Environment="ODD=a b %%n $$X"' in text  # no specifier or variable expansion
    assert "Restart=no" in text and "KillMode=control-group" in text and "TimeoutStartSec=1200" in text
    assert systemd_quote(ARGV[-1]) in text
    assert "HF_TOKEN" not in text
    # Learned on a real systemd (tests/fixtures/systemd/): the journal must be whole and name the
    # server, the server is the main process (its own exit and signal), and tee outlives a stop.
    wrapper = 'trap \'\' TERM; exec > >(tee -a \\"$$FLEET_LOG\\") 2>&1; trap - TERM; exec \\"$$@\\"'
    assert "LogRateLimitIntervalSec=0" in text and "SyslogIdentifier=fleet-server" in text
    assert wrapper in text and "[Install]" not in text  # never started at boot
    agent = render_agent_unit(work_dir="/var/lib/fleet", agent_dir="/var/lib/fleet/agent", python="/usr/bin/python3").text
    assert "LogRateLimitIntervalSec=0" in agent and "SyslogIdentifier=fleet-agent" in agent and "[Install]" not in agent
    assert "RestartPreventExitStatus=2 3 4 5" in agent and wrapper in agent


def test_systemd_quote_escapes_what_systemd_would_interpret() -> None:
    assert systemd_quote('a "b" \\ 100% $X') == '"a \\"b\\" \\\\ 100%% $$X"'


def test_bad_names_are_refused() -> None:
    with pytest.raises(ValueError, match="environment variable name"):
        server_unit(env={"BAD-NAME": "1"})
    with pytest.raises(ValueError, match="absolute"):
        server_unit(working_dir="relative/dir")

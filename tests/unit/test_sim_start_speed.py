"""The sim's start-up time scale (FLEET_SIM_START_SPEED / --sim-start-speed, a host file's
`engine.sim_start_speed`): the start-up phases' sleeps alone, serving keeps the time scale."""

from __future__ import annotations

import http.client
import io
import json
import time
from pathlib import Path

import pytest

from fleet.errors import ConfigError
from fleet.host.engines.sim.cli import parse_command_line, sim_settings
from fleet.host.engines.sim.harness import start_sim
from fleet.host.engines.sim.server import INIT_DISTRIBUTED_S, POOL_ALLOC_S, SPAWN_S, WEIGHT_LOAD_GBS, SimServer, prepare
from fleet.host.errors import SimUsageError
from fleet.inventory import Host, load_host
from fleet.plan import PlanOptions, hardware_of, make_plan, start_scale_of, time_scale_of
from fleet.playbook import load_playbook
from fleet.sweep.events import EventStream, SweepProgress
from fleet.sweep.hoststatus import HostStatus, Phase
from fleet.sweep.ledger import ResultLedger
from fleet.sweep.shards import build_shards
from tests.unit.fake_hosts import make_host

REPO = Path(__file__).resolve().parents[2]
ARGS = ["--model-path", "qwen3.6-27b", "--context-length", "32768", "--mem-fraction-static", "0.75", "--max-running-requests", "4", "--trust-remote-code"]


# --- the sim's setting ----------------------------------------------------------------------------


def test_the_start_scale_is_the_time_scale_unless_set() -> None:
    assert sim_settings({}, {}).start_scale == 1.0
    assert sim_settings({}, {"FLEET_SIM_SPEED": "0.02"}).start_scale == 0.02
    settings = sim_settings({}, {"FLEET_SIM_SPEED": "1.0", "FLEET_SIM_START_SPEED": "0.05"})
    assert (settings.speed, settings.start_speed, settings.start_scale) == (1.0, 0.05, 0.05)


def test_the_flag_wins_over_the_environment() -> None:
    env = {"FLEET_SIM_SPEED": "0.5", "FLEET_SIM_START_SPEED": "0.01"}
    _, settings = parse_command_line(["--model-path", "m", "--sim-start-speed", "0.2"], env)
    assert (settings.speed, settings.start_scale) == (0.5, 0.2)
    _, settings = parse_command_line(["--model-path", "m", "--sim-start-speed=0.25", "--sim-speed", "1"], env)
    assert (settings.speed, settings.start_scale) == (1.0, 0.25)
    _, settings = parse_command_line(["--model-path", "m"], {**env, "FLEET_SIM_START_SPEED": ""})
    assert settings.start_scale == 0.5  # empty: unset, as the other sim variables


@pytest.mark.parametrize("value", ["0", "-1", "nan"])
def test_a_start_scale_that_is_not_positive_is_a_usage_error(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SimUsageError, match=r"start-up time scale \(--sim-start-speed / FLEET_SIM_START_SPEED\) must be positive"):
        sim_settings({}, {"FLEET_SIM_START_SPEED": value})
    with pytest.raises(SystemExit) as exit_info:
        parse_command_line(["--model-path", "m", "--sim-start-speed", value], {})
    assert exit_info.value.code == 2
    assert "fleet sim: error: the start-up time scale (--sim-start-speed / FLEET_SIM_START_SPEED) must be positive" in capsys.readouterr().err


def test_a_start_scale_that_is_no_number_names_its_source() -> None:
    with pytest.raises(SimUsageError, match="environment variable FLEET_SIM_START_SPEED: invalid value 'fast'"):
        sim_settings({}, {"FLEET_SIM_START_SPEED": "fast"})
    with pytest.raises(SystemExit):
        parse_command_line(["--model-path", "m", "--sim-start-speed", "fast"], {})


def test_the_server_sleeps_its_start_up_at_the_start_scale_and_serves_at_the_time_scale(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi: the --sim-gpu-* defaults
    server = prepare([*ARGS, "--sim-speed", "1.0", "--sim-start-speed", "0.001"], {}, io.StringIO(), io.StringIO())
    assert isinstance(server, SimServer)
    assert (server.speed, server.start_speed, server.build_engine().speed) == (1.0, 0.001, 1.0)


# --- the host file and the shard ------------------------------------------------------------------


def test_a_host_files_start_scale_defaults_to_none_and_loads(tmp_path: Path) -> None:
    path = tmp_path / "ct200.yaml"
    path.write_text("name: ct200\naddress: 10.0.0.1\nengine: {kind: sim}\n")
    assert load_host(path).engine.sim_start_speed is None
    path.write_text("name: ct200\naddress: 10.0.0.1\nengine: {kind: sim, sim_speed: 1.0, sim_start_speed: 0.05}\n")
    engine = load_host(path).engine
    assert (engine.sim_speed, engine.sim_start_speed) == (1.0, 0.05)


@pytest.mark.parametrize("value, expected", [("0", "greater than 0"), ("1.5", "less than or equal to 1"), ("fast", "valid number"), (".inf", "finite")])
def test_a_bad_start_scale_names_the_file_and_field(tmp_path: Path, value: str, expected: str) -> None:
    path = tmp_path / "ct200.yaml"
    path.write_text(f"name: ct200\naddress: 10.0.0.1\nengine: {{kind: sim, sim_start_speed: {value}}}\n")
    with pytest.raises(ConfigError) as info:
        load_host(path)
    message = str(info.value)
    assert message.startswith(str(path)) and info.value.field == "engine.sim_start_speed" and expected in message, message


def sim_host(**engine: float) -> Host:
    host = make_host("ct200", gpus=8)
    return host.model_copy(update={"engine": host.engine.model_copy(update=engine)})


def server_envs(host: Host) -> list[dict[str, str]]:
    playbook = load_playbook(REPO / "playbooks" / "demo.yaml")
    plan = make_plan(playbook, [host], PlanOptions(memory_check=False, hardware={host.name: hardware_of(host)}))
    shard = build_shards(plan, {host.name: host}, "s1", {})[host.name]
    assert shard.servers
    return [server.env for server in shard.servers]


def test_a_sim_hosts_shard_gives_its_servers_the_start_scale_where_the_host_file_sets_it() -> None:
    for env in server_envs(sim_host(sim_speed=1.0, sim_start_speed=0.05)):
        assert (env["FLEET_SIM_SPEED"], env["FLEET_SIM_START_SPEED"]) == ("1.0", "0.05")
    for env in server_envs(sim_host(sim_speed=0.02)):
        assert env["FLEET_SIM_SPEED"] == "0.02" and "FLEET_SIM_START_SPEED" not in env  # the sim's default: sim_speed


def test_a_start_scale_times_the_plans_server_starts_and_the_measured_ones_not_the_runs(tmp_path: Path) -> None:
    """The controller's side: the plan estimates a server's start at the start scale and its runs
    at sim_speed, and a start the agent reports is recorded in engine seconds by the start scale
    (durations.json must not learn a start a twentieth as long as the simulated one)."""
    playbook = load_playbook(REPO / "playbooks" / "demo.yaml")
    plain, fast = sim_host(sim_speed=1.0), sim_host(sim_speed=1.0, sim_start_speed=0.05)
    assert (time_scale_of(fast), start_scale_of(fast), start_scale_of(plain)) == (1.0, 0.05, 1.0)
    before = make_plan(playbook, [plain], PlanOptions(memory_check=False, hardware={plain.name: hardware_of(plain)}))
    after = make_plan(playbook, [fast], PlanOptions(memory_check=False, hardware={fast.name: hardware_of(fast)}))
    assert after.run_estimates == before.run_estimates and after.server_estimates
    assert {key: e.seconds for key, e in after.server_estimates.items()} == pytest.approx({key: e.seconds * 0.05 for key, e in before.server_estimates.items()})

    shard = build_shards(after, {fast.name: fast}, "s1", {})[fast.name]
    ledger = ResultLedger(tmp_path, "s1", fast.name)
    progress = SweepProgress(EventStream(None), after, {fast.name: shard}, {fast.name: start_scale_of(fast)}, {fast.name: ledger})
    server = after.servers[0].config.id
    for phase, since in (("starting", 100.0), ("warmup", 101.5)):
        status = HostStatus(fast.name, phase=Phase.RUNNING, servers={server: {"label": "x", "phase": phase, "run": None, "since": since}})
        progress.observe(status, shard, ledger)
    assert progress.server_samples == {server: (fast.name, pytest.approx(30.0))}  # 1.5 wall seconds at a start scale of 0.05


# --- a real server ----------------------------------------------------------------------------------


def test_a_server_with_a_fast_start_scale_comes_up_in_a_fraction_of_its_start_up_and_serves_in_real_time(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    reference = prepare([*ARGS, "--sim-speed", "1.0"], {}, io.StringIO(), io.StringIO())
    assert isinstance(reference, SimServer)
    # The start-up's phases that do not depend on the GPU's memory, in simulated seconds: at scale 1.0
    # the server takes at least this long to its ready line (graph capture and warm-up come on top).
    floor_s = SPAWN_S + INIT_DISTRIBUTED_S + reference.plan.weights_gb_per_gpu / WEIGHT_LOAD_GBS + 1.0 + POOL_ALLOC_S + 1.0
    tokens = 24
    step_s = reference.build_engine().model.decode_step_s(1, 1, 64)
    env = {"PATH": str(tmp_path), "FLEET_SIM_SPEED": "1.0", "FLEET_SIM_START_SPEED": "0.01"}
    began = time.monotonic()
    server = start_sim(ARGS, tmp_path / "server.log", env=env)
    try:
        assert server.wait_ready(timeout_s=floor_s)
        up_s = time.monotonic() - began
        assert up_s < floor_s / 3, f"ready after {up_s:.1f} s, the start-up at scale 1.0 takes over {floor_s:.1f} s"
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        body = {"text": "The capital city of France is", "sampling_params": {"temperature": 0, "max_new_tokens": tokens, "ignore_eos": True}}
        sent = time.monotonic()
        connection.request("POST", "/generate", body=json.dumps(body), headers={"content-type": "application/json"})
        answer = json.loads(connection.getresponse().read())
        served_s = time.monotonic() - sent
        connection.close()
        assert answer["meta_info"]["completion_tokens"] == tokens
        # At scale 1.0 the decode steps after the prefill's token take their simulated length in wall
        # seconds (at the start scale they would take 1 % of it).
        decode_s = (tokens - 1) * step_s
        assert served_s >= 0.9 * decode_s, f"{tokens} tokens in {served_s:.3f} s, their decode at scale 1.0 takes {decode_s:.3f} s"
    finally:
        server.stop()

"""Fault profiles: the default SM120 DDTree crashes of the seed, overrides, and clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleet.host.engines.sim import faults


def test_defaults_are_the_seed_story_on_sm120() -> None:
    profile = faults.FaultProfile()
    b8 = profile.ddtree_crash_for(12, 8)
    b12 = profile.ddtree_crash_for(12, 12)
    assert b8.fires(first_decode=True, max_output_tokens_after_step=2)
    assert not b8.fires(first_decode=False, max_output_tokens_after_step=200)
    assert not b12.fires(first_decode=True, max_output_tokens_after_step=16)
    assert b12.fires(first_decode=False, max_output_tokens_after_step=17)
    assert profile.ddtree_crash_for(12, 15) is None
    assert profile.ddtree_crash_for(9, 8) is None  # Hopper is fine


def test_flashinfer_warning_needs_sm12_and_old_toolkit() -> None:
    profile = faults.FaultProfile()
    assert profile.shows_flashinfer_warning((12, 0), (12, 8))
    assert not profile.shows_flashinfer_warning((12, 0), (12, 9))
    assert not profile.shows_flashinfer_warning((9, 0), (12, 4))
    assert not faults.FaultProfile(flashinfer_sm12_warning=False).shows_flashinfer_warning((12, 0), (12, 8))


def test_profile_file_overrides(tmp_path: Path) -> None:
    path = tmp_path / "sim-faults.json"
    path.write_text(
        json.dumps(
            {
                "ddtree_crashes": [{"compute_cap_major": 12, "budget": 16, "trigger": "output_tokens_over", "tokens": 100}],
                "crash_after_requests": 3,
                "crash_error": "illegal_instruction",
                "slow_start_s": 120,
                "port_in_use": True,
            }
        )
    )
    profile = faults.load_fault_profile(path)
    assert profile.ddtree_crash_for(12, 8) is None
    assert profile.ddtree_crash_for(12, 16).tokens == 100
    assert (profile.crash_after_requests, profile.crash_error, profile.slow_start_s, profile.port_in_use) == (3, "illegal_instruction", 120.0, True)


def test_missing_file_means_defaults(tmp_path: Path) -> None:
    assert faults.load_fault_profile(tmp_path / "absent.json") == faults.FaultProfile()
    assert faults.load_fault_profile(None) == faults.FaultProfile()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"crash_after_request": 1}, r"unknown keys \['crash_after_request'\]"),
        ({"crash_after_requests": True}, "crash_after_requests: expected a non-negative integer"),
        ({"crash_after_requests": -1}, "crash_after_requests: expected a non-negative integer, got -1"),
        ({"crash_error": "oom"}, "crash_error: expected one of"),
        ({"ddtree_crashes": [{"budget": 8, "trigger": "first_decode"}]}, r"ddtree_crashes\[0\]: missing key 'compute_cap_major'"),
        ({"ddtree_crashes": [{"compute_cap_major": 12, "budget": 8, "trigger": "sometimes"}]}, "trigger: expected"),
        ({"slow_start_s": "10"}, "slow_start_s: expected a number of seconds"),
    ],
)
def test_bad_profiles_name_file_and_field(tmp_path: Path, data: dict, message: str) -> None:
    path = tmp_path / "faults.json"
    path.write_text(json.dumps(data))
    with pytest.raises(faults.FaultProfileError, match=message) as caught:
        faults.load_fault_profile(path)
    assert str(path) in str(caught.value)


def test_invalid_json_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "faults.json"
    path.write_text("{")
    with pytest.raises(faults.FaultProfileError, match="not valid JSON"):
        faults.load_fault_profile(path)


def test_profile_path_from_env() -> None:
    assert faults.fault_profile_path({"FLEET_SIM_FAULTS": "/x.json", "FLEET_SIM_WORK_DIR": "/w"}) == "/x.json"
    assert faults.fault_profile_path({"FLEET_SIM_WORK_DIR": "/w"}) == "/w/sim-faults.json"
    assert faults.fault_profile_path({}) is None

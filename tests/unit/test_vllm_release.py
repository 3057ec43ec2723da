"""vLLM's release table: the nearest known release for any version string, with a note when inexact."""

from __future__ import annotations

import pytest

from fleet.host.engines.vllm.launch import ReleaseError  # where the engine package has it from
from fleet.host.engines.vllm.engine import ENGINE
from fleet.host.engines.vllm.release import KNOWN_RELEASES, choose_release


def test_the_known_release_is_033_and_every_table_has_it() -> None:
    from fleet.host.engines.vllm.flags import load_table

    assert KNOWN_RELEASES == ("0.33.0",)
    assert ENGINE.releases == KNOWN_RELEASES and ENGINE.sim_release == "0.33.0" and ENGINE.version_tested == "0.33.0"
    for release in KNOWN_RELEASES:
        assert load_table(release).release == release


@pytest.mark.parametrize("version", ["0.33.0", "v0.33.0", "0.33.0+cu130", "0.33"])
def test_an_exact_release_has_no_note(version: str) -> None:
    choice = choose_release(version)
    assert choice.release == "0.33.0" and choice.exact and choice.note is None


@pytest.mark.parametrize("version", ["0.34.1", "1.0.0", "0.33.1rc1", "0.32.0", "0.10.1"])
def test_another_version_is_planned_with_the_nearest_known_release_and_says_so(version: str) -> None:
    choice = ENGINE.choose_release(version)
    assert choice.release == "0.33.0" and not choice.exact
    assert choice.note == f"vLLM {version} is not a release fleet knows (0.33.0); planned with the nearest known release, 0.33.0"


@pytest.mark.parametrize("version", ["latest", "", "v", "abc.def"])
def test_a_version_that_is_no_release_number_is_refused_naming_an_example(version: str) -> None:
    with pytest.raises(ReleaseError, match=r"vLLM version .*: expected a release number such as 0\.33\.0"):
        choose_release(version)

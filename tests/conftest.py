"""Shared pytest fixtures. Keep this file to fixtures; their logic lives in tests/<helper package>/."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import pytest

from tests.testfleet import TestFleet, start_test_fleet, unavailable_reason
from tests.testfleet.systemd_host import SystemdTestFleet, start_systemd_test_fleet, systemd_unavailable_reason


@pytest.fixture(autouse=True, scope="session")
def controller_state(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The controller's per-user state (the key and the cache of checked results,
    fleet.sweep.resultcache) in the session's own folder, never the user's: the fleet commands the
    tests run in child processes inherit it."""
    with pytest.MonkeyPatch.context() as patched:
        patched.setenv("FLEET_STATE_DIR", str(tmp_path_factory.mktemp("fleet-state")))
        yield


def _skip_without_test_fleet() -> None:
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)


@pytest.fixture
def test_fleet_factory() -> Iterator[Callable[..., TestFleet]]:
    """`test_fleet_factory(["ct200"], shm_size="64m", gpu_profiles={...})`; closed after the test."""
    _skip_without_test_fleet()
    with ExitStack() as made:

        def make(names: list[str], shm_size: str = "256m", **options: Any) -> TestFleet:
            return made.enter_context(start_test_fleet(names, shm_size, **options))

        yield make


@pytest.fixture(scope="module")
def two_hosts() -> Iterator[TestFleet]:
    """ct200 and ct201, shared by the tests of one module (a test that cuts a link restores it)."""
    _skip_without_test_fleet()
    with start_test_fleet(["ct200", "ct201"]) as fleet:
        yield fleet


@pytest.fixture(scope="module")
def systemd_host() -> Iterator[SystemdTestFleet]:
    """One test host, `sd200`, with systemd as PID 1 (tests/testfleet/systemd_host.py), shared by
    the tests of one module: a boot per module. Skips, naming the reason, where it cannot boot."""
    reason = systemd_unavailable_reason()
    if reason:
        pytest.skip(reason)
    with start_systemd_test_fleet(["sd200"]) as fleet:
        fleet.wait_until_running("sd200")
        yield fleet

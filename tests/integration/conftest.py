"""Fixtures of the integration tests that several of their modules share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.testfleet import start_test_fleet, unavailable_reason
from tests.testfleet.slurm import SlurmCluster, slurm_unavailable_reason, start_slurm_cluster


@pytest.fixture(scope="module")
def slurm() -> Iterator[SlurmCluster]:
    """A real Slurm cluster (tests/testfleet/slurm.py): slurmctld and munge on the machine, slurmd
    on ct200 and ct201 (8 GRES GPUs each), `login` the login host; one per test module."""
    reason = unavailable_reason() or slurm_unavailable_reason()
    if reason:
        pytest.skip(reason)
    with start_test_fleet(["login", "ct200", "ct201"]) as fleet, start_slurm_cluster(fleet, ["ct200", "ct201"], "login") as cluster:
        yield cluster

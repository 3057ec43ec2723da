"""Real SSH test hosts in Linux namespaces (see README.md): `start_test_fleet(["ct200", "ct201"])`."""

from tests.testfleet.hosts import TestFleet, TestHost, close_all_fleets, start_test_fleet, unavailable_reason
from tests.testfleet.registry import cleanup_dead_instances

__all__ = [
    "TestFleet",
    "TestHost",
    "cleanup_dead_instances",
    "close_all_fleets",
    "start_test_fleet",
    "unavailable_reason",
]

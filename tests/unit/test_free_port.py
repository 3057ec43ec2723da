"""`fleet.host.engines.sim.harness.free_port`: the ports tests and benchmarks give the servers
they start. Two servers of one shard once got the same port from two bind(0) probes in a row."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from fleet.host.engines.sim import harness
from fleet.host.engines.sim.harness import free_port


def test_ports_are_never_handed_out_twice_and_lie_below_the_ephemeral_range() -> None:
    ephemeral_low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports = [free_port() for _ in range(300)]
    assert len(set(ports)) == len(ports)
    assert all(10000 <= port < ephemeral_low for port in ports)
    with socket.socket() as listener:  # free indeed: a server can bind it
        listener.bind(("127.0.0.1", ports[-1]))
        listener.listen()


def test_a_port_something_holds_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        taken = held.getsockname()[1]
        spare = free_port()
        harness._GIVEN.discard(spare)
        picks = iter([taken, spare])

        class Scripted:
            def randrange(self, low: int, high: int) -> int:
                return next(picks)

        monkeypatch.setattr(harness.random, "Random", Scripted)
        assert free_port() == spare  # the held one was tried first, and passed over

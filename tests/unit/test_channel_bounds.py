"""No call of the sweep loop retries past the time after which it calls a host lost: a host that
went away mid-call is noticed by that deadline, whatever the call's own policy (a bundle push's
TRANSFER policy alone would retry for 30 minutes)."""

from __future__ import annotations

import pytest

from fleet.errors import ConnectionLost
from fleet.host.contract.shard import HandoverRequest
from fleet.retry import CONNECT
from fleet.sweep.channel import AgentChannel
from fleet.transport.fake import FakeTransport
from tests.unit.fake_hosts import make_host

pytestmark = pytest.mark.timeout(60)  # unbounded, the calls below would retry for minutes


def channel(max_retry_s: float | None) -> tuple[AgentChannel, FakeTransport]:
    host = make_host()
    transport = FakeTransport(host.name)
    transport.drop_link(10_000)  # the host is gone: every call fails as a dropped link
    return AgentChannel(host, "sweep-1", transport, max_retry_s=max_retry_s), transport


def test_a_call_gives_up_by_the_lost_host_deadline_not_by_its_own_policy() -> None:
    ch, transport = channel(max_retry_s=2.0)
    with pytest.raises(ConnectionLost):
        ch.push_quarantine({"srv": "quarantined"})  # CONNECT: 120 s on its own
    assert 1 <= len(transport.calls) <= 3  # waits of ~1-2 s each: tried for about 2 s, then gave up
    assert ch.link_drops == 1


def test_the_hand_over_request_is_bounded_too_and_the_answer_is_read_once() -> None:
    ch, transport = channel(max_retry_s=2.0)
    with pytest.raises(ConnectionLost):
        ch.ask_handover(HandoverRequest(("srv",)))
    asked = len(transport.calls)
    assert 1 <= asked <= 3
    with pytest.raises(ConnectionLost):
        ch.handover_answer()  # one try: the loop asks again at its next poll
    assert len(transport.calls) == asked + 1


def test_a_policy_shorter_than_the_bound_is_left_as_it_is() -> None:
    ch, _ = channel(max_retry_s=600.0)
    assert ch._bounded(CONNECT) is CONNECT
    assert channel(max_retry_s=None)[0]._bounded(CONNECT) is CONNECT

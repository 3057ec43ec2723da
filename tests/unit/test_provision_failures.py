"""A provisioning that fails for any reason says what failed and gives its lease back (fake
hosts, no root). Once a bare `assert` on a reply garbled by a host's login banner escaped
`provision_host`: the host failed with an empty reason, and a sweep's lease stayed on the host
for its 900 s TTL, refusing the next `fleet provision`."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.errors import CommandFailed
from fleet.host.contract.lease import HostLease
from fleet.playbook import load_playbook
from fleet.provision import provision as provisioning
from fleet.provision.lease import sweep_claim
from fleet.provision.provision import provision, provision_host, provision_options
from fleet.transport.fake import FakeTransport
from tests.unit.fake_hosts import FakeHostShell, make_host

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "playbooks" / "demo.yaml"
SWEEP = "demo-20261201-100000-aaaa"


@pytest.fixture(autouse=True)
def facts_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def failing_unit_step(error: BaseException):
    def step(*args: object) -> list[object]:
        raise error

    return step


@pytest.mark.parametrize("claimed", [True, False], ids=["sweep", "fleet-provision"])
@pytest.mark.parametrize(
    ("error", "named"),
    [(AssertionError(), "AssertionError at test_provision_failures.py"), (ValueError("bad reply"), "ValueError: bad reply"),
     (CommandFailed("ct200", "cat marker", 1, "", ""), "cat marker")],
)  # fmt: skip
def test_a_failure_of_any_kind_is_said_and_releases_the_lease(monkeypatch: pytest.MonkeyPatch, error: BaseException, named: str, claimed: bool) -> None:
    host, playbook = make_host(), load_playbook(DEMO)
    t = FakeTransport(host.name)
    shell = FakeHostShell(t, host)
    monkeypatch.setattr(provisioning, "ensure_agent_unit", failing_unit_step(error))  # the last step: the lease is held by then
    options = provision_options(DEMO.parent, {}, lease=sweep_claim(SWEEP) if claimed else None)
    report = provision_host(host, playbook, options, transport=t)
    assert report.status == "failed" and named in report.reason
    assert HostLease(shell.lease_dir).read() is None, "the lease was left on the host"


def test_an_interrupt_releases_the_lease_and_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    host, playbook = make_host(), load_playbook(DEMO)
    t = FakeTransport(host.name)
    shell = FakeHostShell(t, host)
    monkeypatch.setattr(provisioning, "ensure_agent_unit", failing_unit_step(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        provision_host(host, playbook, provision_options(DEMO.parent, {}, lease=sweep_claim(SWEEP)), transport=t)
    assert HostLease(shell.lease_dir).read() is None


def test_a_passed_sweep_host_keeps_its_lease_for_its_agent() -> None:
    host, playbook = make_host(), load_playbook(DEMO)
    t = FakeTransport(host.name)
    shell = FakeHostShell(t, host)
    report = provision_host(host, playbook, provision_options(DEMO.parent, {}, lease=sweep_claim(SWEEP)), transport=t)
    assert report.status == "changed", report.reason
    lease = HostLease(shell.lease_dir).read()
    assert lease is not None and lease.sweep_id == SWEEP


def test_a_host_whose_provisioning_escaped_is_reported_with_a_reason() -> None:
    """What `provision` reports when a host's work raised before `provision_host` (its connect)."""

    def connect(host: object) -> FakeTransport:
        raise AssertionError

    reports = provision([make_host()], load_playbook(DEMO), provision_options(DEMO.parent, {}), connect=connect)
    assert [(r.status, r.reason.split(" at ")[0]) for r in reports] == [("failed", "AssertionError")]

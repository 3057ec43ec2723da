"""How often provisioning goes back and forth to a host's transport (issue 12: about ten round
trips per host before; one script per phase where the phases allow). Counted on the fake
transport, which records every call: a fresh sim host, then the same host again (nothing to do)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.playbook import load_playbook
from fleet.provision.provision import models_of, provision_host, provision_options
from fleet.transport.base import BOOT_ID_PATH
from fleet.transport.fake import FakeTransport
from tests.unit.fake_hosts import FakeHostShell, make_host

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "playbooks" / "demo.yaml"


@pytest.fixture(autouse=True)
def facts_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def round_trips(t: FakeTransport, since: int) -> list[str]:
    return [f"{c.kind} {c.command}" for c in t.calls[since:]]


def listing(calls: list[str]) -> str:
    return "\n".join(c[:100] for c in calls)


def test_a_ready_host_is_provisioned_in_six_round_trips() -> None:
    host, playbook = make_host(), load_playbook(DEMO)
    t = FakeTransport(host.name)
    FakeHostShell(t, host)
    provision_host(host, playbook, provision_options(DEMO.parent, {}), transport=t)
    before = len(t.calls)
    again = provision_host(host, playbook, provision_options(DEMO.parent, {}), transport=t)
    assert again.status == "ok" and again.changes == []
    # facts (cached stable facts + fresh volatile ones), the lease, stale servers, the directories,
    # and the markers of every model at once; identities come from those markers.
    calls = round_trips(t, before)
    assert len(calls) <= 6, listing(calls)  # `fleet provision` takes its own lease and gives it back: 2 of them
    assert sum("--fleet--" in c for c in calls) == 1, "one read of all models' markers"
    assert {m.label for m in models_of(playbook)} == set(again.models)


def test_a_fresh_sim_host_reads_each_models_state_once_before_and_once_after_its_changes() -> None:
    host, playbook = make_host(), load_playbook(DEMO)
    t = FakeTransport(host.name)
    FakeHostShell(t, host)
    first = provision_host(host, playbook, provision_options(DEMO.parent, {}), transport=t)
    assert first.status == "changed", first.reason
    calls = round_trips(t, 0)
    models = len(models_of(playbook))
    marker_reads = sum("--fleet--" in c for c in calls)
    # one read of all before; per model after its fetch, and after its staging
    assert marker_reads <= 1 + 2 * models, listing(calls)
    separate_cats = [c for c in calls if c.startswith("run cat ") and "--fleet--" not in c]
    # The one other cat: the boot id once the models changed (a reboot under staging wipes earlier copies).
    assert separate_cats == [f"run cat {BOOT_ID_PATH}"], "no separate marker cat"

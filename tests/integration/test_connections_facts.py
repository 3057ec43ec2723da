"""Facts over a real SSH test host: the engine probe's cache lives on the host, per boot.

The first gather imports torch with the engine's Python and leaves its report in the host's
~/.cache/fleet/engine-probe/; the next gather reads it from there (shown by marking the cached
report); a reboot (a new boot id) makes the probe run again. Both gathers share one connection.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleet.connect import host_paths, transport_for
from fleet.facts.gather import gather_facts
from fleet.inventory import load_inventory

pytestmark = pytest.mark.testfleet


def test_the_engine_probe_is_cached_on_the_host_until_it_reboots(test_fleet_factory, tmp_path: Path) -> None:
    fleet = test_fleet_factory(["ct200"])
    (host,) = load_inventory(fleet.write_inventory(tmp_path / "hosts"))
    cache_dir = fleet["ct200"].persistent_path("/root/.cache/fleet/engine-probe")
    transport = transport_for(host)
    try:
        first = gather_facts(transport, host_paths(host), host.engine.python)
        assert first.engine is not None and first.engine.python_version, first.problems
        (cached,) = cache_dir.glob("*.json")
        entry = json.loads(cached.read_text())
        assert entry["report"]["python_version"] == first.engine.python_version
        entry["report"]["torch_version"] = "from-the-host-cache"
        cached.write_text(json.dumps(entry))

        again = gather_facts(transport, host_paths(host), host.engine.python)
        assert again.engine is not None and again.engine.torch_version == "from-the-host-cache"

        fleet.reboot("ct200")
        rebooted = gather_facts(transport, host_paths(host), host.engine.python)
        assert rebooted.boot_id != first.boot_id
        assert rebooted.engine is not None and rebooted.engine.torch_version == first.engine.torch_version
    finally:
        transport.close()

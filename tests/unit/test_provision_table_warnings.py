"""Preflight warnings show in `fleet provision`'s table, not only with --json (issue 25)."""

from __future__ import annotations

from rich.console import Console

from fleet.provision.preflight import CheckResult, PreflightReport, Verdict
from fleet.provision.provision import HostReport
from fleet.views import provision_table


def test_a_preflight_warning_is_in_the_table() -> None:
    warning = CheckResult(rule_id="driver_toolkit", description="driver vs toolkit", verdict=Verdict.warn,
                          message="driver 570 is older than CUDA toolkit 13.0 needs", hint="upgrade the driver to 580")  # fmt: skip
    passed = CheckResult(rule_id="disk", description="disk", verdict=Verdict.ok, message="enough")
    report = HostReport("ct200", status="ok", preflight=PreflightReport(host="ct200", checks=[warning, passed]))
    console = Console(width=300, record=True)
    console.print(provision_table([report]))
    text = console.export_text()
    assert "warning: driver_toolkit: driver 570 is older than CUDA toolkit 13.0 needs (fix: upgrade the driver to 580)" in text
    assert "disk" not in text.split("reason", 1)[1].replace("reason / warnings", "")

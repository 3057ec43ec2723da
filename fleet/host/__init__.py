"""Everything fleet ships to a host, shipped whole by `fleet.sweep.bundle`: the agent, the
controller<->agent contract, log parsing, the failure catalogue and classifier, SGLang's memory
formulas, the simulator and the model cards.

Standard library only, and nothing from the controller's side of fleet: a host needs Python >= 3.10
and its engine, nothing else. tests/unit/test_host_package.py holds the package to that.
"""

"""fleet's host-side agent: runs a sweep's shard on one host, detached from SSH. Standard library
only (plus fleet/engines/sglang/logparse.py), so that a host needs nothing but Python >= 3.10 and
the engine; fleet.sweep.bundle ships it. Entry point: `python -m fleet.agent` (see __main__.py).
"""

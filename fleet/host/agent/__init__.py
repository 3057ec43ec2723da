"""fleet's host-side agent: runs a sweep's shard on one host, detached from SSH. Entry point:
`python -m fleet.host.agent` (see __main__.py)."""

# What `python -m` runs on a host (a pgrep pattern and the systemd unit are derived from it).
AGENT_MODULE = __name__

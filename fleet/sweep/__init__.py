"""`fleet sweep`: the controller side of a sweep (shards, agent bundle, per-host drivers, progress)."""

"""Sweeps through Slurm: an inventory entry of kind `slurm` is a cluster's login host; the plan
becomes batch jobs that run the same agent inside their allocations (see docs/slurm.md).

jobs.py        what sinfo, sbatch, squeue, scontrol and sacct print, read (pure)
script.py      the batch script of a job or job array (pure)
feasibility.py a request against the cluster's nodes; pending reasons that never clear (pure)
outcome.py     what to do about a job from Slurm's state and the results on the shared dir (pure)
commands.py    those commands over the login host's transport
nodeprep.py    the controller's side of node preparation (facts, preflight, node-local models;
               the node's side is fleet.host.nodeprep)
record.py      what a Slurm sweep records (slurm.json) and the pull of its task dirs
sweep.py       start, watch (repairs, quarantine, resubmissions), resume and cancel
observe.py     `fleet status` and `fleet fetch-logs` of a Slurm sweep, by job id
backend.py     the Slurm backend of `fleet sweep`, `status`, `fetch-logs` (fleet.backend chooses it)
What runs inside an allocation ships with the agent: fleet.host.grant (the task's shard bound to
the GPUs Slurm granted) and fleet.host.nodeprep.
"""

"""Sweeps through Slurm: an inventory entry of kind `slurm` is a cluster's login host; the plan
becomes batch jobs that run the same agent inside their allocations (see README.md, "Slurm").

jobs.py        what sinfo, sbatch, squeue and scontrol print, read (pure)
script.py      the batch script of a job or job array (pure)
feasibility.py a request against the cluster's nodes; pending reasons that never clear (pure)
outcome.py     what to do about a job from Slurm's state and the results on the shared dir (pure)
commands.py    those commands over the login host's transport
"""

"""The fetch of a Hugging Face hub repo (a model or a dataset) with the real `huggingface_hub`
client, and the hub's refusals in words. The script runs under an interpreter that has
huggingface_hub: on a host, the engine's (fleet.provision.models, detached and resumable); on the
controller, its own (fleet.workloads.hub, a playbook's hub dataset). Standard library only here:
the script is text, and `hub_refusal` a pure function of its log.
"""

from __future__ import annotations

# Runs on the host with the engine's own Python (huggingface_hub comes with the engine). The token,
# if any, is HF_TOKEN in the environment: huggingface_hub reads it there; it is never an argument.
# So is HF_ENDPOINT, for a mirror of the hub (and the tests' local hub, tests/testfleet/hub.py).
# Written against huggingface_hub 1.x and 2.x (1.33.0 and 2.4.0 tested), whose errors it names.
#
# A fetch killed mid-file (a reboot, a kill) leaves that file's bytes in
# `.cache/huggingface/download/*.<random>.incomplete`: huggingface_hub writes each download to a
# name of its own process and never resumes one of another (file_download.py
# `_download_to_tmp_and_move`, 1.33.0 and 2.4.0), so the next try starts that file over and the
# leftover is dead weight (a shard's worth per reboot). The files that were complete are kept
# (their `.metadata` names the commit: not fetched again), and the job holds its lock, so no
# other fetch writes there: the leftovers go first. Within one try, a cut connection is resumed
# by huggingface_hub itself with a Range request.
#
# The hub's refusals (gated, private or missing repo, missing revision) end the job with exit
# HUB_REFUSED and one line `fleet-hub-refused <status> <code>`, which the controller words.
HUB_REFUSED = 3
HUB_FETCH_SCRIPT = r"""
import glob, json, os, sys
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
repo, revision, dest = sys.argv[1:4]
repo_type = sys.argv[4] if len(sys.argv) > 4 else "model"
for stale in glob.glob(os.path.join(glob.escape(dest), ".cache", "huggingface", "download", "**", "*.incomplete"), recursive=True):
    os.remove(stale)
from huggingface_hub import HfApi, snapshot_download
from huggingface_hub.utils import GatedRepoError, HfHubHTTPError, RepositoryNotFoundError, RevisionNotFoundError

def refused(code, error):
    response = getattr(error, "response", None)
    status = getattr(response, "status_code", None) or 0
    print("fleet-hub-refused", status, code, flush=True)
    sys.exit(3)

try:
    info = HfApi().repo_info(repo, repo_type=repo_type, revision=revision, files_metadata=True)
    expected = {s.rfilename: s.size for s in info.siblings if s.size is not None}
    tmp = dest + ".fleet-expected.json.tmp"
    with open(tmp, "w") as f:
        json.dump({"sha": info.sha, "files": expected}, f)
    os.replace(tmp, dest + ".fleet-expected.json")
    # Pinned to the commit the metadata came from; snapshot_download keeps what an earlier try completed.
    snapshot_download(repo_id=repo, repo_type=repo_type, revision=info.sha, local_dir=dest)
except GatedRepoError as error:
    refused("GatedRepo", error)
except RevisionNotFoundError as error:
    refused("RevisionNotFound", error)
except RepositoryNotFoundError as error:
    refused("RepoNotFound", error)
except HfHubHTTPError as error:
    if getattr(getattr(error, "response", None), "status_code", None) in (401, 403):
        refused("Unauthorized", error)
    raise
"""


def hub_refusal(repo: str, revision: str, repo_type: str, log_text: str, *, token_given: bool) -> str | None:
    """The fetch's `fleet-hub-refused` line as one clear sentence naming the repo and HF_TOKEN,
    or None where the log has none (another failure: its log says why)."""
    line = next((ln for ln in reversed(log_text.splitlines()) if ln.startswith("fleet-hub-refused ")), None)
    if line is None:
        return None
    _, status, code = (line.split() + ["", ""])[:3]
    what = f"{'dataset' if repo_type == 'dataset' else 'model'} repo {repo}"
    given = "HF_TOKEN was given" if token_given else "no HF_TOKEN was given"
    how = "set HF_TOKEN in the controller's environment (fleet hands it to the host's fetch in its environment, never on a command line)"
    if code == "GatedRepo":
        if token_given:
            return f"the hub refused {what} (HTTP {status}, gated): {given}, but its account has no access: accept the repo's terms on the hub with the account whose token HF_TOKEN holds"
        return f"the hub refused {what} (HTTP {status}, gated): {given}; {how}, a token of an account that has accepted the repo's terms"
    if code == "RevisionNotFound":
        return f"the hub has no revision {revision!r} of {what} (HTTP {status}): name a branch, tag or commit it has"
    if code == "RepoNotFound":
        return f"the hub has no {what}, or it is private (HTTP {status}; {given}): check the repo id and its type, or for a private repo {how}"
    return f"the hub refused {what} (HTTP {status}; {given}): {how}, a token with read access to the repo"

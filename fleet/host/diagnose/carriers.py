"""The text a carrier puts before every line of a log, removed before any rule reads the line.

A server log reaches a user through tools that prefix each line with their own text: a container
runtime's timestamp, journald's stamp and unit, Ray's worker tag, a job launcher's rank label, a CI
console's stamp, a Markdown quote. A carrier says nothing about why the server failed, so every rule
of the classifier and of the engines' step tables reads a line without it (`strip_carriers`); a log
pasted as a Markdown code block (four spaces before every line) is recognised from its first lines
(`code_block_indent`), and kubelet's partial lines (`P`) are joined to the line they belong to
(`cri_partial`). The carriers' timestamps are dropped: the stall detection reads the last start-up
step and the engine's own watchdog words, never the clock, so they would add nothing it reads.

Each form, as its tool prints it (bytes: the scanner reads bytes):
- kubelet's CRI container log file ("timestamp stream tag log": RFC3339Nano with the node's offset,
  "stdout"/"stderr", "F" for a full line or "P" for a part the runtime split at its maximum line size;
  the CRI spec's logging format, kubelet pkg/kubelet/kuberuntime/logs);
- journalctl's `-o short` ("%b %d %H:%M:%S host identifier[pid]: ") and `-o short-iso`
  ("%Y-%m-%dT%H:%M:%S%z host identifier[pid]: "; systemd src/shared/logs-show.c), with the pid (a server's
  lines always have one; without it "stamp vllm: error: ..." would read as a host and a unit);
- `docker logs -t` / `docker compose logs -t` (RFC3339Nano, Docker's fixed nine digits), `kubectl logs
  --timestamps` (RFC3339Nano) and GitHub Actions' raw log (seven digits, "Z"), each then a space;
- buildkite-agent `--timestamp-lines` and Jenkins' timestamper ("[2025-07-25T07:53:08Z] ");
- moreutils ts(1): its default "%b %d %H:%M:%S " and an ISO "%Y-%m-%d %H:%M:%S[.frac] " (not a Python
  logging "asctime - name - LEVEL - " or FastChat's "asctime | LEVEL |" line: those keep their level for
  the classifier's own prefix rules);
- `docker compose logs` (the container name padded to the longest, "| "; compose v2 cmd/formatter/logs.go);
- Buildkite's web log copied ("  | " before every line);
- Open MPI `mpirun --tag-output` ("[job,rank]<stdout>:" with no space, ctime's date before it under
  `--timestamp-output`; orte/mca/iof/base/iof_base_output.c);
- Slurm `srun --label` ("%d: ", the task number padded to the widest);
- `kubectl logs --prefix` ("[pod/<pod>/<container>] ", the log source before each line);
- torchrun's `--tee` ("[${role_name}${local_rank}]:", torch.distributed.elastic's default log line prefix,
  "[default0]:" under torchrun, no space: the line keeps its own; not torch's "[rank0]:", which the
  classifier's own prefix rules read, as before);
- Ray's worker output relayed to the driver ("(pid=952) ", "(RayWorkerWrapper pid=952, ip=10.0.0.1) ",
  "(SGLangEngine pid=952, ip=...) "; ray/_private/worker.py print_worker_logs, in colour), one space taken (a
  frame keeps its own two, a quoted source line its four); vLLM's own process tag ("(EngineCore_DP0 pid=563) ",
  "(VllmWorker rank=0 pid=2) ", and Ray's tag of an actor on the driver's node, which has the same shape) with
  all the spaces after it, as the vLLM log module's PROCESS_TAG takes them (a line under such a tag has always
  read as a message, never as a quoted source line);
- a Markdown block quote ("> ", CommonMark 5.1);
- ANSI colour codes anywhere on the line (tee'd from a terminal), removed first; so are their SGR codes
  written out as text, the escape character shown as "ESC" (GitHub's log view and terminal copy tools render
  ESC so: "ESC[1;36m(VllmWorkerProcess pid=62)ESC[0;0m ERROR ...", the vLLM log's coloured process tag) or
  in caret notation ("^[[1;36m", `cat -v`, less): ECMA-48's CSI "ESC [" parameters then "m".

Standard library only, like the classifier.
"""

from __future__ import annotations

import re

_ANSI = re.compile(rb"\x1b\[[0-9;?]*[ -/]*[@-~]")
_ANSI_AS_TEXT = re.compile(rb"(?:ESC|\^\[)\[[0-9;]*m")
_RFC3339 = rb"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:[.,]\d+)?"
_SHORT = rb"[A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2}(?:\.\d+)?"
_CRI = rb"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2}) (?:stdout|stderr) "
_CARRIER = re.compile(
    rb"(?:" + _CRI + rb"F "
    rb"|(?:" + _SHORT + rb"|" + _RFC3339 + rb"(?:Z|[+-]\d{2}:?\d{2})?) \S+ [^\s:\[]+\[\d+\]: "
    rb"|" + _RFC3339 + rb"(?:Z|[+-]\d{2}:?\d{2}) "
    rb"|\[" + _RFC3339 + rb"Z\] ?"
    rb"|" + _SHORT + rb" "
    rb"|\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)? (?![-|] )"
    rb"|[A-Za-z0-9][\w.-]* +\| "
    rb"|  \| "
    rb"|(?:[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \d{4})?\[\d+,\d+\]<std(?:out|err|diag)>:(?: (?=\S))?"
    rb"| ?\d{1,4}: "
    rb"|\[pod/[^\]\s/]+/[^\]\s]+\] "
    rb"|\[(?!rank\d)[A-Za-z_]+\d+\]:"
    rb"|\(pid=\d+\) ?|\((?:[^()\s]+ )?(?:[\w.-]+=[\w.:-]+,? )*pid=\d+, ip=[\w.:-]+\) ?"
    rb"|\((?:[^()\s]+ )?(?:[\w.-]+=[\w.:-]+ )*pid=\d+\)\s*"
    rb"|> |>$"
    rb")"
)
_CRI_PARTIAL = re.compile(_CRI + rb"P ")
CRI_PARTIAL_LITERAL = b" P "  # on every part line: the cheap test before the pattern (the scanner's too)
CARRIERS_AT_MOST = 6  # carriers nest (compose around docker -t, kubectl around Ray): this many are removed
CODE_BLOCK = b"    "
CODE_BLOCK_LINES = 40  # the first lines that decide whether the log is pasted as a Markdown code block


def strip_carriers(raw: bytes) -> bytes:
    """The line without its carriers' text (the same object when it has none)."""
    if b"\x1b" in raw:
        raw = _ANSI.sub(b"", raw)
    if b"ESC[" in raw or b"^[[" in raw:
        raw = _ANSI_AS_TEXT.sub(b"", raw)
    for _ in range(CARRIERS_AT_MOST):
        found = _CARRIER.match(raw)
        if found is None or not found.end():
            break
        raw = raw[found.end() :]
    return raw


def strip_colour_text(text: str) -> str:
    """A shown line without colour codes written out as text (evidence shows a line as a terminal would: the real
    codes go in logparse.clean_line, these here)."""
    if "ESC[" in text or "^[[" in text:
        return _ANSI_AS_TEXT.sub(b"", text.encode("utf-8", "surrogateescape")).decode("utf-8", "surrogateescape")
    return text


def cri_partial(raw: bytes) -> bytes | None:
    """A kubelet CRI "P" line's text (the first part of a line the runtime split), or None."""
    if CRI_PARTIAL_LITERAL not in raw:
        return None
    found = _CRI_PARTIAL.match(_ANSI.sub(b"", raw) if b"\x1b" in raw else raw)
    return None if found is None else found.string[found.end() :]


def code_block_indent(head: bytes) -> bool:
    """A log pasted as a Markdown indented code block: each of its first non-blank lines begins with four
    spaces (a bare log's frames have two, so a log that begins inside a traceback is none; a log of one line
    so indented is a paste too)."""
    lines = [line for line in head.split(b"\n", CODE_BLOCK_LINES * 4)[: CODE_BLOCK_LINES * 4] if line.strip()][:CODE_BLOCK_LINES]
    return bool(lines) and all(line.startswith(CODE_BLOCK) for line in lines)

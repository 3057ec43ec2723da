"""Does a log read the same however it was carried? Every labelled log, bare and under every carrier.

Real logs reach a user through tools that put their own text before every line: `docker compose logs`,
`docker logs -t` / `kubectl logs --timestamps`, kubelet's CRI log files, journalctl, Ray's worker
prefixes, `srun --label`, Open MPI's `--tag-output`, a CI console, moreutils' `ts`, a terminal's
colours, CRLF line ends, a Markdown quote or code block. A carrier adds nothing about why the server
failed, so it must change nothing: this script diagnoses each labelled log bare (as
`diagnose_confusion.py --bare` does, with its functions) and under each wrapper, and prints per wrapper
the logs whose class changed and those whose first evidence line changed (another line of the log,
or the same line read differently; the wrapper's own text around it does not count).

Manifests: tests/fixtures/logs/manifest.jsonl and each folder's manifest.jsonl under it but for
batch28-heldout's and any later batch's (folders being collected, kept unseen until their collectors
have measured them untouched), and ../shared/sample-logs/manifest.jsonl.

    python benchmarks/diagnose_wrappers.py             # the counts per wrapper
    python benchmarks/diagnose_wrappers.py --changes   # and each change
    python benchmarks/diagnose_wrappers.py --wrapper cri --wrapper ray --changes

Every wrapper is a pure function of (line index, line, the log's engine) built from the format its
tool prints; the timestamps are a fixed start plus a constant step per line (deterministic), but for
`docker-t-gaps`, which keeps the log's own time gaps where its lines carry SGLang's or vLLM's stamp.
"""

from __future__ import annotations

import argparse
import io
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from diagnose_confusion import HEALTHY, read_manifest  # noqa: E402

from fleet.host.diagnose.classify import Diagnosis, diagnose_file, diagnose_stream  # noqa: E402
from fleet.host.engines.sglang.logparse import clean_line, strip_prefix  # noqa: E402

LOGS = ROOT / "tests" / "fixtures" / "logs"
SHARED = ROOT.parent / "shared" / "sample-logs" / "manifest.jsonl"
# Folders being collected now, or collected but not yet measured untouched by their collectors: never read
# here. batch28-heldout by name; any later batch too (batch29-heldout appeared during round twenty-one).
UNSEEN = {"batch28-heldout", "batch29-heldout"}
FIRST_UNSEEN_BATCH = 28
_BATCH = re.compile(r"batch(\d+)-heldout")


def unseen(folder: str) -> bool:
    found = _BATCH.fullmatch(folder)
    return folder in UNSEEN or (found is not None and int(found.group(1)) >= FIRST_UNSEEN_BATCH)


START = datetime(2025, 7, 25, 7, 53, 8, 217487, tzinfo=timezone.utc)
STEP = timedelta(milliseconds=137)

# A wrapper: (index of the line in the log, the line without its end, engine) -> the carried text of that
# line (a carrier that splits a line returns several lines joined by "\n").
Wrapper = Callable[[int, str, str], str]


def _at(index: int) -> datetime:
    return START + STEP * index


def _rfc3339_nano(when: datetime) -> str:
    # Go's time.RFC3339Nano with Docker's fixed nine digits (jsonmessage.RFC3339NanoFixed,
    # "2006-01-02T15:04:05.000000000Z07:00"): the nanoseconds padded, UTC as "Z".
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond * 1000 + 123:09d}Z"


# docker compose logs (compose v2, cmd/formatter/logs.go LogConsumer): the service's container name
# padded to the longest name of the project, then "| ", colour per service when on a terminal.
def compose(index: int, line: str, engine: str) -> str:
    return f"{(engine or 'server') + '-1':<14}| {line}"


def compose_colour(index: int, line: str, engine: str) -> str:
    return f"\x1b[36m{(engine or 'server') + '-1':<14}|\x1b[0m {line}"


# `docker logs -t` / `docker compose logs -t` (RFC3339Nano fixed, then one space before the line) and
# `kubectl logs --timestamps` (the kubelet's RFC3339Nano, then a space).
def docker_t(index: int, line: str, engine: str) -> str:
    return f"{_rfc3339_nano(_at(index))} {line}"


def compose_t(index: int, line: str, engine: str) -> str:
    return compose(index, docker_t(index, line, engine), engine)


_VLLM_STAMP = re.compile(r"(?:INFO|WARNING|ERROR|DEBUG|CRITICAL) (\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})(?:\.(\d{3}))?")


def _own_time(line: str) -> datetime | None:
    """The log's own stamp on this line: SGLang's "[2025-01-02 03:04:05 TP0]" (and journald's ISO stamp, via
    strip_prefix) or vLLM's "INFO 01-02 03:04:05" (the year taken from START)."""
    stamp = strip_prefix(line).timestamp
    if stamp is not None:
        return stamp.replace(tzinfo=None)
    found = _VLLM_STAMP.search(clean_line(line)[:120])
    if found is None:
        return None
    month, day, hour, minute, second, millis = found.groups()
    try:
        return datetime(START.year, int(month), int(day), int(hour), int(minute), int(second), int(millis or 0) * 1000)
    except ValueError:
        return None


def docker_t_gaps(lines: Sequence[str]) -> list[str]:
    """`docker logs -t` that keeps the log's own time gaps: a line with its own stamp is carried at that time,
    a line without one a step after the line before (never before it: a carrier's clock runs forward)."""
    out: list[str] = []
    origin: datetime | None = None
    when = START
    for index, line in enumerate(lines):
        own = _own_time(line)
        if own is not None:
            if origin is None:
                origin = own
            when = max(when, START + (own - origin))
        elif index:
            when += STEP
        out.append(f"{_rfc3339_nano(when)} {line}")
    return out


# kubelet's CRI container log file (/var/log/pods/.../0.log; kubelet pkg/kubelet/kuberuntime/logs and
# the CRI spec's "timestamp stream tag log": RFC3339Nano with the node's offset, "stdout"/"stderr", "F" for
# a full line, "P" for a partial one the runtime split at its maximum line size, containerd's
# max_container_log_line_size, 16 KiB by default).
_CRI_ZONE = timezone(timedelta(hours=8))


def _cri_stamp(index: int) -> str:
    when = _at(index).astimezone(_CRI_ZONE)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond * 1000 + 80:09d}" + when.strftime("%z")[:3] + ":" + when.strftime("%z")[3:]


def _stream(line: str) -> str:
    return "stderr" if any(word in line for word in ("Error", "ERROR", "Traceback", "File ", "WARNING")) else "stdout"


def cri(index: int, line: str, engine: str) -> str:
    return f"{_cri_stamp(index)} {_stream(line)} F {line}"


CRI_SPLIT = 120  # a small max_container_log_line_size, so that partial lines occur in these logs


def cri_partial(index: int, line: str, engine: str) -> str:
    parts = [line[start : start + CRI_SPLIT] for start in range(0, len(line), CRI_SPLIT)] or [""]
    stamp, stream = _cri_stamp(index), _stream(line)
    return "\n".join(f"{stamp} {stream} {'F' if number == len(parts) - 1 else 'P'} {part}" for number, part in enumerate(parts))


# journalctl (systemd src/shared/logs-show.c output_short): `-o short-iso` "%Y-%m-%dT%H:%M:%S%z", the host,
# the identifier and "[pid]: "; the default `-o short` "%b %d %H:%M:%S".
def journal_iso(index: int, line: str, engine: str) -> str:
    return f"{_at(index).strftime('%Y-%m-%dT%H:%M:%S%z')} gpu-node-3 {engine or 'server'}[61613]: {line}"


def journal_short(index: int, line: str, engine: str) -> str:
    return f"{_at(index).strftime('%b %d %H:%M:%S')} gpu-node-3 {engine or 'python'}[61613]: {line}"


# Ray's worker output relayed to the driver (ray/_private/worker.py print_worker_logs): "(" actor name
# " pid=" pid ", ip=" node ip ")" in colorama's cyan, reset, a space; "(pid=N)" for a task on the
# driver's node. The actor: vLLM's RayWorkerWrapper, SGLang's SGLangEngine (as verl/slime run it).
def ray(index: int, line: str, engine: str) -> str:
    actor = "SGLangEngine" if engine == "sglang" else "RayWorkerWrapper"
    return f"\x1b[36m({actor} pid=952, ip=10.0.0.1)\x1b[0m {line}"


def ray_task(index: int, line: str, engine: str) -> str:
    return f"\x1b[36m(pid=952)\x1b[0m {line}"


# Slurm `srun --label` (src/srun: "prepend task number to lines of stdout/err", "%*d: " padded to the
# widest task id).
def srun(index: int, line: str, engine: str) -> str:
    return f"0: {line}"


# `kubectl logs --prefix` ("Prefix each log line with the log source (pod name and container name)":
# "[pod/<pod>/<container>] ").
def kubectl_prefix(index: int, line: str, engine: str) -> str:
    return f"[pod/{engine or 'server'}-0/{engine or 'server'}] {line}"


# torchrun --tee 3 (torch/distributed/elastic/multiprocessing: each line prefixed by
# "[${role_name}${local_rank}]:", torchrun's role "default"; no space after it).
def torchrun(index: int, line: str, engine: str) -> str:
    return f"[default0]:{line}"


# Open MPI `mpirun --tag-output` (orte/mca/iof/base/iof_base_output.c, "[%s,%s]<%s>:" job, rank, stream,
# no space) and with `--timestamp-output` ctime's date before it.
def mpi(index: int, line: str, engine: str) -> str:
    return f"[1,0]<stdout>:{line}"


def mpi_date(index: int, line: str, engine: str) -> str:
    return f"{_at(index).strftime('%a %b %d %H:%M:%S %Y')}[1,0]<stdout>:{line}"


# Buildkite: the job log copied from the web view ("  | " before every line, as batch27's CI logs show)
# and buildkite-agent --timestamp-lines ("RFC3339 UTC timestamps at the beginning of each log line",
# agent CHANGELOG 3.0-beta.29: "[2025-07-25T07:53:08Z] ").
def buildkite(index: int, line: str, engine: str) -> str:
    return f"  | {line}"


def buildkite_ts(index: int, line: str, engine: str) -> str:
    return f"[{_at(index).strftime('%Y-%m-%dT%H:%M:%SZ')}] {line}"


# GitHub Actions' raw job log: an RFC 3339 UTC stamp with seven fractional digits, then a space.
def github(index: int, line: str, engine: str) -> str:
    when = _at(index)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond * 10 + 3:07d}Z {line}"


# moreutils ts(1): default format "%b %d %H:%M:%S", then a space; `ts '%Y-%m-%d %H:%M:%.S'` likewise.
def ts(index: int, line: str, engine: str) -> str:
    return f"{_at(index).strftime('%b %d %H:%M:%S')} {line}"


def ts_iso(index: int, line: str, engine: str) -> str:
    when = _at(index)
    return when.strftime("%Y-%m-%d %H:%M:%S.") + f"{when.microsecond:06d} {line}"


# A terminal's colours kept by tee / script(1): SGR codes around the line (bold red, reset).
def ansi(index: int, line: str, engine: str) -> str:
    return f"\x1b[1;31m{line}\x1b[0m" if line else line


# The same colours copied as text from a page that renders the escape character as "ESC" (GitHub's log view, a
# terminal copy tool): "ESC[1;36m...ESC[0;0m", as batch38's Pascal log carries them around vLLM's process tag.
def ansi_text(index: int, line: str, engine: str) -> str:
    return f"ESC[1;36m{line}ESC[0;0m" if line else line


def crlf(index: int, line: str, engine: str) -> str:
    return line + "\r"


# Markdown: a block quote ("> ", CommonMark 5.1) and an indented code block (four spaces, CommonMark 4.4).
def quote(index: int, line: str, engine: str) -> str:
    return f"> {line}"


def indent(index: int, line: str, engine: str) -> str:
    return f"    {line}"


WRAPPERS: dict[str, Wrapper] = {
    "compose": compose,
    "compose-colour": compose_colour,
    "compose-t": compose_t,
    "docker-t": docker_t,
    "cri": cri,
    "cri-partial": cri_partial,
    "journal-iso": journal_iso,
    "journal-short": journal_short,
    "ray": ray,
    "ray-task": ray_task,
    "srun": srun,
    "kubectl-prefix": kubectl_prefix,
    "torchrun": torchrun,
    "mpi": mpi,
    "mpi-date": mpi_date,
    "buildkite": buildkite,
    "buildkite-ts": buildkite_ts,
    "github": github,
    "ts": ts,
    "ts-iso": ts_iso,
    "ansi": ansi,
    "ansi-text": ansi_text,
    "crlf": crlf,
    "quote": quote,
    "indent": indent,
}
WHOLE_LOG: dict[str, Callable[[Sequence[str]], list[str]]] = {"docker-t-gaps": docker_t_gaps}
NAMES = [*WRAPPERS, *WHOLE_LOG]


@dataclass(frozen=True)
class Entry:
    path: Path
    label: str
    engine: str


def manifests() -> list[Path]:
    # Only the manifest's own folder is looked at: an unseen folder's files are never opened.
    folders = [folder for folder in sorted(LOGS.iterdir()) if folder.is_dir() and not unseen(folder.name)]
    found = [path for path in (LOGS / "manifest.jsonl", *(folder / "manifest.jsonl" for folder in folders)) if path.exists()]
    return [*found, SHARED] if SHARED.exists() else found


def entries(paths: Sequence[Path]) -> list[Entry]:
    return [Entry(log, label, engine) for manifest in paths for log, label, engine in read_manifest(manifest)]


def read_lines(path: Path) -> list[str]:
    return path.read_bytes().decode("utf-8", "surrogateescape").split("\n")


def wrap(name: str, lines: Sequence[str], engine: str) -> tuple[list[str], list[int]]:
    """The log carried by one wrapper, and for each carried line the index of the log's line it carries."""
    body = list(lines)
    ended = bool(body) and body[-1] == ""
    if ended:
        body.pop()
    if name in WHOLE_LOG:
        out = WHOLE_LOG[name](body)
        origin = list(range(len(body)))
    else:
        out, origin = [], []
        for index, line in enumerate(body):
            for part in WRAPPERS[name](index, line, engine).split("\n"):
                out.append(part)
                origin.append(index)
    return out, origin


def diagnose_lines(lines: Sequence[str], path: str) -> Diagnosis:
    data = "\n".join(lines).encode("utf-8", "surrogateescape")
    return diagnose_stream(io.BytesIO(data + b"\n" if data else b""), path)


def _plain(text: str) -> str:
    return clean_line(text).strip()


@dataclass(frozen=True)
class Change:
    entry: Entry
    bare_class: str
    wrapped_class: str
    bare_evidence: str
    wrapped_evidence: str

    @property
    def class_changed(self) -> bool:
        return self.bare_class != self.wrapped_class


def compare(entry: Entry, bare: Diagnosis, name: str, lines: Sequence[str]) -> Change | None:
    """None when the carried log reads as the bare one: the same class and the same first evidence line
    (the same line of the log, its text the bare text with only the carrier's text around it)."""
    carried, origin = wrap(name, lines, entry.engine)
    wrapped = diagnose_lines(carried, str(entry.path))
    bare_class = bare.failure_class or HEALTHY
    wrapped_class = wrapped.failure_class or HEALTHY
    bare_text = bare.evidence[0].text if bare.evidence else ""
    wrapped_text = wrapped.evidence[0].text if wrapped.evidence else ""
    same_line = (not bare.evidence and not wrapped.evidence) or (
        bool(bare.evidence and wrapped.evidence)
        and 0 < wrapped.evidence[0].line <= len(origin)
        and origin[wrapped.evidence[0].line - 1] == bare.evidence[0].line - 1
        and (_plain(bare_text) in _plain(wrapped_text) or (name == "cri-partial" and _plain(wrapped_text) in _plain(bare_text)))
    )
    if bare_class == wrapped_class and same_line:
        return None
    return Change(entry, bare_class, wrapped_class, bare_text, wrapped_text)


def run(selected: Sequence[Entry], names: Sequence[str]) -> dict[str, list[Change]]:
    changes: dict[str, list[Change]] = {name: [] for name in names}
    for entry in selected:
        lines = read_lines(entry.path)
        bare = diagnose_file(entry.path)
        for name in names:
            change = compare(entry, bare, name, lines)
            if change is not None:
                changes[name].append(change)
    return changes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wrapper", action="append", choices=NAMES, help="only this wrapper (repeatable)")
    parser.add_argument("--changes", action="store_true", help="list every change: the log, bare -> wrapped class, both evidence lines")
    args = parser.parse_args(argv)
    names = args.wrapper or NAMES
    paths = manifests()
    selected = entries(paths)
    changes = run(selected, names)
    print(f"{len(selected)} labelled logs from {len(paths)} manifests (not batch{FIRST_UNSEEN_BATCH}-heldout or later), {len(names)} wrappers")
    print(f"{'wrapper':<15} {'class changed':>13} {'evidence changed':>16}")
    total_class = total_evidence = 0
    for name in names:
        class_changed = sum(change.class_changed for change in changes[name])
        evidence_changed = len(changes[name]) - class_changed
        total_class += class_changed
        total_evidence += evidence_changed
        print(f"{name:<15} {class_changed:>13} {evidence_changed:>16}")
    print(f"{'all':<15} {total_class:>13} {total_evidence:>16}   (of {len(selected) * len(names)} carried logs)")
    if args.changes:
        for name in names:
            for change in changes[name]:
                where = change.entry.path.relative_to(ROOT.parent) if change.entry.path.is_relative_to(ROOT.parent) else change.entry.path
                print(f"{name}: {where}: {change.bare_class} -> {change.wrapped_class}")
                print(f"    bare:    {change.bare_evidence[:160]!r}")
                print(f"    wrapped: {change.wrapped_evidence[:160]!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""`fleet provision`: make hosts ready for a sweep, idempotently, and say what was found and changed.

Per host, in parallel: facts -> stale fleet servers cleared -> preflight (stops here on a failed
check) -> directories -> each model of the playbook fetched into the cache and staged -> the
agent's systemd unit. A second run finds everything in place and changes nothing.
"""

from __future__ import annotations

import difflib
import json
import logging
import posixpath
import re
import shlex
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleet.connect import collect_facts, transport_for
from fleet.errors import FleetError
from fleet.facts import HostFacts
from fleet.host.agent import AGENT_MODULE
from fleet.host.agent.services import FLEET_SERVICE_PIDS_SH
from fleet.host.agent.tools import TOOL_PROBE_TIMEOUT_S, ToolFound, probe_tools
from fleet.host.contract.lease import Claim
from fleet.host.modelcard import hf_files_from_card, load_model_card
from fleet.inventory import EngineKind, Host, ServiceManager, Target
from fleet.layout import agent_dir, model_cache_dir
from fleet.playbook import ModelRef, Playbook
from fleet.provision.lease import end_of_provision, hold_for_provision
from fleet.provision.models import MARKER, QUICK_S, Change, Marker, ModelState, ensure_cached, current_cache, ensure_staged, mirror_listing, read_state, read_states
from fleet.errors import ModelError
from fleet.provision.preflight import PreflightReport, PreflightRequirements, run_preflight
from fleet.provision.units import render_agent_unit
from fleet.retry import CONNECT, TRANSFER, retrying
from fleet.transport.base import Transport
from fleet.transport.fanout import fan_out
from fleet.transport.reboot import read_boot_id


def _module_pattern(module: str, *args: str) -> str:
    """A pgrep pattern of `python -m module args...`. The bracket keeps the pattern from matching
    the shell that runs pgrep, whose own command line contains it."""
    return " ".join([f"-m [{module[0]}]{re.escape(module[1:])}", *map(re.escape, args)])


# Fleet's agent: while one runs, the servers are its own to manage (it clears its stale ones itself).
log = logging.getLogger(__name__)
AGENT_PATTERN = _module_pattern(AGENT_MODULE, "run")
FETCH_TIMEOUT_S = 6 * 3600.0
STAGE_TIMEOUT_S = 3600.0
# Rounds of fetching and staging, each begun again after a reboot wiped the fast copies under it.
MODEL_ROUNDS = 3


@dataclass
class HostReport:
    host: str
    status: str = "ok"  # ok | changed | failed
    changes: list[Change] = field(default_factory=list)
    reason: str = ""
    preflight: PreflightReport | None = None
    facts: HostFacts | None = None
    seconds: float = 0.0
    models: dict[str, dict[str, Any]] = field(default_factory=dict)  # label -> revision, source, bytes, dir

    def to_json(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "status": self.status,
            "reason": self.reason or None,
            "changes": [{"action": c.action, "detail": c.detail, "bytes": c.bytes} for c in self.changes],
            "preflight": self.preflight.model_dump(mode="json") if self.preflight else None,
            "models": self.models,
            "seconds": round(self.seconds, 2),
        }


# What a host's model fetch takes from the controller's environment: the hub token, and the hub's
# address where it is a mirror (huggingface_hub reads HF_ENDPOINT). They reach the host only in the
# environment of the fetch (see fleet.transport.base), never in a file or a log.
SECRET_NAMES = ("HF_TOKEN", "HF_ENDPOINT")


@dataclass(frozen=True)
class ProvisionOptions:
    """Build it with `provision_options`, so that provision, sweep and resume agree."""

    dry_run: bool = False
    mirror_root: Path = Path(".")  # relative `mirror:` paths are relative to this (the playbook's folder)
    secrets: Mapping[str, str] = field(default_factory=dict, repr=False)  # never printed with the options
    fetch_timeout_s: float = FETCH_TIMEOUT_S
    stage_timeout_s: float = STAGE_TIMEOUT_S
    lease: Claim | None = None  # a sweep's claim on its hosts' leases; None: `fleet provision`'s own (fleet.provision.lease)


def provision_options(mirror_root: Path, environ: Mapping[str, str], *, dry_run: bool = False, lease: Claim | None = None) -> ProvisionOptions:
    """The one way to make provisioning options: `mirror_root` is the folder of the playbook as the
    user gave it (a sweep records it for its resume), secrets come from `environ` (the
    controller's environment) by name, so `fleet provision`, `fleet sweep` and a resume hand the
    hosts the same token and resolve a relative mirror against the same folder."""
    secrets = {name: environ[name] for name in SECRET_NAMES if environ.get(name)}
    return ProvisionOptions(dry_run=dry_run, mirror_root=Path(mirror_root).resolve(), secrets=secrets, lease=lease)


def models_of(playbook: Playbook) -> list[ModelRef]:
    """The target model and every draft a method uses, each once."""
    models = [playbook.model]
    used = {m.draft for m in playbook.methods.values() if m.draft}
    for name, draft in playbook.drafts.items():
        if name in used and draft not in models:
            models.append(draft)
    return models


# ---------------------------------------------------------------------------------------------
# Steps


def clear_stale_servers(t: Transport, dry_run: bool) -> tuple[list[Change], list[int]]:
    """Servers left by an earlier run hold ports and GPUs; clear them unless a fleet agent is running.
    Stale means marked as fleet's own (the agent's rule, `FLEET_SERVICE_PIDS_SH`): a colleague's
    server, whatever its command line, is never touched (preflight then reports it as foreign)."""
    script = f"if pgrep -f -- {shlex.quote(AGENT_PATTERN)} >/dev/null; then echo agent; exit 0; fi; {FLEET_SERVICE_PIDS_SH}"
    found = [p for p in t.run(script, timeout=QUICK_S).stdout.split() if p.isdigit()]
    if not found:
        return [], []
    change = Change("clear", f"stale server processes {', '.join(found)} (killed with their process groups)")
    if dry_run:
        return [change], [int(p) for p in found]  # still there: fleet's own, not foreign, for preflight
    pids = " ".join(shlex.quote(p) for p in found if p.isdigit())
    kill = (
        f"for p in {pids}; do g=$(ps -o pgid= -p $p | tr -d ' '); [ -n \"$g\" ] && kill -TERM -- -$g 2>/dev/null; done; "
        f"sleep 2; for p in {pids}; do g=$(ps -o pgid= -p $p | tr -d ' '); [ -n \"$g\" ] && kill -KILL -- -$g 2>/dev/null; done; true"
    )
    t.run(kill, timeout=QUICK_S, check=True)
    return [change], []


def ensure_dirs(t: Transport, host: Target, dry_run: bool) -> list[Change]:
    wanted = [host.paths.work_dir, posixpath.join(host.paths.work_dir, "sweeps"), host.paths.model_cache]
    if host.paths.staging:
        wanted.append(host.paths.staging)
    missing = t.run(" ".join(f"[ -d {shlex.quote(d)} ] || echo {shlex.quote(d)};" for d in wanted), timeout=QUICK_S).stdout.split("\n")
    missing = [d for d in missing if d]
    if not missing:
        return []
    if not dry_run:
        t.run(["mkdir", "-p", *missing], timeout=QUICK_S, check=True)
    return [Change("mkdir", ", ".join(missing))]


def ensure_sim_model(t: Transport, model: ModelRef, host: Target, dry_run: bool, state: ModelState | None = None) -> list[Change]:
    """A sim host serves a weightless model directory made from the model card; it fetches nothing.
    `state`: the model's markers as just read (saves reading the cache's marker again)."""
    if not model.card:
        raise ModelError(f"{host.name}: {model.label} needs `card:` (a model card) to be served by the sim engine")
    directory = model_cache_dir(model, host)
    files = {name: (json.dumps(content, indent=1, sort_keys=True) + "\n").encode() for name, content in hf_files_from_card(load_model_card(model.card)).items()}
    marker = Marker(f"card:{model.card}", model.revision, {name: len(data) for name, data in files.items()})
    if state is not None:
        if state.cached == marker:
            return []
    else:
        present = t.run(["cat", posixpath.join(directory, MARKER)], timeout=QUICK_S)
        if present.ok and Marker.parse(present.stdout) == marker:
            return []
    change = Change("fetch", f"{model.label}: weightless sim model from card {model.card} into {directory}")
    if not dry_run:
        for name, data in files.items():
            t.put_bytes(data, posixpath.join(directory, name), timeout=QUICK_S)
        t.put_bytes(marker.to_bytes(), posixpath.join(directory, MARKER), timeout=QUICK_S)
    return [change]


def ensure_agent_unit(t: Transport, host: Host, dry_run: bool) -> list[Change]:
    if host.service_manager is not ServiceManager.systemd:
        return []
    unit = render_agent_unit(work_dir=host.paths.work_dir, agent_dir=agent_dir(host), python=host.engine.python)
    current = t.run(["cat", unit.path], timeout=QUICK_S)
    old = current.stdout if current.ok else ""
    if old == unit.text:
        return []
    diff = "".join(difflib.unified_diff(old.splitlines(True), unit.text.splitlines(True), unit.path + " (now)", unit.path + " (new)"))
    if not dry_run:
        t.put_bytes(unit.text.encode(), unit.path, timeout=QUICK_S)
        t.run(["systemctl", "daemon-reload"], timeout=60, check=True)
    return [Change("unit", f"{unit.name}\n{diff}")]


def _model_identity(model: ModelRef, state: ModelState) -> dict[str, Any]:
    """Which copy of a model the engine will load (from its markers as they are now): for
    results, so a figure names its weights."""
    marker = state.staged or state.cached
    return {
        "requested_revision": model.revision,
        "revision": marker.revision if marker else None,
        "source": marker.source if marker else f"path:{model.path}",
        "bytes": marker.total_bytes if marker else None,
        "dir": state.serve_dir,
    }


@dataclass(frozen=True)
class CopySizes:
    """What provisioning will copy for one model: bytes into the cache and into the fast dir, and
    the bytes of the stale copies there that they replace (removed first: rsync --delete into the
    cache, the stage script empties the fast copy), room the copy has beyond df's figure."""

    fetch: int = 0
    stage: int = 0
    cache_freed: int = 0
    stage_freed: int = 0


def copy_sizes(model: ModelRef, state: ModelState, mirror_root: Path) -> CopySizes:
    """The sizes of the copy the playbook asks for (the mirror as it is now; the model card's
    checkpoint for the hub), from the model's markers as read -- never those of a cached copy it
    will replace (another source, an older fetch: fleet.provision.models.current_cache). A size
    nobody knows counts 0 here: the stage checks the room left on the host against the fetched
    copy's size before it copies."""
    if model.path:
        return CopySizes()
    files = mirror_listing(model, mirror_root)
    current = current_cache(model, state, files)
    fetch = 0
    if current is not None:
        size = current.total_bytes
    elif files is not None:
        size = fetch = sum(files.values())
    elif model.card and not model.mirror:
        card = load_model_card(model.card)
        size = fetch = card.checkpoint_bytes or card.weights_bytes
    else:
        size = 0
    cache_freed = state.cached.total_bytes if fetch and state.cached else 0
    if state.serve_dir == state.cache_dir or (state.staged is not None and state.staged == current):
        return CopySizes(fetch, 0, cache_freed)
    return CopySizes(fetch, size, cache_freed, state.staged.total_bytes if state.staged else 0)


def client_tool_uses(target: Target, playbook: Playbook) -> dict[str, list[tuple[str, str]]]:
    """Which interpreter runs which workload's client tool on `target` (python -> its (workload,
    tool) pairs): the workload's `client.python`, else the engine's for every engine the playbook
    serves. What the SSH preflight probes on a host and a Slurm node's preparation on the node."""
    engines = sorted({engine for method in playbook.methods for engine in playbook.engines_of(method)})
    wanted: dict[str, list[tuple[str, str]]] = {}
    for name, workload in playbook.workloads.items():
        for engine in engines:
            client = workload.resolved_client(target.engine.python_for(engine))
            if client is not None and (name, client["tool"]) not in wanted.setdefault(client["python"], []):
                wanted[client["python"]].append((name, client["tool"]))
    return wanted


def probe_client_tools(t: Transport, host: Host, playbook: Playbook) -> list[ToolFound]:
    """For each workload a client tool measures: can the interpreter that will run it on this host
    find the tool's module? One round trip per interpreter."""

    def run(argv: list[str]) -> tuple[int, str, str]:
        done = t.run(["sh", "-c", "cd / && exec " + shlex.join(argv)], timeout=TOOL_PROBE_TIMEOUT_S)
        return done.exit_code, done.stdout, done.stderr

    return probe_tools(client_tool_uses(host, playbook), run)


def provision_host(host: Host, playbook: Playbook, options: ProvisionOptions, transport: Transport | None = None) -> HostReport:
    t = transport or transport_for(host)
    report = HostReport(host.name)
    try:
        facts = retrying(CONNECT, host.name, lambda: collect_facts(t, host), idempotent=True)
        report.changes += hold_for_provision(t, host, options.lease, options.dry_run)  # before stale servers are cleared: they may be a live sweep's
        cleared, own_pids = clear_stale_servers(t, options.dry_run)
        report.changes += cleared
        if report.changes and not options.dry_run:
            facts = collect_facts(t, host)  # GPUs and ports were just freed
        report.facts = facts
        models = models_of(playbook)
        weightless = {m.label for m in models if host.engine.kind is EngineKind.sim and not (m.mirror or m.path)}
        # Every model's markers in one round trip; each model's steps start from them.
        states = dict(zip([m.label for m in models], read_states(t, models, host)))
        sizes = [copy_sizes(m, states[m.label], options.mirror_root) for m in models if m.label not in weightless]
        requirements = PreflightRequirements.for_host(
            host,
            model_bytes_to_fetch=sum(c.fetch for c in sizes) or None,
            bytes_to_stage=sum(c.stage for c in sizes) or None,
            cache_bytes_freed=sum(c.cache_freed for c in sizes),
            staging_bytes_freed=sum(c.stage_freed for c in sizes),
            own_gpu_pids=own_pids,
            client_tools=retrying(CONNECT, host.name, lambda: probe_client_tools(t, host, playbook), idempotent=True),
        )
        report.preflight = run_preflight(facts, requirements, host=host.name)
        if not report.preflight.ok:
            report.status, report.reason = "failed", report.preflight.summary()
            return report
        boot = facts.boot_id
        for staging_round in range(1, MODEL_ROUNDS + 1):
            round_changes: list[Change] = []
            failure: FleetError | None = None
            try:
                round_changes += ensure_dirs(t, host, options.dry_run)
                for model in models:
                    changes, state = _provision_model(t, model, host, options, states[model.label], weightless=model.label in weightless)
                    round_changes += changes
                    if not options.dry_run:
                        report.models[model.label] = _model_identity(model, state)
            except FleetError as exc:
                if options.dry_run:
                    raise
                # A reboot also fails the call it cuts short (the stage's start, a verify, the
                # next model's fetch): on a new boot that failure is the reboot's, and the round
                # runs again from the markers like one the reboot left alone (every step is idempotent).
                failure = exc
            report.changes += round_changes
            if failure is None and (options.dry_run or not round_changes):
                break
            # A reboot while one model was fetched or staged wipes the fast copies made before it
            # (its own restarts where it left off): read every model's markers again on a new boot.
            now = _boot_after_failure(t, host) if failure is not None else retrying(CONNECT, host.name, lambda: read_boot_id(t), idempotent=True)
            if not boot or not now or now == boot:  # (a host whose boot id cannot be read: no way to tell)
                if failure is not None:
                    raise failure
                break
            if staging_round == MODEL_ROUNDS:
                raise ModelError(f"{host.name}: rebooted during each of {MODEL_ROUNDS} rounds of model staging; not staging again") from failure
            cut = f" ({failure})" if failure is not None else ""
            log.warning("%s: rebooted while its models were staged (boot %s, now %s)%s: checking every model again", host.name, boot, now, cut)
            boot = now
            states = dict(zip([m.label for m in models], read_states(t, models, host)))
        report.changes += ensure_agent_unit(t, host, options.dry_run)
        report.status = "changed" if report.changes else "ok"
    except (FleetError, OSError) as exc:
        report.status, report.reason = "failed", failure_reason(exc)
    except Exception as exc:
        # A bug (once an `assert` on a reply garbled by a host's login banner): still this host's
        # failure, said, and its lease released below; never a sweep left without a reason.
        log.exception("%s: provisioning failed", host.name)
        report.status, report.reason = "failed", failure_reason(exc)
    except BaseException:
        report.status = "failed"  # KeyboardInterrupt: the lease is released below all the same
        raise
    finally:
        end_of_provision(t, host, options.lease, options.dry_run, failed=report.status == "failed")
        if transport is None:
            t.close()
    return report


def _boot_after_failure(t: Transport, host: Host) -> str:
    """The host's boot id once it answers again after a failed call; '' where it cannot be read
    (the failure then stands as it was). A rebooting host answers again within CONNECT's bound."""
    try:
        return str(retrying(CONNECT, host.name, lambda: read_boot_id(t), idempotent=True))
    except FleetError:
        return ""


def _provision_model(t: Transport, model: ModelRef, host: Host, options: ProvisionOptions, state: ModelState, *, weightless: bool) -> tuple[list[Change], ModelState]:
    """The model fetched and staged from `state` (its markers as read); the changes, and the
    markers afterwards (read again only where something changed)."""

    def transfer(action: Callable[[], object]) -> object:
        return retrying(TRANSFER, host.name, action, idempotent=True)

    def poll(action: Callable[[], object]) -> object:
        return retrying(CONNECT, host.name, action, idempotent=True)

    if weightless:
        changes = ensure_sim_model(t, model, host, options.dry_run, state)
    else:
        changes = ensure_cached(
            t,
            model,
            host,
            state,
            dry_run=options.dry_run,
            mirror_root=options.mirror_root,
            transfer=transfer,
            timeout=options.fetch_timeout_s,
            secrets=options.secrets,
        )
    if changes and not options.dry_run:
        state = read_state(t, model, host)
    if options.dry_run and changes:
        # The cache will be filled first; staging follows from it.
        return changes + ([Change("stage", f"{model.label} -> {state.serve_dir}")] if state.serve_dir != state.cache_dir else []), state
    staged = ensure_staged(t, state, dry_run=options.dry_run, poll=poll, timeout=options.stage_timeout_s)
    if staged and not options.dry_run:
        state = read_state(t, model, host)
    return changes + staged, state


def provision(
    hosts: Sequence[Host],
    playbook: Playbook,
    options: ProvisionOptions,
    deadline_s: float = 8 * 3600,
    *,
    connect: Callable[[Host], Transport] = transport_for,
) -> list[HostReport]:
    """Every host in parallel; `connect` makes each host's transport (tests pass fakes)."""

    def one(host: Host) -> HostReport:
        transport = connect(host)
        try:
            return provision_host(host, playbook, options, transport=transport)
        finally:
            transport.close()

    outcomes = fan_out({h.name: h for h in hosts}, one, deadline_s=deadline_s)
    reports = []
    for name, outcome in outcomes.items():
        if outcome.ok and outcome.value is not None:
            outcome.value.seconds = outcome.duration_s
            reports.append(outcome.value)
        else:
            reports.append(HostReport(name, "failed", reason=failure_reason(outcome.error), seconds=outcome.duration_s))
    return reports


def failure_reason(error: BaseException | None) -> str:
    """What failed, never empty: an error without a message (a bare `assert`) is named by its
    type and where it was raised."""
    if isinstance(error, (FleetError, OSError)) and str(error):
        return str(error)
    if error is None:
        return "failed without an error (a bug in fleet)"
    frames = traceback.extract_tb(error.__traceback__)
    where = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
    detail = f": {error}" if str(error) else ""
    return f"{type(error).__name__}{detail}{where}"

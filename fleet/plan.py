"""A sweep's plan: every run, which host and GPUs it gets, the exact launch command, and an ETA.

Pure: the playbook and the chosen hosts in, a Plan out. `fleet plan` prints it; the sweep executes it.
"""

from __future__ import annotations

from collections import defaultdict
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TextIO

from fleet.errors import ConfigError
from fleet.facts import HostFacts
from fleet.fixes.feasibility import apply_adjustments, check_server, hopeless
from fleet.fixes.quarantine import QuarantineEntry, QuarantineKey, QuarantineStore, gpu_arch
from fleet.host.engines import DEFAULT_ENGINE, ENGINE_NAMES
from fleet.host.engines import engine as engine_named
from fleet.host.engines.base import Feasibility, LaunchSpec, describe_adjustments, render_flag
from fleet.host.errors import ArgvError, ReleaseError
from fleet.host.nvidia_smi import KNOWN_GPUS, plays_declared
from fleet.inventory import EngineKind, Target
from fleet.launch import launch_spec
from fleet.layout import model_serve_dir, server_port
from fleet.planning.estimate import DurationHistory, Estimate, calibrate, estimate_run, estimate_server_start
from fleet.planning.ids import IdCache
from fleet.planning.schedule import HostSlots, Job, Schedule, schedule
from fleet.planning.starts import StartedServer, StartHistory
from fleet.playbook import AutoFix, FlagValue, Playbook, Run, ServerConfig, expand_runs
from fleet.workloads import comparability_warnings


@dataclass(frozen=True)
class Hardware:
    """What planning needs to know of a host: per-GPU memory, architecture, engine releases."""

    gpu_memory_mib: int | None = None
    arch: str | None = None  # "sm_120"
    engine_version: str | None = None  # the version of SGLang the host runs (facts, pin; for sim the release it plays); None: unknown
    other_versions: Mapping[str, str | None] = field(default_factory=dict)  # the same of each other engine the host serves, by name

    def version_of(self, engine: str = DEFAULT_ENGINE) -> str | None:
        return self.engine_version if engine == DEFAULT_ENGINE else self.other_versions.get(engine)

    def release_of(self, engine: str = DEFAULT_ENGINE) -> str:
        """The known release predictions are made for (the nearest one to the host's version)."""
        served = engine_named(engine)
        return served.choose_release(self.version_of(engine) or served.version_tested).release

    def release_note_of(self, engine: str = DEFAULT_ENGINE) -> str | None:
        """Set when the host's version is not a release fleet knows (planned with the nearest one)."""
        version = self.version_of(engine)
        return engine_named(engine).choose_release(version).note if version else None

    @property
    def engine_release(self) -> str:
        return self.release_of(DEFAULT_ENGINE)

    @property
    def release_note(self) -> str | None:
        return self.release_note_of(DEFAULT_ENGINE)


def engine_version_of(host: Target, facts: HostFacts | None = None, engine: str = DEFAULT_ENGINE) -> str | None:
    """The version of `engine` a host runs: its facts' version of the engine's package, which its host file pins
    (or, for a sim host, the release the simulator plays). Raises ConfigError, naming the host file
    and the pin's field, when the facts disagree with the pin (a different known release)."""
    pinned = host.engine.release_for(engine)
    served = engine_named(engine)
    if host.engine.kind is EngineKind.sim:
        return pinned or served.sim_release
    reported = facts.engine.package_version(served.name) if facts is not None and facts.engine else None
    if reported is None or pinned is None:
        return reported or pinned
    try:
        release = served.choose_release(reported).release
    except ReleaseError:
        return pinned  # facts that are not a version number: the pin says what the host runs
    if release != pinned:
        raise ConfigError(
            host.source_file,
            "engine.release" if engine == DEFAULT_ENGINE else f"engine.{engine}.release",
            f"the {served.title} release the host runs (its facts report {served.name} {reported}, planned as {release})",
            pinned,
        )
    return reported


def hardware_of(host: Target, facts: HostFacts | None = None) -> Hardware:
    version = engine_version_of(host, facts)
    others = {name: engine_version_of(host, facts, name) for name in ENGINE_NAMES if name != DEFAULT_ENGINE and host.engine.serves(name)}
    # Facts of the real host win -- but a sim host on a machine without its declared GPUs plays those.
    plays = host.engine.kind is EngineKind.sim and plays_declared(host.gpus.model, [g.name for g in facts.gpus] if facts else [])
    if facts is not None and facts.gpus and not plays:
        gpu = facts.gpus[0]
        return Hardware(gpu.memory_total_mib, gpu_arch(gpu.compute_capability), version, others)
    known = KNOWN_GPUS.get(host.gpus.model or "")
    return Hardware(known[0], gpu_arch(known[1]), version, others) if known else Hardware(engine_version=version, other_versions=others)


@dataclass(frozen=True)
class PlanOptions:
    memory_check: bool = True  # False: launch what the playbook says, even when predicted to fail
    quarantine: QuarantineStore | None = None
    hardware: Mapping[str, Hardware] = field(default_factory=dict)  # host name -> what facts say
    # Measured durations of earlier sweeps (results/durations.json): the ETA prefers them to priors.
    durations: DurationHistory | None = None
    # What earlier starts logged of their memory (results/starts.json): an engine that measures at
    # start-up what its planner must otherwise assume (vLLM) predicts the same launch from it.
    starts: StartHistory | None = None


@dataclass(frozen=True)
class PlannedServer:
    config: ServerConfig
    runs: tuple[Run, ...]
    host: str
    gpus: tuple[int, ...]
    port: int
    launch: LaunchSpec
    start_s: float
    end_s: float
    skip_reason: str | None = None  # not launched: quarantined, or replaced by a fixed variant
    prediction: str | None = None  # what the memory planner says of it
    provenance: Mapping[str, Any] | None = None  # for a variant fleet made: what it fixes
    engine_release: str | None = None  # the known release of its engine that its launch and prediction are for
    engine_release_note: str | None = None  # when the host's version is not one fleet knows


@dataclass(frozen=True)
class Plan:
    playbook: Playbook
    servers: tuple[PlannedServer, ...]
    schedule: Schedule
    unplaceable: tuple[tuple[ServerConfig, str], ...] = field(default=())
    # By run id and by server id: each estimate in wall seconds on its host (time-scaled for a sim),
    # with how many measurements stand behind it (0: the prior).
    run_estimates: Mapping[str, Estimate] = field(default_factory=dict)
    server_estimates: Mapping[str, Estimate] = field(default_factory=dict)
    # Each run's and server's id, computed once (make_plan fills it as it goes).
    ids: IdCache = field(default_factory=IdCache, compare=False, repr=False)

    @property
    def measured_runs(self) -> int:
        """Runs whose estimate rests on measurements of earlier sweeps."""
        found = (self.run_estimates.get(self.ids(run)) for _, run in self.runs)
        return sum(1 for estimate in found if estimate is not None and estimate.measured)

    @property
    def runs(self) -> list[tuple[PlannedServer, Run]]:
        return [(server, run) for server in self.servers for run in server.runs]

    def to_json(self) -> dict[str, Any]:
        return {**self._head(), "runs": list(self._runs_json()), **self._tail()}

    def write_json(self, stream: TextIO) -> None:
        """The text of `print(json.dumps(plan.to_json(), indent=2))`, written run by run: the memory it
        takes does not grow with the plan (the whole text, and the encoder's list of its pieces,
        took about 9 KiB per run: 450 MiB at 50k runs)."""
        head = json.dumps(self._head(), indent=2)
        stream.write(head[:-2] + ',\n  "runs": [')
        written = 0
        for run in self._runs_json():
            stream.write(("," if written else "") + "\n    " + json.dumps(run, indent=2).replace("\n", "\n    "))
            written += 1
        stream.write("\n  ]" if written else "]")
        tail = json.dumps(self._tail(), indent=2)
        stream.write(",\n" + tail[2:] + "\n")

    def _head(self) -> dict[str, Any]:
        return {"playbook": self.playbook.name}

    def _runs_json(self) -> Iterator[dict[str, Any]]:
        for server, run in self.runs:
            yield _run_json(server, run, self.ids(run), self.ids(server.config), self.run_estimates.get(self.ids(run)))

    def _tail(self) -> dict[str, Any]:
        return {
            "unplaceable": [{"server": config.label, "server_id": config.id, "reason": reason} for config, reason in self.unplaceable],
            "makespan_s": round(self.schedule.makespan_s, 1),
            "lower_bound_s": round(self.schedule.lower_bound_s, 1),
            "measured_runs": self.measured_runs,
        }


def _run_json(server: PlannedServer, run: Run, run_id: str, server_id: str, estimate: Estimate | None) -> dict[str, Any]:
    return {
        "id": run_id,
        "label": run.label,
        "server_id": server_id,
        "host": server.host,
        "gpus": list(server.gpus),
        "tp": server.config.tp,
        "method": server.config.method,
        "variant": server.config.variant,
        "workload": run.workload_name,
        "workload_kind": run.workload.kind,
        "port": server.port,
        "argv": server.launch.argv,
        "env": server.launch.env,
        "upstream_flags": server.launch.upstream,
        "notes": server.launch.notes,
        "skip_reason": server.skip_reason,
        "prediction": server.prediction,
        "engine_release": server.engine_release,
        "engine_release_note": server.engine_release_note,
        "provenance": dict(server.provenance) if server.provenance else None,
        "server_start_s": round(server.start_s, 1),
        "server_end_s": round(server.end_s, 1),
        "estimate_s": round(estimate.seconds, 1) if estimate else None,
        "estimate_measurements": estimate.measured if estimate else 0,  # 0: the prior of fleet.planning.estimate
    }


def launch_on(host: Target, config: ServerConfig, port: int, hardware: Hardware | None = None) -> LaunchSpec:
    """The exact command that starts `config` on `host`: its engine (release and fork: flag names
    changed in SGLang 0.5.14), its Python, its model copies."""
    hardware = hardware or hardware_of(host)
    engine = config.engine_name
    return launch_spec(
        host.engine.kind,
        config,
        python=host.engine.python_for(engine),
        model_path=model_serve_dir(config.model, host),
        draft_path=model_serve_dir(config.draft, host) if config.draft else None,
        port=port,
        engine_version=hardware.version_of(engine),
        fork=host.engine.fork_for(engine),
        declared_gpus=(host.gpus.count, host.gpus.model),
        sim_noise=host.engine.noise,
    )


def _quarantined(store: QuarantineStore | None) -> dict[QuarantineKey, QuarantineEntry]:
    """The quarantine as the plan starts, by key (the first entry of a key wins, as in
    QuarantineStore.matches): read once per plan, not once per server."""
    entries: dict[QuarantineKey, QuarantineEntry] = {}
    for entry in store.list() if store is not None else []:
        entries.setdefault(entry.key, entry)
    return entries


def _decide(
    planned: PlannedServer, host: Target, hardware: Hardware, playbook: Playbook, options: PlanOptions,
    quarantined: Mapping[QuarantineKey, QuarantineEntry],
) -> list[PlannedServer]:  # fmt: skip
    """Quarantine and memory feasibility, before anything launches. Returns the server, or the
    server marked skipped plus the fixed variant that replaces it (its own id, same GPUs)."""
    config = planned.config
    engine = config.engine_name
    if quarantined and hardware.arch:
        key = QuarantineKey.for_config(config, arch=hardware.arch, engine=quarantine_engine(host, engine), engine_version=hardware.version_of(engine))
        entry = quarantined.get(key)
        if entry is not None:
            return [replace(planned, skip_reason=f"quarantined ({entry.key}): {entry.reason}")]
    if not options.memory_check or hardware.gpu_memory_mib is None:
        return [planned]
    observed = options.starts.for_engine(engine) if options.starts else []
    verdict: Feasibility = check_server(
        config, planned.launch, gpu_memory_mib=hardware.gpu_memory_mib, engine_version=hardware.version_of(engine), fork=host.engine.fork_for(engine), observed=observed
    )
    fits = verdict.plan is not None and verdict.plan.failure is None
    warnings = comparability_warnings(planned.runs, verdict.plan.context_len, verdict.plan.kv_tokens) if fits and verdict.plan else []
    planned = replace(planned, prediction="; ".join([verdict.reason, *warnings]))
    if hopeless(verdict):  # no run of it can succeed: not started (`--no-memory-check` launches it anyway)
        return [replace(planned, skip_reason=f"infeasible: {verdict.reason} (--no-memory-check runs it anyway)")]
    if verdict.ok or not verdict.suggestion or playbook.auto_fix is not AutoFix.apply:
        return [planned]
    variant = apply_adjustments(config, verdict.suggestion)
    fix = describe_adjustments(verdict.suggestion)
    launch = launch_on(host, variant, planned.port, hardware)
    fixed = PlannedServer(
        config=variant,
        runs=tuple(replace(run, server=variant) for run in planned.runs),
        host=planned.host,
        gpus=planned.gpus,
        port=planned.port,
        launch=launch,
        start_s=planned.start_s,
        end_s=planned.end_s,
        engine_release=planned.engine_release,
        engine_release_note=planned.engine_release_note,
        prediction=f"fixed before launch: {fix}",
        provenance={"original_config_id": config.id, "failure_class": verdict.failure.failure_class if verdict.failure else None, "fix": fix, "attempt": 0, "predicted": verdict.reason},
    )
    skipped = replace(planned, skip_reason=f"predicted to fail ({verdict.reason}); replaced by {variant.id} ({fix})")
    return [skipped, fixed]


def quarantine_engine(host: Target, engine: str) -> str:
    """A quarantine key's engine: the host's kind for SGLang (`sglang` or `sim`, as keys always
    said), the engine's name for the others, `sim-<name>` where the simulator plays it (what a
    simulated failure quarantines must not skip a real vLLM host's configuration)."""
    if engine == DEFAULT_ENGINE:
        return host.engine.kind.value
    return f"sim-{engine}" if host.engine.kind.value == "sim" else engine


def started_servers(servers: Iterable[PlannedServer], hardware: Mapping[str, Hardware]) -> dict[str, StartedServer]:
    """What the controller knows of each launched server of a sweep, by server id: its launch, its
    engine's release and its host's GPU (for `fleet.planning.starts`)."""
    found: dict[str, StartedServer] = {}
    for server in servers:
        if server.skip_reason is not None:
            continue
        gpu = hardware.get(server.host, Hardware()).gpu_memory_mib
        found[server.config.id] = StartedServer(server.config.engine_name, tuple(server.launch.argv), dict(server.launch.env), server.engine_release, gpu)
    return found


def time_scale_of(host: Target) -> float:
    """Wall seconds per second of engine time: a sim host's sim_speed, 1 on real hardware."""
    return host.engine.sim_speed if host.engine.kind is EngineKind.sim else 1.0


def start_scale_of(host: Target) -> float:
    """The same for its servers' starts: a sim host's sim_start_speed where it sets one."""
    if host.engine.kind is EngineKind.sim and host.engine.sim_start_speed is not None:
        return host.engine.sim_start_speed
    return time_scale_of(host)


def _flag_fields(playbook: Playbook, engine: str) -> list[tuple[str, Mapping[str, FlagValue]]]:
    """Every place a playbook sets engine flags that reach `engine`'s command line, by its field name in the file."""
    fields: list[tuple[str, Mapping[str, FlagValue]]] = [("server.flags", playbook.server.flags)]
    fields += [(f"methods.{name}.flags", method.flags) for name, method in playbook.methods.items() if engine in playbook.engines_of(name)]
    fields += [(f"overrides[{i}].server.flags", o.server.flags) for i, o in enumerate(playbook.overrides) if o.engine in (None, engine)]
    return fields


def check_engine_flags(playbook: Playbook, hosts: Sequence[Target], hardware: Mapping[str, Hardware] | None = None) -> None:
    """Every host serves every engine the playbook names; every speculative algorithm it names is one
    each host's release (and fork) of the method's engines knows (a misspelt `DFLAHS` started servers
    that failed); every engine flag it sets is one the parser of that release accepts, with a value
    it accepts. Checked at plan time, so a mistake fails with a ConfigError naming the playbook
    field (or the host file's) before any host is contacted, not as the server's `unrecognized
    arguments` after a launch. A host whose version is not known yet (no pin, no facts) accepts a
    flag any known release accepts. A flag under the wrong engine (an SGLang flag in `server.flags`
    of a playbook that also runs vLLM) is refused by the other engine's parser: `overrides` with
    an `engine` carry one engine's own flags."""
    engines = playbook.engine or [DEFAULT_ENGINE]
    for host in hosts:
        known = (hardware or {}).get(host.name) or hardware_of(host)
        for engine_name in engines:
            if not host.engine.serves(engine_name):
                raise ConfigError(host.source_file, "engine", f"a host that serves {engine_name} (playbook {playbook.source_file} runs it): {host.engine.missing(engine_name)}", host.engine.kind.value)
            _check_engine_flags(playbook, host, known, engine_name)


def _check_engine_flags(playbook: Playbook, host: Target, known: Hardware, engine_name: str) -> None:
    served = engine_named(engine_name)
    releases = [known.release_of(engine_name)] if known.version_of(engine_name) else list(served.releases)
    fork = host.engine.fork_for(engine_name)
    engine = f"{served.title} {' or '.join(releases)}" + (f" ({fork} fork)" if fork else "")
    algorithms = served.algorithms(fork)
    for name, method in playbook.methods.items():
        if engine_name in playbook.engines_of(name) and method.algorithm is not None and method.algorithm not in algorithms:
            raise ConfigError(
                playbook.source_file, f"methods.{name}.algorithm",
                f"a speculative algorithm {engine} knows (host {host.name}: {', '.join(algorithms)})", method.algorithm,
            )  # fmt: skip
    for field_name, flags in _flag_fields(playbook, engine_name):
        for key, value in flags.items():
            problems = []
            for release in releases:
                try:
                    served.check_argv(release, render_flag(f"--{key}", value), fork=fork)
                    break
                except ArgvError as exc:
                    problems.append(exc.message)
            else:
                # Where the playbook runs several engines, the flag may be another engine's own.
                where = "; one engine's own flags go in `overrides` with its `engine`" if len(playbook.engine or []) > 1 else ""
                raise ConfigError(
                    playbook.source_file, f"{field_name}.{key}",
                    f"a flag and value {engine} accepts (host {host.name}: {problems[0]}){where}", value,
                )  # fmt: skip


def _time_scale(hosts: Sequence[Target], of: Callable[[Target], float] = time_scale_of) -> float:
    """Sim hosts run faster than real time by their sim_speed (their starts by `start_scale_of`);
    the estimates follow when all agree."""
    scales = {of(h) for h in hosts}
    return scales.pop() if len(scales) == 1 else 1.0


def unplaceable_configs(playbook: Playbook, hosts: Sequence[Target]) -> list[tuple[ServerConfig, str]]:
    """Server configurations no chosen host can hold (more GPUs than the largest has, or hosts
    with no GPUs), each with why: known from the inventory alone, before any host is contacted."""
    largest = max((h.gpus.count for h in hosts), default=0)
    ids = IdCache()  # the runs of a configuration share its object: one id each
    configs = {ids(run.server): run.server for run in expand_runs(playbook)}
    return [(c, f"needs {c.tp} GPUs; the largest host has {largest}") for c in configs.values() if c.tp > largest]


def check_placeable(playbook: Playbook, hosts: Sequence[Target]) -> None:
    """Raises ConfigError (the playbook's `tp`, with each host's `gpus.count`) when some server
    configuration fits on none of the hosts: a sweep refuses such a playbook before it starts,
    rather than leave those runs out (`fleet sweep --allow-unplaceable` runs the rest)."""
    unplaceable = unplaceable_configs(playbook, hosts)
    if unplaceable:
        counts = ", ".join(f"{h.name}: gpus.count {h.gpus.count} in {h.source_file}" for h in hosts) or "no hosts"
        sizes = sorted({c.tp for c, _ in unplaceable})
        raise ConfigError(
            playbook.source_file, "tp",
            f"TP sizes one of the chosen hosts can hold ({counts}); {len(unplaceable)} server configurations cannot be placed",
            sizes,
        )  # fmt: skip


def make_plan(playbook: Playbook, hosts: Sequence[Target], options: PlanOptions | None = None) -> Plan:
    """Raises ConfigError for an engine flag a host's release refuses (check_engine_flags)."""
    check_engine_flags(playbook, hosts, options.hardware if options else None)
    ids = IdCache()
    by_server: dict[str, list[Run]] = defaultdict(list)
    configs: dict[str, ServerConfig] = {}
    for run in expand_runs(playbook):
        by_server[ids(run.server)].append(run)
        configs[ids(run.server)] = run.server
    scale = _time_scale(hosts)
    options = options or PlanOptions()
    history = options.durations
    calibration = calibrate([r for runs in by_server.values() for r in runs], history, ids)
    run_estimates = {ids(r): _scaled(estimate_run(r, history, calibration, ids), scale) for runs in by_server.values() for r in runs}
    start_scale = _time_scale(hosts, start_scale_of)
    server_estimates = {key: _scaled(estimate_server_start(config, history, calibration, ids), start_scale) for key, config in configs.items()}
    jobs = [
        Job(
            key=key,
            gpus=config.tp,
            seconds=server_estimates[key].seconds + sum(run_estimates[ids(r)].seconds for r in by_server[key]),
            label=config.label,
        )
        for key, config in configs.items()
    ]
    slots = [HostSlots(h.name, h.gpus.count) for h in hosts]
    timetable = schedule(jobs, slots, exclusive=playbook.isolation.value == "exclusive")
    hosts_by_name = {h.name: h for h in hosts}
    hardware_by_host = {h.name: options.hardware.get(h.name) or hardware_of(h) for h in hosts}
    quarantined = _quarantined(options.quarantine)
    servers: list[PlannedServer] = []
    on_host: dict[str, int] = defaultdict(int)
    for placement in timetable.placements:
        config = configs[placement.job.key]
        host = hosts_by_name[placement.host]
        # The agent places servers on whichever GPUs free first, so any two may run side by side:
        # a port of its own each (not one per first GPU).
        port = server_port(on_host[host.name])
        on_host[host.name] += 1
        hardware = hardware_by_host[host.name]
        launch = launch_on(host, config, port, hardware)
        planned = PlannedServer(
            config=config,
            runs=tuple(by_server[placement.job.key]),
            host=host.name,
            gpus=placement.gpus,
            port=port,
            launch=launch,
            start_s=placement.start_s,
            end_s=placement.end_s,
            engine_release=hardware.release_of(config.engine_name),
            engine_release_note=hardware.release_note_of(config.engine_name),
        )
        servers += _decide(planned, host, hardware, playbook, options, quarantined)
    servers.sort(key=lambda s: (s.host, s.start_s, s.gpus))
    for server in servers:
        original = server.provenance.get("original_config_id") if server.provenance else None
        if original in configs:
            # A variant fixed before launch runs the same workloads: estimated as its original.
            for run, planned_run in zip(server.runs, by_server[original]):
                run_estimates.setdefault(ids(run), run_estimates[ids(planned_run)])
            server_estimates.setdefault(ids(server.config), server_estimates[original])
    unplaceable = tuple((configs[u.job.key], u.reason) for u in timetable.unplaceable)
    return Plan(playbook, tuple(servers), timetable, unplaceable, run_estimates, server_estimates, ids)


def _scaled(estimate: Estimate, scale: float) -> Estimate:
    return Estimate(estimate.seconds * scale, estimate.measured)

"""Write the playbook and host-file references (`docs/playbook-reference.md`, `docs/host-reference.md`)
from the pydantic models themselves, so that they cannot drift from what fleet accepts:

    python tools/docs_reference.py            # write both pages
    python tools/docs_reference.py --check    # exit 1, naming what differs, where a page is stale

Every field is listed, nested fields by their dotted path (`engine.sim_speed`,
`workloads.<name>.load.rate`; `<name>` is a key the file chooses, `[]` an item of a list), with its
type, its default, its unit where its name or description says it, its constraints (bounds, length,
pattern, choices, and the rule of a validator in the words of its own error message) and its
description. A discriminated union (the workload kinds) gets a section per kind.

tests/unit/test_docs_reference.py walks the models on its own and fails where a page misses a field,
and where the checked-in pages differ from what this writes.
"""

from __future__ import annotations

import argparse
import difflib
import enum
import json
import re
import sys
import types
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `python tools/docs_reference.py` from a checkout without `pip install -e`
    sys.path.insert(0, str(ROOT))

DOCS = ROOT / "docs"
GENERATOR = "tools/docs_reference.py"

# A unit the field's name does not spell (`_s`, `_ms`, `_mib`, `_tokens`) but its meaning fixes:
# SGLang's token-count settings and the one fraction. Keyed by field name, whatever model holds it.
UNITS_BY_NAME = {
    "context_length": "tokens",
    "chunked_prefill_size": "tokens",
    "page_size": "tokens",
    "mem_fraction_static": "fraction of a GPU's memory",
}

# What a field without a `description=` of its own means, by `Model.field`: shown only while the
# model has none (tests/unit/test_docs_reference.py fails on a note for a field that is gone or has
# its own description now). A description belongs in the model: move a note there when you touch it.
NOTES = {
    "Playbook.name": "the playbook's name: its sweeps' ids start with it (`<name>-<stamp>-<hex>`)",
    "Playbook.description": "free text for people; in no run's id",
    "Playbook.model": "the target model",
    "Playbook.drafts": "draft models of speculative methods, by the name a method's `draft` gives",
    "Playbook.methods": "decoding methods by name: each runs at each TP size, a DDTree method once per budget",
    "Playbook.tp": "tensor-parallel sizes (distinct): a server configuration per size and method",
    "Playbook.server": "engine settings of every server",
    "Playbook.overrides": "settings for some TP sizes and/or methods, applied in order over `server` (a later match wins)",
    "Playbook.workloads": "what each server is asked, by name; `kind` picks the workload's fields",
    "Playbook.repeats": "times each run's workload is sent on its server; each repeat's figures are kept (a result's `repeats`) for the report's intervals",
    "Playbook.limits": "time-outs and repair bounds",
    "Playbook.auto_fix": "a failure's smallest fix: `apply` runs it as a variant of its own id, `suggest` only reports it, `off` looks for none",
    "Playbook.isolation": "`shared`: servers side by side on a host's GPUs; `exclusive`: one server on a host at a time",
    "ModelRef.revision": "the branch, tag or commit of `repo`",
    "MethodSpec.num_draft_tokens": "draft tokens verified per step (the engine's speculative-num-draft-tokens)",
    "MethodSpec.num_steps": "draft steps per verification (the engine's speculative-num-steps)",
    "MethodSpec.eagle_topk": "branching factor of EAGLE's draft tree (the engine's speculative-eagle-topk)",
    "MethodSpec.env": "environment variables of this method's servers",
    "ServerSettings.context_length": "unset: the model's own",
    "ServerSettings.draft_attention_backend": "the draft model's attention backend, for speculative methods (SGLang's --speculative-draft-attention-backend)",
    "ServerSettings.trust_remote_code": "let the engine run the model repository's own code",
    "ServerSettings.enable_metrics": "the engine's Prometheus metrics endpoint",
    "ServerSettings.flags": "extra engine flags, without the leading --",
    "ServerSettings.env": "environment variables of the servers",
    "Override.tp": "the TP size it applies to; none: every size",
    "Override.method": "the method (a key of `methods`) it applies to; none: every method",
    "Override.server": "settings set here win where it applies; `flags` and `env` merge key by key",
    "Limits.server_start_timeout_s": "a server not ready this long after its start is a failed start",
    "Limits.request_timeout_s": "a request not finished this long after it was sent is abandoned",
    "Limits.max_fix_attempts": "fixed variants tried, one after another, for one failed configuration (0: none)",
    "ShortWorkload.kind": "a workload of prompts of fleet's library, sent one at a time",
    "ShortWorkload.max_new_tokens": "output tokens per request, at most",
    "LongContextWorkload.kind": "a long prompt (a slice of fleet's corpus) with a question about it",
    "LongContextWorkload.max_new_tokens": "output tokens per request, at most",
    "LongContextWorkload.margin_tokens": "room kept free when the prompt is cut to fit the server's context",
    "ConcurrencyWorkload.kind": "closed-loop concurrency levels: at each, that many requests in flight",
    "ConcurrencyWorkload.prompt": "the library prompt every request sends",
    "ConcurrencyWorkload.max_new_tokens": "output tokens per request, at most",
    "AgenticWorkload.kind": "multi-turn tool-calling conversations, each turn carrying the history",
    "AgenticWorkload.turns": "turns per conversation",
    "AgenticWorkload.max_new_tokens": "output tokens per turn, at most",
    "DatasetWorkload.kind": "prompts sampled from a dataset file",
    "DatasetWorkload.format": "the file's format, as its publisher's loader reads it",
    "DatasetWorkload.sha256": "filled from the file when left out; given, the file must have it (it is part of the run id)",
    "DatasetWorkload.seed": "seed of the sample",
    "DatasetWorkload.slo": "latency targets: adds goodput to the figures",
    "RandomWorkload.kind": "random token ids of exact lengths (ignore_eos)",
    "RandomWorkload.input_tokens": "prompt tokens of every request, exactly",
    "RandomWorkload.max_new_tokens": "output tokens of every request, exactly",
    "RandomWorkload.seed": "seed of the token ids",
    "RandomWorkload.slo": "latency targets: adds goodput to the figures",
    "Load.seed": "seed of the gaps",
    "Slo.ttft": "time to first token",
    "Slo.tpot": "time per output token after the first",
    "Slo.e2e": "end-to-end latency of a request",
    "Host.name": "the host's name: the file's name without extension, and its folder in a sweep's results",
    "Host.kind": "`host`: a GPU host fleet drives itself; `slurm`: the login host of a Slurm cluster (see `slurm`)",
    "Host.transport": "`ssh`, or `local`: this machine, without SSH",
    "Host.address": "host name or IP address to reach over SSH",
    "Host.port": "SSH port",
    "Host.user": "SSH login; none: ssh's default. Hosts with `service_manager: systemd` need root",
    "Host.identity_file": "SSH private key on this machine; none: ssh's own (agent, ~/.ssh)",
    "Host.host_key_policy": "`verify`: the host key must be in known_hosts; `accept-new`: a key never seen is added. A changed key is always refused",
    "Host.known_hosts": "known_hosts file on this machine; none: ssh's default",
    "Host.gpus": "the GPUs the host must have (checked by provisioning)",
    "Host.paths": "where fleet works on the host",
    "Host.engine": "the serving engine the host runs",
    "Host.service_manager": "`systemd`: the agent and servers as system units (a root login); `process`: detached processes, for any login",
    "Host.groups": "groups the host belongs to: `--hosts` takes their names",
    "HostPaths.work_dir": "fleet's folder on the host (persistent): the agent, every sweep's shard, results and logs",
    "HostPaths.model_cache": "persistent model copies, fetched once",
    "EngineSpec.kind": "`sglang`, or `sim`: fleet's SGLang stand-in, which needs no GPU",
    "SlurmSpec.account": "#SBATCH --account; none: the user's default",
    "SlurmSpec.qos": "#SBATCH --qos; none: the default",
    "SlurmSpec.cpus_per_gpu": "#SBATCH --cpus-per-gpu; none: the cluster's default",
}

# ServerSettings fields are engine flags: their rows name the flag of the tested release.
SETTINGS_MODEL = "ServerSettings"


# ---------------------------------------------------------------------------------------------
# Walking a model


@dataclass(frozen=True)
class Row:
    path: str  # the field's dotted path from the top of the file
    type: str
    default: str
    unit: str
    constraints: str
    description: str


SectionKey = tuple[str, type[BaseModel], Union[str, None]]


@dataclass
class Section:
    """One model at one place of the file: its fields' rows. `kinds`: the union members (workload
    kinds) whose sections it belongs to, empty outside a union."""

    path: str  # "" for the top level
    model: type[BaseModel]
    kinds: list[str] = field(default_factory=list)
    kind: str | None = None  # the discriminator value, where this section is one member of a union
    rows: list[Row] = field(default_factory=list)
    links: dict[str, list[SectionKey]] = field(default_factory=dict)  # row path -> the sections it holds

    @property
    def key(self) -> SectionKey:
        return (self.path, self.model, self.kind)

    @property
    def heading(self) -> str:
        where = f"`{self.path}`" if self.path else "top level"
        if self.kind is not None:
            return f"{where}, kind `{self.kind}`"
        if self.kinds:
            return f"{where} (kind {' or '.join(f'`{k}`' for k in self.kinds)})"
        return where


def _unwrap(annotation: Any) -> tuple[Any, list[Any]]:
    """`Annotated[T, m...]` -> (T, [m...]), nested Annotated flattened; anything else -> (it, [])."""
    metadata: list[Any] = []
    while typing.get_origin(annotation) is Annotated:
        annotation, *more = typing.get_args(annotation)
        metadata = [*more, *metadata]
    return annotation, metadata


def _is_union(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (Union, types.UnionType)


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def discriminator_value(model: type[BaseModel], discriminator: str = "kind") -> str:
    """The `kind` a union member answers to (its field `kind: Literal["short"]`)."""
    (value,) = typing.get_args(model.model_fields[discriminator].annotation)
    return str(value)


def nested_models(annotation: Any, path: str) -> Iterator[tuple[str, type[BaseModel], str | None]]:
    """The models a field holds, with their paths: a model itself, an optional one, the values of a
    map (`.<name>`), the items of a list (`[]`), each member of a union of models (with its `kind`)."""
    annotation, _ = _unwrap(annotation)
    if _is_model(annotation):
        yield path, annotation, None
    elif _is_union(annotation):
        members = [_unwrap(a)[0] for a in typing.get_args(annotation) if _unwrap(a)[0] is not type(None)]
        models = [m for m in members if _is_model(m)]
        if len(models) > 1:
            for model in models:
                yield path, model, discriminator_value(model)
        else:
            for member in members:
                yield from nested_models(member, path)
    elif typing.get_origin(annotation) in (list, tuple, set, frozenset):
        for item in typing.get_args(annotation):
            if item is not Ellipsis:
                yield from nested_models(item, f"{path}[]")
    elif typing.get_origin(annotation) is dict:
        _, value = typing.get_args(annotation)
        yield from nested_models(value, f"{path}.<name>")


def sections(model: type[BaseModel], path: str = "", kind: str | None = None) -> list[Section]:
    """The model's section and, after it, its nested models' sections, depth first in field order.
    A model met at one path by several kinds (`load` of `dataset` and `random`) is one section."""
    found: list[Section] = []
    _walk(model, path, kind, None, found)
    merged: dict[SectionKey, Section] = {}
    for section in found:
        if section.key in merged:
            merged[section.key].kinds.extend(k for k in section.kinds if k not in merged[section.key].kinds)
        else:
            merged[section.key] = section
    return list(merged.values())


def _walk(model: type[BaseModel], path: str, kind: str | None, inherited: str | None, found: list[Section]) -> SectionKey:
    section = Section(path=path, model=model, kind=kind, kinds=[inherited] if inherited else [])
    found.append(section)
    for name, info in model.model_fields.items():
        dotted = f"{path}.{name}" if path else name
        section.rows.append(_row(dotted, info, model.__name__))
        for sub_path, sub_model, sub_kind in nested_models(info.annotation, dotted):
            within = None if sub_kind else (kind or inherited)
            section.links.setdefault(dotted, []).append(_walk(sub_model, sub_path, sub_kind, within, found))
    return section.key


# ---------------------------------------------------------------------------------------------
# One field's row


def _row(path: str, info: FieldInfo, owner: str) -> Row:
    name = path.rsplit(".", 1)[-1]
    type_text, constraints = _describe(info.annotation, list(info.metadata))
    description = info.description or NOTES.get(f"{owner}.{name}", "")
    if owner == SETTINGS_MODEL and (flag := _engine_flag(name)):
        description = f"{description}; {flag}" if description else flag
    if info.discriminator:
        constraints.append(f"chosen by `{info.discriminator}`")
    return Row(
        path=path,
        type=type_text,
        default=_default(info),
        unit=_unit(name, info),
        constraints="; ".join(dict.fromkeys(c for c in constraints if c)),
        description=" ".join(description.split()),
    )


def _engine_flag(name: str) -> str:
    """`SGLang 0.5.23: --context-length`: the default engine's flag for a server setting, in its tested
    release ('' where it has none: the setting is the engine's under another name, or fleet's own)."""
    from fleet.host.engines import engine

    served = engine()
    try:
        return f"{served.title} {served.version_tested}: `{served.flag_for(served.version_tested, name)}`"
    except (KeyError, ValueError, LookupError):
        return ""


_SCALARS = {int: "integer", float: "number", str: "string", bool: "boolean", type(None): "null"}


def _describe(annotation: Any, metadata: list[Any], item: str = "") -> tuple[str, list[str]]:
    """(the type in words, its constraints). `item`: the prefix of constraints on what a list or map
    holds ("each ", "each key: ")."""
    annotation, inner = _unwrap(annotation)
    constraints = [f"{item}{c}" for m in [*inner, *metadata] for c in _constraint(m, annotation)]
    if annotation in _SCALARS:
        return _SCALARS[annotation], constraints
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return "string", [*constraints, f"{item}one of " + ", ".join(f"`{m.value}`" for m in annotation)]
    if _is_model(annotation):
        return f"table: {annotation.__name__}", constraints
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Literal:
        scalars = list(dict.fromkeys(_SCALARS.get(type(a), type(a).__name__) for a in args))
        choice = f"{item}`{args[0]}`" if len(args) == 1 else f"{item}one of " + ", ".join(f"`{a}`" for a in args)
        return " or ".join(scalars), [*constraints, choice]
    if _is_union(annotation):
        members = [a for a in args if _unwrap(a)[0] is not type(None)]
        optional = len(members) < len(args)
        models = [m for m in members if _is_model(_unwrap(m)[0])]
        if len(models) > 1:
            names = ", ".join(f"`{discriminator_value(_unwrap(m)[0])}`" for m in models)
            return "table, by its `kind`", [*constraints, f"{item}`kind` one of {names}"]
        words: list[str] = []
        for member in members:
            text, more = _describe(member, [], item)
            words.append(text)
            constraints.extend(more)
        if optional:
            words.append("null")
        return _or(list(dict.fromkeys(words))), constraints
    if origin in (list, tuple, set, frozenset):
        (element, *_) = [a for a in args if a is not Ellipsis]
        text, more = _describe(element, [], "each ")
        return f"list of ({text})" if " or " in text else f"list of {text}", [*constraints, *more]
    if origin is dict:
        key, value = args
        _, key_constraints = _describe(key, [], "each key: ")
        text, more = _describe(value, [], "each value: ")
        return f"map of {_SCALARS.get(_unwrap(key)[0], 'string')} to {text}", [*constraints, *key_constraints, *more]
    return getattr(annotation, "__name__", str(annotation)), constraints


def _or(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def _constraint(item: Any, annotation: Any) -> list[str]:
    """What one piece of a field's metadata asks, in words."""
    if _is_union(annotation):  # an optional list: its length is the list's
        annotation = next((_unwrap(a)[0] for a in typing.get_args(annotation) if _unwrap(a)[0] is not type(None)), annotation)
    things = "entr" if typing.get_origin(annotation) in (list, tuple, set, frozenset, dict) else "character"
    if isinstance(item, FieldInfo):
        return [c for m in item.metadata for c in _constraint(m, annotation)]
    if isinstance(item, annotated_types.Gt):
        return [f"`> {_number(item.gt)}`"]
    if isinstance(item, annotated_types.Ge):
        return [f"`>= {_number(item.ge)}`"]
    if isinstance(item, annotated_types.Lt):
        return [f"`< {_number(item.lt)}`"]
    if isinstance(item, annotated_types.Le):
        return [f"`<= {_number(item.le)}`"]
    if isinstance(item, annotated_types.MinLen):
        return [f"at least {_count(item.min_length, things)}"]
    if isinstance(item, annotated_types.MaxLen):
        return [f"at most {_count(item.max_length, things)}"]
    if getattr(item, "pattern", None):
        return [f"pattern `{item.pattern}`"]
    func = getattr(item, "func", None)
    if callable(func) and type(item).__name__ in ("AfterValidator", "BeforeValidator", "PlainValidator", "WrapValidator"):
        return _validator_rule(func)
    return []


# Values no field takes, put to a validator to read what it expects (its own error message, which
# is what a user gets for a wrong value): an option-like word, an overlong value, a `..` path.
_PROBES = ("-", "x" * 1000, "/a b/..")


def _validator_rule(func: Callable[[Any], Any]) -> list[str]:
    rules: list[str] = []
    for probe in _PROBES:
        try:
            func(probe)
        except ValueError as exc:
            rules.append(re.sub(r"\s*\(got [^)]*\)", "", str(exc)))
        except Exception:  # noqa: BLE001 - a probe a check cannot take at all says nothing
            continue
    return list(dict.fromkeys(rules))


def _count(n: int, stem: str) -> str:
    if stem == "entr":
        return f"{n} {'entry' if n == 1 else 'entries'}"
    return f"{n} {stem}{'' if n == 1 else 's'}"


def _number(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def _default(info: FieldInfo) -> str:
    if info.default_factory is not None:
        return f"`{_yaml(info.default_factory())}`"  # type: ignore[call-arg]
    if info.default is PydanticUndefined:
        return "required"
    if isinstance(info.default, BaseModel):
        changed = info.default.model_dump(mode="json", exclude_defaults=True)
        return f"`{_yaml(changed)}`, the rest as below" if changed else "as below"
    return f"`{_yaml(info.default)}`"


def _yaml(value: Any) -> str:
    """A value as YAML's flow style writes it."""
    if isinstance(value, enum.Enum):
        value = value.value
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value if value and re.fullmatch(r"[A-Za-z0-9_./$-]+", value) else json.dumps(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_yaml(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_yaml(v) for v in value) + "]"
    return repr(value) if isinstance(value, float) else str(value)


def _unit(name: str, info: FieldInfo) -> str:
    """The unit the field's name or description states, else ''."""
    description = info.description or ""
    validators = {getattr(getattr(m, "func", None), "__name__", "") for m in _all_metadata(info)}
    if "_duration_s" in validators:
        return "s (written with its unit: `200ms`, `1.5s`)"
    if name in UNITS_BY_NAME:
        return UNITS_BY_NAME[name]
    for suffix, unit in (("_s", "s"), ("_ms", "ms"), ("_mib", "MiB"), ("_gib", "GiB"), ("_tokens", "tokens")):
        if name.endswith(suffix):
            return unit
    if "in dollars" in description and "per hour" in description:
        return "$ per GPU-hour"
    if "requests per second" in description:
        return "requests/s"
    if re.search(r"\btimes this\b", description):
        return "x (a factor)"
    return ""


def _all_metadata(info: FieldInfo) -> Iterator[Any]:
    stack = [info.annotation, *info.metadata]
    while stack:
        item = stack.pop()
        annotation, metadata = _unwrap(item)
        if metadata:
            stack.extend([annotation, *metadata])
            continue
        if isinstance(item, FieldInfo):
            stack.extend(item.metadata)
        elif _is_union(item) or typing.get_origin(item) in (list, tuple, dict):
            stack.extend(a for a in typing.get_args(item) if a is not Ellipsis)
        else:
            yield item


# ---------------------------------------------------------------------------------------------
# Pages


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def _cell(text: str) -> str:
    """Table-cell text: `|` escaped, and outside code spans `<` `>` too (`<gres>` is no HTML tag)."""
    parts = text.split("`")
    for i in range(0, len(parts), 2):
        parts[i] = parts[i].replace("<", "&lt;").replace(">", "&gt;")
    return "`".join(parts).replace("|", "\\|")


def _linked_type(row: Row, section: Section, by_key: dict[SectionKey, Section]) -> str:
    """The row's type; a nested model's names its section(s), linked."""
    held = [by_key[key] for key in section.links.get(row.path, [])]
    if not held:
        return _cell(row.type)
    links = ", ".join(f"[{s.kind or s.model.__name__}](#{_anchor(s)})" for s in held)
    return _cell(row.type.split(":")[0]) + ": " + links


def _anchor(section: Section) -> str:
    return slug(section.heading.replace("`", ""))


def render(model: type[BaseModel], title: str, intro: str) -> str:
    """The reference page of `model`: the intro, a contents list, then a table per section."""
    all_sections = sections(model)
    by_key = {section.key: section for section in all_sections}
    lines = [
        f"<!-- Generated by {GENERATOR} from {model.__module__}.{model.__name__}: edit the models, then run "
        f"`python {GENERATOR}` (tests/unit/test_docs_reference.py fails while this page is stale). -->",
        "",
        f"# {title}",
        "",
        intro.strip(),
        "",
        "Sections:",
        "",
    ]
    for section in all_sections:
        lines.append(f"- [{section.heading}](#{_anchor(section)})")
    for section in all_sections:
        level = "##" if not section.path or section.path.count(".") + section.path.count("[]") == 0 else "###"
        lines += ["", f"{level} {section.heading}", ""]
        doc = section.model.__dict__.get("__doc__")
        origin = f"`{section.model.__module__}.{section.model.__name__}`"
        lines.append(f"{origin}. {' '.join(doc.split())}" if doc else f"{origin}.")
        lines += ["", "| Field | Type | Default | Unit | Constraints | Description |", "|---|---|---|---|---|---|"]
        for row in section.rows:
            cells = [f"`{row.path}`", _linked_type(row, section, by_key), _cell(row.default), _cell(row.unit), _cell(row.constraints), _cell(row.description)]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


PLAYBOOK_INTRO = """
A playbook (`playbooks/<name>.yaml`) is the matrix of a sweep: a model and its drafts, decoding
methods, tensor-parallel sizes, server settings and their overrides, workloads, repeats and limits.
Every field fleet reads is below, generated from the models (`fleet/playbook.py`; the workload
kinds in `fleet/workloads/kinds.py`).

How to read it: a path is where the field sits in the file (`server.context_length`); `<name>` is
a key the file chooses (a method, draft or workload name: lowercase letters, digits, `_` and `-`,
at most 64 characters) and `[]` an item of a list. A key the models do not know is an error, as is
a number that is not finite; an integer field takes no `true`, `1.5` or `"8"`. A constraint
in words is the message a wrong value gets. Rules across fields (exactly one of `model.repo` and
`model.path`; a method's `draft` names a key of `drafts`; `budgets` only with `DDTREE`; an
override's `tp` and `method` name the playbook's own; a workload's `max_new_tokens`, with a
`random` workload's `input_tokens`, within the context length) are checked when the file loads, and
`fleet plan` then checks each algorithm against each host's release and fork. A run's id is a hash
of what defines it: editing a field of a run's server or workload makes new runs.
"""

HOST_INTRO = """
A host file (`hosts/<name>.yaml`, one host per file; the file name is the host's `name`, and files
with `.example.` in their name are never loaded) says how fleet reaches a machine and what it must
find there; `kind: slurm` makes it the login host of a Slurm cluster, with a `slurm:` section.
Every field fleet reads is below, generated from the models (`fleet/inventory.py`).

How to read it: a path is where the field sits in the file (`engine.sim_speed`). A key the models
do not know is an error, as is a number that is not finite; an integer field takes no `true`,
`1.5` or `"8"`. A constraint in words is the message a wrong value gets. Rules across fields
(`address` or `ssh_alias`, not both, for an ssh host; a `slurm:` section exactly when
`kind: slurm`) are checked when the file loads. `hosts/ct200.example.yaml` shows a real host.
"""


def pages() -> dict[str, str]:
    """File name under docs/ -> its text."""
    from fleet.inventory import Host
    from fleet.playbook import Playbook

    return {
        "playbook-reference.md": render(Playbook, "Playbook reference", PLAYBOOK_INTRO),
        "host-reference.md": render(Host, "Host file reference", HOST_INTRO),
    }


# ---------------------------------------------------------------------------------------------
# --check


def _rows_of(text: str) -> dict[str, str]:
    """Table rows of a page by `section heading / field path`."""
    rows: dict[str, str] = {}
    heading = ""
    for line in text.splitlines():
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
        elif match := re.match(r"^\| `([^`]+)` \|", line):
            rows[f"{heading} / {match.group(1)}"] = line
    return rows


def stale(docs_dir: Path) -> list[str]:
    """One line per way the pages under `docs_dir` differ from the models ([] when current)."""
    problems: list[str] = []
    for name, wanted in pages().items():
        path = _shown(docs_dir / name)
        if not path.is_file():
            problems.append(f"{path}: missing")
            continue
        have = path.read_text(encoding="utf-8")
        if have == wanted:
            continue
        old, new = _rows_of(have), _rows_of(wanted)
        said = [f"{path}: field {key} is not in the page" for key in new if key not in old]
        said += [f"{path}: field {key} is no longer in the models" for key in old if key not in new]
        said += [f"{path}: field {key} differs" for key in new if key in old and old[key] != new[key]]
        if not said:
            diff = difflib.unified_diff(have.splitlines(), wanted.splitlines(), "page", "models", n=0, lineterm="")
            first = next((line for line in diff if line[:1] in "+-" and line[:3] not in ("+++", "---")), "")
            said = [f"{path}: text outside the tables differs ({first[:120]})"]
        problems += said
    return problems


def _shown(path: Path) -> Path:
    """`docs/x.md` for a page of this checkout, else the path as given."""
    full, here = path.resolve(), Path.cwd().resolve()
    return full.relative_to(here) if full.is_relative_to(here) else path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 naming what differs where a page is stale")
    parser.add_argument("--docs-dir", type=Path, default=DOCS, help="where the pages are (default: docs/)")
    args = parser.parse_args(argv)
    if args.check:
        problems = stale(args.docs_dir)
        for line in problems:
            print(line)
        if problems:
            print(f"the references are stale: run `python {GENERATOR}` and commit docs/")
            return 1
        print(f"{', '.join(pages())}: current")
        return 0
    args.docs_dir.mkdir(parents=True, exist_ok=True)
    for name, text in pages().items():
        (args.docs_dir / name).write_text(text, encoding="utf-8")
        print(f"wrote {args.docs_dir / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The playbook and host-file references (docs/*-reference.md) list every field of the models, and
are what tools/docs_reference.py writes from them today.

The fields are found here by a walk of their own (not the generator's): every field of the model,
recursively through optional fields, lists, maps and each member of a discriminated union (the
workload kinds), by dotted path. A page misses a field when no table row of the right section
starts with that path.
"""

from __future__ import annotations

import importlib.util
import re
import sys
import types
import typing
from pathlib import Path
from typing import Annotated, Literal, Union

import pytest
from pydantic import BaseModel, Field

from fleet.inventory import EngineSpec, Host, Name
from fleet.playbook import Limits, Playbook
from fleet.workloads.kinds import WorkloadKind, WorkloadModel

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def _generator() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("docs_reference", ROOT / "tools" / "docs_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


generator = _generator()


# ---------------------------------------------------------------------------------------------
# The walk: (kind or None, dotted path) of every field


def _models_in(annotation: object) -> list[tuple[str, type[BaseModel]]]:
    """(path suffix, model) for every model the annotation holds."""
    while typing.get_origin(annotation) is Annotated:
        annotation = typing.get_args(annotation)[0]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [("", annotation)]
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (Union, types.UnionType):
        return [found for arg in args for found in _models_in(arg)]
    if origin in (list, tuple, set, frozenset):
        return [("[]" + suffix, model) for arg in args if arg is not Ellipsis for suffix, model in _models_in(arg)]
    if origin is dict:
        return [(".<name>" + suffix, model) for suffix, model in _models_in(args[1])]
    return []


def _kind_of(model: type[BaseModel]) -> str | None:
    field = model.model_fields.get("kind")
    if field is None or typing.get_origin(field.annotation) is not Literal:
        return None
    (value,) = typing.get_args(field.annotation)
    return str(value)


def every_field(model: type[BaseModel], path: str = "", kind: str | None = None) -> list[tuple[str | None, str]]:
    found: list[tuple[str | None, str]] = []
    for name, info in model.model_fields.items():
        dotted = f"{path}.{name}" if path else name
        found.append((kind, dotted))
        held = _models_in(info.annotation)
        union = len({m for _, m in held}) > 1
        for suffix, sub in held:
            found += every_field(sub, dotted + suffix, (_kind_of(sub) if union else None) or kind)
    return found


def _sections(page: str) -> list[tuple[str, set[str]]]:
    """(heading, the paths its table rows start with), in page order."""
    out: list[tuple[str, set[str]]] = [("", set())]
    for line in page.splitlines():
        if line.startswith("#"):
            out.append((line, set()))
        elif match := re.match(r"^\| `([^`]+)` \|", line):
            out[-1][1].add(match.group(1))
    return out


def missing_fields(model: type[BaseModel], page: str) -> list[str]:
    """The fields of `model` no table row of `page` lists (a kind's fields: in a section whose
    heading names that kind)."""
    sections = _sections(page)
    missing = []
    for kind, path in every_field(model):
        places = [rows for heading, rows in sections if kind is None or f"`{kind}`" in heading]
        if not any(path in rows for rows in places):
            missing.append(path if kind is None else f"{path} (kind {kind})")
    return missing


# ---------------------------------------------------------------------------------------------
# The checked-in pages


@pytest.mark.parametrize(("model", "page"), [(Playbook, "playbook-reference.md"), (Host, "host-reference.md")])
def test_the_reference_lists_every_field_of_the_model(model: type[BaseModel], page: str) -> None:
    text = (DOCS / page).read_text(encoding="utf-8")
    assert missing_fields(model, text) == [], f"docs/{page} misses fields: run `python tools/docs_reference.py`"


def test_the_walk_reaches_nested_fields_and_every_workload_kind() -> None:
    """The walk itself goes where the brief says the references must: nested tables, maps, lists and
    every kind of the union, so an empty walk cannot pass the test above."""
    playbook, host = set(every_field(Playbook)), set(every_field(Host))
    assert (None, "limits.host_lost_after_s") in playbook
    assert (None, "overrides[].server.max_running_requests") in playbook
    assert (None, "drafts.<name>.repo") in playbook
    assert ("random", "workloads.<name>.load.rate") in playbook and ("dataset", "workloads.<name>.slo.ttft") in playbook
    assert {kind for kind, _ in playbook} == {None, *(_kind_of(m) for m in typing.get_args(WorkloadModel))}
    assert {(None, "engine.sim_speed"), (None, "slurm.shared_dir"), (None, "gpus.count"), (None, "paths.staging")} <= host


def test_the_checked_in_pages_are_what_the_generator_writes(capsys: pytest.CaptureFixture[str]) -> None:
    code = generator.main(["--check"])
    said = capsys.readouterr().out
    assert code == 0, f"docs/ is stale (run `python tools/docs_reference.py`):\n{said}"


# ---------------------------------------------------------------------------------------------
# The checks can fail


class _WiderLimits(Limits):
    patience_s: float = 1.0


class _Sleep(WorkloadKind):
    kind: Literal["sleep"]
    seconds: float = Field(default=1.0, gt=0, description="how long")

    def resolved(self, name: str, time_scale: float) -> dict[str, object]:
        return {}


class _WiderPlaybook(Playbook):
    frobnicate: int = 0
    limits: _WiderLimits = _WiderLimits()
    workloads: dict[Name, Annotated[Union[WorkloadModel, _Sleep], Field(discriminator="kind")]] = Field(min_length=1)


class _WiderEngine(EngineSpec):
    warp: int = 9


class _WiderHost(Host):
    engine: _WiderEngine = _WiderEngine()


def test_a_field_the_page_lacks_is_reported_at_every_depth() -> None:
    page = (DOCS / "playbook-reference.md").read_text(encoding="utf-8")
    assert sorted(missing_fields(_WiderPlaybook, page)) == [
        "frobnicate",
        "limits.patience_s",
        "workloads.<name>.kind (kind sleep)",
        "workloads.<name>.seconds (kind sleep)",
    ]
    assert missing_fields(_WiderHost, (DOCS / "host-reference.md").read_text(encoding="utf-8")) == ["engine.warp"]


def test_a_field_listed_only_under_another_kind_is_missing() -> None:
    """`load` is a field of `dataset` and `random`: a page that lists it under one kind only misses it."""
    page = (DOCS / "playbook-reference.md").read_text(encoding="utf-8")
    heading = "\n### `workloads.<name>`, kind `random`\n"
    head, tail = page.split(heading)
    tail = re.sub(r"(?m)^\| `workloads\.<name>\.load` \|.*\n", "", tail)
    assert missing_fields(Playbook, head + heading + tail) == ["workloads.<name>.load (kind random)"]


def test_the_generator_documents_a_new_field_with_its_type_default_unit_and_constraints() -> None:
    page = generator.render(_WiderPlaybook, "t", "intro")
    assert missing_fields(_WiderPlaybook, page) == []
    row = next(line for line in page.splitlines() if line.startswith("| `workloads.<name>.seconds` |"))
    assert row == "| `workloads.<name>.seconds` | number | `1.0` |  | `> 0` | how long |"
    row = next(line for line in page.splitlines() if line.startswith("| `limits.patience_s` |"))
    assert "| number | `1.0` | s |" in row


def test_check_names_the_page_and_the_field_that_differ(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert generator.main(["--docs-dir", str(tmp_path)]) == 0
    assert generator.main(["--check", "--docs-dir", str(tmp_path)]) == 0
    page = tmp_path / "host-reference.md"
    page.write_text(page.read_text(encoding="utf-8").replace("| `engine.sim_speed` | number | `1.0` |", "| `engine.sim_speed` | number | `0.5` |"))
    (tmp_path / "playbook-reference.md").unlink()
    capsys.readouterr()
    assert generator.main(["--check", "--docs-dir", str(tmp_path)]) == 1
    said = capsys.readouterr().out
    assert f"{page}: field `engine` / engine.sim_speed differs" in said
    assert f"{tmp_path / 'playbook-reference.md'}: missing" in said


def test_every_note_is_for_a_field_that_exists_and_has_no_description_of_its_own() -> None:
    """A note stands in for a missing `description=`: one for a field that is gone, or that has its
    own description now, must go (so a note never hides or contradicts the model)."""
    models: dict[str, type[BaseModel]] = {}

    def collect(model: type[BaseModel]) -> None:
        models[model.__name__] = model
        for info in model.model_fields.values():
            for _, sub in _models_in(info.annotation):
                if sub.__name__ not in models:
                    collect(sub)

    collect(Playbook)
    collect(Host)
    for key in generator.NOTES:
        owner, name = key.split(".")
        assert owner in models and name in models[owner].model_fields, f"NOTES[{key!r}]: no such field"
        assert not models[owner].model_fields[name].description, f"NOTES[{key!r}]: the field has its own description now"

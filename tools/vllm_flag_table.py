"""Write vLLM's `vllm serve` flag table (`fleet/host/engines/vllm/flagdata/<release>.json`) from the
installed wheel's own argument parser: every action `make_arg_parser` registers, with its option
strings (the hidden ones too), dest, action kind, nargs, type (named so fleet can rebuild it),
choices, default, const and whether vLLM calls it deprecated, in the parser's order.

    python tools/vllm_flag_table.py            # the installed wheel (what CI installs: 0.33.0)
    python tools/vllm_flag_table.py --stdout   # print instead of writing

The parser is built as `vllm serve` builds it (vllm 0.33.0):
- vllm/entrypoints/cli/main.py:88 `FlexibleArgumentParser(description="vLLM CLI", ...)`, :98
  `add_subparsers(required=False, dest="subparser")`, :108 `cmd.subparser_init(subparsers)`;
- vllm/entrypoints/cli/serve.py:161 `ServeSubcommand.subparser_init`: `add_parser("serve",
  usage="vllm serve [model_tag] [options]")`, then
- vllm/entrypoints/common/cli_args.py:431 `make_arg_parser`: `model_tag` (nargs ?), --headless,
  --api-server-count/-asc, --config, --grpc, `FrontendArgs.add_cli_args` (:264) and
- vllm/engine/arg_utils.py:3250 `AsyncEngineArgs.add_cli_args` -> :959 `EngineArgs.add_cli_args`,
  whose kwargs come from the config dataclasses through :325 `_compute_kwargs` / :443 `get_kwargs`.
- vllm/utils/argparse_utils.py:156 `FlexibleArgumentParser` (underscores, `-O`, dotted JSON keys,
  `--config` YAML, `--model` moved to the positional) and :120 `EnableDisableAction`.

vLLM builds its config defaults on the current platform: on a machine without a GPU the parser
raises "Failed to infer device type" (vllm/config/device.py:55) unless VLLM_TARGET_DEVICE=cpu, which
this tool sets. Neither the CPU nor the CUDA platform changes the parser
(platforms/interface.py:639 `pre_register_and_update` is a no-op on both).

tests/integration/test_vllm_parser.py regenerates the table and compares it with the stored one.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FLAGDATA = ROOT / "fleet" / "host" / "engines" / "vllm" / "flagdata"

_STDLIB_ACTIONS = {
    "_StoreAction": "store",
    "_StoreTrueAction": "store_true",
    "_StoreFalseAction": "store_false",
    "_StoreConstAction": "store_const",
    "_AppendAction": "append",
    "_HelpAction": "help",
    "_VersionAction": "version",
    "EnableDisableAction": "enable_disable",
    "BooleanOptionalAction": "boolean_optional",
    "LoRAParserAction": "lora_modules",
    "DeprecatedLogConfigFileAction": "deprecated_log_config_file",
}


def _plain(value: Any) -> tuple[Any, bool]:
    """(JSON value, exact): a default JSON cannot hold (a config object, a set, an enum) is kept as its repr."""
    if isinstance(value, (set, frozenset)):
        return repr(value), False
    try:
        json.dumps(value)
        return value, True
    except TypeError:
        return repr(value), False


def describe_type(fn: Any) -> Any:
    """vLLM's type callables, named: `int`, `loads` (json.loads), `optional(...)` (arg_utils.py:173
    optional_type), `parse(...)` (:161 parse_type), `union_dict_and_str` (:182), `human_readable_int`
    and `human_readable_int_or_auto` (argparse_utils.py:30, :77), `parse_reasoning_parser` (:188),
    `{"config": Name, "fields": [...], "extra": ...}` for a pydantic config dataclass validated from
    JSON (:369 parse_dataclass), and the two lambdas of add_cli_args by what they do."""
    name = getattr(fn, "__name__", None)
    if fn in (str, int, float):
        return fn.__name__
    if name == "loads" and fn is json.loads:
        return "loads"
    if name in ("human_readable_int", "human_readable_int_or_auto", "parse_reasoning_parser", "union_dict_and_str"):
        return name
    if name == "_optional_type":
        return {"optional": describe_type(fn.__closure__[0].cell_contents)}
    if name == "_parse_type":
        return {"parse": describe_type(fn.__closure__[0].cell_contents)}
    if name == "parse_dataclass":
        cls = fn.__defaults__[0]
        extra = getattr(cls, "__pydantic_config__", {}).get("extra")
        return {"config": cls.__name__, "fields": [f.name for f in dataclasses.fields(cls)], "extra": extra}
    if name == "<lambda>":
        names = fn.__code__.co_names
        if names == ("lower", "replace"):
            return "lower_underscores"  # arg_utils.py:1844 `lambda s: s.lower().replace("-", "_")`
        if "split" in names:
            return "device_ids"  # arg_utils.py:1196 comma-separated ints or UUIDs
    raise SystemExit(f"a type fleet cannot name: {fn!r} ({getattr(fn, '__qualname__', '')})")


def table_of(serve: argparse.ArgumentParser, top: argparse.ArgumentParser, *, release: str) -> dict[str, Any]:
    deprecated_actions = getattr(serve, "_deprecated", set())
    actions = []
    for action in serve._actions:
        cls = type(action).__name__
        kind = _STDLIB_ACTIONS.get(cls)
        if kind is None:
            raise SystemExit(f"an action class fleet does not know: {cls} ({action.option_strings})")
        registered = sorted(o for o, a in serve._option_string_actions.items() if a is action)
        if kind == "enable_disable":
            negatives = set(action.negative_option_strings)  # type: ignore[attr-defined]
            options = [o for o in action.visible_option_strings if o not in negatives]  # type: ignore[attr-defined]
        else:
            options = list(action.option_strings)
        entry: dict[str, Any] = {"options": options, "dest": action.dest, "action": kind}
        if sorted(options) != registered:
            entry["registered"] = registered  # every spelling the parser takes (`--no-x`, hidden inverses)
        if kind == "enable_disable":
            entry["negative"] = sorted(action.negative_option_strings)  # type: ignore[attr-defined]
        if action.nargs is not None:
            entry["nargs"] = action.nargs
        if action.type is not None:
            entry["type"] = describe_type(action.type)
        if action.choices is not None:
            entry["choices"] = list(action.choices)
        if action.required:
            entry["required"] = True
        if action.help == argparse.SUPPRESS:
            entry["hidden"] = True
        if isinstance(action.metavar, str) and kind != "store" or isinstance(action.metavar, tuple):
            entry["metavar"] = action.metavar
        if kind not in ("help", "version"):
            default, exact = _plain(action.default)
            entry["default"] = default
            if not exact:
                entry["default_is_repr"] = True
        if action.const is not None:
            entry["const"] = _plain(action.const)[0]
        help_text = action.help if isinstance(action.help, str) else ""
        if action in deprecated_actions or getattr(action, "deprecated", False):
            entry["deprecated"] = "argparse"  # FlexibleArgumentParser's `deprecated=True` (argparse_utils.py:212)
        elif "deprecated" in help_text.lower():
            entry["deprecated"] = " ".join(help_text.split())
        actions.append(entry)
    return {
        "release": release,
        "source": (f"vllm {release}: vllm/entrypoints/cli/serve.py ServeSubcommand.subparser_init -> vllm/entrypoints/common/cli_args.py make_arg_parser (imported, VLLM_TARGET_DEVICE=cpu)"),
        "prog": serve.prog,
        "top_prog": top.prog,
        "usage": serve.usage,
        "allow_abbrev": serve.allow_abbrev,
        "python": ".".join(map(str, sys.version_info[:2])),
        "option_strings": len(serve._option_string_actions),
        "actions": actions,
    }


def installed_table() -> dict[str, Any]:
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    import logging
    from importlib.metadata import version

    logging.disable(logging.WARNING)
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    top = FlexibleArgumentParser(prog="vllm", description="vLLM CLI")
    subparsers = top.add_subparsers(required=False, dest="subparser")
    serve = ServeSubcommand().subparser_init(subparsers)
    return table_of(serve, top, release=version("vllm"))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--stdout", action="store_true", help="print instead of writing flagdata/<release>.json")
    args = parser.parse_args(argv)
    table = installed_table()
    text = json.dumps(table, indent=1) + "\n"
    if args.stdout:
        sys.stdout.write(text)
    else:
        FLAGDATA.mkdir(parents=True, exist_ok=True)
        (FLAGDATA / f"{table['release']}.json").write_text(text)
        print(f"{FLAGDATA / (table['release'] + '.json')}: {table['option_strings']} option strings, {len(table['actions'])} actions")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

"""The command line `vllm serve` accepts under each known vLLM release, rebuilt with the standard
library from the release's flag table.

A release's flags are data: `flagdata/<release>.json`, written by `tools/vllm_flag_table.py` from
that release's own parser (`make_arg_parser`, vllm/entrypoints/common/cli_args.py:431, under the
`serve` subparser of vllm/entrypoints/cli/main.py:88). From a table this module builds the same
parser shape as `vllm serve`: a top-level parser `vllm` whose `serve` subparser holds the flags, so
that abbreviations (allow_abbrev is on: `--max-num-se` is `--max-num-seqs`), ambiguous prefixes,
types, choices, missing values and unknown flags are accepted and refused exactly as vLLM's are,
with argparse's own error text (`unrecognized arguments` is the top-level `vllm`'s error, every
other one `vllm serve`'s).

What a table cannot hold is here: the type callables (by the name argparse prints), vLLM's
argparse actions (`EnableDisableAction`, `LoRAParserAction`, the deprecated `--log-config-file`),
and what `FlexibleArgumentParser.parse_args` does before argparse sees the argv
(vllm/utils/argparse_utils.py:313): `--model X` moved to the positional model, `--served-model-name`
without a positional model refused, `--config` YAML merged, underscores in a flag's name turned to
dashes (`--max_num_seqs`), `-O3`, and dotted JSON keys (`--speculative-config.method eagle`)
folded into one JSON argument. Then `validate_parsed_serve_args` (cli_args.py:531), the checks
`vllm serve` runs before it loads anything, except the chat template's (it reads the wheel's own
template folder).

A config dataclass given as JSON (`--compilation-config`, `--attention-config`, ...) is validated by
pydantic in vLLM; fleet checks that it is a JSON object with the class's field names (the table
lists them) and keeps the object as given, with the class's name under `__config__`: the field
types are not checked, and its refusal text is fleet's, not pydantic's.

Standard library only: ships to hosts with the agent and the simulator.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, NoReturn

from fleet.host.errors import ArgvError, ConfigFileError
from fleet.host.engines.vllm.release import KNOWN_RELEASES

FLAGDATA_DIR = Path(__file__).resolve().parent / "flagdata"
SUBCOMMAND = "serve"


class FlagTableError(ValueError):
    """A flag table that is not what tools/vllm_flag_table.py writes."""


class ServeArgsError(ValueError):
    """What `vllm serve` raises (a traceback, exit 1) before or right after parsing: a Python
    exception other than argparse's exit 2. `exception` is its type as vLLM raises it."""

    def __init__(self, exception: str, message: str) -> None:
        super().__init__(message)
        self.exception = exception
        self.message = message


@dataclass(frozen=True)
class FlagTable:
    release: str
    source: str
    prog: str
    top_prog: str
    usage: str
    allow_abbrev: bool
    actions: tuple[Mapping[str, Any], ...]

    def registered(self, action: Mapping[str, Any]) -> list[str]:
        return list(action.get("registered", action["options"]))

    @property
    def option_strings(self) -> tuple[str, ...]:
        return tuple(option for action in self.actions for option in self.registered(action))

    def action_of(self, dest: str) -> Mapping[str, Any] | None:
        return next((a for a in self.actions if a["dest"] == dest), None)

    def option_of(self, dest: str) -> str | None:
        """The first (canonical) option string of a dest, None when the release has no such flag."""
        action = self.action_of(dest)
        return str(action["options"][0]) if action and action["options"] else None


@lru_cache(maxsize=None)
def load_table(release: str) -> FlagTable:
    if release not in KNOWN_RELEASES:
        raise FlagTableError(f"vLLM release {release!r}: fleet has flag tables for {', '.join(KNOWN_RELEASES)}")
    path = FLAGDATA_DIR / f"{release}.json"
    data = json.loads(path.read_text())
    if data.get("release") != release or not isinstance(data.get("actions"), list):
        raise FlagTableError(f"{path}: expected the flag table of release {release} (release, actions)")
    return FlagTable(release, data["source"], data["prog"], data["top_prog"], data["usage"], bool(data["allow_abbrev"]), tuple(data["actions"]))


def flag_for(release: str, dest: str) -> str:
    """The option string of the release's parser dest `dest` (`max_num_seqs` -> `--max-num-seqs`)."""
    option = load_table(release).option_of(dest)
    if option is None:
        raise FlagTableError(f"vLLM {release} has no flag for {dest!r} (flagdata/{release}.json)")
    return option


def negative_flag_for(release: str, dest: str) -> str:
    """The spelling that turns an enable/disable flag off (`enable_prefix_caching` ->
    `--disable-prefix-caching`), the visible one where the release has one."""
    action = load_table(release).action_of(dest)
    negatives = sorted(action.get("negative", ())) if action else []
    if not negatives:
        raise FlagTableError(f"vLLM {release} has no negative flag for {dest!r} (flagdata/{release}.json)")
    return next((n for n in negatives if not n.startswith("--no-")), negatives[0])


@lru_cache(maxsize=None)
def every_spelling(dest: str) -> frozenset[str]:
    """Every option string that sets `dest` in any known release (the hidden `--no-` ones too)."""
    return frozenset(option for release in KNOWN_RELEASES for action in load_table(release).actions if action["dest"] == dest for option in load_table(release).registered(action))


@lru_cache(maxsize=None)
def every_spelling_of_any() -> frozenset[str]:
    """Every long option string of any known release."""
    return frozenset(o for release in KNOWN_RELEASES for o in load_table(release).option_strings if o.startswith("--"))


# --- type callables, named as argparse prints them ("invalid <__name__> value: 'x'") -------------------


def human_readable_int(value: str) -> int:
    """vllm/utils/argparse_utils.py:30 (0.33.0): `1k` = 1000, `1K` = 1024, no decimals with K/M/G/T."""
    value = value.strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", value)
    if match:
        decimal_multiplier = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
        binary_multiplier = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
        number, suffix = match.groups()
        if suffix in decimal_multiplier:
            return int(float(number) * decimal_multiplier[suffix])
        try:
            return int(number) * binary_multiplier[suffix]
        except ValueError as e:
            raise argparse.ArgumentTypeError(f"Decimals are not allowed with binary suffixes like {suffix}. Did you mean to use {number}{suffix.lower()} instead?") from e
    return int(value)


def human_readable_int_or_auto(value: str) -> int:
    """argparse_utils.py:77: `-1` or `auto` (any case) -> -1."""
    value = value.strip()
    if value == "-1" or value.lower() == "auto":
        return -1
    return human_readable_int(value)


def parse_reasoning_parser(val: str) -> str:
    """vllm/engine/arg_utils.py:188: `none` (any case) is the unset default."""
    return "" if val.lower() == "none" else val


def _parse(return_type: Callable[[str], Any]) -> Callable[[str], Any]:
    """arg_utils.py:161 parse_type."""

    def _parse_type(val: str) -> Any:
        try:
            return return_type(val)
        except ValueError as e:
            raise argparse.ArgumentTypeError(f"Value {val} cannot be converted to {return_type}.") from e

    return _parse_type


def _optional(return_type: Callable[[str], Any]) -> Callable[[str], Any]:
    """arg_utils.py:173 optional_type: "" and "None" are None."""

    def _optional_type(val: str) -> Any:
        if val == "" or val == "None":
            return None
        return _parse(return_type)(val)

    return _optional_type


def union_dict_and_str(val: str) -> Any:
    """arg_utils.py:182: a JSON object when it looks like one, else the string."""
    if not re.match(r"(?s)^\s*{.*}\s*$", val):
        return str(val)
    return _optional(json.loads)(val)


def _expand_json_human_readable_numbers(val: str) -> str:
    """arg_utils.py:302: bare `80m`, `1K` ... inside JSON, outside strings, as numbers."""
    parts = re.split(r'("(?:[^"\\]|\\.)*")', val)
    for i in range(0, len(parts), 2):
        parts[i] = re.sub(r"\b\d+(?:\.\d+)?[kKmMgGtT]\b", lambda m: str(human_readable_int(m.group())), parts[i])
    return "".join(parts)


CONFIG_KEY = "__config__"


def _config(name: str, fields: Sequence[str], extra: str | None) -> Callable[[str], Any]:
    """arg_utils.py:369 parse_dataclass, as far as the standard library can: the JSON must be an
    object, and (pydantic `extra="forbid"`, vllm/config/utils.py:71) name only the class's fields."""
    known = frozenset(fields)

    def parse_dataclass(val: str) -> Any:
        try:
            value = json.loads(_expand_json_human_readable_numbers(val))
        except json.JSONDecodeError as e:
            raise argparse.ArgumentTypeError(f"1 validation error for {name}: Invalid JSON: {e.msg}") from e
        if not isinstance(value, dict):
            raise argparse.ArgumentTypeError(f"1 validation error for {name}: Input should be an object")
        unknown = sorted(k for k in value if k not in known) if extra == "forbid" else []
        if unknown:
            raise argparse.ArgumentTypeError(f"{len(unknown)} validation error for {name}: {unknown[0]}: Extra inputs are not permitted")
        return {CONFIG_KEY: name, **value}

    return parse_dataclass


def _lower_underscores(s: str) -> str:
    return s.lower().replace("-", "_")


def _device_ids(s: str) -> list[int | str]:
    return [int(device_id) if device_id.isdigit() else device_id for device_id in (part.strip() for part in s.split(","))]


_lower_underscores.__name__ = _device_ids.__name__ = "<lambda>"  # as argparse names vLLM's lambdas

_NAMED: Mapping[str, Callable[[str], Any]] = {
    "str": str,
    "int": int,
    "float": float,
    "loads": json.loads,
    "human_readable_int": human_readable_int,
    "human_readable_int_or_auto": human_readable_int_or_auto,
    "parse_reasoning_parser": parse_reasoning_parser,
    "union_dict_and_str": union_dict_and_str,
    "lower_underscores": _lower_underscores,
    "device_ids": _device_ids,
}


def type_of(described: Any) -> Callable[[str], Any]:
    """The callable a table's type descriptor names (tools/vllm_flag_table.py describe_type)."""
    if isinstance(described, str):
        if described not in _NAMED:
            raise FlagTableError(f"type {described!r} is not one fleet implements")
        return _NAMED[described]
    if isinstance(described, dict) and "optional" in described:
        return _optional(type_of(described["optional"]))
    if isinstance(described, dict) and "parse" in described:
        return _parse(type_of(described["parse"]))
    if isinstance(described, dict) and "config" in described:
        return _config(described["config"], described["fields"], described.get("extra"))
    raise FlagTableError(f"type {described!r} is not one fleet implements")


# --- vLLM's argparse actions ----------------------------------------------------------------------


class EnableDisableAction(argparse.BooleanOptionalAction):
    """vllm/utils/argparse_utils.py:120: `--enable-x` pairs with `--disable-x`; `--no-enable-x` is
    accepted too, hidden from help."""

    _inverse_prefixes = {"--enable-": "--disable-", "--disable-": "--enable-"}

    def __init__(self, option_strings: Sequence[str], dest: str, *args: Any, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, *args, **kwargs)
        inverses = [inverse + opt.removeprefix(prefix) for opt in option_strings for prefix, inverse in self._inverse_prefixes.items() if opt.startswith(prefix)]
        negated = {opt for opt in self.option_strings if opt not in option_strings}
        self.negative_option_strings = negated | set(inverses)
        self.visible_option_strings = [*option_strings, *inverses] if inverses else list(self.option_strings)
        self.option_strings = [*self.option_strings, *inverses]

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option_string: str | None = None) -> None:
        setattr(namespace, self.dest, option_string not in self.negative_option_strings)


class _LoRAModules(argparse.Action):
    """vllm/entrypoints/common/cli_args.py:37 LoRAParserAction: `name=path` or JSON objects of
    LoRAModulePath (vllm/entrypoints/openai/models/protocol.py:15), kept as dicts."""

    _FIELDS = ("name", "path", "base_model_name", "is_3d_lora_weight")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option_string: str | None = None) -> None:
        if values is None:
            values = []
        lora_list: list[dict[str, Any]] = []
        for item in values:
            if item in [None, ""]:
                continue
            if "=" in item and "," not in item:
                name, path = item.split("=", 1)
                lora_list.append(self._module(name=name, path=path))
                continue
            try:
                lora_dict = json.loads(item)
            except json.JSONDecodeError:
                parser.error(f"Invalid JSON format for --lora-modules: {item}")
            try:
                lora_list.append(self._from_json(lora_dict))
            except TypeError as e:
                parser.error(f"Invalid fields for --lora-modules: {item} - {str(e)}")
        setattr(namespace, self.dest, lora_list)

    def _module(self, name: Any, path: Any, base_model_name: Any = None, is_3d_lora_weight: Any = False) -> dict[str, Any]:
        return {"name": name, "path": path, "base_model_name": base_model_name, "is_3d_lora_weight": is_3d_lora_weight}

    def _from_json(self, lora_dict: Any) -> dict[str, Any]:
        if not isinstance(lora_dict, dict):
            raise TypeError(f"LoRAModulePath() argument after ** must be a mapping, not {type(lora_dict).__name__}")
        for key in lora_dict:
            if key not in self._FIELDS:
                raise TypeError(f"LoRAModulePath.__init__() got an unexpected keyword argument '{key}'")
        missing = [f"'{f}'" for f in ("name", "path") if f not in lora_dict]
        if missing:
            plural = "s" if len(missing) > 1 else ""
            raise TypeError(f"LoRAModulePath.__init__() missing {len(missing)} required positional argument{plural}: {' and '.join(missing)}")
        return self._module(**lora_dict)


class _DeprecatedLogConfigFile(argparse.Action):
    """arg_utils.py:480 DeprecatedLogConfigFileAction: warns, then stores."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option_string: str | None = None) -> None:
        _warn(namespace, "--log-config-file is deprecated and will be removed in v0.33.0. Use --logging-config.pylogging_config_file instead.")
        setattr(namespace, self.dest, values)


_WARNINGS = "_fleet_warnings"


def _warn(namespace: argparse.Namespace, message: str) -> None:
    if not hasattr(namespace, _WARNINGS):
        setattr(namespace, _WARNINGS, [])
    getattr(namespace, _WARNINGS).append(message)


_ACTIONS: Mapping[str, Any] = {
    "store": "store",
    "store_true": "store_true",
    "store_false": "store_false",
    "store_const": "store_const",
    "append": "append",
    "help": "help",
    "enable_disable": argparse.BooleanOptionalAction,  # registered to EnableDisableAction, as vLLM does
    "boolean_optional": argparse.BooleanOptionalAction,
    "lora_modules": _LoRAModules,
    "deprecated_log_config_file": _DeprecatedLogConfigFile,
}


class _Parser(argparse.ArgumentParser):
    """FlexibleArgumentParser's error (argparse_utils.py:182): argparse's, raised instead of exit 2,
    with vLLM's hint for `--task`."""

    show_serve_task_hint = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.register("action", argparse.BooleanOptionalAction, EnableDisableAction)

    def error(self, message: str) -> NoReturn:
        if (self.prog.endswith(" serve") or _Parser.show_serve_task_hint) and message.startswith("unrecognized arguments:") and re.search(r"(^|\s)--task(=|\s|$)", message):
            message += (
                "\n\nHint: --task is not a vllm serve option. "
                "For embedding, reranking, or reward models, use "
                "--runner pooling. To adapt a generative model for pooling, "
                "also use --convert embed, --convert classify, or "
                "--convert reward."
            )
        raise ArgvError(message, self.format_usage(), self.prog)


@dataclass(frozen=True)
class ReprDefault:
    """A default JSON cannot hold (a config object, a set, an enum): its repr, as the table has it."""

    text: str

    def __repr__(self) -> str:
        return self.text


@dataclass(frozen=True)
class Parsers:
    top: argparse.ArgumentParser
    serve: argparse.ArgumentParser


@lru_cache(maxsize=None)
def build_parser(release: str) -> Parsers:
    """`vllm` with its `serve` subparser, from the release's table (cli/main.py:88-108)."""
    table = load_table(release)
    top = _Parser(prog=table.top_prog, description="vLLM CLI")
    subparsers = top.add_subparsers(required=False, dest="subparser")
    serve = subparsers.add_parser(SUBCOMMAND, usage=table.usage, add_help=False, allow_abbrev=table.allow_abbrev)
    for entry in table.actions:
        _add(serve, entry, table)
    return Parsers(top, serve)


def _add(parser: argparse.ArgumentParser, entry: Mapping[str, Any], table: FlagTable) -> None:
    kind = entry["action"]
    if kind not in _ACTIONS:
        raise FlagTableError(f"flagdata/{table.release}.json {entry['options']}: action {kind!r} is not one fleet implements")
    if kind == "help":
        parser.add_argument(*entry["options"], action="help")
        return
    default = entry.get("default")
    if entry.get("default_is_repr"):
        default = ReprDefault(str(default))  # not a str: argparse would run it through the type
    elif default == argparse.SUPPRESS:
        default = argparse.SUPPRESS  # argparse tests it by identity
    kwargs: dict[str, Any] = {"action": _ACTIONS[kind], "default": default}
    options = list(entry["options"])
    if options:
        kwargs["dest"] = entry["dest"]
    if kind in ("store", "append", "lora_modules", "deprecated_log_config_file") and "nargs" in entry:
        kwargs["nargs"] = entry["nargs"]
    if "type" in entry:
        kwargs["type"] = type_of(entry["type"])
    if "choices" in entry:
        kwargs["choices"] = entry["choices"]
    if entry.get("required"):
        kwargs["required"] = True
    if kind in ("store_const",) or (kind == "store" and entry.get("nargs") == "?"):
        kwargs["const"] = entry.get("const")
    if "metavar" in entry:
        kwargs["metavar"] = entry["metavar"] if isinstance(entry["metavar"], str) else tuple(entry["metavar"])
    if entry.get("hidden"):
        kwargs["help"] = argparse.SUPPRESS
    if not options:  # the positional model_tag
        parser.add_argument(entry["dest"], **kwargs)
        return
    action = parser.add_argument(*options, **kwargs)
    if isinstance(action, EnableDisableAction):  # argparse_utils.py _register_action: hidden spellings leave help
        action.option_strings = action.visible_option_strings
    registered = sorted(o for o, a in parser._option_string_actions.items() if a is action)
    if registered != sorted(table.registered(entry)):
        raise FlagTableError(f"flagdata/{table.release}.json {entry['options']}: rebuilt as {registered}, the table says {table.registered(entry)}")


# --- FlexibleArgumentParser.parse_args (argparse_utils.py:313), before argparse --------------------------


def _model_first(args: list[str], warnings: list[str]) -> list[str]:
    """:326-366: `--model X` becomes the positional; `--served-model-name` needs a positional model."""
    model_idx = next((i for i, arg in enumerate(args) if re.match(r"^--model(=.+|$)", arg)), None)
    if model_idx is not None:
        warnings.append(
            "With `vllm serve`, you should provide the model as a positional argument or in a config file "
            "instead of via the `--model` option. The `--model` option will be removed in a future version."
        )
        if args[model_idx] == "--model":
            if model_idx + 1 >= len(args):
                raise ServeArgsError("IndexError", "list index out of range")
            model_tag = args[model_idx + 1]
            rest_start_idx = model_idx + 2
        else:
            model_tag = args[model_idx].removeprefix("--model=")
            rest_start_idx = model_idx + 1
        args = [SUBCOMMAND, model_tag, *args[1:model_idx], *args[rest_start_idx:]]
    if len(args) > 1 and args[1].startswith("-") and not any(re.match(r"^--config(=.+|$)", arg) for arg in args) and any(re.match(r"^--served[-_]model[-_]name(=.+|$)", arg) for arg in args):
        raise ServeArgsError(
            "ValueError",
            "`model` should be provided as the first positional argument when using `vllm serve`. i.e. `vllm serve <model> --<arg> <value>`.",
        )
    return args


def _dashes(args: list[str]) -> list[str]:
    """:381-410: underscores to dashes in a flag's name (up to the first `.`), `-O3` and `-O 3`."""
    pattern = re.compile(r"(?<=--)[^\.]*")

    def repl(match: re.Match[str]) -> str:
        return match.group(0).replace("_", "-")

    processed: list[str] = []
    for i, arg in enumerate(args):
        if arg.startswith("--help="):
            processed.append("--help")
        elif arg.startswith("--"):
            if "=" in arg:
                key, value = arg.split("=", 1)
                processed.append(f"{pattern.sub(repl, key, count=1)}={value}")
            else:
                processed.append(pattern.sub(repl, arg, count=1))
        elif arg.startswith("-O") and arg != "-O":
            processed += ["--optimization-level", arg[3:] if arg[2] == "=" else arg[2:]]
        elif arg == "-O" and i + 1 < len(args) and args[i + 1] in {"0", "1", "2", "3"}:
            processed.append("--optimization-level")
        else:
            processed.append(arg)
    return processed


def _dotted(processed_args: list[str], warnings: list[str]) -> list[str]:
    """:412-500: `--json-arg.key value` (and `.key+` list items) folded into `--json-arg '{...}'`,
    appended after the other arguments."""

    def create_nested_dict(keys: list[str], value: Any) -> dict[str, Any]:
        nested: Any = value
        for key in reversed(keys):
            nested = {key: nested}
        return dict(nested)

    def recursive_dict_update(original: dict[str, Any], update: dict[str, Any]) -> set[str]:
        duplicates: set[str] = set()
        for k, v in update.items():
            if isinstance(v, dict) and isinstance(original.get(k), dict):
                duplicates |= {f"{k}.{d}" for d in recursive_dict_update(original[k], v)}
            elif isinstance(v, list) and isinstance(original.get(k), list):
                original[k] += v
            else:
                if k in original:
                    duplicates.add(k)
                original[k] = v
        return duplicates

    delete: set[int] = set()
    dict_args: defaultdict[str, dict[str, Any]] = defaultdict(dict)
    duplicates: set[str] = set()
    regular_args_seen: set[str] = set()
    for i, processed_arg in enumerate(processed_args):
        if i in delete:
            continue
        if processed_arg.startswith("--") and "." not in processed_arg:
            arg_name = processed_arg.split("=", 1)[0] if "=" in processed_arg else processed_arg
            if arg_name in regular_args_seen:
                duplicates.add(arg_name)
            else:
                regular_args_seen.add(arg_name)
            continue
        if processed_arg.startswith("-") and "." in processed_arg:
            if "=" in processed_arg:
                processed_arg, value_str = processed_arg.split("=", 1)
                if "." not in processed_arg:
                    continue
            else:
                if i + 1 >= len(processed_args):
                    raise ServeArgsError("IndexError", "list index out of range")
                value_str = processed_args[i + 1]
                delete.add(i + 1)
            if processed_arg.endswith("+"):
                processed_arg = processed_arg[:-1]
                value_str = json.dumps(list(value_str.split(",")))
            key, *keys = processed_arg.split(".")
            value: Any
            try:
                value = json.loads(value_str)
            except json.JSONDecodeError:
                try:
                    value = human_readable_int(value_str)
                except (ValueError, argparse.ArgumentTypeError):
                    value = value_str
            duplicates |= {f"{key}.{d}" for d in recursive_dict_update(dict_args[key], create_nested_dict(keys, value))}
            delete.add(i)
    out = [a for i, a in enumerate(processed_args) if i not in delete]
    if duplicates:
        warnings.append(f"Found duplicate keys {', '.join(duplicates)}")
    for dict_arg, dict_value in dict_args.items():
        out += [dict_arg, json.dumps(dict_value)]
    return out


# --- --config (argparse_utils.py:516 _pull_args_from_config, :606 load_config_file) -----------------------


def _pull_args_from_config(parser: argparse.ArgumentParser, args: list[str]) -> list[str]:
    if args.count("--config") > 1:
        raise ServeArgsError("AssertionError", "More than one config file specified!")
    index = args.index("--config")
    if index == len(args) - 1:
        raise ServeArgsError("ValueError", "No config file specified! Please check your command-line arguments.")
    config_args = load_config_file(parser, args[index + 1])
    if args[0].startswith("-"):
        return config_args + args[0:index] + args[index + 2 :]
    if args[0] == SUBCOMMAND:
        model_in_cli = len(args) > 1 and not args[1].startswith("-")
        model_in_config = any(arg == "--model" for arg in config_args)
        if not model_in_cli and not model_in_config:
            raise ServeArgsError("ValueError", "No model specified! Please specify model either as a positional argument or in a config file.")
        if model_in_cli:
            return args[:2] + config_args + args[2:index] + args[index + 2 :]
        return args[:1] + config_args + args[1:index] + args[index + 2 :]
    return [args[0]] + config_args + args[1:index] + args[index + 2 :]


def load_config_file(parser: argparse.ArgumentParser, file_path: str) -> list[str]:
    extension = file_path.split(".")[-1]
    if extension not in ("yaml", "yml"):
        raise ServeArgsError("ValueError", f"Config file must be of a yaml/yml type. {extension} supplied")
    path = Path(file_path)
    if not path.exists():
        raise ServeArgsError("FileNotFoundError", f"[Errno 2] No such file or directory: '{file_path}'")
    processed: list[str] = []
    for key, value in read_yaml_mapping(path).items():
        if isinstance(value, bool):
            if value:
                processed.append("--" + key)
            elif (no_key := f"--no-{key}") in parser._option_string_actions:
                processed.append(no_key)
        elif isinstance(value, list):
            if value:
                processed += ["--" + key, *(_yaml_str(item) for item in value)]
        elif isinstance(value, dict):
            processed += ["--" + key, json.dumps(value)]
        else:
            processed += ["--" + key, _yaml_str(value)]
    return processed


def _yaml_str(value: Any) -> str:
    return str(value)


_YAML_SCALARS: Mapping[str, Any] = {
    "true": True, "false": False, "True": True, "False": False, "TRUE": True, "FALSE": False,
    "yes": True, "no": False, "on": True, "off": False, "null": None, "Null": None, "NULL": None, "~": None,
}  # fmt: skip


def read_yaml_mapping(path: Path) -> dict[str, Any]:
    """The YAML of a `vllm serve --config` file, as far as the standard library reads it: a mapping
    of scalars, `[a, b]` or block lists, `{...}` JSON flow mappings and nested block mappings
    (`speculative-config:` with indented `method: eagle` under it). vLLM reads it with PyYAML's
    safe_load; anything richer is refused here with its line (a fleet limitation, said plainly)."""
    lines: list[tuple[int, int, str]] = []
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        text = "" if raw.lstrip().startswith("#") else raw.split(" #", 1)[0].rstrip()
        if text.strip():
            if "\t" in text[: len(text) - len(text.lstrip())]:
                raise ConfigFileError(f"{path}:{number}: a tab in the indentation")
            lines.append((number, len(text) - len(text.lstrip(" ")), text.strip()))
    value, end = _yaml_block(lines, 0, 0, path)
    if end != len(lines):
        raise ConfigFileError(f"{path}:{lines[end][0]}: indentation fleet cannot read")
    if not isinstance(value, dict):
        raise ConfigFileError(f"{path}: expected a mapping of options")
    return value


def _yaml_block(lines: list[tuple[int, int, str]], i: int, indent: int, path: Path) -> tuple[Any, int]:
    """The mapping or list whose lines start at `i`, indented `indent`: (value, next line)."""
    if i < len(lines) and lines[i][2].startswith("- "):
        items: list[Any] = []
        while i < len(lines) and lines[i][1] == indent and lines[i][2].startswith("- "):
            items.append(_yaml_scalar(lines[i][2][2:].strip()))
            i += 1
        return items, i
    mapping: dict[str, Any] = {}
    while i < len(lines) and lines[i][1] == indent:
        number, _, body = lines[i]
        match = re.fullmatch(r"([A-Za-z0-9_.+-]+)\s*:(?:\s+(.*))?", body)
        if not match:
            raise ConfigFileError(f"{path}:{number}: expected `key: value` (fleet reads simple YAML config files only), got {body!r}")
        key, rest = match[1], (match[2] or "").strip()
        i += 1
        if rest:
            mapping[key] = _yaml_value(rest, path, number)
        elif i < len(lines) and (lines[i][1] > indent or lines[i][1] == indent and lines[i][2].startswith("- ")):
            mapping[key], i = _yaml_block(lines, i, lines[i][1], path)
        else:
            mapping[key] = None
    return mapping, i


def _yaml_value(raw: str, path: Path, number: int) -> Any:
    if raw.startswith("{"):
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            raise ConfigFileError(f"{path}:{number}: a mapping value fleet can read must be JSON, got {raw!r}") from None
    if raw.startswith("[") and raw.endswith("]"):
        return [_yaml_scalar(item.strip()) for item in raw[1:-1].split(",") if item.strip()]
    return _yaml_scalar(raw)


def _yaml_scalar(raw: str) -> Any:
    if raw in _YAML_SCALARS:
        return _YAML_SCALARS[raw]
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
        return raw[1:-1]
    if re.fullmatch(r"[-+]?\d+", raw):
        return int(raw)
    if re.fullmatch(r"[-+]?(\d+\.\d*|\.\d+)([eE][-+]?\d+)?", raw):  # PyYAML's floats have a dot
        return float(raw)
    return raw


# --- validate_parsed_serve_args (cli_args.py:531) ---------------------------------------------------------

_REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")  # vllm/renderers/params.py:27


def validate_parsed(values: Mapping[str, Any], env: Mapping[str, str]) -> None:
    """What `vllm serve` checks after parsing, before anything loads (the chat template excepted)."""
    grpc_port = values.get("grpc_port")
    if grpc_port is not None:  # :495 validate_grpc_port_arg
        if values.get("grpc"):
            raise ServeArgsError("ValueError", (
                "--grpc and --grpc-port are mutually exclusive. Use --grpc --port for the Python gRPC server, "
                "or VLLM_USE_RUST_FRONTEND=1 with --grpc-port for the Rust frontend."))  # fmt: skip
        if env.get("VLLM_USE_RUST_FRONTEND", "0").lower() not in ("1", "true") or values.get("subparser") != SUBCOMMAND:
            raise ServeArgsError("ValueError", "--grpc-port requires VLLM_USE_RUST_FRONTEND=1 vllm serve")
    effort_map = values.get("reasoning_effort_map")
    if effort_map is not None:  # :515 validate_reasoning_effort_map
        if not isinstance(effort_map, dict) or not all(isinstance(v, str) for v in effort_map.values()):
            raise ServeArgsError("ValueError", "Error: --reasoning-effort-map must be a JSON object mapping reasoning efforts to strings.")
        if unknown := sorted(set(effort_map) - set(_REASONING_EFFORTS)):
            raise ServeArgsError("ValueError", f"Error: --reasoning-effort-map has unknown efforts {unknown}; keys must be one of {list(_REASONING_EFFORTS)}.")
    if values.get("enable_auto_tool_choice") and not values.get("tool_call_parser"):
        raise ServeArgsError("TypeError", "Error: --enable-auto-tool-choice requires --tool-call-parser")
    if values.get("enable_log_outputs") and not values.get("enable_log_requests"):
        raise ServeArgsError("TypeError", "Error: --enable-log-outputs requires --enable-log-requests")
    if values.get("sse_keep_alive_interval", 0) < 0:
        raise ServeArgsError("ValueError", "Error: --sse-keep-alive-interval must be a non-negative integer (0 disables keep-alive comments).")
    if values.get("enable_per_request_metrics", False) and values.get("disable_log_stats", False):
        raise ServeArgsError("ValueError", (
            "Error: --enable-per-request-metrics requires engine statistics logging; remove --disable-log-stats "
            "to enable per-request metrics."))  # fmt: skip
    if values.get("data_parallel_multi_port_external_lb"):
        raise ServeArgsError("NotImplementedError", "fleet does not model --data-parallel-multi-port-external-lb's checks")


# --- the whole of `vllm serve ARGS` up to the engine arguments ---------------------------------------


@dataclass(frozen=True)
class ParsedServe:
    """The namespace `vllm serve` parses ARGS to (what `AsyncEngineArgs.from_cli_args` reads)."""

    release: str
    values: dict[str, Any]
    warnings: tuple[str, ...]

    @property
    def model(self) -> str:
        """ServeSubcommand.cmd (serve.py:52): the positional model wins over `--model`."""
        tag = self.values.get("model_tag")
        return str(tag if tag is not None else self.values.get("model"))


def parse_serve(release: str, args: Sequence[str], env: Mapping[str, str] | None = None) -> ParsedServe:
    """`vllm serve ARGS` as vLLM's CLI parses and validates it (cli/main.py:117-121). Raises
    ArgvError where it exits 2, ServeArgsError where it raises (ValueError, TypeError, ...), and
    ConfigFileError for a --config file fleet cannot read."""
    parsers = build_parser(release)
    warnings: list[str] = []
    argv = [SUBCOMMAND, *args]
    _Parser.show_serve_task_hint = any(re.match(r"^--task(=.+|$)", arg) for arg in argv[1:])
    try:
        argv = _model_first(argv, warnings)
        if "--config" in argv:
            # The top-level parser reads the file (its parse_args runs first), so `key: false` finds no
            # `--no-key` among its own options and is dropped (argparse_utils.py load_config_file).
            argv = _pull_args_from_config(parsers.top, argv)
        argv = _dotted(_dashes(argv), warnings)
        namespace = argparse.Namespace(**{_WARNINGS: []})
        parsed = parsers.top.parse_args(argv, namespace)
    finally:
        _Parser.show_serve_task_hint = False
    values = {k: v for k, v in vars(parsed).items() if k != _WARNINGS}
    validate_parsed(values, env or {})
    return ParsedServe(release, values, tuple(warnings + list(getattr(parsed, _WARNINGS))))

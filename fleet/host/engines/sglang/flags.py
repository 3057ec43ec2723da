"""The command line each known SGLang release accepts, and fleet's names for the flags it renders.

A release's flags are data: `flagdata/<release>.json`, written by `tools/sglang_flag_table.py` from
that release's own `ServerArgs.add_cli_args` (the JSON names its source). From a table this module
builds a standard-library `argparse.ArgumentParser` with SGLang's prog and allow_abbrev, so that
abbreviations, ambiguous prefixes, type conversion, `choices`, missing values and unknown flags
are accepted and refused exactly as that release's parser does, with argparse's own error text.
What a table cannot hold is here, per release: the type functions (by the name argparse prints
in `invalid <name> value`), SGLang's custom argparse actions, `--config` merging
(`prepare_server_args`), and the renames `from_cli_args` applies.

Fork-only flags (the DDTree fork, sgl-project/sglang PR #29907) are not in any release's table;
`fork="ddtree"` adds them, for hosts whose engine is the fork.

Standard library only: the simulator ships to hosts with it.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from functools import lru_cache
from pathlib import Path
from typing import Any, NoReturn

from fleet.host.engines import yaml11
from fleet.host.errors import ArgvError, ConfigFileError
from fleet.host.engines.sglang.release import FORKS, KNOWN_RELEASES
from fleet.host.errors import FlagTableError

FLAGDATA_DIR = Path(__file__).resolve().parent / "flagdata"
# The DDTree fork's additions to the release it is built on (PR #29907, DB-Guo/sglang-ddtree-dev).
FORK_FLAGS: Mapping[str, tuple[Mapping[str, Any], ...]] = {
    "ddtree": (
        {"options": ["--speculative-ddtree-budget"], "dest": "speculative_ddtree_budget", "action": "store", "type": "int"},
        {"options": ["--speculative-dflash-enable-ddtree"], "dest": "speculative_dflash_enable_ddtree", "action": "store_true", "default": False},
    ),
}
FORK_ALGORITHMS: Mapping[str, frozenset[str]] = {"ddtree": frozenset({"DDTREE"})}


@dataclass(frozen=True)
class ReleaseFlags:
    """What a release's flag table cannot say by itself."""

    # ServerArgs field -> parser dest, for the fields `from_cli_args` copies from another dest.
    from_cli_args: Mapping[str, str]
    # How the release turns decode CUDA graphs off: a flag without its leading "--" and its value
    # (True: a store_true flag).
    disable_cuda_graph: tuple[str, str | bool]
    # fleet's name of a setting (the 0.5.12 field names) -> this release's field, where it differs.
    renamed: Mapping[str, str] = field(default_factory=dict)


RELEASE_FLAGS: Mapping[str, ReleaseFlags] = {
    # 0.5.12 server_args.py:7132 from_cli_args: `args.tp_size = args.tensor_parallel_size` ...
    "0.5.12": ReleaseFlags(
        from_cli_args={
            "tp_size": "tensor_parallel_size",
            "pp_size": "pipeline_parallel_size",
            "attn_cp_size": "attention_context_parallel_size",
            "moe_dp_size": "moe_data_parallel_size",
            "dp_size": "data_parallel_size",
            "ep_size": "expert_parallel_size",
        },
        # server_args.py: `--disable-cuda-graph` (store_true).
        disable_cuda_graph=("disable-cuda-graph", True),
    ),
    # 0.5.14 renamed the mamba strategy and the decode CUDA-graph flags; 0.5.23 has no old spelling
    # (flagdata/0.5.23.json), and its `disable_cuda_graph` is only the deprecated flag's dest.
    "0.5.23": ReleaseFlags(
        from_cli_args={},
        # `--disable-cuda-graph` survives only as a deprecated alias; the release's own advice on a
        # failed capture (model_executor/runner_backend_utils/__init__.py:18,
        # CUDA_GRAPH_CAPTURE_FAILED_MSG) is `--cuda-graph-backend-decode=disabled` (choices
        # full/breakable/disabled).
        disable_cuda_graph=("cuda-graph-backend-decode", "disabled"),
        renamed={
            "mamba_scheduler_strategy": "mamba_radix_cache_strategy",
            "cuda_graph_max_bs": "cuda_graph_max_bs_decode",
            "cuda_graph_bs": "cuda_graph_bs_decode",
        },
    ),
}
assert set(RELEASE_FLAGS) == set(KNOWN_RELEASES), "one ReleaseFlags per known release"


@dataclass(frozen=True)
class FlagTable:
    release: str
    source: str
    prog: str
    allow_abbrev: bool
    actions: tuple[Mapping[str, Any], ...]

    @property
    def option_strings(self) -> tuple[str, ...]:
        return tuple(option for action in self.actions for option in action["options"])

    def dest_of(self, option: str) -> str | None:
        for action in self.actions:
            if option in action["options"]:
                return str(action["dest"])
        return None

    def option_of(self, dest: str) -> str | None:
        """The first (canonical) option string of a dest, None when the release has no such flag."""
        for action in self.actions:
            if action["dest"] == dest and action["options"]:
                return str(action["options"][0])
        return None


@lru_cache(maxsize=None)
def load_table(release: str) -> FlagTable:
    if release not in KNOWN_RELEASES:
        raise FlagTableError(f"SGLang release {release!r}: fleet has flag tables for {', '.join(KNOWN_RELEASES)}")
    path = FLAGDATA_DIR / f"{release}.json"
    data = json.loads(path.read_text())
    if data.get("release") != release or not isinstance(data.get("actions"), list):
        raise FlagTableError(f"{path}: expected the flag table of release {release} (release, actions)")
    return FlagTable(release, data["source"], data["prog"], bool(data["allow_abbrev"]), tuple(data["actions"]))


def fleet_field(release: str, name: str) -> str:
    """This release's ServerArgs field for fleet's setting `name` (its 0.5.12 name)."""
    return RELEASE_FLAGS[release].renamed.get(name, name)


def flag_for(release: str, name: str) -> str:
    """The option string that sets fleet's setting `name` under `release`, e.g.
    flag_for("0.5.23", "cuda_graph_max_bs") == "--cuda-graph-max-bs-decode"."""
    option = load_table(release).option_of(fleet_field(release, name))
    if option is None:
        raise FlagTableError(f"SGLang {release} has no flag for {name!r} (flagdata/{release}.json)")
    return option


def release_of_fields(fields: Collection[str]) -> str:
    """The known release whose ServerArgs a logged `server_args` is (`fields`: its field names): the
    newest whose own names of fleet's renamed settings are all there, else the oldest."""
    for release in reversed(KNOWN_RELEASES):
        renamed = RELEASE_FLAGS[release].renamed
        if renamed and all(field_name in fields for field_name in renamed.values()):
            return release
    return KNOWN_RELEASES[0]


@lru_cache(maxsize=None)
def every_spelling(name: str) -> frozenset[str]:
    """Every option string of fleet's setting `name` in any known release (to spot a playbook's
    free-form `flags` that would set what fleet renders itself). Cached: the flag tables are data
    shipped with fleet, and a plan asks this for every server (9 s of a 50k-run plan)."""
    spellings: set[str] = set()
    for release in KNOWN_RELEASES:
        dest = fleet_field(release, name)
        for action in load_table(release).actions:
            if action["dest"] == dest:
                spellings.update(action["options"])
    return frozenset(spellings)


# --- type functions, named as argparse prints them: "invalid <__name__> value: 'x'" -----------------


def human_readable_int(value: str) -> int:
    """sglang/srt/utils/common.py human_readable_int (0.5.12 :2383, 0.5.23 :3394), the same in both."""
    value = value.strip()
    si = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
    iec = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)", value)
    if match:
        number, suffix = match.groups()
        if suffix in iec:
            if "." in number:
                raise argparse.ArgumentTypeError(
                    f"Decimals are not allowed with IEC suffixes like '{suffix}'. Use an integer IEC value such as '{int(Decimal(number))}{suffix}', or an SI value such as '{number}{suffix[0]}'."
                )
            return int(number) * iec[suffix]
        return int(Decimal(number) * si[suffix])
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"Invalid integer value: '{value}'. Use a plain integer, SI suffixes (1k, 1M), or IEC suffixes (1Ki, 1Mi). Suffixes are case-sensitive.") from None


def nullable_str(val: str) -> str | None:
    """utils/common.py nullable_str."""
    if not val or val == "None":
        return None
    return val


def _orjson_int(text: str) -> int | float:
    """orjson reads an integer outside i64..u64 as a float (checked against orjson 3.12)."""
    value = int(text)
    return value if -(2**63) <= value < 2**64 else float(value)


def _orjson_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):  # orjson: "number is infinity when parsed as double"
        raise ValueError("number is infinity when parsed as double")
    return value


def _orjson_constant(name: str) -> Any:  # NaN, Infinity: orjson refuses the literals json.loads takes
    raise ValueError(f"unexpected character {name}")


def _has_lone_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        return any(0xD800 <= ord(c) <= 0xDFFF for c in value)
    if isinstance(value, list):
        return any(_has_lone_surrogate(v) for v in value)
    if isinstance(value, dict):
        return any(_has_lone_surrogate(k) or _has_lone_surrogate(v) for k, v in value.items())
    return False


def orjson_loads(value: str) -> Any:
    """orjson.loads as far as it differs from json.loads on text: no NaN/Infinity literals, no
    infinite floats, no lone surrogates, no BOM; integers past u64/i64 become floats."""
    if value.startswith("\ufeff"):
        raise ValueError("UTF-8 byte order mark (BOM) is not supported")
    parsed = json.loads(value, parse_int=_orjson_int, parse_float=_orjson_float, parse_constant=_orjson_constant)
    if _has_lone_surrogate(parsed):
        raise ValueError("no low surrogate in string")
    return parsed


def json_list_type(value: str) -> Any:
    """0.5.23 utils/common.py:4818 json_list_type: orjson.loads, whose JSONDecodeError is argparse's error."""
    try:
        return orjson_loads(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"Invalid JSON list: {value}. Please provide a valid JSON list.") from None


def loads(value: str) -> Any:
    """`type=json.loads`: a ValueError, so argparse says `invalid loads value`."""
    return json.loads(value)


def parse_cuda_graph_backend_arg(raw: str) -> str:
    """0.5.23 model_executor/cuda_graph_config.py:237."""
    if raw == "tc_piecewise":
        raise argparse.ArgumentTypeError("tc_piecewise was removed; select breakable, full, or disabled")
    return raw


_CUDA_GRAPH_PHASE_KEYS = {  # 0.5.23 cuda_graph_config.py:75 ALLOWED_KEYS_PER_PHASE
    "decode": ("backend", "max_bs", "bs"),
    "prefill": ("backend", "max_bs", "bs", "max_context_size", "full_prefill_max_req", "full_prefill_prefix_chunk_tokens", "max_seq_len"),
}


def parse_cuda_graph_config_arg(raw: str) -> dict[str, dict[str, Any]]:
    """0.5.23 cuda_graph_config.py:246-285: a JSON object of known phases, each an object of that
    phase's allowed keys (:75 ALLOWED_KEYS_PER_PHASE; any other key is refused), a retired backend refused."""
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"--cuda-graph-config must be JSON: {e}") from None
    if not isinstance(parsed, dict):
        raise argparse.ArgumentTypeError(f"--cuda-graph-config must be a JSON object, got {type(parsed).__name__}")
    result: dict[str, dict[str, Any]] = {}
    for phase, settings in parsed.items():
        phase = str(phase)
        if phase not in _CUDA_GRAPH_PHASE_KEYS:
            raise argparse.ArgumentTypeError(f"--cuda-graph-config: unknown phase '{phase}', expected one of {tuple(_CUDA_GRAPH_PHASE_KEYS)}")
        if not isinstance(settings, dict):
            raise argparse.ArgumentTypeError(f"--cuda-graph-config['{phase}'] must be a JSON object, got {type(settings).__name__}")
        if "backend" in settings:
            parse_cuda_graph_backend_arg(settings["backend"])
        allowed = _CUDA_GRAPH_PHASE_KEYS[phase]
        for key in settings:
            if key not in allowed:
                raise argparse.ArgumentTypeError(f"--cuda-graph-config['{phase}']: unknown key '{key}', expected one of {allowed}")
        result[phase] = dict(settings)
    return result


TYPES: Mapping[str, Callable[[str], Any]] = {
    "str": str,
    "int": int,
    "float": float,
    "loads": loads,
    "human_readable_int": human_readable_int,
    "nullable_str": nullable_str,
    "json_list_type": json_list_type,
    "parse_cuda_graph_backend_arg": parse_cuda_graph_backend_arg,
    "parse_cuda_graph_config_arg": parse_cuda_graph_config_arg,
}


# --- SGLang's custom argparse actions (server_args.py 0.5.12 :7867.., arg_groups/argparse_actions.py 0.5.23) ---


class _Deprecated(argparse.Action):
    """DeprecatedAction: a no-op flag that warns (or, with an error_message, stops)."""

    def __init__(self, option_strings: Sequence[str], dest: str, error_message: str | None = None, nargs: Any = 0, **kwargs: Any) -> None:
        self.error_message = error_message
        super().__init__(option_strings, dest, nargs=nargs, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option_string: str | None = None) -> None:
        if self.error_message is not None:
            parser.error(self.error_message)
        _warn(namespace, f"The command line argument '{option_string}' is deprecated and will be removed in future versions.")


class _DeprecatedStoreTrue(argparse.Action):
    def __init__(self, option_strings: Sequence[str], dest: str, new_flag: str | None = None, nargs: Any = 0, const: Any = True, default: Any = False, **kwargs: Any) -> None:
        self.new_flag = new_flag
        super().__init__(option_strings, dest, nargs=nargs, const=const, default=default, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option_string: str | None = None) -> None:
        replacement = f" Use '{self.new_flag}' instead." if self.new_flag else ""
        _warn(namespace, f"'{option_string}' is deprecated and will be removed in a future release.{replacement}")
        setattr(namespace, self.dest, True)


class _DeprecatedStoreConst(argparse.Action):
    def __init__(self, option_strings: Sequence[str], dest: str, new_flag: str | None = None, const_value: Any = None, nargs: Any = 0, default: Any = None, **kwargs: Any) -> None:
        self.new_flag = new_flag
        self.const_value = const_value
        super().__init__(option_strings, dest, nargs=nargs, default=default, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option_string: str | None = None) -> None:
        replacement = f" Use '{self.new_flag}' instead." if self.new_flag else ""
        _warn(namespace, f"'{option_string}' is deprecated and will be removed in a future release.{replacement}")
        setattr(namespace, self.dest, self.const_value)


class _LoRAPath(argparse.Action):
    """LoRAPathAction: names, or JSON objects with lora_name and lora_path."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option_string: str | None = None) -> None:
        paths: list[Any] = []
        for path in values or []:
            path = path.strip()
            if path.startswith("{") and path.endswith("}"):
                obj = json.loads(path)
                assert "lora_path" in obj and "lora_name" in obj, f"{path!r} looks like a JSON str, but it does not contain 'lora_name' and 'lora_path' keys."
                paths.append(obj)
            else:
                paths.append(path)
        setattr(namespace, self.dest, paths)


_WARNINGS = "_fleet_deprecation_warnings"


def _warn(namespace: argparse.Namespace, message: str) -> None:
    getattr(namespace, _WARNINGS).append(message)


_ACTIONS: Mapping[str, Any] = {
    "store": "store",
    "store_true": "store_true",
    "store_false": "store_false",
    "store_const": "store_const",
    "append": "append",
    "help": "help",
    "boolean_optional": argparse.BooleanOptionalAction,
    "DeprecatedAction": _Deprecated,
    "DeprecatedStoreTrueAction": _DeprecatedStoreTrue,
    "DeprecatedStoreConstAction": _DeprecatedStoreConst,
    "LoRAPathAction": _LoRAPath,
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise ArgvError(message, self.format_usage(), self.prog)


@lru_cache(maxsize=None)
def build_parser(release: str, fork: str | None = None) -> argparse.ArgumentParser:
    """The release's parser as `prepare_server_args` builds it (prog `sglang serve`), plus a fork's flags.
    Built once per (release, fork): parsing leaves a parser as it was (argparse keeps results in the namespace)."""
    if fork is not None and fork not in FORKS:
        raise FlagTableError(f"fork {fork!r}: fleet knows the forks {', '.join(FORKS)}")
    table = load_table(release)
    # add_help=False: the table has its own -h/--help, first, as argparse adds it.
    parser = _Parser(prog=table.prog, allow_abbrev=table.allow_abbrev, add_help=False)
    for entry in (*table.actions, *(FORK_FLAGS[fork] if fork else ())):
        _add(parser, entry, table)
    return parser


def _add(parser: argparse.ArgumentParser, entry: Mapping[str, Any], table: FlagTable) -> None:
    kind = entry["action"]
    if kind not in _ACTIONS:
        raise FlagTableError(f"flagdata/{table.release}.json {entry['options']}: action {kind!r} is not one fleet implements")
    kwargs: dict[str, Any] = {"dest": entry["dest"], "action": _ACTIONS[kind]}
    if kind in ("store", "append", "LoRAPathAction", "DeprecatedStoreConstAction") and "nargs" in entry:
        kwargs["nargs"] = entry["nargs"]
    elif kind == "DeprecatedStoreConstAction":
        kwargs["nargs"] = None
    if "type" in entry:
        if entry["type"] not in TYPES:
            raise FlagTableError(f"flagdata/{table.release}.json {entry['options']}: type {entry['type']!r} is not one fleet implements")
        kwargs["type"] = TYPES[entry["type"]]
    if "choices" in entry:
        kwargs["choices"] = entry["choices"]
    if entry.get("required"):
        kwargs["required"] = True
    if "default" in entry and kind != "help":
        kwargs["default"] = entry["default"]
    if kind in ("store_const",) or (kind == "store" and entry.get("nargs") == "?"):
        kwargs["const"] = entry.get("const")
    for extra in ("const_value", "new_flag", "error_message"):
        if extra in entry:
            kwargs[extra] = entry[extra]
    if "metavar" in entry:
        kwargs["metavar"] = entry["metavar"] if isinstance(entry["metavar"], str) else tuple(entry["metavar"])
    if entry.get("hidden"):
        kwargs["help"] = argparse.SUPPRESS
    if kind == "help":
        kwargs = {"action": "help"}
    options = entry["options"]
    if kind == "boolean_optional":
        # BooleanOptionalAction adds the --no- spellings itself; the table lists them as the parser has them.
        options = [o for o in options if not o.startswith("--no-") or o[5:] and f"--{o[5:]}" not in options]
    parser.add_argument(*options, **kwargs)


@dataclass(frozen=True)
class ParsedArgv:
    """A release's ServerArgs fields as given on the command line (from_cli_args applied)."""

    release: str
    fork: str | None
    values: dict[str, Any]
    warnings: tuple[str, ...]  # the deprecation warnings SGLang's actions print

    def fleet_value(self, name: str) -> Any:
        """The value of fleet's setting `name` (0.5.12 field name) under this release's field name."""
        return self.values.get(fleet_field(self.release, name))


def parse_argv(release: str, argv: Sequence[str], *, fork: str | None = None) -> ParsedArgv:
    """`prepare_server_args(argv)` up to `ServerArgs.from_cli_args`: raises ArgvError where the
    release's parser exits 2 and ConfigFileError where its `--config` merge raises."""
    parser = build_parser(release, fork)
    args = list(argv)
    if "--config" in args:
        args = merge_config(parser, args)
    namespace = argparse.Namespace(**{_WARNINGS: []})
    parsed = parser.parse_args(args, namespace)
    values = {k: v for k, v in vars(parsed).items() if k != _WARNINGS}
    for name, dest in RELEASE_FLAGS[release].from_cli_args.items():
        values[name] = values.get(dest)
    return ParsedArgv(release, fork, values, tuple(getattr(parsed, _WARNINGS)))


# --- --config (0.5.23 sglang/srt/utils/server_args_config_parser.py, 0.5.12 sglang/srt/server_args_config_parser.py) ---


def _config_keys(action: argparse.Action) -> set[str]:
    return {action.dest} | {option[2:].replace("-", "_") for option in action.option_strings if option.startswith("--")}


def merge_config(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """ConfigArgumentMerger.merge_config_with_args (server_args_config_parser.py:75-106): the YAML
    file's keys become flags placed before the command line's (CLI > config > defaults)."""
    indices = [i for i, arg in enumerate(argv) if arg == "--config"]
    if len(indices) > 1:
        raise ConfigFileError("Multiple config files specified! Only one allowed.")
    index = indices[0]
    if index == len(argv) - 1:
        raise ConfigFileError("No config file specified after --config flag!")
    path = Path(argv[index + 1])
    config = read_config_yaml(path)
    # :42-69 (__init__): store_true keys, and the keys of actions that take more than one value (refused).
    store_true = {key for a in parser._actions if isinstance(a, argparse._StoreTrueAction) for key in _config_keys(a)}
    supported = [a for a in parser._actions if isinstance(a, (argparse._StoreTrueAction, argparse._StoreAction)) or a.nargs is None]
    supported_keys = {key for a in supported for key in _config_keys(a)}
    unsupported = {
        key: a for a in parser._actions if a.option_strings and a not in supported and not {"--config", "--help", "-h"} & set(a.option_strings) for key in _config_keys(a) if key not in supported_keys
    }
    return config_args(config, store_true, unsupported) + argv[:index] + argv[index + 2 :]


def config_args(config: dict[Any, Any], store_true: set[str], unsupported: Mapping[str, argparse.Action]) -> list[str]:
    """_convert_config_to_args (server_args_config_parser.py:164-183) on the object PyYAML built: the
    same Python values, so the same str() and json.dumps texts (None -> "None", 1e+3 floats -> "1000.0",
    dates -> "2024-01-02", nested mappings -> JSON, empty lists skipped, list items str()'d)."""
    merged: list[str] = []
    for key, value in config.items():
        if not isinstance(key, str):  # :169 key.replace(...) on an int/bool/None key: SGLang dies with AttributeError
            raise ConfigFileError(f"AttributeError: {type(key).__name__!r} object has no attribute 'replace'")
        norm = key.replace("-", "_")
        if norm in unsupported:
            raise ConfigFileError(f"Unsupported config option '{norm}' with action '{_sglang_action_name(unsupported[norm])}'")
        if isinstance(value, bool):  # :185-200 _add_boolean_arg
            if norm in store_true:
                merged += [f"--{key}"] if value else []
            else:
                merged += [f"--{key}", str(value).lower()]
        elif isinstance(value, list):  # :202-206 _add_list_arg: an empty list adds nothing
            merged += [f"--{key}", *(str(item) for item in value)] if value else []
        elif isinstance(value, dict):  # :179 json.dumps(value)
            try:
                merged += [f"--{key}", json.dumps(value)]
            except (TypeError, ValueError) as exc:  # e.g. a date inside: SGLang dies with json's TypeError
                raise ConfigFileError(f"{type(exc).__name__}: {exc}") from None
        else:
            merged += [f"--{key}", str(value)]
    return merged


def _sglang_action_name(action: argparse.Action) -> str:
    """The class name SGLang's message prints (:172): its own action classes' names, not fleet's stand-ins'."""
    for name, cls in _ACTIONS.items():
        if isinstance(cls, type) and type(action) is cls and cls.__module__ == __name__:
            return name
    return type(action).__name__


def read_config_yaml(path: Path) -> dict[Any, Any]:
    """_parse_yaml_config (server_args_config_parser.py:124-153, :155-162): the suffix and existence checks,
    `yaml.safe_load` (fleet.host.engines.yaml11, PyYAML's rules with the standard library), an empty
    file as {}, and a root that is not a mapping refused."""
    if path.suffix.lower() not in (".yaml", ".yml"):
        raise ConfigFileError(f"Config file must be YAML format, got: {path.suffix}")
    if not path.exists():
        raise ConfigFileError(f"Config file not found: {path}")
    data = yaml11.safe_load(path)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigFileError("Config file must contain a dictionary at root level")
    return data


# The former name (tests/unit/test_sglang_flags.py imports it).
read_flat_yaml = read_config_yaml

"""Write a release's flag table (`fleet/host/engines/sglang/flagdata/<release>.json`) from SGLang's own
argument parser: every option string `ServerArgs.add_cli_args` registers, with its action, nargs,
type, choices and default, in the parser's order (argparse's ambiguity messages list matches in it).

Two ways to get at the parser:

    python tools/sglang_flag_table.py installed            # the installed wheel (what CI installs: 0.5.23)
    python tools/sglang_flag_table.py source DIR           # an unpacked wheel that cannot be imported here

`source` is for releases whose import needs a GPU stack (0.5.12 imports transformers, torchvision, ...):
it executes only `ServerArgs.add_cli_args` from DIR/sglang/srt/server_args.py, with ServerArgs' own
field defaults, the module's constant assignments and classes, and the helper type functions and
dynamic-choice dictionaries read from their source files. Get such a DIR with
`pip download --no-deps sglang==0.5.12 -d /tmp/x && unzip /tmp/x/*.whl 'sglang/*' -d /tmp/x/src`.

tests/integration/test_sglang_parser.py regenerates the installed release's table and compares it
with the stored one, so a stored table cannot drift from the parser it claims to describe.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FLAGDATA = ROOT / "fleet" / "host" / "engines" / "sglang" / "flagdata"

# argparse's own action classes by kind; SGLang's custom ones are named by their class.
_STDLIB_ACTIONS = {
    "_StoreAction": "store",
    "_StoreTrueAction": "store_true",
    "_StoreFalseAction": "store_false",
    "_StoreConstAction": "store_const",
    "_AppendAction": "append",
    "_HelpAction": "help",
    "BooleanOptionalAction": "boolean_optional",
}


def _plain(value: Any) -> tuple[Any, bool]:
    """(JSON value, exact): a default that JSON cannot hold is kept as its repr."""
    try:
        json.dumps(value)
        return value, True
    except TypeError:
        return repr(value), False


def table_of(parser: argparse.ArgumentParser, *, release: str, source: str) -> dict[str, Any]:
    actions = []
    for action in parser._actions:
        kind = _STDLIB_ACTIONS.get(type(action).__name__, type(action).__name__)
        entry: dict[str, Any] = {"options": list(action.option_strings), "dest": action.dest, "action": kind}
        if action.nargs is not None:
            entry["nargs"] = action.nargs
        if action.type is not None:
            entry["type"] = getattr(action.type, "__name__", repr(action.type))
        if action.choices is not None:
            choices = list(action.choices)
            if isinstance(action.choices, (set, frozenset)):
                # A set's order (and so argparse's "choose from" text) varies between runs upstream too.
                entry["choices_unordered"] = True
                choices = sorted(choices)
            entry["choices"] = choices
        if action.required:
            entry["required"] = True
        if action.help == argparse.SUPPRESS:
            entry["hidden"] = True  # left out of the usage line that every parse error prints
        if action.metavar is not None:
            entry["metavar"] = action.metavar
        default, exact = _plain(action.default)
        if kind != "help":
            entry["default"] = default  # None too: a store_true whose default is None parses to None
            if not exact:
                entry["default_is_repr"] = True
        if action.const is not None:
            entry["const"] = _plain(action.const)[0]
        for extra in ("const_value", "new_flag", "error_message"):
            if getattr(action, extra, None) is not None:
                entry[extra] = _plain(getattr(action, extra))[0]
        actions.append(entry)
    return {
        "release": release,
        "source": source,
        "prog": parser.prog,
        "allow_abbrev": parser.allow_abbrev,
        "option_strings": sum(len(a["options"]) for a in actions),
        "actions": actions,
    }


def installed_table() -> dict[str, Any]:
    from importlib.metadata import version

    from sglang.srt.server_args import ServerArgs

    # As sglang.srt.server_args.prepare_server_args builds it.
    parser = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    release = version("sglang")
    return table_of(parser, release=release, source=f"sglang {release}: sglang/srt/server_args.py ServerArgs.add_cli_args (imported)")


def _definitions(path: Path, names: set[str], namespace: dict[str, Any]) -> None:
    """Define the top-level functions, classes and constants `names` of `path` in `namespace`, from their source."""
    tree = ast.parse(path.read_text(), str(path))
    for node in tree.body:
        named = (
            {node.name}
            if isinstance(node, (ast.FunctionDef, ast.ClassDef))
            else {t.id for t in (node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]) if isinstance(t, ast.Name)}
        )
        if named & names:
            exec(compile(ast.Module([node], []), str(path), "exec"), namespace)


def _class_dict(path: Path, class_name: str, attribute: str) -> dict[str, None]:
    """The keys of a dict literal assigned to `class_name.attribute` in `path` (values are classes)."""
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            for item in node.body:
                target = item.target if isinstance(item, ast.AnnAssign) else (item.targets[0] if isinstance(item, ast.Assign) else None)
                if isinstance(target, ast.Name) and target.id == attribute and isinstance(item.value, ast.Dict):
                    return {ast.literal_eval(key): None for key in item.value.keys if key is not None}
    raise SystemExit(f"{path}: no dict {class_name}.{attribute}")


def source_table(root: Path) -> dict[str, Any]:
    srt = root / "sglang" / "srt"
    server_args = srt / "server_args.py"
    tree = ast.parse(server_args.read_text(), str(server_args))
    namespace: dict[str, Any] = {"argparse": argparse, "json": json, "dataclasses": dataclasses, "field": dataclasses.field}
    namespace["os"] = __import__("os")
    _definitions(srt / "utils" / "common.py", {"human_readable_int", "nullable_str", "json_list_type", "SUPPORTED_LORA_TARGET_MODULES", "LORA_TARGET_ALL_MODULES"}, namespace)
    namespace["re"] = __import__("re")
    namespace["Decimal"] = __import__("decimal").Decimal
    namespace["orjson"] = json  # json_list_type calls orjson.loads; the same for parsing
    for node in tree.body:  # constants (choice lists) and the module's own argparse Action classes
        if isinstance(node, (ast.Assign, ast.AnnAssign)) or (isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name != "ServerArgs"):
            try:
                exec(compile(ast.Module([node], []), str(server_args), "exec"), namespace)
            except Exception:  # noqa: BLE001 - a constant that needs the GPU stack; add_cli_args reports it if used
                pass
    namespace["FunctionCallParser"] = type("FunctionCallParser", (), {"ToolCallParserEnum": _class_dict(srt / "function_call" / "function_call_parser.py", "FunctionCallParser", "ToolCallParserEnum")})
    namespace["ReasoningParser"] = type("ReasoningParser", (), {"DetectorMap": _class_dict(srt / "parser" / "reasoning_parser.py", "ReasoningParser", "DetectorMap")})
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ServerArgs")
    defaults: dict[str, Any] = {}
    for node in cls.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            value: Any = None
            if node.value is not None:
                value = eval(compile(ast.Expression(node.value), str(server_args), "eval"), namespace)
                if isinstance(value, dataclasses.Field):
                    try:
                        value = value.default_factory() if value.default_factory is not dataclasses.MISSING else value.default  # type: ignore[misc]
                    except NameError:
                        value = None  # a device probe (is_hip()): no CLI default to read
            defaults[node.target.id] = value
    namespace["ServerArgs"] = type("ServerArgs", (), defaults)
    add_cli_args = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "add_cli_args")
    add_cli_args.decorator_list = []
    exec(compile(ast.Module([add_cli_args], []), str(server_args), "exec"), namespace)
    parser = argparse.ArgumentParser(prog="sglang serve")  # prepare_server_args' prog
    namespace["add_cli_args"](parser)
    release = _release_of(root)
    line = add_cli_args.lineno
    return table_of(parser, release=release, source=f"sglang {release}: sglang/srt/server_args.py:{line} ServerArgs.add_cli_args (executed from source)")


def _release_of(root: Path) -> str:
    for meta in root.glob("sglang-*.dist-info/METADATA"):
        for line in meta.read_text().splitlines():
            if line.startswith("Version: "):
                return line.split(": ", 1)[1].strip()
    # A wheel's generated version module: `__version__ = version = '0.5.12'`.
    for line in (root / "sglang" / "_version.py").read_text().splitlines():
        if line.startswith("__version__ = "):
            return line.split("=")[-1].strip().strip("'\"")
    raise SystemExit(f"{root}: no sglang-*.dist-info/METADATA nor sglang/_version.py to read the release from")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("installed", "source"))
    parser.add_argument("dir", nargs="?", type=Path, help="unpacked wheel (source mode)")
    parser.add_argument("--stdout", action="store_true", help="print instead of writing flagdata/<release>.json")
    args = parser.parse_args(argv)
    if args.mode == "source" and args.dir is None:
        parser.error("source mode needs the unpacked wheel's directory")
    table = installed_table() if args.mode == "installed" else source_table(args.dir)
    text = json.dumps(table, indent=1) + "\n"
    if args.stdout:
        sys.stdout.write(text)
    else:
        FLAGDATA.mkdir(parents=True, exist_ok=True)
        (FLAGDATA / f"{table['release']}.json").write_text(text)
        print(f"{FLAGDATA / (table['release'] + '.json')}: {table['option_strings']} option strings")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

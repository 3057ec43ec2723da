"""Loading YAML files into pydantic models, with errors that name the file, the field and what was expected.

Validation happens here, at the root, and nowhere else: the reader refuses what is not a small
UTF-8 YAML text with distinct keys; every string of a file is checked for control characters; and
the types below are what any value that reaches a host (a path, a name, an address, a flag, an
environment variable) must be -- so that nothing a file says can escape a directory, inject into
a remote shell or rsync, or be read as an option.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, TypeVar

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Strict, ValidationError
from pydantic_core import ErrorDetails

from fleet.errors import ConfigError
from fleet.shell import is_env_name

M = TypeVar("M", bound=BaseModel)

# Host files and playbooks are a few KB; a bound keeps a wrong file (a log, a dump) from taking
# minutes and gigabytes to parse.
MAX_FILE_BYTES = 1 << 20
# YAML aliases make shared sub-trees: a handful is plenty for a playbook, thousands is a bomb.
MAX_ALIASES = 100


class StrictModel(BaseModel):
    """Base of every file-backed model: unknown keys are errors (a typo must not be silently
    ignored) and numbers are finite (`.inf` is no timeout)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


# An integer field of a file: `true` is not 1 (`port: true`), nor is 1.5 or "8".
Int = Annotated[int, Strict()]


# ---------------------------------------------------------------------------------------------
# The YAML reader


# libyaml's parser when PyYAML was built with it (several times faster on every host file and
# playbook); the pure-Python one otherwise. Both compose the same nodes, checked the same way.
_SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _StrictLoader(_SafeLoader):  # type: ignore[valid-type,misc]
    """safe_load, but a key given twice in one mapping is an error (YAML keeps the last silently),
    and so are more than MAX_ALIASES aliases."""

    def get_single_node(self) -> Any:
        node = super().get_single_node()
        if node is not None:
            _count_aliases(node)
        return node

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: dict[Any, Any] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:
                continue  # an unhashable key: the base constructor reports it
            if first is not None:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} given twice (first on line {first.line + 1})", key_node.start_mark
                )
            seen[key] = key_node.start_mark
        return super().construct_mapping(node, deep=deep)


def _count_aliases(root: yaml.Node) -> None:
    """Raise on more than MAX_ALIASES aliases, before anything is constructed.

    An alias composes to the very node its anchor made, so every visit of a node already seen is
    one alias (the C parser composes without a Python hook, hence a walk of the composed graph;
    it never expands the graph, so a "billion laughs" file costs its own size here).
    """
    seen: set[int] = set()
    aliases = 0
    stack: list[yaml.Node] = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            aliases += 1
            if aliases > MAX_ALIASES:
                raise yaml.composer.ComposerError(None, None, f"more than {MAX_ALIASES} aliases (*name)", node.start_mark)
            continue
        seen.add(id(node))
        if isinstance(node, yaml.SequenceNode):
            stack.extend(reversed(node.value))
        elif isinstance(node, yaml.MappingNode):
            for key, value in reversed(node.value):
                stack.extend((value, key))


def read_yaml(path: Path) -> Any:
    """The parsed YAML of a host file or playbook: at most MAX_FILE_BYTES of UTF-8 text, every key
    of a mapping given once, every string free of control characters."""
    try:
        size = path.stat().st_size
        with path.open("rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise ConfigError(path, "", "a readable file", exc.strerror) from exc
    if max(size, len(data)) > MAX_FILE_BYTES:
        raise ConfigError(path, "", f"a YAML file of at most {MAX_FILE_BYTES // 1024} KiB", f"{max(size, len(data))} bytes")
    if b"\0" in data:
        nul = data.index(b"\0")
        raise ConfigError(path, "", "a YAML text file", f"binary data (a NUL byte at offset {nul})")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(path, "", "UTF-8 text", f"an invalid byte at offset {exc.start}") from None
    try:
        parsed = yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(path, where, "valid YAML with each key once", problem) from exc
    _check_text(path, parsed, ())
    return parsed


# Control characters (and Unicode's invisible direction overrides, which make a value read other
# than it is) have no place in any value; a newline only in free text (descriptions).
_BIDI = set("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
MULTILINE_FIELDS = ("description",)


def _bad_char(text: str, multiline: bool) -> str | None:
    for char in text:
        if char in "\n\t" and multiline:
            continue
        if unicodedata.category(char) == "Cc" or char in _BIDI:
            return f"U+{ord(char):04X}"
    return None


def _check_text(path: Path, data: Any, loc: tuple[Any, ...]) -> None:
    if isinstance(data, dict):
        for key, value in data.items():
            if isinstance(key, str) and (bad := _bad_char(key, False)):
                raise ConfigError(path, _field_name((*loc, key)), "a key without control characters", f"{key!r} ({bad})")
            _check_text(path, value, (*loc, key))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            _check_text(path, value, (*loc, i))
    elif isinstance(data, str):
        multiline = bool(loc) and loc[-1] in MULTILINE_FIELDS
        if bad := _bad_char(data, multiline):
            expected = "text without control characters" + ("" if multiline else " or line breaks")
            raise ConfigError(path, _field_name(loc), expected, f"{data!r} ({bad})")


# ---------------------------------------------------------------------------------------------
# Value types: what a file may say where the value reaches a host, a shell, rsync or a file name


def checked(check: Callable[[str], str | None]) -> AfterValidator:
    """A validator from `check(value) -> None or what was expected`."""

    def validate(value: str) -> str:
        expected = check(value)
        if expected is not None:
            raise ValueError(expected)  # validate_model adds what was given
        return value

    return AfterValidator(validate)


_SAFE_PATH = re.compile(r"^[A-Za-z0-9._+@%,=:~/-]+$")


def checked_host_path(value: str) -> str | None:
    """None for a safe absolute host path, else what was expected."""
    if not value.startswith("/"):
        return "an absolute path on the host"
    if not _SAFE_PATH.match(value):
        return "an absolute path of letters, digits and . _ + @ % , = : ~ / - (no spaces, quotes or shell characters)"
    if any(part in ("..", ".") for part in PurePosixPath(value).parts) or "/./" in value or value.endswith("/."):
        return "an absolute path without . or .. components"
    return None


def _hf_repo(value: str) -> str | None:
    parts = value.split("/")
    if len(parts) > 2 or not all(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", p) for p in parts) or ".." in value or "--" in value:
        return "a Hugging Face repo id (`name` or `owner/name`: letters, digits, . _ -; no `..` or `--`)"
    return None


def _revision(value: str) -> str | None:
    parts = value.split("/")
    if not all(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", p) for p in parts) or ".." in value:
        return "a branch, tag or commit (letters, digits, . _ - and /; no `..`)"
    return None


def _address(value: str) -> str | None:
    if re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?", value) or re.fullmatch(r"[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*", value):
        return None
    return "a host name or IP address (letters, digits, . - or an IPv6 address; not starting with -)"


def _ssh_alias(value: str) -> str | None:
    ok = re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", value)
    return None if ok else "a Host name of ~/.ssh/config (letters, digits, . _ -; not starting with -)"


def _user(value: str) -> str | None:
    ok = re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]*\$?", value)
    return None if ok else "a user name (letters, digits, _ . -; starting with a letter or _)"


def _local_path(value: str) -> str | None:
    if value.startswith("-"):
        return "a path on this machine, not starting with -"
    return None


def _command(value: str) -> str | None:
    if not re.fullmatch(r"[A-Za-z0-9_./+-]+", value) or value.startswith("-"):
        return "an interpreter: a command name or path (letters, digits, _ . / + -; no spaces or shell characters)"
    if value.startswith("/") and (why := checked_host_path(value)):
        return why
    return None


def _token(value: str) -> str | None:
    ok = re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", value)
    return None if ok else "a word of letters, digits, . _ - (no spaces or shell characters)"


def _env_name(value: str) -> str | None:
    return None if is_env_name(value) else "an environment variable name (letters, digits and _, not starting with a digit)"


def _flag_name(value: str) -> str | None:
    if value.startswith("-"):
        return "an engine flag name without the leading --"
    ok = re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", value)
    return None if ok else "an engine flag name (letters, digits, - _ and .)"


HostPath = Annotated[str, checked(checked_host_path)]
HfRepoId = Annotated[str, checked(_hf_repo)]
Revision = Annotated[str, checked(_revision)]
HostAddress = Annotated[str, checked(_address)]
SshAlias = Annotated[str, checked(_ssh_alias)]
UserName = Annotated[str, checked(_user)]
LocalPath = Annotated[str, checked(_local_path)]
Command = Annotated[str, checked(_command)]
Token = Annotated[str, checked(_token)]
EnvName = Annotated[str, checked(_env_name)]
FlagName = Annotated[str, checked(_flag_name)]


def _field_name(loc: tuple[Any, ...]) -> str:
    name = ""
    for part in loc:
        name += f"[{part}]" if isinstance(part, int) else (f".{part}" if name else str(part))
    return name or "(top level)"


def _expectation(error: ErrorDetails) -> str:
    kind = error["type"]
    if kind == "missing":
        return "this field (it is required)"
    if kind == "extra_forbidden":
        return "no such field (unknown key; check its spelling)"
    message: str = error["msg"]
    for prefix in ("Input should be ", "Value error, ", "Assertion failed, "):
        if message.startswith(prefix):
            message = message[len(prefix) :]
    return message


def validate_model(path: Path, data: Any, model: type[M], context: dict[str, Any] | None = None) -> M:
    """Validate parsed YAML against `model`; every problem of the file is reported in one ConfigError."""
    if data is None:
        raise ConfigError(path, "", f"a mapping describing a {model.__name__}", "an empty file")
    try:
        return model.model_validate(data, context=context)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            got = None if error["type"] in ("missing", "extra_forbidden") else error.get("input")
            if isinstance(got, (dict, list)):
                got = None  # the whole sub-tree is noise; the field name says where
            problems.append((_field_name(error["loc"]), _expectation(error), got))
        field, expected, got = problems[0]
        more = tuple(
            f"{f}: expected {e}" + (f", got {g!r}" if g is not None else "") for f, e, g in problems[1:]
        )
        raise ConfigError(path, field, expected, got, more=more) from None


def load_model_file(path: Path, model: type[M], context: dict[str, Any] | None = None) -> M:
    return validate_model(path, read_yaml(path), model, context)

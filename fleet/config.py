"""Loading YAML files into pydantic models, with errors that name the file, the field and what was expected.

Validation happens here, at the root, and nowhere else: the reader refuses what is not a small
UTF-8 YAML text with distinct keys; every string of a file is checked for control characters; and
the types below are what any value that reaches a host (a path, a name, an address, a flag, an
environment variable) must be -- so that nothing a file says can escape a directory, inject into
a remote shell or rsync, or be read as an option.
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, TypeVar

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Strict, ValidationError
from pydantic_core import ErrorDetails

from fleet.errors import ConfigError, ContractError
from fleet.host.contract.reader import read_bytes
from fleet.shell import is_env_name

M = TypeVar("M", bound=BaseModel)

# Host files and playbooks are a few KB; a bound keeps a wrong file (a log, a dump) from taking
# minutes and gigabytes to parse.
MAX_FILE_BYTES = 1 << 20
# YAML aliases make shared sub-trees: a handful is plenty for a playbook, thousands is a bomb. The
# count alone bounds nothing (81 aliases of 9 aliases each make 9^9 values), so what bounds the cost
# is the size of the document with every alias expanded, as the validation will walk it.
MAX_ALIASES = 100
MAX_YAML_VALUES = 100_000
# Deeper than any host file or playbook, and far below where libyaml's composer (recursive C code,
# under no Python recursion limit) overflows the stack and kills the process.
MAX_YAML_DEPTH = 64
# The kernel's own file systems: their files claim size 0 and say whatever the kernel makes of them.
_KERNEL_DIRS = ("/proc", "/sys")


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
    """safe_load, but a key given twice in one mapping is an error (YAML keeps the last silently);
    aliases and nesting are bounded before, by `_check_shape`."""

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
                raise yaml.constructor.ConstructorError(None, None, f"key {key!r} given twice (first on line {first.line + 1})", key_node.start_mark)
            seen[key] = key_node.start_mark
        return super().construct_mapping(node, deep=deep)


def _check_shape(path: Path, text: str) -> None:
    """Raise, before anything is composed, on a document nested deeper than MAX_YAML_DEPTH, with
    more than MAX_ALIASES aliases, or holding more than MAX_YAML_VALUES values once its aliases are
    expanded (an alias of an anchor still open, a cycle, is refused as well).

    Read from the parser's events, which libyaml produces without recursion: the composer and
    everything after it see only a document that is small and shallow when expanded.
    """
    sizes: dict[str, int] = {}  # anchor -> its node's size, aliases expanded
    open_nodes: list[list[Any]] = [[None, 0]]  # [anchor, values so far] per open collection
    aliases = 0
    for event in yaml.parse(text, Loader=_SafeLoader):
        if isinstance(event, yaml.CollectionStartEvent):
            if len(open_nodes) > MAX_YAML_DEPTH:
                raise ConfigError(path, _line(event), f"YAML nested at most {MAX_YAML_DEPTH} levels deep", "deeper")
            open_nodes.append([event.anchor, 1])
            continue
        if isinstance(event, yaml.CollectionEndEvent):
            anchor, size = open_nodes.pop()
        elif isinstance(event, yaml.ScalarEvent):
            anchor, size = event.anchor, 1
        elif isinstance(event, yaml.AliasEvent):
            aliases += 1
            if aliases > MAX_ALIASES:
                raise ConfigError(path, _line(event), f"at most {MAX_ALIASES} aliases (*name)", "more")
            if event.anchor not in sizes and any(node[0] == event.anchor for node in open_nodes):
                raise ConfigError(path, _line(event), "an alias of a finished anchor", f"*{event.anchor} inside &{event.anchor} (a cycle)")
            anchor, size = None, sizes.get(event.anchor or "", 1)  # an unknown anchor: the composer names it
        else:
            continue
        if anchor is not None:
            sizes[anchor] = size
        open_nodes[-1][1] += size
        if open_nodes[-1][1] > MAX_YAML_VALUES:
            raise ConfigError(path, _line(event), f"at most {MAX_YAML_VALUES} values with every alias (*name) expanded", "more")


def _line(event: yaml.Event) -> str:
    mark = event.start_mark
    return "" if mark is None else f"line {mark.line + 1}, column {mark.column + 1}"


def read_input_file(path: Path, what: str, limit: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of a file named by a user or kept by the controller (a host file, a playbook,
    `results/LATEST`, the quarantine): a regular file of at most `limit` bytes, `what` in messages.
    Read by the contract's bounded reader (no FIFO, device or socket, never more than `limit`),
    following a link the user made; anything under /proc or /sys is refused too."""
    if kernel := kernel_file_system(path):
        raise ConfigError(path, "", f"{what}: a regular file", f"a file of the kernel's {kernel} file system")
    try:
        return read_bytes(path, limit, follow_links=True)
    except ContractError as exc:
        if exc.expected.startswith("a file of at most"):
            raise ConfigError(path, "", f"{what} of at most {_size_text(limit)}", exc.got) from None
        raise ConfigError(path, "", f"{what}: {exc.expected}", exc.got) from None


def kernel_file_system(path: Path) -> str | None:
    """`/proc` or `/sys` where `path` (links resolved) lies in one, else None."""
    real = os.path.realpath(path)
    return next((top for top in _KERNEL_DIRS if real == top or real.startswith(top + "/")), None)


def _size_text(limit: int) -> str:
    return f"{limit // 1024} KiB" if limit >= 1024 else f"{limit} bytes"


def read_yaml(path: Path) -> Any:
    """The parsed YAML of a host file or playbook: at most MAX_FILE_BYTES of UTF-8 text, every key
    of a mapping given once, every string free of control characters."""
    data = read_input_file(path, "a YAML file")
    if b"\0" in data:
        nul = data.index(b"\0")
        raise ConfigError(path, "", "a YAML text file", f"binary data (a NUL byte at offset {nul})")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(path, "", "UTF-8 text", f"an invalid byte at offset {exc.start}") from None
    try:
        _check_shape(path, text)
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


# The longest value of each kind a file may give: within what the systems that receive it take (a
# DNS name is at most 253 characters, a Linux user name 32), and short enough that a sweep's paths
# on a host stay far below PATH_MAX.
MAX_ADDRESS = 253
MAX_USER = 32
MAX_HOST_PATH = 512


def checked_host_path(value: str) -> str | None:
    """None for a safe absolute host path, else what was expected."""
    if len(value) > MAX_HOST_PATH:
        return f"an absolute path of at most {MAX_HOST_PATH} characters (got {len(value)})"
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
    if len(value) > MAX_ADDRESS:
        return f"a host name or IP address of at most {MAX_ADDRESS} characters (got {len(value)})"
    if re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?", value) or re.fullmatch(r"[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*", value):
        return None
    return "a host name or IP address (letters, digits, . - or an IPv6 address; not starting with -)"


def _ssh_alias(value: str) -> str | None:
    ok = len(value) <= MAX_ADDRESS and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", value)
    return None if ok else f"a Host name of ~/.ssh/config (letters, digits, . _ -; not starting with -; at most {MAX_ADDRESS} characters)"


def _user(value: str) -> str | None:
    ok = len(value) <= MAX_USER and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]*\$?", value)
    return None if ok else f"a user name (letters, digits, _ . -; starting with a letter or _; at most {MAX_USER} characters)"


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


# The most of a value a message shows.
MAX_SHOWN = 120


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
            elif isinstance(got, str) and len(got) > MAX_SHOWN:
                got = got[: MAX_SHOWN - 3] + "..."  # a 10,000-character value would bury the message
            problems.append((_field_name(error["loc"]), _expectation(error), got))
        field, expected, got = problems[0]
        more = tuple(f"{f}: expected {e}" + (f", got {g!r}" if g is not None else "") for f, e, g in problems[1:])
        raise ConfigError(path, field, expected, got, more=more) from None


def load_model_file(path: Path, model: type[M], context: dict[str, Any] | None = None) -> M:
    return validate_model(path, read_yaml(path), model, context)

"""YAML as PyYAML's `yaml.safe_load` reads it, for engine `--config` files, with the standard library only.

SGLang 0.5.23 reads `--config` with `yaml.safe_load` (sglang/srt/utils/server_args_config_parser.py:141)
and vLLM does the same; a host ships without PyYAML (tests/unit/test_host_package.py), so this module
rebuilds the part of PyYAML 6.0 such files use: block mappings and sequences nested by indentation,
flow `[...]` and `{...}` collections, plain, single- and double-quoted scalars, comments, anchors,
aliases and `<<` merge keys, one document. Plain scalars resolve with PyYAML's own YAML 1.1 rules,
copied from yaml/resolver.py:170-215 (bool yes/no/on/off, int 0b/0x/leading-0 octal/sexagesimal with
`_`, float needing a dot and a signed exponent, null ~/null/empty, timestamps) and built as
yaml/constructor.py:224-351 builds them, so `0o17` stays the string it is in PyYAML and `017` is 15.

Two kinds of refusal, both `ConfigFileError`: `YamlError` for text PyYAML itself refuses (SGLang
then fails to start with PyYAML's exception), and `YamlUnsupported` for YAML that is valid but beyond
this reader (block scalars `|` `>`, tags, complex keys, multi-line plain or flow scalars): a fleet
limitation, said plainly with the line.
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fleet.host.errors import YamlError, YamlUnsupported

__all__ = ["YamlError", "YamlUnsupported", "safe_load"]


# yaml/resolver.py:170-215, in registration order (the first that matches wins).
_BOOL = re.compile(r"^(?:yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF)$")
_FLOAT = re.compile(
    r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?
    |\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?
    |[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""",
    re.X,
)
_INT = re.compile(
    r"""^(?:[-+]?0b[0-1_]+
    |[-+]?0[0-7_]+
    |[-+]?(?:0|[1-9][0-9_]*)
    |[-+]?0x[0-9a-fA-F_]+
    |[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$""",
    re.X,
)
_NULL = re.compile(r"^(?:~|null|Null|NULL|)$")
_TIMESTAMP = re.compile(
    r"""^(?:[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]
    |[0-9][0-9][0-9][0-9] -[0-9][0-9]? -[0-9][0-9]?
     (?:[Tt]|[ \t]+)[0-9][0-9]?
     :[0-9][0-9] :[0-9][0-9] (?:\.[0-9]*)?
     (?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?)$""",
    re.X,
)
# yaml/constructor.py:310
_TIMESTAMP_PARTS = re.compile(
    r"""^(?P<year>[0-9][0-9][0-9][0-9])
    -(?P<month>[0-9][0-9]?)
    -(?P<day>[0-9][0-9]?)
    (?:(?:[Tt]|[ \t]+)
    (?P<hour>[0-9][0-9]?)
    :(?P<minute>[0-9][0-9])
    :(?P<second>[0-9][0-9])
    (?:\.(?P<fraction>[0-9]*))?
    (?:[ \t]*(?P<tz>Z|(?P<tz_sign>[-+])(?P<tz_hour>[0-9][0-9]?)
    (?::(?P<tz_minute>[0-9][0-9]))?))?)?$""",
    re.X,
)
_FIRST_CHARS = {
    "bool": set("yYnNtTfFoO"),
    "float": set("-+0123456789."),
    "int": set("-+0123456789"),
    "null": set("~nN"),
    "timestamp": set("0123456789"),
}


def _sexagesimal(value: str, part: type) -> Any:
    total = part(0)
    base = 1
    for digit in reversed([part(p) for p in value.split(":")]):
        total += digit * base
        base *= 60
    return total


def _construct_int(value: str) -> int:  # yaml/constructor.py:237-263
    value = value.replace("_", "")
    sign = -1 if value[0] == "-" else 1
    if value[0] in "+-":
        value = value[1:]
    if value == "0":
        return 0
    if value.startswith("0b"):
        return sign * int(value[2:], 2)
    if value.startswith("0x"):
        return sign * int(value[2:], 16)
    if value[0] == "0":
        return sign * int(value, 8)
    if ":" in value:
        return sign * int(_sexagesimal(value, int))
    return sign * int(value)


def _construct_float(value: str) -> float:  # yaml/constructor.py:270-292
    value = value.replace("_", "").lower()
    sign = -1 if value[0] == "-" else 1
    if value[0] in "+-":
        value = value[1:]
    if value == ".inf":
        return sign * float("inf")
    if value == ".nan":
        return float("nan")
    if ":" in value:
        return sign * float(_sexagesimal(value, float))
    return sign * float(value)


def _construct_timestamp(value: str) -> datetime.date:  # yaml/constructor.py:322-351
    match = _TIMESTAMP_PARTS.match(value)
    assert match is not None
    v = match.groupdict()
    year, month, day = int(v["year"]), int(v["month"]), int(v["day"])
    if not v["hour"]:
        return datetime.date(year, month, day)
    fraction = int((v["fraction"] or "")[:6].ljust(6, "0")) if v["fraction"] else 0
    tzinfo: datetime.tzinfo | None = None
    if v["tz_sign"]:
        delta = datetime.timedelta(hours=int(v["tz_hour"]), minutes=int(v["tz_minute"] or 0))
        tzinfo = datetime.timezone(-delta if v["tz_sign"] == "-" else delta)
    elif v["tz"]:
        tzinfo = datetime.timezone.utc
    return datetime.datetime(year, month, day, int(v["hour"]), int(v["minute"]), int(v["second"]), fraction, tzinfo=tzinfo)


def resolve_plain(text: str) -> Any:
    """A plain (unquoted) scalar as SafeLoader builds it."""
    first = text[:1]
    if first in _FIRST_CHARS["bool"] and _BOOL.match(text):
        return {"yes": True, "no": False, "true": True, "false": False, "on": True, "off": False}[text.lower()]
    if first in _FIRST_CHARS["float"] and _FLOAT.match(text):
        return _construct_float(text)
    if first in _FIRST_CHARS["int"] and _INT.match(text):
        return _construct_int(text)
    if (first in _FIRST_CHARS["null"] or text == "") and _NULL.match(text):
        return None
    if first in _FIRST_CHARS["timestamp"] and _TIMESTAMP.match(text):
        try:
            return _construct_timestamp(text)
        except ValueError as exc:  # e.g. month 13: PyYAML's constructor raises the same ValueError
            raise YamlError(f"timestamp {text!r}: {exc}") from None
    if text in ("=", "<<"):  # tag:yaml.org,2002:value / merge as a value: SafeConstructor has no constructor for them
        raise YamlError(f"could not determine a constructor for {text!r}")
    return text


# --- the document --------------------------------------------------------------------------------------

_ESCAPES = {
    "0": "\0", "a": "\x07", "b": "\x08", "t": "\t", "\t": "\t", "n": "\n", "v": "\x0b", "f": "\x0c", "r": "\r", "e": "\x1b",
    " ": " ", '"': '"', "/": "/", "\\": "\\", "N": "\x85", "_": "\xa0", "L": "\u2028", "P": "\u2029",
}  # fmt: skip
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}


@dataclass
class _Line:
    number: int
    indent: int
    text: str  # without indentation and comment


class _Reader:
    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self.anchors: dict[str, Any] = {}
        self.lines = self._lines(text)

    # errors
    def bad(self, number: int, message: str) -> YamlError:
        return YamlError(f"{self.path}:{number}: PyYAML refuses this file: {message}")

    def unsupported(self, number: int, message: str) -> YamlUnsupported:
        return YamlUnsupported(f"{self.path}:{number}: fleet cannot read this YAML ({message}); SGLang reads it with PyYAML")

    def _lines(self, text: str) -> list[_Line]:
        text = text.lstrip("\ufeff")
        out: list[_Line] = []
        documents = 0
        for number, raw in enumerate(text.splitlines(), 1):
            body = raw.rstrip()
            stripped = body.lstrip(" ")
            if stripped.startswith("\t") or (stripped and "\t" in body[: len(body) - len(stripped)]):
                if _strip_comment(stripped.lstrip("\t")):
                    raise self.bad(number, "found character '\\t' that cannot start any token")
                continue
            content = _strip_comment(stripped)
            if not content:
                continue
            indent = len(body) - len(stripped)
            if indent == 0 and content.startswith("%"):
                raise self.unsupported(number, "a directive")
            if indent == 0 and (content == "---" or content.startswith("--- ")):
                documents += 1
                if documents > 1 or out:
                    raise self.bad(number, "expected a single document in the stream")
                rest = content[3:].strip()
                if rest:
                    out.append(_Line(number, 4, rest))
                continue
            if indent == 0 and (content == "..." or content.startswith("... ")):
                raise self.unsupported(number, "a document end marker")
            out.append(_Line(number, indent, content))
        return out

    def document(self) -> Any:
        if not self.lines:
            return None
        value, i = self.block(0, self.lines[0].indent)
        if i != len(self.lines):
            line = self.lines[i]
            raise self.bad(line.number, "expected <block end>, but found another node (bad indentation)")
        return value

    def block(self, i: int, indent: int) -> tuple[Any, int]:
        line = self.lines[i]
        if _is_item(line.text):
            return self.sequence(i, indent)
        if _mapping_key(line.text) is not None:
            return self.mapping(i, indent)
        # A lone scalar or flow node as the whole block (e.g. a root that is not a mapping).
        if i + 1 < len(self.lines) and self.lines[i + 1].indent > indent:
            raise self.unsupported(self.lines[i + 1].number, "a plain scalar over several lines")
        return self.inline(line.text, line.number), i + 1

    def sequence(self, i: int, indent: int) -> tuple[list[Any], int]:
        items: list[Any] = []
        while i < len(self.lines) and self.lines[i].indent == indent and _is_item(self.lines[i].text):
            line = self.lines[i]
            rest = line.text[1:].lstrip(" ")
            if not rest:
                i += 1
                if i < len(self.lines) and self.lines[i].indent > indent:
                    value, i = self.block(i, self.lines[i].indent)
                else:
                    value = None
                items.append(value)
                continue
            # "- key: v" or "- - x": a block node that starts on the item's line, indented past the dash.
            if _is_item(rest) or _mapping_key(rest) is not None:
                self.lines[i] = _Line(line.number, indent + len(line.text) - len(rest), rest)
                value, i = self.block(i, self.lines[i].indent)
                items.append(value)
                continue
            value, i = self.node_after(rest, line, i, indent)
            items.append(value)
        if i < len(self.lines) and self.lines[i].indent > indent:
            raise self.bad(self.lines[i].number, "bad indentation of a sequence entry")
        return items, i

    def mapping(self, i: int, indent: int) -> tuple[dict[Any, Any], int]:
        pairs: list[tuple[Any, Any]] = []
        merges: list[Any] = []
        while i < len(self.lines) and self.lines[i].indent == indent:
            line = self.lines[i]
            if _is_item(line.text):
                break
            split = _mapping_key(line.text)
            if split is None:
                raise self.bad(line.number, "could not find expected ':' (while scanning a simple key)")
            key_text, rest = split
            if key_text.startswith("? ") or key_text == "?":
                raise self.unsupported(line.number, "a complex key")
            key = self.key(key_text, line.number)
            if not rest:
                i += 1
                if i < len(self.lines) and (self.lines[i].indent > indent or (self.lines[i].indent == indent and _is_item(self.lines[i].text))):
                    value, i = self.block(i, self.lines[i].indent)
                else:
                    value = None
            else:
                value, i = self.node_after(rest, line, i, indent)
            if key == "<<" and key_text == "<<":
                merges.append((value, line.number))
            else:
                pairs.append((key, value))
        if i < len(self.lines) and self.lines[i].indent > indent:
            raise self.bad(self.lines[i].number, "mapping values are not allowed here (bad indentation)")
        # yaml/constructor.py:180 flatten_mapping: merged pairs go first, the mapping's own override them;
        # of a list of merged mappings, earlier ones win.
        merged: list[tuple[Any, Any]] = []
        for value, number in merges:
            sources = value if isinstance(value, list) else [value]
            if not all(isinstance(s, dict) for s in sources):
                raise self.bad(number, "expected a mapping or list of mappings for merging")
            for source in reversed(sources):
                merged.extend(source.items())
        result: dict[Any, Any] = {}
        for key, value in merged + pairs:
            result[key] = value  # block keys come from key(): scalars, always hashable
        return result, i

    def key(self, text: str, number: int) -> Any:
        if text.startswith(("&", "*", "!")) or text.startswith(("[", "{")):
            raise self.unsupported(number, "a key with an anchor, alias, tag or flow collection")
        if text[0] in "'\"":
            value, end = _quoted(text, 0, lambda message: self.bad(number, message))
            if end != len(text):
                raise self.bad(number, "unexpected text after a quoted key")
            return value
        if text == "<<":
            return "<<"
        return resolve_plain(text)

    def node_after(self, rest: str, line: _Line, i: int, indent: int) -> tuple[Any, int]:
        """The node written after `key:` or `- ` on line i (an anchor alone takes the block below)."""
        anchor = None
        if rest.startswith("&"):
            name, _, rest = rest[1:].partition(" ")
            anchor, rest = name, rest.strip()
        if rest.startswith("!"):
            raise self.unsupported(line.number, "a tag")
        i += 1
        if not rest:
            if i < len(self.lines) and self.lines[i].indent > indent:
                value, i = self.block(i, self.lines[i].indent)
            else:
                value = None
        else:
            if rest[0] in "|>":
                raise self.unsupported(line.number, "a block scalar")
            if rest[0] in "[{":
                # A flow collection runs on over the next lines until its brackets close.
                while _open_brackets(rest) > 0:
                    if i >= len(self.lines):
                        raise self.bad(line.number, "while parsing a flow collection: expected ',' or a closing bracket, but got '<stream end>'")
                    rest += " " + self.lines[i].text
                    i += 1
            elif i < len(self.lines) and self.lines[i].indent > indent:
                if rest[0] not in "'\"" and _mapping_key(self.lines[i].text) is not None:
                    # A plain scalar continued on a line with `key:` in it (yaml/scanner.py: "mapping values are not allowed here").
                    raise self.bad(self.lines[i].number, "mapping values are not allowed here")
                raise self.unsupported(self.lines[i].number, "a scalar over several lines")
            value = self.inline(rest, line.number)
        if anchor is not None:
            self.anchors[anchor] = value
        return value, i

    def inline(self, text: str, number: int) -> Any:
        parser = _Flow(text, self, number)
        value = parser.node(flow=False)
        parser.skip()
        if parser.pos != len(text):
            raise self.bad(number, f"unexpected text {text[parser.pos :]!r}")
        return value


def _strip_comment(text: str) -> str:
    """The line without its comment: `#` at the start or after a blank, outside quotes."""
    quote = None
    i = 0
    while i < len(text):
        c = text[i]
        if quote:
            if quote == '"' and c == "\\":
                i += 2
                continue
            if c == quote:
                if quote == "'" and text[i + 1 : i + 2] == "'":
                    i += 2
                    continue
                quote = None
        elif c == "#" and (i == 0 or text[i - 1] in " \t"):
            return text[:i].rstrip()
        elif c in "'\"" and (i == 0 or text[i - 1] in " \t[{,:-?"):
            quote = c
        i += 1
    return text.rstrip()


def _open_brackets(text: str) -> int:
    """How many `[`/`{` are still open at the end of text (outside quotes)."""
    depth = 0
    quote = None
    i = 0
    while i < len(text):
        c = text[i]
        if quote:
            if quote == '"' and c == "\\":
                i += 1
            elif c == quote:
                quote = None
        elif c in "'\"" and (i == 0 or text[i - 1] in " [{,:"):
            quote = c
        elif c in "[{":
            depth += 1
        elif c in "]}":
            depth -= 1
        i += 1
    return depth


def _is_item(text: str) -> bool:
    return text == "-" or text.startswith("- ")


def _mapping_key(text: str) -> tuple[str, str] | None:
    """(key, rest) when the line is `key: rest` (the first `: ` or final `:` outside quotes and brackets)."""
    if text[0] in "'\"":
        end = _quoted_end(text)
        if end is None:
            return None
        after = text[end:].lstrip(" ")
        if after == ":" or after.startswith(": "):
            return text[:end], after[1:].strip()
        return None
    if text[0] in "[{":
        return None
    for match in re.finditer(r":(?:[ \t]|$)", text):
        rest = text[match.start() + 1 :]
        if rest.lstrip(" ").startswith("\t"):  # PyYAML skips only spaces before a token (yaml/scanner.py scan_to_next_token)
            raise YamlError("found character '\\t' that cannot start any token")
        return text[: match.start()].rstrip(), rest.strip()
    return None


def _quoted_end(text: str) -> int | None:
    quote = text[0]
    i = 1
    while i < len(text):
        if quote == '"' and text[i] == "\\":
            i += 2
            continue
        if text[i] == quote:
            if quote == "'" and text[i + 1 : i + 2] == "'":
                i += 2
                continue
            return i + 1
        i += 1
    return None


def _quoted(text: str, pos: int, bad: Any) -> tuple[str, int]:
    quote = text[pos]
    out: list[str] = []
    i = pos + 1
    while i < len(text):
        c = text[i]
        if c == quote:
            if quote == "'" and text[i + 1 : i + 2] == "'":
                out.append("'")
                i += 2
                continue
            return "".join(out), i + 1
        if quote == '"' and c == "\\":
            code = text[i + 1 : i + 2]
            if code in _ESCAPES:
                out.append(_ESCAPES[code])
                i += 2
                continue
            if code in _HEX_ESCAPES:
                digits = text[i + 2 : i + 2 + _HEX_ESCAPES[code]]
                if len(digits) != _HEX_ESCAPES[code] or not re.fullmatch(r"[0-9A-Fa-f]+", digits):
                    raise bad("expected escape sequence of hexadecimal numbers")
                out.append(chr(int(digits, 16)))
                i += 2 + len(digits)
                continue
            raise bad(f"found unknown escape character {code!r}")
        out.append(c)
        i += 1
    raise YamlUnsupported("a quoted scalar over several lines")


class _Flow:
    """One line's node: a scalar, an alias, or a flow collection (nested)."""

    def __init__(self, text: str, reader: _Reader, number: int) -> None:
        self.text = text
        self.pos = 0
        self.reader = reader
        self.number = number

    def skip(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] == " ":
            self.pos += 1

    def node(self, flow: bool) -> Any:
        self.skip()
        text, reader = self.text, self.reader
        if self.pos >= len(text):
            return None
        c = text[self.pos]
        if c == "&":
            match = re.compile(r"&([^\s,\[\]{}]+)").match(text, self.pos)
            if match is None:
                raise reader.bad(self.number, "expected an anchor name")
            self.pos = match.end()
            value = self.node(flow)
            reader.anchors[match[1]] = value
            return value
        if c == "*":
            match = re.compile(r"\*([^\s,\[\]{}]+)").match(text, self.pos)
            if match is None:
                raise reader.bad(self.number, "expected an alias name")
            self.pos = match.end()
            if match[1] not in reader.anchors:
                raise reader.bad(self.number, f"found undefined alias {match[1]!r}")
            return reader.anchors[match[1]]
        if c == "!":
            raise reader.unsupported(self.number, "a tag")
        if c in "|>" and not flow:
            raise reader.unsupported(self.number, "a block scalar")
        if c in "'\"":
            try:
                value, self.pos = _quoted(text, self.pos, lambda message: reader.bad(self.number, message))
            except YamlUnsupported:
                raise reader.unsupported(self.number, "a quoted scalar over several lines") from None
            return value
        if c == "[":
            return self.sequence()
        if c == "{":
            return self.mapping()
        if c in "@`":
            raise reader.bad(self.number, f"found character {c!r} that cannot start any token")
        if c in "]},":
            if flow:
                return None
            raise reader.bad(self.number, f"did not find expected node content, found {c!r}")
        return self.plain(flow)

    def plain(self, flow: bool) -> Any:
        text = self.text
        start = self.pos
        stops = r"(?::(?:[ ,\[\]{}]|$)|[,\[\]{}]| #)" if flow else r"(?::(?: |$)| #)"
        match = re.compile(stops).search(text, self.pos)
        end = match.start() if match else len(text)
        if not flow and match and text[match.start()] == ":":
            raise self.reader.bad(self.number, "mapping values are not allowed here")
        value = text[start:end].rstrip()
        self.pos = start + len(value)
        return resolve_plain(value)

    def expect(self, char: str) -> None:
        self.skip()
        if self.pos >= len(self.text):
            raise self.reader.unsupported(self.number, "a flow collection over several lines")
        if self.text[self.pos] != char:
            raise self.reader.bad(self.number, f"expected {char!r}, found {self.text[self.pos]!r}")
        self.pos += 1

    def at(self, char: str) -> bool:
        self.skip()
        if self.pos >= len(self.text):
            raise self.reader.unsupported(self.number, "a flow collection over several lines")
        return self.text[self.pos] == char

    def sequence(self) -> list[Any]:
        self.pos += 1
        items: list[Any] = []
        while not self.at("]"):
            start = self.pos
            item = self.node(flow=True)
            if self.pos == start:
                raise self.reader.bad(self.number, "did not find expected node content")
            if self.at(":"):
                raise self.reader.unsupported(self.number, "a single-pair mapping inside a flow sequence")
            items.append(item)
            if self.at(","):
                self.pos += 1
            elif not self.at("]"):
                raise self.reader.bad(self.number, "did not find expected ',' or ']'")
        self.pos += 1
        return items

    def mapping(self) -> dict[Any, Any]:
        self.pos += 1
        result: dict[Any, Any] = {}
        while not self.at("}"):
            key = self.node(flow=True)
            value = None
            if self.at(":"):
                self.pos += 1
                value = self.node(flow=True)
            try:
                result[key] = value
            except TypeError:
                raise self.reader.bad(self.number, "found unhashable key") from None
            if self.at(","):
                self.pos += 1
            elif not self.at("}"):
                raise self.reader.bad(self.number, "did not find expected ',' or '}'")
        self.pos += 1
        return result


def safe_load(path: Path) -> Any:
    """`yaml.safe_load(open(path))` for the YAML this module reads."""
    return _Reader(path, path.read_text()).document()

"""The checked reader's one pass (fleet.host.contract.reader.parse_untrusted, issue 28) accepts
exactly what the exact path accepts (`untrusted(parse_json(...))` and `bounded`), as the same
values, and where it refuses, the exact path says why in the same words: the guarantees of
untrusted host files (test_ledger.py) hold whichever path a file takes. And a result's check
costs a bounded number of Python lines whatever the sweep's size (counted, not timed)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from types import FrameType
from typing import Any

import orjson
import pytest

from fleet.host.contract import ContractError
from fleet.host.contract.reader import MAX_DEPTH, Decoder, bounded, json_decode, parse_json, parse_untrusted, untrusted
from fleet.host.contract.results import MAX_MAGNITUDE
from fleet.report import load_sweep
from fleet.sweep.ledger import DECODE
from tests.unit.line_count import lines_executed

NOISY = Path(__file__).resolve().parents[1] / "fixtures" / "report" / "noisy"
REAL = sorted((NOISY / "local" / "runs").glob("*.json"))


def exact(text: str) -> object:
    """The reader as it was before the one pass: every value walked, every check its own walk."""
    data = untrusted(parse_json(text, "r1.json"))
    bounded(data, "r1.json", "", MAX_MAGNITUDE)
    return data


def outcome(read: Any, text: str) -> tuple[str, object]:
    try:
        return "value", read(text)
    except ContractError as exc:
        return "refused", str(exc)


def nested(depth: int) -> str:
    return "[" * depth + "1" + "]" * depth


# A real result with one value changed each time: what a forged or broken host could write.
BASE = json.loads(REAL[0].read_text())
MUTATED = [
    {"label": "tp1\x1b[31m-evil"},  # an escape sequence, written escaped (\u001b)
    {"label": "a\rb"},  # each control JSON escapes by a letter, alone
    {"label": "a\x08b"},
    {"label": "a\x0cb"},
    {"label": "nul\x00 and unit separator\x1f"},
    {"label": "tab\tand\nnewline"},  # allowed: the one pass sends them to the exact path, which keeps them
    {"label": "del\x7f and csi\x9b2J"},  # DEL and C1, raw in the text (ensure_ascii=False below)
    {"label": "caf\u00e9 \u4e2d\u6587 \U0001f680"},  # printable non-ASCII, raw and escaped
    {"label": "back\\slash \\r \\u001b literally"},  # backslashes that escape nothing
    {"extras_key": {"k\x1b": "v\x00"}},  # in a key
    {"figures": {"output_tok_s": 1e12}},  # at the bound: accepted
    {"figures": {"output_tok_s": 1.0000001e12}},  # past it
    {"figures": {"n": 10**12}},
    {"figures": {"n": 10**12 + 1}},
    {"figures": {"n": -(10**13)}},
    {"requests": [{"ttft_s": [1.0, [2.0, 1e300]]}]},  # deep in a list
    {"started_at": 17961933266254520000},
    {"figures": {"n": 2**64}},  # past 64 bits: a float to orjson, an int to json; out of bounds either way
    {"figures": {"n": -(2**63) - 1}},
    {"figures": {"n": 2**64 - 1}},  # the largest integer orjson keeps whole, out of bounds
    {"label": "lone \ud800 surrogate"},  # escaped by json.dumps: json accepts it, orjson refuses it
    {"deep": json.loads(nested(MAX_DEPTH - 1))},  # the deepest allowed
    {"deep": json.loads(nested(MAX_DEPTH))},  # one too deep
]


def texts() -> list[str]:
    out = [path.read_text() for path in REAL]
    for change in MUTATED:
        data = {**BASE, **change}
        out += [json.dumps(data), json.dumps(data, ensure_ascii=False)]
    whole = json.dumps(BASE)
    out.append(json.dumps({"label": "del\x7f"}, ensure_ascii=False))  # DEL raw in a text of ASCII only (the fixture's has more)
    out += [whole.replace("0.02", "1e999"), whole.replace("0.02", "NaN"), whole.replace("0.02", "-Infinity"), whole[:-10], whole + "x", "[]", "5", '"s"', nested(10_000)]
    return out


DECODERS = {"json": json_decode, "ledger": DECODE}


@pytest.mark.parametrize("decoder", DECODERS)
@pytest.mark.parametrize("text", texts(), ids=range(len(texts())))
def test_the_one_pass_accepts_and_refuses_as_the_exact_path(text: str, decoder: str) -> None:
    """With json's parser (the host side's) and with the ledger's (orjson, the controller's)."""
    decode: Decoder = DECODERS[decoder]
    assert outcome(lambda t: parse_untrusted(t, "r1.json", MAX_MAGNITUDE, decode=decode), text) == outcome(exact, text)


@pytest.mark.parametrize("kind", [str, str.encode], ids=["one pass", "exact path (bytes)"])
def test_the_depth_bound_is_max_depth_levels(kind: Any) -> None:
    assert parse_untrusted(kind(nested(MAX_DEPTH)), "r1.json", MAX_MAGNITUDE) == json.loads(nested(MAX_DEPTH))
    with pytest.raises(ContractError, match=f"nested at most {MAX_DEPTH} levels deep"):
        parse_untrusted(kind(nested(MAX_DEPTH + 1)), "r1.json", MAX_MAGNITUDE)


def test_the_corpus_holds_what_each_path_must_decide() -> None:
    """The corpus is not all accepted or all refused: a one pass that let every string through
    unchecked, or refused everything to the exact path, is what the test above must catch."""
    outcomes = [outcome(exact, text) for text in texts()]
    refused = [why for kind, why in outcomes if kind == "refused"]
    assert any("magnitude at most" in why for why in refused) and any("nested at most" in why for why in refused)
    assert any(kind == "value" and "\ufffd" in json.dumps(value, ensure_ascii=False) for kind, value in outcomes)


def _sweep(folder: Path, size: int) -> Path:
    """A sweep folder of `size` copies of the noisy fixture's real results, each under its own run
    id (as benchmarks/bench_scale.py's report row lays one out)."""
    shutil.copytree(NOISY / "hosts", folder / "hosts")
    shutil.copy(NOISY / "sweep.json", folder / "sweep.json")
    runs = folder / "local" / "runs"
    runs.mkdir(parents=True)
    for i in range(size):
        data = json.loads(REAL[i % len(REAL)].read_text())
        run_id = f"{i:012x}"
        (runs / f"{run_id}.json").write_text(json.dumps({**data, "run_id": run_id}))
    return folder


def test_reading_a_result_costs_the_same_lines_in_a_sweep_of_any_size(tmp_path: Path) -> None:
    """`fleet report`'s reading of results (the ledger, the checked reader, the report's part of
    each): the Python lines per result do not grow with the results, and stay below what the
    reader cost when each check walked every value on its own (16,000 lines a result of these,
    load_result alone; 5,700 with the one pass)."""
    sweep_id = json.loads((NOISY / "sweep.json").read_text())["sweep_id"]
    small, large = len(REAL), 4 * len(REAL)  # each real result as often in both
    folders = {size: _sweep(tmp_path / str(size) / sweep_id, size) for size in (2, small, large)}
    load_sweep(folders[2])  # imports and caches that fill once
    per_small = lines_executed(lambda: load_sweep(folders[small])) / small
    per_large = lines_executed(lambda: load_sweep(folders[large])) / large
    assert len(load_sweep(folders[large]).results) == large
    assert per_large <= 1.05 * per_small, (per_small, per_large)
    assert per_large < 8_000, per_large


def test_a_report_parses_each_result_once_with_the_ledgers_decoder(tmp_path: Path) -> None:
    """The report's first reading of a folder (no cache) parses each result with orjson (the
    ledger's DECODE), once, and never with json's parser: counted through sys.setprofile."""
    sweep_id = json.loads((NOISY / "sweep.json").read_text())["sweep_id"]
    folder = _sweep(tmp_path / sweep_id, 2 * len(REAL))
    calls = {"orjson": 0, "json": 0}

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "c_call" and arg is orjson.loads:
            calls["orjson"] += 1
        elif event == "call" and frame.f_code is json_decode.__code__:
            calls["json"] += 1

    sys.setprofile(profile)
    try:
        loaded = load_sweep(folder)
    finally:
        sys.setprofile(None)
    assert len(loaded.results) == 2 * len(REAL) and not loaded.unreadable
    assert calls == {"orjson": 2 * len(REAL), "json": 0}

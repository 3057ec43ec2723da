"""Every fix and piece of advice fleet can produce, parsed by the parser of each release it is for
(issue 26, Must-show 4).

The corpus (`advice_corpus.py`) drives fleet's producers -- the diagnosis of every real log and of
start logs in each release's text, every catalogue template, the automatic fixes of every failure
class with their variants' launches, the feasibility verdicts, the plan's notes -- for each SGLang
release fleet knows, and cuts each text into argv fragments. Each fragment goes through:
- SGLang 0.5.23: the REAL parser (`sglang.srt.server_args.prepare_server_args`, in a child interpreter
  as tests/integration/test_sglang_parser.py runs it; `pip install --no-deps sglang==0.5.23`);
- SGLang 0.5.12: its wheel is not installed, so fleet's parser built from the table generated from
  0.5.12's own `ServerArgs.add_cli_args` (`fleet/host/engines/sglang/flagdata/0.5.12.json`); the same
  table-built parser for 0.5.23 is checked here to judge every fragment as the real one does;
- vLLM fragments (the catalogue names `--max-model-len` and the like beside SGLang's): fleet's tables of
  each vLLM release it knows (`fleet/host/engines/vllm/flagdata/`; no vLLM wheel is installed).
A fragment passes when the release accepts it without a deprecation warning, names its flags by
their own option strings (no abbreviation, no ambiguous prefix), and gives a number that is a value
the setting can take (positive; a memory fraction below 1). A fix's figures come from one log line.
"""

from __future__ import annotations

import functools
import json
import re
import sys
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from fleet.host.engines import engine
from fleet.host.engines.sglang import flags as sglang_flags
from fleet.host.engines.sglang.release import KNOWN_RELEASES
from fleet.host.engines.vllm import flags as vllm_flags
from fleet.host.errors import ArgvError, ConfigFileError
from tests.integration.advice_corpus import MIXED_REQUEST_LINES, Advice, Fragment, diagnoses, every_advice, every_fragment
from tests.integration import sglang_wheel
from tests.integration.test_sglang_parser import RELEASE, _parse_all

pytestmark = [pytest.mark.sglang_parser, pytest.mark.timeout(sglang_wheel.CHILD_TEST_TIMEOUT_S)]

MODEL = ["--model-path", "/models/target"]
Outcome = dict[str, Any]  # {"error": the parser's error line or None}


@pytest.fixture(scope="module")
def advice() -> list[Advice]:
    return every_advice()


@pytest.fixture(scope="module")
def corpus(advice: list[Advice]) -> list[Fragment]:
    return every_fragment(advice)


def _args(argv: tuple[str, ...]) -> list[str]:
    return list(argv) if "--model-path" in argv else [*MODEL, *argv]


def _options_of(parser: Any) -> dict[str, dict[str, bool]]:
    """Each option string of an argparse parser: whether it takes a value, whether it is deprecated
    (SGLang's Deprecated*Action, fleet's _Deprecated* stand-ins)."""
    return {option: {"takes_value": action.nargs != 0, "deprecated": "Deprecated" in type(action).__name__} for option, action in parser._option_string_actions.items()}


def _problems(fragments: list[Fragment], options: Mapping[str, Mapping[str, bool]], outcome: Callable[[tuple[str, ...]], Outcome], who: str) -> list[str]:
    problems = []
    for fragment in fragments:
        argv, error = fragment.argv, outcome(fragment.argv)["error"]
        flags = [token.split("=")[0] for token in argv if token.startswith("--")]
        named = options.get(argv[0])
        if len(argv) == 1 and named is not None and named["takes_value"] and error is not None and error.endswith("expected one argument"):
            error = None  # a flag named without a value: that it is the release's own option string is what counts
        why = error or next((f"{flag} is deprecated" for flag in flags if options.get(flag, {}).get("deprecated")), None)
        why = why or next((f"{flag} is not an option string of the release (an abbreviation?)" for flag in flags if flag not in options), None)
        if why is None and not fragment.advice.launch and len(argv) == 2:
            why = _invalid_value(argv[0], argv[1])
        if why is not None:
            problems.append(f"{who}: {' '.join(argv)!r}: {why}\n    from {fragment.advice.source}: {fragment.advice.text[:300]}")
    return problems


def _invalid_value(flag: str, value: str) -> str | None:
    try:
        number = float(value)
    except ValueError:
        return None
    if number <= 0:
        return f"{value} is no value to advise for {flag}"
    if flag == "--mem-fraction-static" and number >= 1:
        return f"{value} is no memory fraction"
    return None


def _table_outcome(release: str, fork: str | None = None) -> Callable[[tuple[str, ...]], Outcome]:
    # Once per distinct argv: a fragment's outcome is the parser's answer to its argv alone, and
    # the 17,524 fragments of 0.5.12 are 87 distinct argvs (25 s of parsing each one again).
    @functools.cache
    def outcome(argv: tuple[str, ...]) -> Outcome:
        try:
            sglang_flags.parse_argv(release, _args(argv), fork=fork)
        except ArgvError as exc:
            return {"error": exc.text.strip().splitlines()[-1]}
        except ConfigFileError as exc:
            return {"error": str(exc)}
        return {"error": None}

    return outcome


def _sglang(corpus: list[Fragment], release: str, fork: str | None) -> list[Fragment]:
    return [fragment for fragment in corpus if fragment.engine == "sglang" and fragment.advice.release == release and fragment.advice.fork == fork]


@pytest.fixture(scope="module")
def real(corpus: list[Fragment]) -> dict[str, Any]:
    """0.5.23's own parser on every distinct 0.5.23 fragment, in a child interpreter."""
    argvs = sorted({fragment.argv for fragment in _sglang(corpus, RELEASE, None)})
    answer = sglang_wheel.run_child(__file__, [{"name": json.dumps(argv), "args": _args(argv)} for argv in argvs], "sglang parser")
    return {"version": answer["version"], "options": answer["options"], "results": {tuple(json.loads(name)): result for name, result in answer["results"].items()}}


def test_the_real_parser_is_the_pinned_release(real: dict[str, Any]) -> None:
    assert real["version"] == RELEASE


def test_the_corpus_holds_every_producer_for_every_release(advice: list[Advice], corpus: list[Fragment]) -> None:
    sources = {(item.source.split(":")[0], item.release) for item in advice}
    assert sources == {(producer, release) for producer in ("diagnose", "catalogue", "autofix", "feasibility", "plan") for release in KNOWN_RELEASES}, sorted(sources)
    assert {fragment.advice.source.split(":")[0] for fragment in corpus} == {"diagnose", "catalogue", "autofix", "feasibility", "plan"}
    assert any(fragment.advice.fork for fragment in corpus)  # DDTree configurations, judged by the fork's parser
    assert any(fragment.advice.launch for fragment in corpus)  # the variants fixes launch
    assert any(fragment.engine == "vllm" for fragment in corpus)
    assert len(corpus) >= 5000 and len({fragment.argv for fragment in corpus}) >= 60


def test_every_sglang_fragment_parses_under_0523s_own_parser(corpus: list[Fragment], real: dict[str, Any]) -> None:
    problems = _problems(_sglang(corpus, RELEASE, None), real["options"], lambda argv: real["results"][argv], f"sglang {RELEASE} (installed)")
    assert not problems, f"{len(problems)} fragments fail:\n" + "\n".join(problems[:30])


# 0.5.12 upstream and every release's DDTree fork (fleet's table plus the fork's flags: no wheel of either is installed).
TABLE_CASES = [(release, None) for release in KNOWN_RELEASES if release != RELEASE] + [(release, fork) for release in KNOWN_RELEASES for fork in sglang_flags.FORKS]


@pytest.mark.parametrize(("release", "fork"), TABLE_CASES)
def test_every_sglang_fragment_parses_under_the_flag_table_of_each_other_release(corpus: list[Fragment], release: str, fork: str | None) -> None:
    fragments = _sglang(corpus, release, fork)
    assert fragments
    who = f"sglang {release}{' + ' + fork if fork else ''} (flagdata/{release}.json)"
    problems = _problems(fragments, _options_of(sglang_flags.build_parser(release, fork)), _table_outcome(release, fork), who)
    assert not problems, f"{len(problems)} fragments fail:\n" + "\n".join(problems[:30])


def test_the_0523_flag_table_judges_every_fragment_as_the_real_parser(corpus: list[Fragment], real: dict[str, Any]) -> None:
    # What makes the table a fair stand-in for 0.5.12, whose wheel is not installed.
    table = _table_outcome(RELEASE)
    differ = [f"{argv}: real {result['error']!r}, table {table(argv)['error']!r}" for argv, result in real["results"].items() if result["error"] != table(argv)["error"]]
    assert not differ, "\n".join(differ[:20])
    assert _options_of(sglang_flags.build_parser(RELEASE)).keys() == real["options"].keys()


def test_every_vllm_fragment_parses_under_each_vllm_release(corpus: list[Fragment]) -> None:
    fragments = [fragment for fragment in corpus if fragment.engine == "vllm"]
    assert fragments
    problems = []
    for release in vllm_flags.KNOWN_RELEASES:
        options = set(vllm_flags.load_table(release).option_strings)
        for fragment in fragments:
            try:
                engine("vllm").check_argv(release, list(fragment.argv), fork=None)
                error = None
            except ArgvError as exc:
                error = None if len(fragment.argv) == 1 and exc.message.endswith("expected one argument") else exc.message  # named without a value
            if error or fragment.argv[0] not in options:
                problems.append(f"vllm {release}: {fragment.argv}: {error or 'not an option string'} (from {fragment.advice.source})")
    assert not problems, "\n".join(problems[:20])


def test_a_fix_quotes_the_figures_of_one_refused_request() -> None:
    # Two requests refused with different figures in one log: the fix's numbers are one line's
    # (a request of 5000 tokens is not "9000 prompt + 100 to generate").
    checked = 0
    for source, release, diagnosis, lines in diagnoses():
        if lines is None or MIXED_REQUEST_LINES not in source:
            continue
        quoted = set(re.findall(r"\d+", diagnosis.fix or ""))
        per_line = [set(re.findall(r"\d+", line)) for line in lines]
        logged = quoted & set().union(*per_line)
        assert any(logged <= numbers for numbers in per_line), f"{source} ({release}): the fix quotes {sorted(logged)} of two lines: {diagnosis.fix}"
        checked += 1
    assert checked == 6 * len(KNOWN_RELEASES)


def test_advice_names_no_context_of_zero_tokens(corpus: list[Fragment]) -> None:
    # A KV pool of 0 tokens (synthetic, in each release's text) must not become "--context-length 0".
    zero = [fragment for fragment in corpus if "synthetic:zero-kv-pool" in fragment.advice.source]
    assert zero and all(fragment.argv != ("--context-length", "0") for fragment in zero)


# ---------------------------------------------------------------------------------------------
# The child: 0.5.23's parser (its option strings and prepare_server_args on each argv), as JSON.

if __name__ == "__main__":
    import argparse

    from sglang.srt.server_args import ServerArgs  # type: ignore[import-untyped]

    parser = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    parsed = _parse_all(json.load(sys.stdin))
    answer = {
        "version": parsed["version"],
        "options": _options_of(parser),
        "results": {name: {"error": result.get("error") if result["outcome"] != "ok" else None} for name, result in parsed["results"].items()},
    }
    json.dump(answer, sys.stdout)

"""Which of an engine's own error texts does `fleet diagnose` read? A sweep of its raise and error-log statements.

Walks an installed engine package (SGLang's or vLLM's site-packages folder, or any release unpacked from
`pip download --no-deps`), takes every `raise X(<message>)` whose message is a string, an f-string, a %- or
.format-string or a sum of them, renders it with each placeholder filled by a figure, keeps those whose words name a
failure class's subject (context length, the KV cache, memory, ports, GPU architectures, CUDA graphs) and reads each as
the exception line of a start (SGLang's scheduler traceback, or vLLM's engine core that failed to start). It prints,
per subject, how many read as that subject's class and every text that did not, with its file and line: a list to read
by hand, since a subject's words are no label (most hits of "KV cache" are configuration refusals no class names).
With `--logged` it reads the texts the engine logs at error level instead (`logger.error`, `.exception`, `.critical`),
each as the engine's own log line.

    python benchmarks/diagnose_raise_sweep.py "$(python -c 'import sglang, os; print(os.path.dirname(sglang.__file__))')" sglang
    python benchmarks/diagnose_raise_sweep.py /tmp/vllm-0.10.1.1/vllm vllm --subject context_length_exceeded
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fleet.host.diagnose.classify import diagnose_text  # noqa: E402

# A subject's words, checked in this order (the first that matches files the text).
SUBJECTS: dict[str, re.Pattern[str]] = {
    "context_length_exceeded": re.compile(r"context length|max_model_len|maximum context|context window|too long|exceeds? the (?:model|max)|longer than the maximum", re.I),
    "kv_pool_too_small": re.compile(r"kv cache|num_gpu_blocks|memory pool|kv pool|cache blocks|max_num_batched_tokens is smaller|Not enough memory|token_to_kv", re.I),
    "cuda_oom": re.compile(r"out of memory|\bOOM\b|insufficient (?:gpu )?memory|not enough (?:gpu )?memory", re.I),
    "port_in_use": re.compile(r"\bport\b.*(?:in use|bind|taken|occupied|available)|address already", re.I),
    "unsupported_gpu_arch": re.compile(
        r"compute capability|\bSM ?\d{2,3}|sm_\d|not supported on (?:this|the current) (?:GPU|device|platform)|gfx\d|Hopper|Blackwell|Ampere|Volta|Turing",
        re.I,
    ),
    "cuda_graph_error": re.compile(r"cuda ?graph|capture", re.I),
    "import_error": re.compile(r"pip install|is not installed|not installed|please install|No module named|failed to import|cannot import", re.I),
    "model_load_error": re.compile(
        r"checkpoint|safetensors|config\.json|model path|not a valid model|does not appear to have|gated repo|weights? (?:file|not found)|load(?:ing)? (?:the )?(?:model|weights)",
        re.I,
    ),
}
_FIGURE = "4096"
# An error-level log line as each engine prints it (SGLang's "[time TP0] msg", vLLM's "ERROR date time [file:line] msg").
_LOG_LINE = {"sglang": "[2026-01-01 10:00:00 TP0] ", "vllm": "ERROR 01-01 10:00:00 [engine.py:100] "}
_FRAMING = {
    "sglang": ("[2026-01-01 10:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):", ""),
    "vllm": (
        "(EngineCore_DP0 pid=7) ERROR 01-01 10:00:00 [core.py:700] EngineCore failed to start.",
        "(EngineCore_DP0 pid=7) ERROR 01-01 10:00:00 [core.py:700] ",
    ),
}


def render(node: ast.expr) -> str | None:
    """The message a raise builds, each placeholder a figure; None where it is built some other way."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(str(part.value) if isinstance(part, ast.Constant) else _FIGURE for part in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = render(node.left), render(node.right)
        return left + right if left is not None and right is not None else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        left = render(node.left)
        return re.sub(r"%[-\d.]*[sdfr]", _FIGURE, left) if left is not None else None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
        template = render(node.func.value)
        return re.sub(r"\{[^}]*\}", _FIGURE, template) if template is not None else None
    return None


_LOG_LEVELS = {"error", "exception", "critical", "fatal"}


def _statement(node: ast.AST, logged: bool) -> tuple[str, ast.expr] | None:
    """The exception's name and message expression of a raise, or ("", message) of an error-level log call."""
    if logged:
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _LOG_LEVELS
            and isinstance(node.func.value, ast.Name)
            and "log" in node.func.value.id.lower()
            and node.args
        ):
            return "", node.args[0]
        return None
    if not (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args):
        return None
    func = node.exc.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else "RuntimeError"
    return (name if name.endswith(("Error", "Exception")) else "RuntimeError"), node.exc.args[0]


def raised_texts(root: Path, logged: bool = False) -> list[tuple[str, str, str]]:
    """(exception name, one-line message, file:line) of every raise (or error-level log call) with a renderable message,
    each message once."""
    seen: set[str] = set()
    found = []
    for path in sorted(root.rglob("*.py")):
        try:
            tree = ast.parse(path.read_text(errors="replace"))
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            statement = _statement(node, logged)
            if statement is None:
                continue
            name, expression = statement
            message = render(expression)
            if not message or message in seen:
                continue
            seen.add(message)
            found.append((name, " ".join(message.split()), f"{path.relative_to(root)}:{getattr(node, 'lineno', 0)}"))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("package", type=Path, help="the engine package's folder (the one holding its __init__.py)")
    parser.add_argument("engine", choices=sorted(_FRAMING), help="whose start to frame each exception line in")
    parser.add_argument("--subject", choices=sorted(SUBJECTS), help="only this subject")
    parser.add_argument("--logged", action="store_true", help="error-level log calls instead of raise statements")
    args = parser.parse_args()
    opening, prefix = _FRAMING[args.engine]
    by_subject: dict[str, list[tuple[str, str, str]]] = {}
    for name, message, where in raised_texts(args.package, args.logged):
        subject = next((subject for subject, words in SUBJECTS.items() if words.search(message)), None)
        if subject is None or (args.subject and subject != args.subject):
            continue
        if args.logged:
            line = message
            got = diagnose_text([_LOG_LINE[args.engine] + line]).failure_class or "healthy"
        else:
            line = f"{name}: {message}"
            got = diagnose_text([opening, prefix + line]).failure_class or "healthy"
        by_subject.setdefault(subject, []).append((got, where, line))
    for subject, items in by_subject.items():
        right = sum(1 for got, _, _ in items if got == subject)
        print(f"== {subject}: {right}/{len(items)} read as {subject}")
        for got, where, line in items:
            if got != subject:
                print(f"   [{got}] {where}: {line[:240]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

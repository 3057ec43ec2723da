"""The stand-in tokenizer: deterministic, BPE-like counts, and generated text that re-tokenizes exactly."""

from __future__ import annotations

import random

import pytest

from fleet.host import tokens as tokenizer


@pytest.mark.parametrize(
    ("text", "pieces"),
    [
        ("Hello, world!", ["Hello", ",", " world", "!"]),
        ("def fibonacci(n):", ["def", " fibo", "nacc", "i", "(", "n", ")", ":"]),
        ("x = 1234", ["x", " =", " 1", "2", "3", "4"]),
        ("a\n\n    b", ["a", "\n", "\n", "    ", "b"]),
        ("snake_case", ["snake", "_", "case"]),
        ("", []),
    ],
)
def test_pieces(text: str, pieces: list[str]) -> None:
    assert tokenizer.tokenize(text) == pieces
    assert tokenizer.count_tokens(text) == len(pieces)
    assert "".join(tokenizer.tokenize(text)) == text


def test_count_matches_tokenize_on_real_text() -> None:
    with open(__file__) as handle:
        text = handle.read() * 3
    assert tokenizer.count_tokens(text) == len(tokenizer.tokenize(text))
    assert "".join(tokenizer.tokenize(text)) == text


def test_generated_text_retokenizes_to_its_token_count() -> None:
    rng = random.Random(7)
    for kind, vocabulary in tokenizer.GENERATION_VOCABULARY.items():
        for _ in range(300):
            pieces = rng.choices(vocabulary, k=rng.randrange(1, 80))
            assert tokenizer.count_tokens("".join(pieces)) == len(pieces), (kind, pieces)


def test_chat_template_adds_fixed_tokens_per_message() -> None:
    one = [{"role": "user", "content": "Write quicksort."}]
    two = one + [{"role": "assistant", "content": [{"type": "text", "text": "Sure"}]}]
    assert tokenizer.count_chat_tokens(one) == tokenizer.count_tokens("Write quicksort.") + 5 + 3
    assert tokenizer.count_chat_tokens(two) == tokenizer.count_chat_tokens(one) + 5 + 1


def test_token_ids_are_stable_and_distinct_for_generated_pieces() -> None:
    ids = [tokenizer.piece_id(p) for vocab in tokenizer.GENERATION_VOCABULARY.values() for p in vocab]
    assert len(set(ids)) == len({p for vocab in tokenizer.GENERATION_VOCABULARY.values() for p in vocab})


def test_counting_a_megabyte_agrees_with_the_pieces() -> None:
    """The fast count (regex `subn`, no list of matches) is the number of pieces `tokenize` makes,
    on a text as large as a long-context prompt. Its speed is the simulator's business, measured in
    benchmarks/bench_sim.py (CPU per emitted token), not timed here: a unit test's clock on a loaded
    machine fails without a cause (1.85 s against a 1.5 s bound beside a CPU hog)."""
    text = "The quick brown fox jumps over the lazy dog 1234. def f(x):\n    return x+1\n" * 12_000  # ~1 MB
    tokens = tokenizer.count_tokens(text)
    assert tokens > 300_000 and tokens == len(tokenizer.tokenize(text))

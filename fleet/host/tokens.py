"""A deterministic stand-in tokenizer: the simulator's, and how fleet's workload code sizes prompts
and counts a dataset's lengths (fleet.host.tokens: no controller module imports the simulator).

It is no real BPE, but it behaves like one where it matters for sizing prompts: a short word with
its leading space is one token, a long word is split into 4-character pieces, every digit and every
punctuation mark is a token (Qwen-style tokenizers split digits), a newline is a token and a run of
indentation is one token. Standard library only: it ships to hosts with the agent.

Text the simulator generates is built from single-token pieces that never merge with their
neighbours, so re-tokenizing generated text gives back exactly the completion token count.
"""

from __future__ import annotations

import re
from typing import Mapping, Sequence

# Alternatives in priority order: a word (letters only) with an optional leading space, a digit,
# any other visible character, a newline, a run of other whitespace.
_PIECE = re.compile(r" ?[^\W\d_]+| ?\d| ?[^\s]|\n|[^\S\n]+")
# Words longer than this are split into _LONG_WORD_PIECE-character pieces.
_SHORT_WORD_MAX = 6
_LONG_WORD_PIECE = 4
_LONG_WORD = re.compile(r"[^\W\d_]{%d,}" % (_SHORT_WORD_MAX + 1))

# Qwen's chat template wraps each message as `<|im_start|>{role}\n{content}<|im_end|>\n` and
# ends with `<|im_start|>assistant\n`: special tokens, the role and newlines around each message.
CHAT_TOKENS_PER_MESSAGE = 5
CHAT_GENERATION_PROMPT_TOKENS = 3


def _long_word_extra(length: int) -> int:
    """Tokens a long word adds beyond the one piece every word counts for."""
    return -(-length // _LONG_WORD_PIECE) - 1


def count_tokens(text: str) -> int:
    """Number of tokens in `text`. Linear in the text and allocation-light: it is on hot paths."""
    # subn counts matches without building a list of them: about 2.5x faster than findall.
    count = _PIECE.subn("", text)[1]
    for match in _LONG_WORD.finditer(text):
        count += _long_word_extra(match.end() - match.start())
    return count


def tokenize(text: str) -> list[str]:
    """The token pieces of `text`; `len(tokenize(t)) == count_tokens(t)` and `"".join(...) == t`."""
    pieces: list[str] = []
    for piece in _PIECE.findall(text):
        word = piece.lstrip(" ")
        if len(word) > _SHORT_WORD_MAX and word.isalpha():
            lead = piece[: len(piece) - len(word)]
            chunks = [word[i : i + _LONG_WORD_PIECE] for i in range(0, len(word), _LONG_WORD_PIECE)]
            chunks[0] = lead + chunks[0]
            pieces.extend(chunks)
        else:
            pieces.append(piece)
    return pieces


def count_chat_tokens(messages: Sequence[Mapping[str, object]]) -> int:
    """Prompt tokens of a chat request after the chat template is applied (with the generation prompt)."""
    total = CHAT_GENERATION_PROMPT_TOKENS
    for message in messages:
        total += CHAT_TOKENS_PER_MESSAGE + count_tokens(message_text(message))
    return total


def message_text(message: Mapping[str, object]) -> str:
    """The text of an OpenAI chat message; content may be a string or a list of typed parts."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


# Vocabulary for generated text. Words carry their leading space and symbols stand alone, so no two
# adjacent pieces can merge into one token when the text is re-tokenized.
_PROSE = (" the", " model", " of", " and", " a", " result", " is", " to", " we", " value", " in", " this", " step", " so", " it", " for", " each", " can", ",", ".", " that", " be")
_CODE = (" def", " return", " if", " else", " for", " in", " x", " n", " i", " =", "(", ")", ":", "\n", " +", " -", " 1", " 0", ",", " fib", " list", "[", "]", " left", " right")
_ARITH = (" 1", " 2", " 3", "4", "5", " +", " =", " *", " -", " so", " the", " total", " is", ".", "\n")
_JSON = ("{", "}", ' "', '"', " name", " id", ":", ",", " 1", "2", " [", "]", " true", " null", "\n")
GENERATION_VOCABULARY: Mapping[str, tuple[str, ...]] = {
    "prose": _PROSE,
    "code": _CODE,
    "arithmetic": _ARITH,
    "json": _JSON,
}
# Token ids: the position in one global list, so output_ids are stable across runs and processes.
_ALL_PIECES: tuple[str, ...] = tuple(dict.fromkeys(p for vocab in GENERATION_VOCABULARY.values() for p in vocab))
_PIECE_ID = {piece: index + 1000 for index, piece in enumerate(_ALL_PIECES)}


def piece_id(piece: str) -> int:
    return _PIECE_ID[piece]

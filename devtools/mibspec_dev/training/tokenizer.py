"""A word-level tokenizer for the generated tasks, loadable by ``transformers.AutoTokenizer``.

Tokenization rule: whitespace (spaces, newlines) separates words and is dropped; every
punctuation character is a token of its own; each remaining word is one token; case is
kept. Hence an answer written with a leading space (``" Mary"``, ``" D"``, ``" 91"``)
is exactly one token, and for a prompt that does not end in whitespace::

    tokenize(prompt + answer) == tokenize(prompt) + tokenize(answer)

Numbers are whole words (``"27"`` is one token), so an addition's answer is one token.
No special token is added when encoding: models see exactly the prompt's word tokens.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path

from tokenizers import Tokenizer, models, pre_tokenizers

__all__ = [
    "EOS_TOKEN",
    "PAD_TOKEN",
    "SPECIAL_TOKENS",
    "UNK_TOKEN",
    "build_word_tokenizer",
    "load_word_tokenizer",
    "save_tokenizer_files",
    "tokenize_function",
    "word_pre_tokenizer",
]

PAD_TOKEN = "<pad>"
UNK_TOKEN = "<unk>"
EOS_TOKEN = "<eos>"
#: Special tokens, in id order (0, 1, 2).
SPECIAL_TOKENS: tuple[str, ...] = (PAD_TOKEN, UNK_TOKEN, EOS_TOKEN)


def word_pre_tokenizer() -> pre_tokenizers.PreTokenizer:
    """Split on whitespace, then isolate every punctuation character."""
    return pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation(behavior="isolated")]
    )


def build_word_tokenizer(texts: Iterable[str]) -> Tokenizer:
    """A WordLevel tokenizer whose vocabulary is every word of ``texts``.

    Ids: the special tokens first (``<pad>`` 0, ``<unk>`` 1, ``<eos>`` 2), then the words
    in code-point order, so the same texts always give the same ids.
    """
    splitter = word_pre_tokenizer()
    words: set[str] = set()
    for text in texts:
        if not isinstance(text, str):
            raise ValueError(f"texts: expected strings, got {type(text).__name__}")
        words.update(piece for piece, _ in splitter.pre_tokenize_str(text))
    words.difference_update(SPECIAL_TOKENS)
    vocab = {token: i for i, token in enumerate((*SPECIAL_TOKENS, *sorted(words)))}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK_TOKEN))
    tokenizer.pre_tokenizer = word_pre_tokenizer()
    tokenizer.add_special_tokens(list(SPECIAL_TOKENS))
    return tokenizer


def save_tokenizer_files(tokenizer: Tokenizer, folder: str | Path, model_max_length: int) -> list[Path]:
    """Write ``tokenizer.json``, ``tokenizer_config.json`` and ``special_tokens_map.json``.

    The config names ``PreTrainedTokenizerFast`` so that ``AutoTokenizer.from_pretrained``
    loads the folder offline, with right padding and no cleanup of spaces on decoding.
    """
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(out / "tokenizer.json"))
    specials = {"pad_token": PAD_TOKEN, "unk_token": UNK_TOKEN, "eos_token": EOS_TOKEN}
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        **specials,
        "model_max_length": model_max_length,
        "padding_side": "right",
        "clean_up_tokenization_spaces": False,
    }
    paths = [out / "tokenizer.json", out / "tokenizer_config.json", out / "special_tokens_map.json"]
    for path, payload in zip(paths[1:], (config, specials), strict=True):
        path.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return paths


def load_word_tokenizer(folder: str | Path) -> Tokenizer:
    """Load ``tokenizer.json`` from a model folder (no ``transformers`` needed)."""
    path = Path(folder) / "tokenizer.json"
    if not path.is_file():
        raise ValueError(f"folder: expected a tokenizer.json in {folder}, found none")
    return Tokenizer.from_file(str(path))


def tokenize_function(tokenizer: Tokenizer) -> Callable[[str], list[int]]:
    """``str -> token ids`` without special tokens, e.g. for the equal-length filter."""

    def tokenize(text: str) -> list[int]:
        return list(tokenizer.encode(text, add_special_tokens=False).ids)

    return tokenize

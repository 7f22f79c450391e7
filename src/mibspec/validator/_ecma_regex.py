"""JSON Schema's ``pattern`` with the meaning ECMA-262 gives it, on Python's ``re``.

JSON Schema (draft 2020-12, §6.4) reads a pattern as an ECMA-262 regular expression, where
``\\d`` and ``\\w`` are ASCII classes. Python's ``re`` reads ``\\d`` as any Unicode decimal
digit, ``\\w`` as any Unicode word character, ``$`` as "the end, or before a final newline"
and ``.`` as anything but ``\\n``. Searched as Python reads them, the RFC 3339 pattern of
``created`` accepts ``٢٠٢٤-٠١-٠١T00:00:00Z`` and a date followed by a newline. Each pattern
is therefore translated before it is compiled:

* compiled with ``re.ASCII``: ``\\d \\D \\w \\W \\b \\B`` are ECMA's ASCII classes;
* ``\\s`` and ``\\S`` name ECMA's whitespace (Unicode spaces and line terminators, which
  ``re.ASCII`` would narrow to six characters);
* ``$`` outside a class is ``\\Z``, the end of the text only;
* ``.`` outside a class excludes ECMA's four line terminators.

Constructs whose meaning differs in ways this translation does not cover (``[]``,
``[^]``, ``\\S`` inside a class) are refused: every pattern of the shipped schemas is
translated by a test.
"""

from __future__ import annotations

import functools
import re

__all__ = ["UnsupportedPatternError", "ecma_regex"]

# ECMA-262 WhiteSpace and LineTerminator: the members of \s.
_SPACE_MEMBERS = "\\t\\n\\x0b\\x0c\\r \\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff"
_DOT = "[^\\n\\r\\u2028\\u2029]"


class UnsupportedPatternError(ValueError):
    """A pattern whose ECMA-262 meaning this translation does not reproduce."""


def _translate(pattern: str) -> str:
    out: list[str] = []
    in_class = False
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            if i + 1 >= len(pattern):
                raise UnsupportedPatternError(f"{pattern!r}: ends in a lone backslash")
            escaped = pattern[i + 1]
            if escaped == "s":
                out.append(_SPACE_MEMBERS if in_class else f"[{_SPACE_MEMBERS}]")
            elif escaped == "S":
                if in_class:
                    raise UnsupportedPatternError(f"{pattern!r}: \\S inside a character class")
                out.append(f"[^{_SPACE_MEMBERS}]")
            else:
                out.append(char + escaped)
            i += 2
            continue
        if in_class:
            if char == "]":
                in_class = False
            out.append(char)
        elif char == "[":
            start = i + 2 if pattern.startswith("[^", i) else i + 1
            if pattern.startswith("]", start):
                raise UnsupportedPatternError(f"{pattern!r}: an empty class or one starting with ']'")
            in_class = True
            out.append(pattern[i:start])
            i = start
            continue
        elif char == "$":
            out.append("\\Z")
        elif char == ".":
            out.append(_DOT)
        else:
            out.append(char)
        i += 1
    return "".join(out)


@functools.lru_cache(maxsize=256)
def ecma_regex(pattern: str) -> re.Pattern[str]:
    """``pattern`` compiled so that ``search`` matches what ECMA-262 (without flags) matches.

    >>> bool(ecma_regex(r"^\\d{2}$").search("42"))
    True
    >>> bool(ecma_regex(r"^\\d{2}$").search("٤٢")), bool(ecma_regex(r"^\\d{2}$").search("42\\n"))
    (False, False)

    Raises:
        UnsupportedPatternError: the pattern uses a construct the translation does not cover.
        re.error: the pattern is not a regular expression.
    """
    return re.compile(_translate(pattern), re.ASCII)

"""Text taken from documents, file names or other programs, made safe to show to people.

Every output meant for a terminal, a CI log or a viewer (``text``, ``github``, ``junit``,
the SARIF message text, the HTML and Markdown pages, and the command's own messages)
passes such text through :func:`visible` before it writes it. The JSON outputs need no
such step: JSON escapes control characters itself.
"""

from __future__ import annotations

import re

__all__ = ["visible"]

#: Characters that move the cursor, erase, start escape sequences, end a line or reorder
#: the text around them: C0 controls (with TAB, LF and CR), DEL, C1 controls, the bidi
#: marks, embeddings, overrides and isolates, the line and paragraph separators, lone
#: surrogates (not encodable) and the two non-characters XML 1.0 forbids.
_HIDDEN = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff\ufffe\uffff]"
)


def _shown(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    r"""``text`` with each character in :data:`_HIDDEN` written as a visible escape.

    Linear in the length of ``text``; the result is one line.

    >>> visible("a\x1b[2K\rPASS\u202e")
    'a\\x1b[2K\\x0dPASS\\u202e'
    """
    return _HIDDEN.sub(_shown, text)

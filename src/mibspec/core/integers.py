"""The one parser of integers written as text: in file and folder names, rows, options and
the environment.

``str.isdigit`` accepts characters ``int`` refuses (``"²"``), ``int`` accepts what a name
should not hold (other scripts' digits, ``"1_000"``, spaces around the number) and spends
time quadratic in the digits before it refuses more than 4,300 of them. :func:`parse_int`
accepts ASCII digits only, at most :data:`MAX_DIGITS` of them by default, and returns
``None`` for anything else, so that each caller turns a bad integer into its own finding or
usage error.
"""

from __future__ import annotations

__all__ = ["MAX_DIGITS", "parse_int"]

#: Digits read by default: every value below 10**18 fits a signed 64-bit integer.
MAX_DIGITS = 18

_ASCII_DIGITS = frozenset("0123456789")


def parse_int(text: object, *, max_digits: int = MAX_DIGITS, signed: bool = False) -> int | None:
    """``text`` as an integer, or ``None`` unless it is 1 to ``max_digits`` ASCII digits
    (after one ``-`` or ``+`` when ``signed``), with nothing else: no spaces, no ``_``.

    >>> parse_int("12"), parse_int("007"), parse_int("-3", signed=True)
    (12, 7, -3)
    >>> parse_int("²"), parse_int("٣"), parse_int(" 1"), parse_int("1_0"), parse_int("-3")
    (None, None, None, None, None)
    >>> parse_int("9" * 19) is None
    True
    """
    if not isinstance(text, str):
        return None
    sign = text[:1] if signed and text[:1] in ("-", "+") else ""
    digits = text[len(sign) :]
    if not 0 < len(digits) <= max_digits or not _ASCII_DIGITS.issuperset(digits):
        return None
    return -int(digits) if sign == "-" else int(digits)

"""JSON pointers (RFC 6901): escaping a reference token and joining tokens into a pointer."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["escape_pointer_token", "join_pointer"]


def escape_pointer_token(token: str | int) -> str:
    """One reference token, escaped: ``~`` → ``~0``, ``/`` → ``~1``.

    >>> escape_pointer_token("a/b~c")
    'a~1b~0c'
    """
    return str(token).replace("~", "~0").replace("/", "~1")


def join_pointer(tokens: Iterable[str | int], base: str = "") -> str:
    """``base`` followed by each token, escaped (``""`` is the root).

    >>> join_pointer(["claims", 0, "a/b"])
    '/claims/0/a~1b'
    """
    return base + "".join(f"/{escape_pointer_token(token)}" for token in tokens)

"""Running torch on one thread, for small models whose values must not depend on the machine."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

__all__ = ["one_thread"]


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """Run torch on one intra-op thread inside the block (restored on exit): the models are
    small, thread hand-offs cost more than they save on a shared machine, and the values do
    not depend on the machine's core count."""
    import torch  # here, not above: importing this module must not import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)

"""Recomputers of the verify command's recompute stage, one module per track.

Each module exposes ``recompute(ctx, progress) -> Recomputation`` (see
``mibspec.validator``'s recompute stage) and is imported only when that stage runs.
"""

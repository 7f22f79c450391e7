"""What the recomputation of several reports in one run shares: the file-hash cache, the
last model built and the unpatched runs of the last batches.

A session lives as long as one batch of reports (one group, see ``mibspec.verification.grouping``) and
is reached by recomputers as ``ctx.session``. Everything it returns is keyed by
content, so a report's result does not depend on which reports were verified before it:

* the file-hash cache (:class:`~._hash_cache.FileHashCache`, on disk), only when the run
  trusts it (``--trust-hash-cache``), spares hashing a model file whose key has not changed
  since it was hashed; by default every model file is hashed as it is read;
* one model is kept, keyed by its folder, revision, dtype and the digests of the files it
  was built from; it is used again only when the files still have those digests;
* the clean and ablation runs of batches, each distinct circuit's per-example metrics on
  a batch and the ``mean`` ablation's dataset mean are kept in an ``ActivationCache``
  (bounded, by default :data:`~mibspec.reference_impl.engine.DEFAULT_ACTIVATION_BYTES`; the
  environment variable ``MIBSPEC_ACTIVATION_CACHE_BYTES`` sets another bound, 0 turns it off),
  when the session serves more than one report: a report's circuits are evaluated in one
  call, which runs each batch once, so a session of one report keeps none (a batch's runs
  kept would only sit in memory beside the next batch's).
"""

from __future__ import annotations

from typing import Any

from mibspec.core.environment import environment_int

from ._hash_cache import FileHashCache, default_cache_dir

__all__ = ["RecomputeSession"]


class RecomputeSession:
    """Caches shared by the reports of one run (see the module docstring).

    Args:
        trust_hash_cache: take model files' digests from the on-disk file-hash cache when
            their keys are unchanged (and store new ones); without it (the default) every
            model file is hashed from the bytes read each time a report reads it, as when
            each report is verified alone, and the cache is neither read nor written.
        share_activations: keep runs and circuit metrics for the reports that follow
            (:attr:`activations`); ``False`` for a session of one report.
    """

    def __init__(self, *, trust_hash_cache: bool = False, share_activations: bool = True) -> None:
        self.hashes = FileHashCache(default_cache_dir()) if trust_hash_cache else None
        self._model: tuple[Any, tuple[Any, ...], Any] | None = None
        self._activations: Any = None
        self.share_activations = share_activations

    def has_model(self, key: Any) -> bool:
        return self._model is not None and self._model[0] == key

    def model(self, key: Any, digests: tuple[Any, ...]) -> Any:
        """The model kept for ``key`` if it was built from files with these digests."""
        if self._model is not None and self._model[0] == key and self._model[1] == digests:
            return self._model[2]
        return None

    def keep_model(self, key: Any, digests: tuple[Any, ...], value: Any) -> None:
        self._model = (key, digests, value)

    def forget_model(self) -> None:
        """Drop the model kept and the runs kept on it (before another is built: the two are
        never held at once)."""
        self._model = None
        if self._activations is not None:
            self._activations.clear()

    def activation_bound(self) -> int:
        """Bytes the session keeps runs and metrics in: 0 when it shares none, else
        ``MIBSPEC_ACTIVATION_CACHE_BYTES`` or the engine's default."""
        if not self.share_activations:
            return 0
        bound = environment_int("MIBSPEC_ACTIVATION_CACHE_BYTES")
        if bound is not None:
            return bound
        from ..engine import DEFAULT_ACTIVATION_BYTES

        return DEFAULT_ACTIVATION_BYTES

    @property
    def activations(self) -> Any:
        """The session's ``ActivationCache`` (created on first use; imports torch), or ``None``
        when it shares none."""
        if self._activations is None and self.share_activations:
            from ..engine import ActivationCache

            self._activations = ActivationCache(self.activation_bound())
        return self._activations

    def close(self) -> None:
        """Write the file-hash cache and drop the model and activations."""
        if self.hashes is not None:
            self.hashes.save()
        self._model = None
        self._activations = None

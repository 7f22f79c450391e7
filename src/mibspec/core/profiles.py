"""Profiles: conventions and constants, loaded from ``spec/v1/profiles/<name>.json``.

Profiles are plain data checked against ``profile.schema.json`` by the test suite;
at run time they are read as JSON so validation does not build the typed models.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from .spec import SPEC_VERSION, load_spec_json, spec_dir

__all__ = ["LoadedProfile", "known_profiles", "load_profile", "model_dtype"]


class LoadedProfile(Mapping[str, Any]):
    """A profile as loaded from the spec for checking, read-only: ``profile["grid"]`` or
    ``profile.grid``. (The typed model of a profile document is ``mibspec.documents.Profile``.)"""

    def __init__(self, data: Mapping[str, Any]) -> None:
        self._data = dict(data)

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __getattr__(self, key: str) -> Any:
        try:
            return self._data[key]
        except KeyError:
            raise AttributeError(key) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"LoadedProfile({self._data.get('name')!r})"


def known_profiles(spec_version: str = SPEC_VERSION) -> list[str]:
    return sorted(path.stem for path in (spec_dir(spec_version) / "profiles").glob("*.json"))


@functools.lru_cache(maxsize=8)
def load_profile(name: str, spec_version: str = SPEC_VERSION) -> LoadedProfile:
    """Load a profile by name.

    Raises:
        KeyError: no profile of that name exists for the spec version.
    """
    if name not in known_profiles(spec_version):
        raise KeyError(name)
    return LoadedProfile(load_spec_json(spec_version, f"profiles/{name}.json"))


def model_dtype(profile: Mapping[str, Any], track: str, names: Iterable[str]) -> str:
    """The dtype ``profile`` evaluates a model of ``track`` in: that of its first ``model_dtypes``
    entry naming the model (by architecture or hub id, ``names``) or every model (``*``), else
    ``float32``. Importers declare it; recomputation accepts it on weights stored wider (M-6)."""
    known = {"*", *names}
    for entry in profile.get("model_dtypes", []):
        if entry["track"] == track and known & set(entry["models"]):
            return str(entry["dtype"])
    return "float32"

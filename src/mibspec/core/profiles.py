"""Profiles: conventions and constants, loaded from ``spec/v1/profiles/<name>.json``.

Profiles are plain data checked against ``profile.schema.json`` by the test suite;
at run time they are read as JSON so validation does not build the typed models.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from typing import Any

from .spec import SPEC_VERSION, load_spec_json, spec_dir

__all__ = ["Profile", "known_profiles", "load_profile"]


class Profile(Mapping[str, Any]):
    """A read-only profile: ``profile["grid"]`` or ``profile.grid``."""

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
        return f"Profile({self._data.get('name')!r})"


def known_profiles(spec_version: str = SPEC_VERSION) -> list[str]:
    return sorted(path.stem for path in (spec_dir(spec_version) / "profiles").glob("*.json"))


@functools.lru_cache(maxsize=8)
def load_profile(name: str, spec_version: str = SPEC_VERSION) -> Profile:
    """Load a profile by name.

    Raises:
        KeyError: no profile of that name exists for the spec version.
    """
    if name not in known_profiles(spec_version):
        raise KeyError(name)
    return Profile(load_spec_json(spec_version, f"profiles/{name}.json"))

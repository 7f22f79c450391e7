"""Package layout: the top-level folders become subpackages of ``mibspec``.

``validator/`` installs as ``mibspec.validator``, ``reference_impl/`` as
``mibspec.reference_impl``, and the language-neutral ``spec/`` folder ships as
package data under ``mibspec.spec``. The conformance suite stays in the
repository (it contains deliberately hostile files, such as symbolic links that
point outside their case). Everything else lives in ``pyproject.toml``.
"""

from pathlib import Path

from setuptools import setup

ROOTS = {
    "mibspec": "mibspec",
    "mibspec.validator": "validator",
    "mibspec.reference_impl": "reference_impl",
}
DATA_ROOTS = {"mibspec.spec": "spec"}


def _packages(name: str, folder: str, *, data: bool) -> dict[str, str]:
    """Map every (sub)folder below ``folder`` to its dotted package name."""
    found = {name: folder}
    for path in sorted(Path(folder).rglob("*")):
        if not path.is_dir() or path.name == "__pycache__":
            continue
        if not data and not (path / "__init__.py").exists():
            continue
        rel = path.relative_to(folder)
        found[".".join([name, *rel.parts])] = str(path)
    return found


package_dir: dict[str, str] = {}
for pkg, folder in ROOTS.items():
    package_dir.update(_packages(pkg, folder, data=False))
data_dirs: dict[str, str] = {}
for pkg, folder in DATA_ROOTS.items():
    data_dirs.update(_packages(pkg, folder, data=True))
package_dir.update(data_dirs)

setup(
    packages=sorted(package_dir),
    package_dir=package_dir,
    package_data={
        **{pkg: ["py.typed", "*.json"] for pkg in ROOTS},
        **{pkg: ["*"] for pkg in data_dirs},
    },
    include_package_data=False,
)

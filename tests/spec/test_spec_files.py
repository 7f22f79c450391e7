"""The spec folder is consistent: schemas match the models, pass the metaschema, and the
profiles and catalogue are well-formed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest

from mibspec.core.spec import spec_dir
from mibspec.documents import KINDS, schema_names, schema_text

SPEC = spec_dir()


@pytest.mark.parametrize("name", schema_names())
def test_committed_schema_equals_generated(name: str) -> None:
    committed = (SPEC / "schemas" / f"{name}.schema.json").read_text(encoding="utf-8")
    assert committed == schema_text(name), (
        f"spec/v1/schemas/{name}.schema.json is out of date; regenerate with "
        "`python -m mibspec.documents.export spec/v1/schemas`"
    )


def test_no_stray_schema_files() -> None:
    shipped = {p.name.removesuffix(".schema.json") for p in (SPEC / "schemas").glob("*.schema.json")}
    assert shipped == set(schema_names())


@pytest.mark.parametrize("name", schema_names())
def test_schema_passes_the_2020_12_metaschema(name: str) -> None:
    schema = json.loads((SPEC / "schemas" / f"{name}.schema.json").read_text(encoding="utf-8"))
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)
    # The v1 folder holds the schemas of the latest 1.x version, which also accept 1.0 documents.
    assert schema["$id"] == f"urn:mibspec:schema:{name}:1.2"


@pytest.mark.parametrize("name", schema_names())
def test_schema_compiles_in_a_second_implementation(name: str) -> None:
    import jsonschema_rs

    schema = json.loads((SPEC / "schemas" / f"{name}.schema.json").read_text(encoding="utf-8"))
    jsonschema_rs.Draft202012Validator(schema)


def test_profiles_validate_against_the_profile_schema() -> None:
    schema = json.loads((SPEC / "schemas" / "profile.schema.json").read_text(encoding="utf-8"))
    validator = jsonschema.Draft202012Validator(schema)
    names = []
    for path in sorted((SPEC / "profiles").glob("*.json")):
        profile = json.loads(path.read_text(encoding="utf-8"))
        assert list(validator.iter_errors(profile)) == [], path.name
        assert profile["name"] == path.stem
        names.append(path.stem)
    assert {"default", "mib-2025"} <= set(names)


def test_default_profile_grid_is_the_documented_one() -> None:
    profile = json.loads((SPEC / "profiles" / "default.json").read_text(encoding="utf-8"))
    # The grid the public MIB code uses (FIELD_NOTES §1), with no k = 0 point.
    assert profile["grid"] == [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0]


def test_every_document_kind_has_a_schema() -> None:
    for kind in KINDS:
        assert (SPEC / "schemas" / f"{kind}.schema.json").is_file()


def test_spec_text_defines_every_requirement_the_catalogue_cites() -> None:
    text = (SPEC / "SPEC.md").read_text(encoding="utf-8")
    defined = set(re.findall(r"\*\*\[([A-Z]+-\d+)\]\*\*", text))
    catalogue = json.loads((SPEC / "rules.json").read_text(encoding="utf-8"))
    cited = {rule["requirement"] for rule in catalogue["rules"]}
    assert cited <= defined, sorted(cited - defined)


def test_spec_text_requirement_ids_are_unique() -> None:
    text = (SPEC / "SPEC.md").read_text(encoding="utf-8")
    ids = re.findall(r"\*\*\[([A-Z]+-\d+)\]\*\*", text)
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})


def test_spec_is_shipped_inside_the_package_or_beside_it() -> None:
    assert (Path(SPEC) / "rules.json").is_file()


def test_the_schema_regenerator_takes_one_folder_and_no_option(tmp_path: Path) -> None:
    from mibspec.documents.export import main

    before = sorted(Path.cwd().iterdir())
    assert main(["--help"]) == 0
    assert main(["-o"]) == 2
    assert main([]) == 2
    assert main([str(tmp_path / "a"), str(tmp_path / "b")]) == 2
    assert sorted(Path.cwd().iterdir()) == before  # no folder named after an option
    assert not (tmp_path / "a").exists()
    assert main([str(tmp_path / "out")]) == 0
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(
        f"{name}.schema.json" for name in schema_names()
    )
    for name in schema_names():  # the files the spec ships
        written = (tmp_path / "out" / f"{name}.schema.json").read_bytes()
        assert written == (spec_dir() / "schemas" / f"{name}.schema.json").read_bytes()

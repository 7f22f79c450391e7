"""``mibspec.core.folders``: the one name of what is written, reading inside a folder given,
and a plan of every file written before the first is."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mibspec.core.folders import (
    MAX_NAME_CHARS,
    InputFolder,
    NameClashError,
    OutputPlan,
    OutsideFolderError,
    UnsafeNameError,
    name_problem,
    safe_name,
)
from mibspec.core.outputs import Inputs, OutputPathError

TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=300)


@given(st.lists(TEXT, min_size=1, max_size=4))
def test_a_safe_name_is_one_plain_ascii_name_and_stays_what_it_is(parts: list[str]) -> None:
    name = safe_name(*parts)
    assert name_problem(name) is None
    assert name not in ("", ".", "..")
    assert name.isascii()
    assert len(name) <= MAX_NAME_CHARS
    assert set(name) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
    assert safe_name(name) == name  # the import reads back what the export wrote


def test_safe_names_keep_plain_names_and_tell_long_names_apart() -> None:
    assert safe_name("ioi", "gpt2") == "ioi_gpt2"
    assert (
        safe_name("4_answer_MCQA_Qwen2ForCausalLM_answer_pointer")
        == "4_answer_MCQA_Qwen2ForCausalLM_answer_pointer"
    )
    assert safe_name("ResidualStream(Layer:3,Token:last_token)") == "ResidualStream-Layer-3-Token-last_token"
    assert safe_name("x" * 500) != safe_name("x" * 499 + "y")
    for hostile in ("..", ".", "", "/", "../..", "\x00", "a/../../b"):
        assert "/" not in safe_name(hostile)
        assert safe_name(hostile) not in (".", "..")


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("", "is empty"),
        (".", "is . or .."),
        ("..", "is . or .."),
        ("a/b", "holds a path separator"),
        ("a\\b", "holds a path separator"),
        ("a\x00b", "holds a control character"),
        ("a\nb", "holds a control character"),
        ("é" * 200, "is 400 bytes long, over the 255 a file name may have"),
        ("\ud800", "is not valid Unicode text"),
    ],
)
def test_a_name_kept_as_it_is_must_be_one_plain_file_name(name: str, problem: str) -> None:
    assert name_problem(name) == problem


def test_reading_stays_inside_the_folder_given(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "sub").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret").write_text("x", encoding="utf-8")
    (root / "sub" / "file").write_text("x", encoding="utf-8")
    (root / "in").symlink_to(root / "sub" / "file")
    (root / "out").symlink_to(outside / "secret")
    (root / "out-folder").symlink_to(outside, target_is_directory=True)
    (root / "loop").symlink_to(root / "loop")
    folder = InputFolder(root)
    assert folder.check(root / "in") == root / "in"
    assert folder.listing(root / "sub") == [root / "sub" / "file"]
    for path in (root / "out", root / "out-folder" / "secret", root / "loop", root / ".." / "outside"):
        with pytest.raises(OutsideFolderError):
            folder.check(path)
    with pytest.raises(OutsideFolderError, match="out-folder leads out of root"):
        folder.listing(root / "out-folder")


def test_a_plan_refuses_two_inputs_under_one_name(tmp_path: Path) -> None:
    plan = OutputPlan(tmp_path / "out")
    plan.add("ioi_gpt2/report.json", b"1", source="first")
    with pytest.raises(
        NameClashError, match=r"first and second would both be written as IOI_gpt2/report\.json"
    ):
        plan.add("IOI_gpt2/report.json", b"2", source="second")
    plan.claim("mcqa_gpt2", "first")
    with pytest.raises(NameClashError):
        plan.add("mcqa_gpt2/circuit.json", b"2", source="second")  # a folder another input owns
    plan.add("mcqa_gpt2/circuit.json", b"2", source="first")
    with pytest.raises(NameClashError):
        plan.add("mcqa_gpt2/circuit.json", b"3", source="first")  # one file, planned twice
    with pytest.raises(NameClashError):
        plan.add("ioi_gpt2/report.json/x", b"3", source="first")  # below a file
    plan.add("ioi_gpt2/dataset.json", b"4", source="other")  # folders nobody claimed are shared
    with pytest.raises(UnsafeNameError):
        plan.add("../escaped", b"5", source="first")
    assert not (tmp_path / "out").exists()  # nothing is written before write()


def test_a_plan_writes_everything_or_nothing(tmp_path: Path) -> None:
    source = tmp_path / "input.json"
    source.write_text("{}", encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    (out / "linked").symlink_to(tmp_path, target_is_directory=True)
    staged = out / ".staged.tmp"
    staged.write_bytes(b"rows")
    plan = OutputPlan(out)
    plan.add("a/one.json", b"1", source="s", mtime=1_000_000)
    plan.add_staged("rows.jsonl", staged, source="s")
    plan.add("linked/escaped.json", b"2", source="s")
    with pytest.raises(OutputPathError, match="leads out of"):
        plan.write(Inputs([source]))
    assert sorted(p.name for p in out.iterdir()) == ["linked"]  # nothing written, the staged file gone
    assert not (tmp_path / "escaped.json").exists()

    plan = OutputPlan(tmp_path)
    plan.add("input.json", b"overwritten", source="s")
    with pytest.raises(OutputPathError, match="would overwrite the input"):
        plan.write(Inputs([source]))
    assert source.read_text(encoding="utf-8") == "{}"

    staged.write_bytes(b"rows")
    plan = OutputPlan(out)
    plan.add("a/one.json", b"1", source="s", mtime=1_000_000)
    plan.add_staged("rows.jsonl", staged, source="s")
    assert plan.write(Inputs([source])) == [out / "a" / "one.json", out / "rows.jsonl"]
    assert (out / "rows.jsonl").read_bytes() == b"rows"
    assert os.stat(out / "a" / "one.json").st_mtime == 1_000_000

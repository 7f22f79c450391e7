"""The file-hash cache of model files (used only when a run trusts it): a digest is reused
only for a file whose path, size, device, inode and times are unchanged; any change
(same-size rewrite, touch, replacement by rename, another volume) is hashed again; the cache
file is written atomically, bounded, and ignored when corrupt or foreign."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

import pytest

from mibspec.reference_impl.recompute import _hash_cache
from mibspec.reference_impl.recompute._hash_cache import (
    MAX_CACHE_BYTES,
    FileGrewError,
    FileHashCache,
    default_cache_dir,
)

CACHE_FILE = "file-hashes-v2.json"
#: Longer than a coarse file-system clock tick, so a change after it gets new timestamps.
TICK = 0.05


def _later() -> int:
    """A clock two seconds ahead: files written just now count as settled."""
    return time.time_ns() + 2_000_000_000


def _file(tmp_path: Path, data: bytes = b"weights " * 1000) -> Path:
    path = tmp_path / "model.safetensors"
    path.write_bytes(data)
    return path


def _read(cache: FileHashCache, path: Path) -> str:
    digest, size, data, _ = cache.read(path, path.stat().st_size, keep=True)
    assert size == len(data) == path.stat().st_size
    return digest


def test_an_unchanged_file_is_not_hashed_again_across_runs(tmp_path: Path) -> None:
    path = _file(tmp_path)
    first = FileHashCache(tmp_path / "cache", clock=_later)
    assert _read(first, path) == hashlib.sha256(path.read_bytes()).hexdigest()
    first.save()
    second = FileHashCache(tmp_path / "cache", clock=_later)
    assert _read(second, path) == hashlib.sha256(path.read_bytes()).hexdigest()
    assert (first.hashed, second.hashed, second.reused) == (1, 0, 1)
    # without the bytes: not even read
    digest, size, data, cached = second.read(path, path.stat().st_size, keep=False)
    assert (digest, size, data, cached) == (
        hashlib.sha256(path.read_bytes()).hexdigest(),
        path.stat().st_size,
        b"",
        True,
    )


def _rewrite_same_size(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[0] ^= 1
    with path.open("r+b") as handle:  # same inode, same size
        handle.write(bytes(data))


def _touch(path: Path) -> None:
    os.utime(path)


def _replace_by_rename(path: Path) -> None:
    other = path.with_name("new.tmp")
    other.write_bytes(path.read_bytes())  # same bytes, new inode
    os.replace(other, path)


@pytest.mark.parametrize("change", [_rewrite_same_size, _touch, _replace_by_rename])
def test_a_changed_file_is_hashed_again(tmp_path: Path, change: object) -> None:
    path = _file(tmp_path)
    cache = FileHashCache(tmp_path / "cache", clock=_later)
    _read(cache, path)
    cache.save()
    time.sleep(TICK)
    change(path)  # type: ignore[operator]
    again = FileHashCache(tmp_path / "cache", clock=_later)
    assert _read(again, path) == hashlib.sha256(path.read_bytes()).hexdigest()
    assert (again.hashed, again.reused) == (1, 0)


def test_a_file_changed_just_before_hashing_is_not_trusted_later(tmp_path: Path) -> None:
    # Within a timestamp tick of its last change a file could change again unseen: such a
    # digest is not stored.
    path = _file(tmp_path)
    cache = FileHashCache(tmp_path / "cache")  # the real clock, the default settling time
    _read(cache, path)
    assert cache.entries == {}


def test_a_file_that_grows_while_read_is_refused(tmp_path: Path) -> None:
    path = _file(tmp_path)
    cache = FileHashCache(None, clock=_later)
    with pytest.raises(FileGrewError):
        cache.read(path, path.stat().st_size - 1)


def test_the_cache_file_is_written_atomically_and_privately(tmp_path: Path) -> None:
    path = _file(tmp_path)
    cache = FileHashCache(tmp_path / "cache", clock=_later)
    _read(cache, path)
    cache.save()
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == [CACHE_FILE]  # no temporary left
    assert (tmp_path / "cache" / CACHE_FILE).stat().st_mode & 0o077 == 0
    entries = json.loads((tmp_path / "cache" / CACHE_FILE).read_text())["entries"]
    assert entries[0][0] == str(path.resolve())
    assert entries[0][6] == hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize(
    "content",
    [
        b"\x00not json",
        b"[]",
        b'{"version": 1, "entries": []}',
        b'{"version": 2, "entries": {}}',
        b'{"version": 2, "entries": [[1, 2, 3, 4, 5, 6, 7], ["p", -1, 0, 0, 0, 0, "' + b"a" * 64 + b'"]]}',
        b"[" * 100_000 + b"]" * 100_000,
    ],
)
def test_a_corrupt_cache_file_is_ignored(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / CACHE_FILE).write_bytes(content)
    cache = FileHashCache(tmp_path / "cache", clock=_later)
    assert cache.entries == {}
    path = _file(tmp_path)
    _read(cache, path)
    cache.save()  # replaced by a valid one
    assert len(json.loads((tmp_path / "cache" / CACHE_FILE).read_text())["entries"]) == 1


def _hostile_entry(path: Path) -> list[object]:
    """An entry that matches ``path``'s key but lies about its digest."""
    st = path.stat()
    return [str(path.resolve()), st.st_size, st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, "0" * 64]


def test_a_cache_file_writable_by_others_or_too_large_is_ignored(tmp_path: Path) -> None:
    path = _file(tmp_path)
    folder = tmp_path / "cache"
    folder.mkdir()
    target = folder / CACHE_FILE
    target.write_text(json.dumps({"version": 2, "entries": [_hostile_entry(path)]}))
    target.chmod(0o666)
    assert FileHashCache(folder).entries == {}
    target.chmod(0o600)
    assert len(FileHashCache(folder).entries) == 1  # the same file, private: read
    target.write_bytes(b" " * (MAX_CACHE_BYTES + 1))
    assert FileHashCache(folder).entries == {}


@pytest.mark.parametrize("field", [2, 3, 4, 5], ids=["device", "inode", "mtime", "ctime"])
def test_an_entry_is_never_used_for_a_file_it_does_not_describe(tmp_path: Path, field: int) -> None:
    # another device: another volume mounted at the same path, whose file has the same
    # inode, size and times by chance or by design
    path = _file(tmp_path)
    folder = tmp_path / "cache"
    folder.mkdir()
    entry = _hostile_entry(path)
    entry[field] = int(entry[field]) + 1  # another file, or another state of it
    (folder / CACHE_FILE).write_text(json.dumps({"version": 2, "entries": [entry]}))
    cache = FileHashCache(folder, clock=_later)
    assert _read(cache, path) == hashlib.sha256(path.read_bytes()).hexdigest()
    assert cache.hashed == 1


def test_the_cache_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_hash_cache, "MAX_ENTRIES", 3)
    cache = FileHashCache(tmp_path / "cache", clock=_later)
    for i in range(5):
        path = tmp_path / f"f{i}"
        path.write_bytes(b"x" * i)
        _read(cache, path)
    cache.save()
    names = [e[0] for e in json.loads((tmp_path / "cache" / CACHE_FILE).read_text())["entries"]]
    assert names == [str((tmp_path / f"f{i}").resolve()) for i in (2, 3, 4)]  # the most recent


def test_the_cache_folder_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MIBSPEC_CACHE_DIR", str(tmp_path / "explicit"))
    assert default_cache_dir() == tmp_path / "explicit"
    monkeypatch.delenv("MIBSPEC_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "mibspec"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "mibspec"


def test_chunk_reader_holds_the_file_once_and_sees_it_grow(tmp_path: Path) -> None:
    import io

    from mibspec.reference_impl.recompute._hash_cache import _CHUNK, ChunkReader

    data = bytes(range(256)) * (_CHUNK // 256 * 3 + 7)  # three chunks and a bit
    with io.BytesIO(data) as handle:
        reader = ChunkReader(handle, len(data), keep=True, expected=len(data))
        chunks = [bytes(c) for c in reader]
    assert b"".join(chunks) == data
    assert (reader.total, bytes(reader.data())) == (len(data), data)
    # the file grew past what was expected but within the limit: read whole
    with io.BytesIO(data) as handle:
        reader = ChunkReader(handle, len(data), keep=True, expected=len(data) - 10)
        assert b"".join(bytes(c) for c in reader) == data
    assert bytes(reader.data()) == data
    # past the limit: the reader stops one chunk later and says how much it read
    with io.BytesIO(data) as handle:
        reader = ChunkReader(handle, len(data) - 1, keep=False, expected=len(data) - 1)
        list(reader)
    assert reader.total > len(data) - 1
    assert reader.data() == bytearray()

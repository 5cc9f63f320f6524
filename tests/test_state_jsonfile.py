"""JsonFile: private from the first byte, atomic, locked, and careful with a file it can't read."""

from __future__ import annotations

import json
import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from state.errors import BadInput
from state.jsonfile import FORMAT, JsonFile


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def open_umask() -> Iterator[None]:
    """Umask 0, so a mode we get right can't be the umask's doing."""
    old = os.umask(0)
    yield
    os.umask(old)


def test_missing_file_reads_empty_and_creates_nothing(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "state.json"
    assert JsonFile(target).read() == {}
    assert not (tmp_path / "sub").exists()


def test_created_private_from_the_first_byte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, open_umask: None
) -> None:
    target = tmp_path / "a" / "b" / "state.json"
    real_replace = os.replace
    seen: list[tuple[int, int]] = []

    def replace(src: str, dst: str) -> None:
        temp_mode = mode(Path(src))  # the temp file, full of data, just before it becomes dst
        real_replace(src, dst)
        seen.append((temp_mode, mode(Path(dst))))

    monkeypatch.setattr(os, "replace", replace)
    with JsonFile(target).edit() as doc:
        doc["token"] = "yui_ct_secret"
    with JsonFile(target).edit() as doc:
        doc["more"] = 1

    assert seen == [(0o600, 0o600), (0o600, 0o600)]
    assert mode(target.parent) == 0o700
    assert mode(target.with_name("state.json.lock")) == 0o600
    assert sorted(p.name for p in target.parent.iterdir()) == ["state.json", "state.json.lock"]


def test_existing_loose_file_becomes_private_on_write(tmp_path: Path, open_umask: None) -> None:
    target = tmp_path / "state.json"
    target.write_text('{"a": 1}')
    target.chmod(0o644)
    with JsonFile(target).edit() as doc:
        doc["a"] = 2
    assert mode(target) == 0o600


def test_layout_on_disk(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    with JsonFile(target).edit() as doc:
        doc["name"] = "Yüi"
        doc["list"] = [1]
    text = target.read_text(encoding="utf-8")
    assert text == '{\n "format": 1,\n "name": "Yüi",\n "list": [1]\n}\n'
    assert JsonFile(target).read() == {"name": "Yüi", "list": [1]}


def test_unchanged_edit_does_not_write(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    with JsonFile(target).edit() as doc:
        doc["a"] = 1
    inode = target.stat().st_ino
    with JsonFile(target).edit() as doc:
        doc["a"] = 1
    assert target.stat().st_ino == inode


def test_exception_in_block_writes_nothing(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    with JsonFile(target).edit() as doc:
        doc["a"] = 1
    with pytest.raises(KeyError), JsonFile(target).edit() as doc:
        doc["a"] = 2
        raise KeyError("boom")
    assert JsonFile(target).read() == {"a": 1}


@pytest.mark.parametrize("failing", ["replace", "fsync"])
def test_crash_mid_write_keeps_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    target = tmp_path / "state.json"
    with JsonFile(target).edit() as doc:
        doc["token"] = "old"
    before = target.read_bytes()

    def crash(*args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, failing, crash)
    with pytest.raises(OSError), JsonFile(target).edit() as doc:
        doc["token"] = "new"
    monkeypatch.undo()

    assert target.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json", "state.json.lock"]
    with JsonFile(target).edit() as doc:  # and the lock was released
        doc["token"] = "newer"
    assert JsonFile(target).read() == {"token": "newer"}


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b'{"token": "yui_ct_x", ', "not valid JSON"),
        (b"\xff\xfe\x00garbage", "not valid JSON"),
        (b"[1, 2]", "JSON object"),
        (b'{"format": "one"}', "bad 'format'"),
        (b'{"format": 0}', "bad 'format'"),
    ],
)
def test_unreadable_file_is_refused_not_wiped(tmp_path: Path, content: bytes, words: str) -> None:
    target = tmp_path / "state.json"
    target.write_bytes(content)
    for attempt in (JsonFile(target).read, lambda: JsonFile(target).edit().__enter__()):
        with pytest.raises(BadInput) as caught:
            attempt()
        assert str(target) in caught.value.message
        assert words in caught.value.message
        assert "yui_ct_x" not in caught.value.message
        assert caught.value.__cause__ is None  # a JSONDecodeError would carry the whole text
    assert target.read_bytes() == content


def test_newer_format_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    content = json.dumps({"format": FORMAT + 1, "token": "t"}).encode()
    target.write_bytes(content)
    with pytest.raises(BadInput, match="newer yui"):
        JsonFile(target).read()
    with pytest.raises(BadInput, match="newer yui"), JsonFile(target).edit() as doc:
        doc["token"] = "overwritten"
    assert target.read_bytes() == content


def test_unstamped_and_empty_files_are_read(tmp_path: Path) -> None:
    legacy = tmp_path / "webhook.json"
    legacy.write_text('{"token": "t", "floors": {}}')
    assert JsonFile(legacy).read() == {"token": "t", "floors": {}}
    empty = tmp_path / "empty.json"
    empty.touch()
    assert JsonFile(empty).read() == {}


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_file_we_may_not_read_names_the_path(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    target.write_text("{}")
    target.chmod(0)
    with pytest.raises(BadInput, match="cannot read"):
        JsonFile(target).read()


def test_nested_edit_raises_instead_of_deadlocking(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    with JsonFile(target).edit(), pytest.raises(RuntimeError, match="nested"):
        JsonFile(target).edit().__enter__()
    with JsonFile(target).edit() as doc:  # the failed attempt left nothing held
        doc["ok"] = True


def test_symlink_is_followed_and_kept(tmp_path: Path) -> None:
    real = tmp_path / "real.json"
    link = tmp_path / "link.json"
    link.symlink_to(real)
    with JsonFile(link).edit() as doc:
        doc["a"] = 1
    assert link.is_symlink()
    assert JsonFile(real).read() == {"a": 1}
    assert JsonFile(link).lock_path == JsonFile(real).lock_path


def test_threads_share_the_lock(tmp_path: Path) -> None:
    target = tmp_path / "state.json"

    def bump() -> None:
        for _ in range(20):
            with JsonFile(target).edit() as doc:
                doc["n"] = doc.get("n", 0) + 1

    threads = [threading.Thread(target=bump) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert JsonFile(target).read() == {"n": 80}

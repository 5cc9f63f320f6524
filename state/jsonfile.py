"""A JSON document on disk that any number of processes can change without losing an update.

The state file and the person's `app.json` both hold tokens and are shared between a long-running
bridge and short commands from cron, so every file here is private from its first byte (it only
ever appears by renaming a temp file created 0600), every change runs under an exclusive lock on a
sidecar `<file>.lock`, and every write lands by atomic rename: a crash leaves the old file or the
new one, never half of one.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from state.errors import BadInput
from state.paths import ensure_private_dir, real_path

FORMAT_KEY = "format"
FORMAT = 1  # bump when a change would mislead an older toolkit reading the file

_editing = threading.local()  # the paths this thread holds the lock of, to catch a nested edit


class JsonFile:
    """One JSON object in one file, read as a snapshot or changed under a lock."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = real_path(path)
        self.lock_path = self.path.with_name(self.path.name + ".lock")

    def __repr__(self) -> str:
        return f"JsonFile({str(self.path)!r})"

    def read(self) -> dict[str, Any]:
        """The document as it is now; `{}` if the file doesn't exist yet.

        No lock is needed: writes land by rename, so a reader sees one whole version or the next.
        """
        return _parse(self.path, self._raw())

    @contextlib.contextmanager
    def edit(self) -> Iterator[dict[str, Any]]:
        """Yield the document under the lock; write it back on a clean exit if it changed.

        An exception inside the block leaves the file as it was. Don't nest edits of one file in
        one thread: the inner one would wait for the outer forever, so it raises instead.
        """
        held: set[Path] = _editing.__dict__.setdefault("paths", set())
        if self.path in held:
            raise RuntimeError(f"nested edit of {self.path} would deadlock")
        lock = self._open_lock()
        held.add(self.path)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            raw = self._raw()
            doc = _parse(self.path, raw)
            yield doc
            after = _dump(doc)
            # What we write is exactly what we read back, so the bytes tell a change; a file
            # that doesn't exist and stays empty is not created.
            if after != raw and (raw.strip() or doc):
                self._replace(after)
        finally:
            held.discard(self.path)
            os.close(lock)  # closing the descriptor releases the flock

    def _open_lock(self) -> int:
        """The lock file's descriptor; the folder is made (private) only when it is missing."""
        flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC
        try:
            try:
                return os.open(self.lock_path, flags, 0o600)
            except FileNotFoundError:
                ensure_private_dir(self.path.parent)
                return os.open(self.lock_path, flags, 0o600)
        except OSError as exc:
            raise BadInput(f"cannot lock {self.path}: {exc.strerror}") from None

    def _raw(self) -> bytes:
        try:
            return self.path.read_bytes()
        except FileNotFoundError:
            return b""
        except OSError as exc:
            raise BadInput(f"cannot read {self.path}: {exc.strerror}") from None

    def _replace(self, data: bytes) -> None:
        """Write `data` to a private temp file beside the target, then rename it over the target."""
        # mkstemp creates the file 0600 (O_EXCL), whatever the umask: private before any byte.
        fd, tmp = tempfile.mkstemp(
            prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent
        )
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        _fsync_dir(self.path.parent)


def _parse(path: Path, data: bytes) -> dict[str, Any]:
    """Decode a document, refusing anything we would otherwise overwrite and lose."""
    if not data.strip():
        return {}  # an empty file (from `touch` or `mktemp`) holds nothing to lose
    try:
        doc = json.loads(data)
    except ValueError as exc:
        # `from None`: a JSONDecodeError carries the whole text, token included.
        where = ""
        if isinstance(exc, json.JSONDecodeError):
            where = f" (line {exc.lineno}, column {exc.colno})"
        raise BadInput(
            f"{path} is not valid JSON{where}",
            hint="fix it by hand, or move it aside to start over",
        ) from None
    if not isinstance(doc, dict):
        raise BadInput(f"{path} should hold a JSON object")
    fmt = doc.pop(FORMAT_KEY, FORMAT)  # no stamp: written by hand or by the reference bridge
    if type(fmt) is not int or fmt < 1:
        raise BadInput(f"{path} has a bad {FORMAT_KEY!r}: {fmt!r}")
    if fmt > FORMAT:
        raise BadInput(
            f"{path} was written by a newer yui (format {fmt}; this one knows {FORMAT})",
            hint="upgrade yui-bridges",
        )
    return doc


def _dump(doc: dict[str, Any]) -> bytes:
    """The bytes on disk: stamped with the format, one top-level entry a line, one trailing
    newline. Not `indent`: with it `json` encodes in Python, ~3× slower than its C encoder,
    and a bridge writes the file twice a turn (a 100-agent host's is ~20 kB)."""
    body = {FORMAT_KEY: FORMAT, **{k: v for k, v in doc.items() if k != FORMAT_KEY}}
    lines = ",\n".join(
        f" {json.dumps(key, ensure_ascii=False)}: {json.dumps(value, ensure_ascii=False)}"
        for key, value in body.items()
    )
    return f"{{\n{lines}\n}}\n".encode()


def _fsync_dir(path: Path) -> None:
    """Make a rename in `path` durable: without this a power cut can undo it."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

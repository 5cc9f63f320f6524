"""Storage's bytes on the relay's disk: one file per object, named by the object's id.

Files are named by id, never by the object's path, so no path a client sends can reach outside
the folder. An upload streams into a temporary file first; only once the database has accepted
its row is it moved into place, so a refused or broken upload leaves nothing behind.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

STALE_UPLOAD = 3600.0  # seconds after which a temporary file is a crashed upload's leftover


class TooLarge(Exception):
    """The body went past the bucket's size limit."""


class Missing(Exception):
    """An object's row is there but its file isn't (a sweep or a crash got there first)."""


@dataclass(frozen=True)
class Upload:
    """A finished temporary file and what was learned while writing it."""

    temp: Path
    size: int
    sha256: str


class MediaFolder:
    """`<relay folder>/media`: objects at `<id>`, uploads in progress under `.tmp/`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.temp_dir = root / ".tmp"

    def prepare(self) -> None:
        """Create the folders (0700) and drop temporary files a crash left behind.

        Only old ones: another gateway on the same folder may be writing a fresh one.
        """
        for folder in (self.root, self.temp_dir):
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            folder.chmod(0o700)
        cutoff = time.time() - STALE_UPLOAD
        for leftover in self.temp_dir.iterdir():
            if leftover.stat().st_mtime < cutoff:
                leftover.unlink(missing_ok=True)

    def path(self, object_id: str) -> Path:
        return self.root / str(uuid.UUID(object_id))

    async def receive(self, chunks: AsyncIterator[bytes], limit: int) -> Upload:
        """Write the body to a temporary file (0600), hashing as it goes; TooLarge past `limit`.

        The body is never held in memory whole: each chunk is written as it arrives, and the
        first chunk past the limit stops it.
        """
        temp = self.temp_dir / f"{uuid.uuid4()}.part"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        digest, size = hashlib.sha256(), 0
        try:
            with os.fdopen(fd, "wb") as out:
                async for chunk in chunks:
                    size += len(chunk)
                    if size > limit:
                        raise TooLarge
                    digest.update(chunk)
                    out.write(chunk)
                out.flush()
                await asyncio.to_thread(os.fsync, out.fileno())
        except BaseException:
            temp.unlink(missing_ok=True)
            raise
        return Upload(temp, size, digest.hexdigest())

    def place(self, upload: Upload, object_id: str) -> Path:
        """Move an accepted upload to its object's name; returns where it now is."""
        final = self.path(object_id)
        os.replace(upload.temp, final)
        return final

    def link(self, source_id: str, object_id: str) -> Path:
        """A copy's bytes: a second name for the source's file, which never changes (an object
        is never overwritten), so nothing is copied; returns the new name."""
        final = self.path(object_id)
        try:
            os.link(self.path(source_id), final)
        except FileNotFoundError:
            raise Missing from None
        return final

    def remove(self, object_ids: list[str]) -> None:
        for object_id in object_ids:
            self.path(object_id).unlink(missing_ok=True)

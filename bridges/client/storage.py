"""A Storage bucket as one caller sees it: a host with its session, a person with their token,
an operator with the service key. The bucket decides who may read or write what (its rules
live in the relay's database); this only speaks Storage's contract and reads its answers.

A path is never reused, so an upload answered 409 is an earlier try that landed; a signed link
or a download answered 404 (or 400) is an object that isn't there, or not to this caller.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from urllib.parse import quote

from bridges.client.http import Response
from bridges.client.relay import Auth, Outcome, RelayClient, outcome, raise_for_status
from state.errors import MediaRefused

MEDIA_BUCKET = "yui-media"
UPLOAD_TIMEOUT = 120.0  # seconds per socket operation of an upload
DELETE_BATCH = 1000  # names per delete, as Storage allows

Progress = Callable[[int], None]  # bytes sent so far


class _Upload(io.BytesIO):
    """The bytes being sent, telling `progress` how far the upload has got."""

    def __init__(self, data: bytes, progress: Progress | None) -> None:
        super().__init__(data)
        self._progress = progress

    def read(self, size: int | None = -1) -> bytes:
        chunk = super().read(size)
        if self._progress is not None:
            self._progress(self.tell())
        return chunk


class Bucket:
    """One bucket, read and written with one caller's `auth`."""

    def __init__(self, client: RelayClient, auth: Auth, name: str = MEDIA_BUCKET) -> None:
        self.client = client
        self.auth = auth
        self.name = name

    def __repr__(self) -> str:
        return f"Bucket({self.client.url!r}, {self.name!r})"

    def upload(
        self,
        path: str,
        data: bytes,
        content_type: str,
        progress: Progress | None = None,
        *,
        name: str | None = None,
    ) -> bool:
        """Store `data` at `path` (`name` says where it came from, for messages); False when
        it was already there (an earlier try)."""
        response = self.client.storage(
            "POST",
            f"/{self.name}/{quote(path)}",
            auth=self.auth,
            data=_Upload(data, progress),
            headers={"content-type": content_type},
            timeout=UPLOAD_TIMEOUT,
        )
        if outcome(response.status_code) is Outcome.LANDED:
            return False
        _check(response, f"uploading {name or path}")
        return True

    def sign(self, path: str, seconds: int) -> str | None:
        """A link to the object for `seconds`, or None when there is no such object."""
        response = self.client.storage(
            "POST", f"/sign/{self.name}/{quote(path)}", auth=self.auth, body={"expiresIn": seconds}
        )
        if response.status_code == 404:
            return None
        _check(response, f"signing {path}")
        return self.client.storage_link(response.json()["signedURL"])

    def download(self, path: str) -> bytes | None:
        """The object's bytes, or None when it is gone (or not visible to this caller)."""
        response = self.client.storage(
            "GET",
            f"/authenticated/{self.name}/{quote(path)}",
            auth=self.auth,
            timeout=UPLOAD_TIMEOUT,
        )
        if response.status_code in (400, 404):
            return None
        _check(response, f"downloading {path}")
        return response.content

    def remove(self, names: list[str]) -> int:
        """Delete objects by name, a batch at a time; how many went."""
        removed = 0
        for start in range(0, len(names), DELETE_BATCH):
            response = self.client.storage(
                "DELETE",
                f"/{self.name}",
                auth=self.auth,
                body={"prefixes": names[start : start + DELETE_BATCH]},
            )
            raise_for_status(response, f"deleting from {self.name}")
            removed += len(response.json())
        return removed


def _check(response: Response, what: str) -> None:
    """A Storage answer: fine, try again later (`Unreachable`), this token refused, or the
    object refused for good (`MediaRefused`, with the status)."""
    status = response.status_code
    if status == 401 or outcome(status) in (Outcome.DONE, Outcome.LATER):
        raise_for_status(response, what)
        return
    try:
        reason = response.json().get("message") or response.reason
    except (ValueError, AttributeError):
        reason = response.reason
    raise MediaRefused(f"{what}: the relay refused it: {status} {reason}", status=status)

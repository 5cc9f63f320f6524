"""An upload sent as `multipart/form-data`, read as it arrives.

supabase-py always uploads this way, and so does supabase-js for a Blob or File: small fields
first (`cacheControl`, `metadata`), then the file part, whose own content-type is the object's.
As Storage does, the file is the first part with a filename, whatever its field name (the JS
client names it ""). Its bytes are handed on as they are parsed, never held whole; everything
else the body carries is counted and capped at FORM_EXTRA, so a form costs no more memory or
disk than a plain upload of the same file.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import AsyncIterator

from python_multipart.exceptions import FormParserError
from python_multipart.multipart import MultipartParser, parse_options_header

from relay.gateway.storage_errors import StorageError, invalid

# A malformed body is the client's error, answered with a 400; the parser would also log a
# warning for each, a line in the gateway's log per bad request any client can send.
logging.getLogger("python_multipart").setLevel(logging.ERROR)

FORM_EXTRA = 64 * 1024  # the body's bytes besides the file's: fields, part headers, boundaries
MAX_FIELDS = 16
MAX_FIELD = 8 * 1024


def is_form(content_type: str | None) -> bool:
    return (content_type or "").split(";")[0].strip().lower() == "multipart/form-data"


class FormReader:
    """One form body: `file()` reads up to the file part's headers, `data()` streams the file's
    bytes and then reads the rest of the body to its closing boundary."""

    def __init__(self, chunks: AsyncIterator[bytes], content_type: str) -> None:
        boundary = parse_options_header(content_type)[1].get(b"boundary")
        if not boundary:
            raise invalid("The multipart body names no boundary")
        try:
            self._parser = MultipartParser(
                boundary,
                {
                    "on_part_begin": self._part_begin,
                    "on_header_field": self._header_field,
                    "on_header_value": self._header_value,
                    "on_header_end": self._header_end,
                    "on_headers_finished": self._headers_finished,
                    "on_part_data": self._part_data,
                    "on_part_end": self._part_end,
                    "on_end": self._end,
                },
            )
        except FormParserError:  # a boundary longer than multipart allows
            raise invalid("The multipart boundary is not valid") from None
        self._chunks = aiter(chunks)
        self.fields: dict[str, str] = {}
        self.mime = "application/octet-stream"
        self._pending: deque[bytes] = deque()
        self._part: str | None = None  # "file", "field" or "skip": what the current part is
        self._name = ""
        self._value = bytearray()
        self._header = [bytearray(), bytearray()]
        self._headers: dict[bytes, bytes] = {}
        self._found = self._done = self._ended = self._eof = False
        self._extra = 0  # bytes read that aren't the file's

    # The parser's callbacks: synchronous, called from inside `write`.

    def _part_begin(self) -> None:
        self._headers = {}

    def _header_field(self, data: bytes, start: int, end: int) -> None:
        self._header[0] += data[start:end]

    def _header_value(self, data: bytes, start: int, end: int) -> None:
        self._header[1] += data[start:end]

    def _header_end(self) -> None:
        name, value = self._header
        self._headers[bytes(name).strip().lower()] = bytes(value).strip()
        self._header = [bytearray(), bytearray()]

    def _headers_finished(self) -> None:
        _, options = parse_options_header(self._headers.get(b"content-disposition", b""))
        if b"filename" in options and not self._found:
            self._part, self._found = "file", True
            mime = self._headers.get(b"content-type", b"").decode("latin-1")
            self.mime = mime or self.mime
        elif b"filename" in options:
            self._part = "skip"  # a second file: Storage takes the first
        else:
            if len(self.fields) >= MAX_FIELDS:
                raise invalid(f"A form may carry at most {MAX_FIELDS} fields")
            self._part, self._value = "field", bytearray()
            self._name = options.get(b"name", b"").decode("utf-8", "replace")

    def _part_data(self, data: bytes, start: int, end: int) -> None:
        if self._part == "file":
            self._pending.append(bytes(data[start:end]))
            self._extra -= end - start
        elif self._part == "field":
            self._value += data[start:end]
            if len(self._value) > MAX_FIELD:
                raise invalid(f"A form field may hold at most {MAX_FIELD} bytes")

    def _part_end(self) -> None:
        if self._part == "file":
            self._done = True
        elif self._part == "field":
            self.fields.setdefault(self._name, self._value.decode("utf-8", "replace"))
        self._part = None

    def _end(self) -> None:
        self._ended = True

    async def _feed(self) -> None:
        """Parse the next chunk of the body; past its end, only note that it ended."""
        try:
            chunk = await anext(self._chunks)
        except StopAsyncIteration:
            self._eof = True
            return
        self._extra += len(chunk)
        try:
            self._parser.write(chunk)
        except FormParserError:
            raise invalid("The multipart body doesn't parse") from None
        if self._extra > FORM_EXTRA:
            raise StorageError(
                413,
                "Payload too large",
                f"A form may carry at most {FORM_EXTRA} bytes besides its file",
                "EntityTooLarge",
            )

    async def file(self) -> None:
        """Read until the file part's headers are known (the fields before it are then too)."""
        while not self._found:
            if self._eof:
                raise invalid("The form holds no file")
            await self._feed()

    async def data(self) -> AsyncIterator[bytes]:
        """The file's bytes as they are parsed; then the rest of the body, which must end."""
        while True:
            while self._pending:
                yield self._pending.popleft()
            if self._done:
                break
            if self._eof:
                raise invalid("The multipart body ends inside its file")
            await self._feed()
        while not self._eof:
            await self._feed()
        if not self._ended:
            raise invalid("The multipart body has no closing boundary")

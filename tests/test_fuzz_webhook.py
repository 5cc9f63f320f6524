"""Fuzzing what a webhook answers: whatever bytes come back, `WebhookAgent.answer` returns clean
reply texts or raises `RetryTurn` with a reason, never anything else.

A raw loopback server answers each example with hypothesis-built bytes: any status, content type
and charset, JSON of any shape (wrong types, deep nesting, huge strings, lone surrogates), text,
random bytes, NUL bytes, BOMs, UTF-16, gzip (valid or not), chunked or lying framing. The
regression tests at the end pin what the fuzz found, now fixed.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from bridges.client.rows import MAX_BODY, AgentInfo
from bridges.engine.turns import RetryTurn, Turn
from bridges.webhook.plugin import MAX_RESPONSE, WebhookAgent
from tests.helpers.fuzzing import RawServer, fuzz_settings, json_values, tricky_text

EXAMPLES = 150

# Inputs behind findings the fuzz made (each fixed, each pinned by a regression test below).
NON_TEXT_CHARSETS = ["rot13", "base64", "hex", "zlib", "bz2", "uu", "quopri"]  # finding W2
BARE_UNICODE_ERROR_CHARSETS = ["idna", "punycode", "undefined"]  # finding W5
ODD_DIGIT_LENGTHS = [b"\xb2", b"\xb9\xb2"]  # finding W1: "²", "¹²" once read as Latin-1
BLANK_THEN_TEXT = ["prefixed"]  # finding W4: blanks past the relay's limit, then text


@dataclass(frozen=True)
class RawAnswer:
    """One HTTP answer, as the bytes that go on the wire."""

    status: int
    reason: bytes
    headers: list[tuple[bytes, bytes]]
    body: bytes
    framing: str  # "length" | "chunked" | "close" | "longer" | "shorter" | "odd-length" | ...
    chunks: tuple[int, ...] = ()
    odd_length: bytes = b""

    def wire(self) -> bytes:
        head = [b"HTTP/1.1 %d %s" % (self.status, self.reason), *self._lines()]
        body = self.body
        if self.framing == "chunked":
            body = _chunked(self.body, self.chunks)
        elif self.framing == "bad-chunks":
            body = b"zz\r\n" + self.body + b"\r\n0\r\n\r\n"
        return b"\r\n".join(head) + b"\r\n\r\n" + body

    def _lines(self) -> Iterator[bytes]:
        for name, value in self.headers:
            yield name + b": " + value
        size = len(self.body)
        framing = {
            "length": b"content-length: %d" % size,
            "chunked": b"transfer-encoding: chunked",
            "bad-chunks": b"transfer-encoding: chunked",
            "longer": b"content-length: %d" % (size + 7),
            "shorter": b"content-length: %d" % max(size - 3, 0),
            "odd-length": b"content-length: " + self.odd_length,
            "huge-length": b"content-length: %d" % (MAX_RESPONSE + 1),
        }.get(self.framing)
        if framing is not None:
            yield framing
        yield b"connection: close"


def _chunked(body: bytes, sizes: tuple[int, ...]) -> bytes:
    out, pos = b"", 0
    for size in (*sizes, len(body)):
        piece = body[pos : pos + max(size, 1)]
        if not piece:
            break
        out += b"%x\r\n%s\r\n" % (len(piece), piece)
        pos += len(piece)
    return out + b"0\r\n\r\n"


# --- strategies -------------------------------------------------------------------------------

CHARSETS = ["utf-8", "UTF-8", "utf8", "latin-1", "iso-8859-1", "ascii", "utf-16", "utf-16-le"]
CHARSETS += ["utf-32", "cp1252", "shift_jis", "utf-7", "mbcs", "nope", '"utf-8"']
CHARSETS += NON_TEXT_CHARSETS + BARE_UNICODE_ERROR_CHARSETS
MEDIA_TYPES = ["application/json", "APPLICATION/JSON", "application/problem+json", "text/json"]
MEDIA_TYPES += ["text/plain", "text/html", "application/octet-stream", "", "json", "*/*"]


SHAPES = [
    lambda v: {"reply": v},
    lambda v: {"replies": v},
    lambda v: {"replies": [v, v]},
    lambda v: v,
    lambda v: [v],
    lambda v: {"reply": "ok", "replies": v},
    lambda v: {"other": v},
    lambda v: [[v]],
]


@st.composite
def json_bodies(draw: st.DrawFn) -> bytes:
    """JSON in the shapes a webhook may answer, right or wrong."""
    value: Any
    if draw(st.booleans()):  # a reply text, the usual case, with tricky characters
        value = {"reply": draw(tricky_text)}
    elif draw(st.booleans()):
        value = {"replies": draw(st.lists(tricky_text, max_size=5))}
    else:
        value = draw(st.sampled_from(SHAPES))(draw(json_values()))
    ascii_only = draw(st.booleans())
    # Without ensure_ascii a lone surrogate becomes invalid UTF-8 on the wire: a good case too.
    return json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")


@st.composite
def huge_bodies(draw: st.DrawFn) -> bytes:
    """Megabytes of one character, as a reply, several replies or plain text."""
    unit = draw(st.sampled_from(["a", " ", "é", "🙂", '"', "\x00", "\n", "a\x00"]))
    size = draw(st.sampled_from([MAX_BODY - 1, MAX_BODY, MAX_BODY + 1, 200_000, 3_000_000]))
    text = unit * (size // len(unit))
    shape = draw(st.sampled_from(["reply", "replies", "text", *BLANK_THEN_TEXT]))
    if shape == "reply":
        return json.dumps({"reply": text}).encode()
    if shape == "replies":
        return json.dumps({"replies": [text, "x", text]}).encode()
    if shape == "prefixed":
        return (" " * size + "tail").encode()
    return text.encode()


def _nested(depth: int, kind: str) -> bytes:
    opener, closer = {"array": ("[", "]"), "object": ('{"a":', "}")}[kind]
    return (opener * depth + "1" + closer * depth).encode()


odd_bodies = st.one_of(
    st.binary(max_size=300),
    st.text(max_size=200).map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.sampled_from(
        [
            b"",
            b" \r\n\t ",
            b"\x00",
            b"\x00\x00hello\x00",
            b"\xef\xbb\xbf",
            b'\xef\xbb\xbf{"reply": "with a BOM"}',
            b'{"reply": "a\\u0000b"}',
            b'{"reply": "\\u0000"}',
            b'{"replies": 5}',
            b'{"reply": {"a": 1}}',
            b'{"replies": [[["deep"]], {"a": 1}, 5, null, true, "ok"]}',
            b'{"replies": "abc"}',
            b"not json at all",
            b"{",
            b'{"reply": "unterminated',
            b"\xff\xfe\xfd",
            b"NaN",
            b"Infinity",
            b"-Infinity",
            b'{"reply": 1e999}',
            b'{"reply": "a", "reply": "b"}',
            b"1" * 5000,
            b'"' + b"9" * 5000 + b'"',
            _nested(50, "array"),
            _nested(5000, "array"),
            _nested(100_000, "object"),
        ]
    ),
)


@st.composite
def mangled(draw: st.DrawFn, body: bytes) -> bytes:
    """The body with a BOM, a NUL, a bad byte, a cut, or re-encoded as UTF-16."""
    how = draw(st.sampled_from(["as-is"] * 4 + ["bom", "nul", "bad-byte", "cut", "utf-16"]))
    if how == "bom":
        return b"\xef\xbb\xbf" + body
    if how == "nul" and body:
        at = draw(st.integers(0, len(body)))
        return body[:at] + b"\x00" + body[at:]
    if how == "bad-byte" and body:
        at = draw(st.integers(0, len(body) - 1))
        return body[:at] + b"\xff" + body[at + 1 :]
    if how == "cut" and body:
        return body[: draw(st.integers(0, len(body) - 1))]
    if how == "utf-16":
        return body.decode("utf-8", "replace").encode("utf-16")
    return body


header_text = st.text(
    st.characters(min_codepoint=0x20, max_codepoint=0xFF, exclude_characters="\x7f"), max_size=40
).map(lambda t: t.encode("latin-1"))


@st.composite
def content_types(draw: st.DrawFn) -> bytes | None:
    kind = draw(st.sampled_from(["none", "media", "charset", "random"]))
    if kind == "none":
        return None
    if kind == "random":
        return draw(header_text)
    media = draw(st.sampled_from(MEDIA_TYPES))
    if kind == "media":
        return media.encode()
    charset = draw(st.sampled_from(CHARSETS) | st.text("abcdefxyz-_019", max_size=12))
    return f"{media}; charset={charset}".encode()


@st.composite
def answers(draw: st.DrawFn) -> RawAnswer:
    usual = [200] * 8 + [201, 202, 203, 204, 206, 299, 304, 400, 429, 500, 503]
    status = draw(st.sampled_from(usual) if draw(st.integers(0, 7)) else st.integers(100, 999))
    body = draw(st.one_of(json_bodies(), odd_bodies, huge_bodies()))
    if len(body) < 100_000:
        body = draw(mangled(body))
    headers: list[tuple[bytes, bytes]] = []
    content_type = draw(content_types())
    if content_type is not None:
        headers.append((b"content-type", content_type))
    encoding = draw(st.sampled_from([None, None, "gzip", "deflate", "broken-gzip", "br"]))
    if encoding == "gzip":
        body = gzip.compress(body)
    elif encoding == "deflate":
        body = zlib.compress(body)
    if encoding is not None:
        headers.append(
            (b"content-encoding", b"gzip" if encoding == "broken-gzip" else encoding.encode())
        )
    if draw(st.booleans()):
        headers.append((b"retry-after", draw(header_text | st.sampled_from([b"5", b"0"]))))
    for _ in range(draw(st.integers(0, 2))):
        name = draw(st.sampled_from([b"x-odd", b"set-cookie", b"location", b"content-language"]))
        value = draw(header_text)
        headers.append((name, value))
    framing = draw(
        st.sampled_from(
            ["length"] * 4
            + ["chunked"] * 2
            + ["close", "longer", "shorter", "bad-chunks"]
            + ["odd-length", "huge-length"]
        )
    )
    chunks = tuple(draw(st.lists(st.integers(1, 5000), max_size=5)))
    odd = [b"abc", b"-1", b"1e3", b" 12 ", b"5, 5", b"", b"0x10", b"\xd9\xa3"]
    odd_length = draw(st.sampled_from(odd + ODD_DIGIT_LENGTHS))
    reason = draw(st.sampled_from([b"OK", b"", b"Weird \xe9 reason"]))
    return RawAnswer(status, reason, headers, body, framing, chunks, odd_length)


# --- the property -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[RawServer]:
    raw = RawServer()
    try:
        yield raw
    finally:
        raw.close()


def make_turn() -> Turn:
    agent = AgentInfo(id="a-1", name="Fuzz", handle="fuzz", ref=None)
    row = {"id": "r1", "kind": "text", "body": "hi", "meta": None, "created_at": None}
    return Turn(agent=agent, rows=[row])


def check_answer(url: str) -> list[str] | RetryTurn:
    """Ask once; assert the contract on whatever comes back, and return it."""
    agent = WebhookAgent(url, timeout=10)
    try:
        replies = agent.answer(make_turn())
    except RetryTurn as retry:
        assert isinstance(retry.reason, str) and retry.reason.strip(), repr(retry.reason)
        return retry
    finally:
        agent.pool.clear()
    assert isinstance(replies, list)
    for reply in replies:
        assert type(reply) is str
        assert reply.strip(), "a blank reply"
        assert len(reply) <= MAX_BODY
        assert "\x00" not in reply
        reply.encode("utf-8")  # the outbox and the relay store UTF-8: no lone surrogates
    return replies


@fuzz_settings(EXAMPLES)
@given(answer=answers())
def test_any_webhook_answer_is_replies_or_a_retry(server: RawServer, answer: RawAnswer) -> None:
    """Replies are clean non-blank strings within the relay's limit, else a RetryTurn."""
    server.answer = answer.wire()
    outcome = check_answer(server.url)
    event(f"{answer.framing}: " + ("retry" if isinstance(outcome, RetryTurn) else "replies"))
    if isinstance(outcome, list) and outcome:
        assert 200 <= answer.status < 300, "replies taken from a non-2xx answer"


# --- regression tests for the findings --------------------------------------------------------


def _answer(server: RawServer, head: bytes, body: bytes) -> list[str] | RetryTurn:
    server.answer = b"HTTP/1.1 200 OK\r\n" + head + b"connection: close\r\n\r\n" + body
    return check_answer(server.url)


def test_w1_a_non_ascii_digit_content_length_is_a_retry_or_ignored(server: RawServer) -> None:
    # http.client reads headers as Latin-1: the byte 0xB2 is "²", and "²".isdigit() is True.
    _answer(server, b"content-type: text/plain\r\ncontent-length: \xb2\r\n", b"hi")


@pytest.mark.parametrize("charset", NON_TEXT_CHARSETS)
def test_w2_a_non_text_codec_charset_is_read_as_utf8(server: RawServer, charset: str) -> None:
    head = f"content-type: text/plain; charset={charset}\r\ncontent-length: 5\r\n".encode()
    assert _answer(server, head, b"hello") == ["hello"]


@pytest.mark.parametrize("escape", ["\\ud800", "\\udfff", "\\ud83d"])
def test_w3_a_lone_surrogate_never_reaches_a_reply(server: RawServer, escape: str) -> None:
    body = json.dumps({"reply": "hi "}).replace("hi ", "hi " + escape).encode()
    head = b"content-type: application/json\r\ncontent-length: %d\r\n" % len(body)
    outcome = _answer(server, head, body)
    assert isinstance(outcome, list) and len(outcome) == 1 and outcome[0].startswith("hi ")


def test_w4_a_reply_is_cut_after_its_leading_blanks(server: RawServer) -> None:
    body = (" " * MAX_BODY + "the answer").encode()
    head = b"content-type: text/plain\r\ncontent-length: %d\r\n" % len(body)
    outcome = _answer(server, head, body)
    assert isinstance(outcome, list) and outcome and outcome[0].strip() == "the answer"


@pytest.mark.parametrize(
    ("charset", "body"),
    [("idna", b"caf\xc3\xa9"), ("idna", b"xn--99"), ("punycode", b"a\\b"), ("undefined", b"hi")],
)
def test_w5_a_charset_whose_codec_raises_unicode_error_is_read_as_utf8(
    server: RawServer, charset: str, body: bytes
) -> None:
    head = b"content-type: text/plain; charset=%s\r\ncontent-length: %d\r\n" % (
        charset.encode(),
        len(body),
    )
    outcome = _answer(server, head, body)
    assert isinstance(outcome, list) and len(outcome) == 1


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_w6_a_redirect_with_a_latin1_location_is_a_retry(server: RawServer, status: int) -> None:
    server.answer = (
        b"HTTP/1.1 %d Moved\r\nlocation: /caf\xe9\r\ncontent-length: 0\r\n"
        b"connection: close\r\n\r\n" % status
    )
    assert isinstance(check_answer(server.url), RetryTurn)

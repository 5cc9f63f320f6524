"""Shared pieces for the hypothesis fuzz tests: settings, tricky text, JSON values, and a raw
HTTP server on loopback that answers exactly the bytes a test hands it."""

from __future__ import annotations

import os
import socket
import threading
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

# Derandomized: every run (CI or local) tries the same examples, so a fuzz test never flakes;
# YUI_FUZZ_RANDOM=1 explores new ones (and prints a seed for any failure it finds).
DERANDOMIZE = os.environ.get("YUI_FUZZ_RANDOM", "") != "1"
# YUI_FUZZ_SCALE=N runs N times the examples: more for a longer local hunt, a fraction in the
# fast lane (`make check`); the whole suite, and so CI, keeps 1.
SCALE = max(float(os.environ.get("YUI_FUZZ_SCALE", "1") or "1"), 0.05)


def fuzz_settings(max_examples: int) -> settings:
    """Bounded, deterministic settings that tolerate session fixtures and slow I/O examples."""
    return settings(
        max_examples=max(round(max_examples * SCALE), 1),
        deadline=None,
        derandomize=DERANDOMIZE,
        database=None,
        suppress_health_check=[
            HealthCheck.function_scoped_fixture,
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.large_base_example,
        ],
    )


# --- text and JSON -----------------------------------------------------------------------------

# Strings that break naive parsers: quoting, separators, line breaks of every kind, NUL, BOM,
# lone surrogates, emoji, right-to-left marks, and characters whose str methods surprise.
TRICKY = [
    "",
    " ",
    '"',
    "'",
    "\\",
    "|",
    "=",
    ",",
    ".",
    ":",
    "::",
    "->",
    "->>",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    "*",
    "%",
    "%00",
    "&",
    "#",
    "?",
    "\x00",
    "\n",
    "\r\n",
    "\t",
    "\x0b",
    "\x0c",
    "\x1c",
    "\x85",
    "\u2028",
    "\u2029",
    "\ufeff",
    "\ud800",
    "\udfff",
    "\u200f",
    "²",
    "٣",
    "🙂",
    "👩‍👩‍👧",
    "null",
    "true",
    "NaN",
    "-0",
    "1e999",
    "9" * 40,
    "not.",
    "eq.",
    "in.(",
]

tricky_text = st.one_of(
    st.text(max_size=20),
    st.sampled_from(TRICKY),
    st.lists(st.sampled_from(TRICKY) | st.text(max_size=4), max_size=6).map("".join),
)

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    tricky_text,
)


def json_values(max_leaves: int = 12) -> st.SearchStrategy[Any]:
    """Any JSON value: scalars, lists and objects nested a few levels."""
    return st.recursive(
        json_scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(tricky_text, inner, max_size=4),
        max_leaves=max_leaves,
    )


# --- a raw HTTP server ----------------------------------------------------------------------


class RawServer:
    """Loopback HTTP/1.1 server: reads each request whole, answers `answer` verbatim, closes.

    Each connection gets the answer set when it was accepted; the answer's bytes are whatever
    the test built (a bad status line, lying lengths, broken chunks), never fixed up.
    """

    def __init__(self) -> None:
        self.answer = b"HTTP/1.1 204 No Content\r\n\r\n"
        self.requests = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/hook"
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn, self.answer), daemon=True).start()

    def _answer(self, conn: socket.socket, answer: bytes) -> None:
        with conn:
            try:
                conn.settimeout(10)
                self._read_request(conn)
                self.requests += 1
                conn.sendall(answer)
                conn.shutdown(socket.SHUT_WR)
                conn.settimeout(2)
                while conn.recv(65536):  # drain until the client closes: no RST
                    pass
            except OSError:
                pass

    @staticmethod
    def _read_request(conn: socket.socket) -> None:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.strip())
        while len(body) < length:
            chunk = conn.recv(65536)
            if not chunk:
                return
            body += chunk

    def close(self) -> None:
        self.listener.close()


# --- deep and huge ---------------------------------------------------------------------------

# Nesting depths around the readers' bound (64), and far past it: the 1,200 `[` of the poison
# reply (issue 14), and 100,000.
DEPTHS = st.one_of(
    st.integers(min_value=0, max_value=130),
    st.sampled_from([63, 64, 65, 1_200, 100_000]),
)
# Line lengths around the readers' bound (32,000 characters), and megabytes past it.
SIZES = st.sampled_from([31_999, 32_000, 32_001, 32_002, 100_000, 1_000_000, 3_000_000])


@st.composite
def nested_json(draw: st.DrawFn) -> tuple[str, int]:
    """JSON text nested DEPTHS deep, arrays and objects mixed in a drawn pattern, with its depth;
    sometimes left unclosed or with brackets inside a string (which don't nest)."""
    depth = draw(DEPTHS)
    pattern = draw(st.lists(st.booleans(), min_size=1, max_size=6))
    opens = ['{"k":' if pattern[i % len(pattern)] else "[" for i in range(depth)]
    closes = ["}" if o.startswith("{") else "]" for o in reversed(opens)]
    inner = draw(st.sampled_from(["1", '"x"', '"[[[{{{"', '"\\"[["', "null", "[]", "{}"]))
    deepest = depth + (inner in ("[]", "{}"))
    text = "".join(opens) + inner + ("" if draw(st.booleans()) else "".join(closes))
    return text, deepest


def deep_value(depth: int, pattern: list[bool]) -> Any:
    """A value tree `depth` deep (dicts where `pattern` says, lists elsewhere), built without
    recursion so any depth can be made."""
    value: Any = 1
    for i in range(depth):
        value = {"k": value} if pattern[i % len(pattern)] else [value]
    return value


@st.composite
def huge_lines(draw: st.DrawFn) -> str:
    """One line of SIZES characters: a tricky piece of text or Yui Lines repeated."""
    unit = draw(
        st.sampled_from(
            [t for t in TRICKY if t and "\n" not in t and "\r" not in t]
            + ["a ", "a=b ", "+a ", "a|", '"a b" ', "[", "{", "-->", "a --> b ", "1:2 "]
        )
    )
    size = draw(SIZES)
    return (unit * (size // len(unit) + 1))[:size]

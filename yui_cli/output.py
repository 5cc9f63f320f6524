"""Output, rendered once: data on stdout (a readable line per result; a list as a table on a
terminal and as JSON lines in a pipe; one JSON object per line with `--json`), people-facing
progress and messages on stderr.

Most of what is printed came from the relay, so from people and agents who may be hostile: a
body can hold a clear-screen, a clipboard write (OSC 52), a link that hides its target (OSC 8)
or a carriage return that overwrites what came before. Every line for people goes through
`clean`, which drops control sequences and keeps the words, newlines and tabs; JSON keeps the
exact text with every control character escaped (`json_line`); the bridges' logs go through
`CleanLogs`.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import logging
import os
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from rich.console import Console

Column = str | Callable[[dict[str, Any]], Any]
"""A table column: the record's key, or what to show for a record."""


@functools.cache
def console() -> Console:
    """The stderr console for people. NO_COLOR means no styling at all (rich alone would
    still send dim and bold, and their resets). Rich is imported here, when first needed, so
    a command's help never waits for it."""
    from rich.console import Console

    if os.environ.get("NO_COLOR"):
        return Console(stderr=True, highlight=False, soft_wrap=True, color_system=None)
    return Console(stderr=True, highlight=False, soft_wrap=True)


# ESC or 8-bit CSI, parameters, intermediates, final byte: colours, cursor moves, clear screen.
_CSI = r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"
# OSC, DCS, SOS, PM, APC: a string up to BEL or ST (clipboard writes, links, titles). One with
# no terminator is left for the next step, which drops its introducer and keeps the rest.
_STRING = r"(?:\x1b[\]PX^_]|[\x90\x98\x9d-\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)"
_ESCAPE = r"\x1b[ -/]*[0-~]"  # the two-byte escapes: reset, save cursor, charset, keypad
_SEQUENCE = re.compile(f"{_CSI}|{_STRING}|{_ESCAPE}")
_BREAK = re.compile(r"\r\n?|[\u2028\u2029]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # C0 but tab and newline, DEL, C1
_JSON_RAW = re.compile(r"[\x7f-\x9f\u2028\u2029]")  # what json.dumps leaves raw


def clean(text: str) -> str:
    """`text` safe for a terminal: control sequences and characters gone, every line break a
    newline (so a carriage return can't overwrite), tabs and every printable character kept."""
    return _CONTROL.sub("", _BREAK.sub("\n", _SEQUENCE.sub("", text)))


def _default(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return value.isoformat()
    return str(value)


def json_line(record: Any) -> str:
    """`record` as one JSON line, its text exact but with no raw control character: json
    escapes C0 itself; DEL, C1 and the two Unicode line separators are escaped here."""
    text = json.dumps(record, default=_default, ensure_ascii=False)
    return _JSON_RAW.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def emit(record: dict[str, Any], human: str, *, json_: bool) -> None:
    """One result: `record` as a JSON line, or `human` as a readable line."""
    if json_:
        click.echo(json_line(record))
    else:
        show(human)


def show(text: str, *, nl: bool = True) -> None:
    """Words for people on stdout, cleaned: the one way anything readable is printed there."""
    click.echo(clean(text), nl=nl)


def emit_rows(
    records: Iterable[dict[str, Any]],
    columns: Mapping[str, Column],
    *,
    json_: bool,
    table_: bool = False,
    title: str | None = None,
) -> None:
    """A list of records: an aligned table with `columns`' names as headers (under `title`,
    when given) on a terminal or with `--table`; one JSON object per line in a pipe or with
    `--json` (which wins), so a script reads every field whatever the columns show.

    In a table a missing value shows as `-`, and a line break in a value as a space, so each
    record stays one line.
    """
    if json_ or not (table_ or sys.stdout.isatty()):
        for record in records:
            emit(record, "", json_=True)
        return
    getters = [_getter(column) for column in columns.values()]
    rows = [[_cell(get(record)) for get in getters] for record in records]
    if title is not None:
        show(title)
    show(_table(rows, list(columns)))


def _getter(column: Column) -> Callable[[dict[str, Any]], Any]:
    if callable(column):
        return column
    return lambda record: record.get(column)


def _cell(value: Any) -> str:
    return "-" if value is None else " ".join(clean(str(value)).splitlines())


def _table(rows: Sequence[Sequence[str]], headers: Sequence[str]) -> str:
    """Plain aligned columns, two spaces apart."""
    grid = [list(headers), *[list(r) for r in rows]]
    widths = [max(len(row[i]) for row in grid) for i in range(len(headers))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in grid
    )


def progress(message: str) -> None:
    """A progress line for people, on stderr."""
    from rich.markup import escape

    console().print(f"[dim]{escape(clean(message))}[/dim]", markup=True)


class CleanLogs(logging.Filter):
    """Installed on a log handler, makes every record it writes safe for a terminal and a log
    file: the message with its args, and any traceback, cleaned; a line break in them indented,
    so no text an agent wrote can pass for a log record of its own."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = _indented(clean(record.getMessage()))
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = "  " + _indented(clean(record.exc_text))
        if record.stack_info:
            record.stack_info = "  " + _indented(clean(record.stack_info))
        return True


def _indented(text: str) -> str:
    return text.replace("\n", "\n  ")


def clock(iso: str | None) -> str:
    """`HH:MM:SS` of an ISO timestamp, in local time."""
    if not iso:
        return "-"
    return dt.datetime.fromisoformat(iso).astimezone().strftime("%H:%M:%S")

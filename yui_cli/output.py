"""Output modes, declared once: data on stdout (a readable line, or one JSON object per line
with `--json`), people-facing progress and messages on stderr."""

from __future__ import annotations

import datetime as dt
import functools
import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.markup import escape

F = TypeVar("F", bound=Callable[..., Any])


@functools.cache
def console() -> Console:
    """The stderr console for people (honours NO_COLOR)."""
    return Console(stderr=True, highlight=False, soft_wrap=True)


def json_option(func: F) -> F:
    """`--json`: one JSON object per line on stdout instead of readable lines."""
    return click.option("--json", "json_", is_flag=True, help="Print one JSON object per line.")(
        func
    )


def _default(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return value.isoformat()
    return str(value)


def emit(record: dict[str, Any], human: str, *, json_: bool) -> None:
    """One result: `record` as a JSON line, or `human` as a readable line."""
    if json_:
        click.echo(json.dumps(record, default=_default, ensure_ascii=False))
    else:
        click.echo(human)


def table(rows: Iterable[Sequence[str]], headers: Sequence[str]) -> str:
    """Plain aligned columns: readable on a terminal, still greppable in a pipe."""
    grid = [list(headers), *[list(r) for r in rows]]
    widths = [max(len(row[i]) for row in grid) for i in range(len(headers))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in grid
    )


def progress(message: str) -> None:
    """A progress line for people, on stderr."""
    console().print(f"[dim]{escape(message)}[/dim]", markup=True)


def clock(iso: str | None) -> str:
    """`HH:MM:SS` of an ISO timestamp, in local time."""
    if not iso:
        return "-"
    return dt.datetime.fromisoformat(iso).astimezone().strftime("%H:%M:%S")

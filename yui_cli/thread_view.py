"""A thread as a person reads it in a terminal: who said what, the ticks (✓ delivered, ✓✓
handled), a reaction on the message it is on, and a picture or video as `[picture]` and its
caption: the signed link (hundreds of characters) only with `--links`; `--json` keeps all."""

from __future__ import annotations

import re
from typing import Any

from yui_cli.output import clock
from yuilines.fences import find_fences, splice

# `image <url> "caption"` or `video …`, as `media_line` writes them
MEDIA = re.compile(r'\s*(image|video)\s+(\S+)(?:\s+"((?:[^"\\]|\\.)*)")?\s*')
SHOWN_AS = {"image": "[picture]", "video": "[video]"}
INDENT = "\n" + " " * 10


def _media(line: str, links: bool) -> str:
    found = MEDIA.fullmatch(line)
    if found is None:
        return line
    kind, url, caption = found.groups()
    words = re.sub(r"\\(.)", r"\1", caption or "")
    return " ".join(part for part in (SHOWN_AS[kind], words, url if links else "") if part)


def readable(body: str, links: bool = False) -> str:
    """`body` with each screen that only shows pictures or videos as one line per picture."""
    swaps = {}
    for fence in find_fences(body):
        lines = [line for line in fence.body(body).splitlines() if line.strip()]
        if lines and all(MEDIA.fullmatch(line) for line in lines):
            swaps[fence] = "\n".join(_media(line, links) for line in lines) + "\n"
    return splice(body, swaps).rstrip("\n") if swaps else body


def is_reaction(row: dict[str, Any]) -> bool:
    """The event a reaction writes: shown as the emoji on the message it is on instead."""
    return row["kind"] == "event" and "react" in (row.get("meta") or {})


def thread_line(agent: dict[str, Any], row: dict[str, Any], links: bool = False) -> str:
    """One row as a line (its later lines indented): time, who, words, marks."""
    # another agent's answer to a mention shows in that agent's name
    mirrored = (row.get("meta") or {}).get("mention_reply") or {}
    who = "you" if row["sender"] == "user" else mirrored.get("name") or agent["name"]
    body = readable(row["body"], links)
    if row["kind"] == "event":
        echo = (row.get("meta") or {}).get("echo")
        body = f"(tap) {echo}" if echo else f"(tap) {body}"
    elif row["kind"] == "control" and row["sender"] == "user":
        body = f"({body})"
    marks = ""
    if row["sender"] == "user":
        marks = " ✓✓" if row.get("handled_at") else (" ✓" if row.get("delivered_at") else "")
    if row.get("reaction"):
        marks = f" [{row['reaction']}]"
    return f"{clock(row['created_at'])}  {who}: {body.replace(chr(10), INDENT)}{marks}"

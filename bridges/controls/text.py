"""What Controls says and what it hides: the plain messages of its refusals, the one line an
agent reads about its changed settings, and the secret shapes no item may carry off the host.

A line that looks like a key goes out whole as `HIDDEN`: not masked, not cut, so not even the
key's length or its first characters leave the machine.
"""

from __future__ import annotations

import re
from typing import Any

HIDDEN = "[hidden on the host]"
MAX_CHANGES = 12  # changes named in one note; the rest are counted

MESSAGES = {
    "version": "The agent's computer speaks another version of Controls: update yui there.",
    "not_owner": "Only the agent's owner can see or change its settings.",
    "bad_op": "The agent's computer doesn't know that request.",
    "bad_section": "The agent's computer doesn't serve that part of Controls.",
    "not_allowed": "That can't be changed from the app.",
    "keep_soul": "An agent needs a personality: edit it instead.",
    "bad_id": "That isn't the name of anything the agent's computer listed.",
    "not_found": "That isn't on the agent's computer any more.",
    "bad_verb": "That can't be done to this item.",
    "confirm": "Deleting needs a yes first.",
    "too_fast": "Too many changes in a minute: wait a moment, then try again.",
    "conflict": "It changed on the agent's computer since you opened it.",
    "bad_value": "The new version must be text.",
    "too_big": "That's over 32 KB.",
    "empty": "A personality can't be empty.",
    "read_only": "This holds a key, so it can only be changed on the agent's computer.",
    "unsafe": "Keys and tokens don't travel through Controls: set them on the agent's computer.",
    "too_long": "The answer is too long to send: there's too much to list.",
    "bundled": "This came with the agent's software: switch it off instead.",
    "no_frontmatter": "A skill needs its name and description at the top.",
    "bad_schedule": "That time doesn't parse.",
    "failed": "The agent's computer couldn't do that.",
}

# Token shapes, matched anywhere in a line: provider keys, platform tokens, signed tokens,
# private keys, and this toolkit's own secrets.
_SHAPES = re.compile(
    "|".join(
        [
            r"\bsk-[A-Za-z0-9_-]{16,}",  # OpenAI, Anthropic (sk-ant-), OpenRouter (sk-or-)
            r"\b[sr]k_(?:live|test)_[A-Za-z0-9]{10,}",  # Stripe
            r"\bgh[pousr]_[A-Za-z0-9]{20,}",
            r"\bgithub_pat_[A-Za-z0-9_]{20,}",
            r"\bglpat-[A-Za-z0-9_-]{20,}",
            r"\bxox[abposr]-[A-Za-z0-9-]{10,}",  # Slack
            r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",  # AWS
            r"\bAIza[0-9A-Za-z_-]{30,}",  # Google
            r"\bhf_[A-Za-z0-9]{30,}",  # Hugging Face
            r"\bnpm_[A-Za-z0-9]{30,}",
            r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",  # a JWT's header and claims
            r"\byui_[a-z]{2}_[A-Za-z0-9_-]{8,}",
            r"\bsb_secret_[A-Za-z0-9_-]{8,}",
            r"\bwhsec_[A-Za-z0-9+/=]{16,}",
            r"\b\d{6,12}:[A-Za-z0-9_-]{30,}",  # Telegram bot
            r"-----BEGIN [A-Z ]*PRIVATE KEY",
        ]
    )
)
# A name that says "secret" given a long value (`api_key = …`, `"token": "…"`), and a bearer
# token (with a digit, so prose such as "the bearer" followed by a long word isn't hidden).
_ASSIGNED = re.compile(
    r"(?:api[_-]?key|secret|token|passw(?:or)?d|authorization)[\"']?\s*[:=]\s*[\"']?"
    r"(?:bearer\s+)?[A-Za-z0-9._~+/=-]{12,}"
    r"|\bbearer\s+(?=[A-Za-z._~+/=-]*\d)[A-Za-z0-9._~+/=-]{16,}",
    re.IGNORECASE,
)


def looks_like_key(line: str) -> bool:
    return bool(_SHAPES.search(line) or _ASSIGNED.search(line))


def redact_text(text: str) -> tuple[str, bool]:
    """The text with every key-shaped line replaced whole; whether any was."""
    lines = text.split("\n")
    hidden = False
    for n, line in enumerate(lines):
        if looks_like_key(line):
            lines[n] = HIDDEN
            hidden = True
    return "\n".join(lines), hidden


def redact(value: Any) -> tuple[Any, bool]:
    """A JSON value with every string redacted (keys of objects included); whether any was."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, list):
        pairs = [redact(v) for v in value]
        return [v for v, _ in pairs], any(h for _, h in pairs)
    if isinstance(value, dict):
        out, hidden = {}, False
        for key, item in value.items():
            clean_key, key_hidden = redact_text(str(key))
            clean, item_hidden = redact(item)
            out[clean_key] = clean
            hidden = hidden or key_hidden or item_hidden
        return out, hidden
    return value, False


def title_of(item: dict[str, Any]) -> str:
    """A short name for an item: its title, else its text's first line, else its id."""
    title = item.get("title")
    if not isinstance(title, str) or not title.strip():
        text = item.get("text")
        text = text if isinstance(text, str) else ""
        title = next((line for line in text.splitlines() if line.strip()), "")
        title = title.strip().lstrip("#").strip() or str(item.get("id", ""))
    title = " ".join(title.split())
    return title if len(title) <= 60 else title[:59] + "…"


_DONE = {
    ("act", "enable"): "switched on",
    ("act", "disable"): "switched off",
    ("act", "pause"): "paused",
    ("act", "resume"): "resumed",
    ("act", "run"): "set to run now",
    ("put", None): "edited",
    ("delete", None): "deleted",
}
_NOUNS = {"memory": "a memory", "skills": "skill", "schedules": "schedule", "soul": "personality"}


def change_words(op: str, section: str, title: str, verb: str | None) -> str:
    """One change in a few words: `personality edited`, `schedule "morning" paused`."""
    done = _DONE.get((op, verb if op == "act" else None), op)
    if section == "soul":
        return f"personality {done}"
    if section == "memory":
        return "a memory forgotten" if op == "delete" else f"a memory {done}"
    return f'{_NOUNS.get(section, section)} "{title}" {done}'


def note_line(changes: list[tuple[str, int]]) -> str:
    """The agent's one line about its settings: each change once, repeats counted, at most
    twelve named."""
    named = [words if n == 1 else f"{words} ({n} times)" for words, n in changes[:MAX_CHANGES]]
    more = len(changes) - MAX_CHANGES
    if more > 0:
        named.append(f"{more} more")
    return (
        "[yui] The person changed your settings in Controls since your last turn: "
        + "; ".join(named)
        + ". It's already done: nothing to answer."
    )

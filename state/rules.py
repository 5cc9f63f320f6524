"""What the relay refuses, checked before anything is sent: the person hears the rule in
words ("a handle is ..."), not a database's check-constraint message or a bare `400`.

The relay stays the authority (its constraints don't move); these are its published shapes.
"""

from __future__ import annotations

import re

from state.errors import BadInput

MAX_BODY = 32_000  # characters in one message, the relay's limit
REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
HANDLE = re.compile(r"[a-z0-9][a-z0-9-]{0,31}")
REF_RULE = "1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit"
HANDLE_RULE = "1 to 32 lowercase letters, digits or '-', starting with a letter or digit"


def checked_ref(ref: str) -> str:
    """The name a host knows an agent by (`yui pair --ref`)."""
    if not REF.fullmatch(ref):
        raise BadInput(f"--ref {ref!r} can't be used: a ref is {REF_RULE}")
    return ref


def checked_handle(handle: str) -> str:
    """An agent's @handle (`yui app add-agent --handle`)."""
    if not HANDLE.fullmatch(handle):
        raise BadInput(
            f"--handle {handle!r} can't be used: a handle is {HANDLE_RULE}",
            hint=f"e.g. {re.sub(r'[^a-z0-9-]+', '-', handle.lower()).strip('-') or 'my-agent'}",
        )
    return handle


def checked_text(text: str, what: str = "a message") -> str:
    """A message's words: some text that isn't only blanks, within the relay's limit."""
    if not text.strip():
        raise BadInput(f"{what} is empty: give it some text")
    if len(text) > MAX_BODY:
        raise BadInput(f"{what} has {len(text):,} characters; the limit is {MAX_BODY:,}")
    return text

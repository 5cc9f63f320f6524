"""What the engine didn't expect, told: one short line for the events, and the innermost frames
of its traceback for the log.

A bug, or an answer that breaks a reader, can fail the same way on every try of a turn, and a
deep recursion's traceback runs to a thousand frames: the log gets the last TRACE_FRAMES of them
(where it failed), so a failing turn can't flood a journal or fill a pipe nobody reads.
"""

from __future__ import annotations

import logging
import traceback

TRACE_FRAMES = 12  # frames of a traceback in the log, the innermost

log = logging.getLogger("yui.bridge")


def failure(exc: BaseException) -> str:
    """The exception in one short line: its type and message."""
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    return text if len(text) <= 200 else text[:199] + "…"


def log_failure(what: str, exc: BaseException) -> None:
    """Log `what` failed (it names the agent, never a row's body) with where it failed."""
    trace = traceback.format_exception(exc, limit=-TRACE_FRAMES)
    log.error("%s:\n%s", what, "".join(trace).rstrip())

"""The toolkit's one exception tree, and the exit status each branch becomes.

It lives in the bottom layer so that `state`, `bridges` and the relay's admin code can all
raise it; `yui_cli` turns it into a message on stderr and an exit code in one place.

    YuiError                      1   something failed
    ├── BadInput                  1   the user gave us something we can't use
    │   ├── MediaRefused          1   a picture or video that can't be stored (type, size, relay)
    │   └── BadUsage              2   a flag or variable with no usable value (a relay URL)
    ├── NotPaired                 3   no connector token in the state file
    ├── Refused                   4   the relay said no for good: bad token, revoked, refused
    │   └── Suspended             5   the kill switch is on for this host or account
    ├── Unreachable              75   the relay (or Postgres) can't be reached: try again
    └── StateBusy                 6   another process holds what this one needs (a bridge lock)
"""

from __future__ import annotations

import enum


class ExitStatus(enum.IntEnum):
    """Exit codes every `yui` command uses; documented in the README and tested."""

    OK = 0
    ERROR = 1
    USAGE = 2
    NOT_PAIRED = 3
    REFUSED = 4
    SUSPENDED = 5
    BUSY = 6
    UNREACHABLE = 75  # sysexits' EX_TEMPFAIL: systemd and cron treat it as "try again"
    INTERRUPTED = 130


class YuiError(Exception):
    """Base of every error the toolkit raises on purpose."""

    exit_status = ExitStatus.ERROR

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class BadInput(YuiError):
    """The user gave us something we can't use (a bad file, a malformed answer, a bad flag)."""


class MediaRefused(BadInput):
    """A file that can't be stored (its type, its size), or that the relay won't store."""

    def __init__(self, message: str, *, status: int | None = None, hint: str | None = None):
        super().__init__(message, hint=hint)
        self.status = status


class BadUsage(BadInput):
    """A usage mistake found past click's parsing (a malformed `$YUI_URL`): exit 2 like
    click's own, so a script that retries on 75 doesn't loop on a typo."""

    exit_status = ExitStatus.USAGE


class NotPaired(YuiError):
    """This state file has no connector token yet."""

    exit_status = ExitStatus.NOT_PAIRED


class Refused(YuiError):
    """The relay refused for good: a bad or revoked token, or a request it won't take."""

    exit_status = ExitStatus.REFUSED

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.status = status
        self.code = code


class Suspended(Refused):
    """The relay's kill switch is on for this host or account."""

    exit_status = ExitStatus.SUSPENDED


class Unreachable(YuiError):
    """The relay can't be reached right now; the same command later may work (after `after`
    seconds, when the relay said so with a Retry-After)."""

    exit_status = ExitStatus.UNREACHABLE

    def __init__(
        self, message: str, *, hint: str | None = None, after: float | None = None
    ) -> None:
        super().__init__(message, hint=hint)
        self.after = after


class StateBusy(YuiError):
    """Another process holds a lock this command needs."""

    exit_status = ExitStatus.BUSY

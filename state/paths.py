"""Where the toolkit keeps its files: one home folder, overridable by environment."""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_URL = "http://127.0.0.1:54321"


def yui_home() -> Path:
    """`$YUI_HOME`, else `~/.yui`."""
    return Path(os.environ.get("YUI_HOME") or Path.home() / ".yui").expanduser()


def ensure_private_dir(path: Path) -> Path:
    """Create `path` (and parents) so that only its owner can enter it."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def relay_url(explicit: str | None = None) -> str:
    """The relay to talk to: `--relay`, else `$YUI_URL`, else the local relay where its own
    record says it listens (`yui relay up --port N`), else its default address."""
    from state.local_relay import local_relay_url  # it builds on this module

    return (explicit or os.environ.get("YUI_URL") or local_relay_url() or DEFAULT_URL).rstrip("/")


def real_path(path: str | os.PathLike[str]) -> Path:
    """`path` with `~` expanded and symlinks resolved, so every alias of a file shares one lock."""
    return Path(os.path.realpath(Path(path).expanduser()))

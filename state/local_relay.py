"""The files a local relay keeps under `$YUI_HOME/relay/`, as the toolkit finds them.

`yui relay up` writes `relay.json` (where it listens, how to reach its database) and `keys.json`
(its signing secret, anon key and service key; mode 600). Any command pointed at that relay's
address finds its keys here, so nothing has to be copied or exported for local use.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from state.errors import YuiError
from state.jsonfile import JsonFile
from state.paths import yui_home

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1", "[::1]")


def relay_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    """`--dir`, else `$YUI_HOME/relay`."""
    return Path(explicit).expanduser() if explicit else yui_home() / "relay"


@dataclass(frozen=True)
class RelayFiles:
    """The two documents of one relay folder."""

    root: Path

    @property
    def config(self) -> JsonFile:
        return JsonFile(self.root / "relay.json")

    @property
    def keys(self) -> JsonFile:
        return JsonFile(self.root / "keys.json")

    @property
    def logs(self) -> Path:
        return self.root / "logs"


@dataclass(frozen=True)
class LocalKeys:
    """A local relay's keys: anon for the apikey header, service for operator commands."""

    anon_key: str
    service_key: str

    def __repr__(self) -> str:
        return "LocalKeys(<redacted>)"


def local_relay_url(folder: Path | None = None) -> str | None:
    """Where the local relay of `$YUI_HOME` listens, from the record `yui relay up` keeps
    (a relay bound to every address is reached on loopback); None when there is none."""
    try:
        config: dict[str, Any] = RelayFiles(folder or relay_dir()).config.read()
    except YuiError:  # a damaged record: the default address, and `yui relay` says why
        return None
    port = config.get("port")
    if not isinstance(port, int) or isinstance(port, bool):
        return None
    host = config.get("host")
    if not isinstance(host, str) or host in ("", "0.0.0.0", "::", "[::]"):
        host = "127.0.0.1"
    elif ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"


def local_keys_for(url: str, folder: Path | None = None) -> LocalKeys | None:
    """The keys of the local relay listening at `url`, or None if `url` is somewhere else."""
    files = RelayFiles(folder or relay_dir())
    config: dict[str, Any] = files.config.read()
    port = config.get("port")
    parts = urlsplit(url)
    if port is None or parts.hostname not in LOOPBACK_NAMES or parts.port != port:
        return None
    keys = files.keys.read()
    if not keys.get("anon_key"):
        return None
    return LocalKeys(anon_key=keys["anon_key"], service_key=keys["service_key"])

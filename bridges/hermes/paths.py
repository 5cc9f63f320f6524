"""Where a Hermes profile keeps its Yui files, and which profile this process is.

Hermes runs a profile with `HERMES_HOME=<root>/profiles/<name>` (the default profile is the root
itself, `~/.hermes`). Each profile has its own state file, `<profile home>/yui/state.json` (the
toolkit's format: floors, outbox, acks, turns in flight), so two gateways on one machine never
share rows; they share the machine's pairing, which a profile not paired yet takes from a
sibling, so the relay sees one computer running one gateway per profile.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

from state.host import HostState
from state.paths import relay_url

DEFAULT_PROFILE = "default"
PROFILE_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")  # what `hermes profile create` takes


def hermes_home() -> Path:
    """The running profile's home: `$HERMES_HOME`, else `~/.hermes`."""
    return Path(os.environ.get("HERMES_HOME") or Path.home() / ".hermes").expanduser()


def profile_name(home: Path | None = None) -> str:
    """The profile a home belongs to: its folder's name under `profiles/`, else `default`."""
    home = home or hermes_home()
    return home.name if home.parent.name == "profiles" else DEFAULT_PROFILE


def hermes_root(home: Path | None = None) -> Path:
    """The folder every profile lives under (the default profile's home)."""
    home = home or hermes_home()
    return home.parent.parent if home.parent.name == "profiles" else home


def profile_home(root: Path, profile: str) -> Path:
    return root if profile == DEFAULT_PROFILE else root / "profiles" / profile


def yui_dir(home: Path | None = None) -> Path:
    """`<profile home>/yui`: the state file, the media cache, the Controls log and trash."""
    return (home or hermes_home()) / "yui"


def state_path(home: Path | None = None) -> Path:
    return yui_dir(home) / "state.json"


def use_profile_home(home: Path | None = None) -> Path:
    """Point the toolkit at this profile's folder for the rest of the process (its state file,
    its media cache), whatever the shell exported for plain `yui` commands. Returns it."""
    folder = yui_dir(home)
    os.environ["YUI_HOME"] = str(folder)
    for name in ("YUI_STATE", "YUI_WEBHOOK_STATE"):
        os.environ.pop(name, None)
    return folder


def sibling_states(home: Path | None = None) -> Iterator[Path]:
    """The state files of the other profiles on this machine, the default profile first."""
    home = home or hermes_home()
    root = hermes_root(home)
    candidates = [state_path(root)]
    profiles = root / "profiles"
    if profiles.is_dir():
        candidates += [state_path(p) for p in sorted(profiles.iterdir())]
    mine = state_path(home)
    yield from (path for path in candidates if path != mine and path.is_file())


def adopt_pairing(state: HostState, home: Path | None = None) -> bool:
    """Give an unpaired profile the machine's pairing from a sibling profile, so every gateway
    on this computer is the same host to the relay. True if it took one."""
    if state.snapshot().token is not None:
        return False
    for path in sibling_states(home):
        sibling = HostState(path).snapshot()
        if sibling.token is not None and sibling.connector.get("id"):
            state.set_pairing(
                token=sibling.token.reveal(),
                connector=sibling.connector,
                url=relay_url(sibling.url),
            )
            return True
    return False

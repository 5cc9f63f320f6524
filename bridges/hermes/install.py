"""Putting the Yui platform into a Hermes profile: the plug-in, `plugins.enabled` and
`platforms.yui.enabled: true`, and nothing else of the profile changed.

The plug-in is either a symlink `<profile home>/plugins/yui` to the folder this package ships
(an upgrade of the toolkit updates every profile), or, with `entry_point`, the
`hermes_agent.plugins` entry point this package already declares (for a Hermes that runs in
the same Python). The config is edited round-trip, so its comments, order and every other key
stay as they were; a second install changes nothing.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from bridges.hermes import paths
from state.errors import BadInput

PLUGIN = "yui"
FOLDER = Path(__file__).resolve().parent / "folder"


def install(profile: str, root: Path | None = None, entry_point: bool = False) -> dict[str, Any]:
    """Install into `profile` under `root` (default: the Hermes root of this shell); says what
    it changed."""
    if not paths.PROFILE_NAME.fullmatch(profile):
        raise BadInput(f"{profile!r} is not a Hermes profile name (lowercase letters, digits)")
    root = root or paths.hermes_root()
    home = paths.profile_home(root, profile)
    if not home.is_dir():
        raise BadInput(
            f"there is no Hermes profile {profile!r} in {root}",
            hint=f"create it first: hermes profile create {profile}",
        )
    changed = []
    plugin = home / "plugins" / PLUGIN
    if not entry_point and _link(plugin):
        changed.append(f"linked {plugin}")
    changed += _enable(home / "config.yaml")
    return {
        "profile": profile,
        "home": str(home),
        "plugin": "entry point" if entry_point else str(plugin),
        "changed": changed,
    }


def _link(plugin: Path) -> bool:
    """The plug-in folder linked into the profile; False when it already was."""
    if plugin.is_symlink() and plugin.resolve() == FOLDER:
        return False
    if plugin.is_symlink() or plugin.exists():
        raise BadInput(
            f"{plugin} is already there and isn't this toolkit's plug-in",
            hint="move it away, then install again",
        )
    plugin.parent.mkdir(parents=True, exist_ok=True)
    plugin.symlink_to(FOLDER, target_is_directory=True)
    return True


def _enable(config: Path) -> list[str]:
    """`plugins.enabled` holds yui and `platforms.yui.enabled` is true; nothing else moves."""
    try:
        from ruamel.yaml import YAML
        from ruamel.yaml.comments import CommentedMap, CommentedSeq
    except ImportError:
        raise BadInput(
            "editing a Hermes profile needs hermes-agent in this Python",
            hint="pip install 'yui-bridges[hermes]'",
        ) from None
    yaml = YAML()  # round-trip: comments, order and quoting kept
    doc = yaml.load(config.read_text(encoding="utf-8")) if config.is_file() else None
    doc = CommentedMap() if doc is None else doc
    if not isinstance(doc, dict):
        raise BadInput(f"{config} isn't a YAML mapping")
    changed = []
    plugins = _mapping(doc, "plugins", config)
    enabled = plugins.get("enabled")
    if enabled is None:
        enabled = plugins["enabled"] = CommentedSeq()
    if not isinstance(enabled, list):
        raise BadInput(f"plugins.enabled in {config} isn't a list")
    if PLUGIN not in enabled:
        enabled.append(PLUGIN)
        changed.append("plugins.enabled += yui")
    platform = _mapping(_mapping(doc, "platforms", config), PLUGIN, config)
    if platform.get("enabled") is not True:
        platform["enabled"] = True
        changed.append("platforms.yui.enabled: true")
    if changed:
        _write(config, yaml, doc)
    return changed


def _mapping(doc: Any, key: str, config: Path) -> Any:
    from ruamel.yaml.comments import CommentedMap

    value = doc.get(key)
    if value is None:
        value = doc[key] = CommentedMap()
    if not isinstance(value, dict):
        raise BadInput(f"{key} in {config} isn't a mapping")
    return value


def _write(config: Path, yaml: Any, doc: Any) -> None:
    """The config replaced in one rename, keeping its mode (it may hold keys)."""
    mode = config.stat().st_mode & 0o777 if config.exists() else 0o600
    fd, tmp = tempfile.mkstemp(prefix=".config.", suffix=".yaml", dir=config.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            yaml.dump(doc, out)
        os.chmod(tmp, mode)
        os.replace(tmp, config)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise

"""`yui hermes`: put this toolkit's Yui platform into a Hermes profile, and pair it.

Inside Hermes the same commands are `hermes -p PROFILE yui …` (the plug-in hands them here with
the profile's home in $HERMES_HOME); from a plain shell, `--profile` names the profile.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from yui_cli.options import allow_private_media_option, json_option

profile_option = click.option(
    "--profile",
    metavar="P",
    help="The Hermes profile (default: the one $HERMES_HOME is, else ~/.hermes's default).",
)


@click.group(name="hermes")
def hermes() -> None:
    """Serve Hermes agents in Yui: install the plug-in into a profile and pair it.

    \b
    yui hermes install coach             the Yui platform into profile "coach"
    hermes -p coach yui pair 123456      its agent (the code from the app's Add agent)
    hermes -p coach gateway restart      the gateway serves it (or: gateway run)
    """


@hermes.command(name="install")
@click.argument("profile")
@click.option(
    "--root",
    type=click.Path(path_type=Path, file_okay=False),
    metavar="DIR",
    help="The Hermes root holding the profiles (default: $HERMES_HOME's root, or ~/.hermes).",
)
@click.option(
    "--entry-point",
    is_flag=True,
    help="Rely on this package's hermes_agent.plugins entry point (Hermes runs in this "
    "Python) instead of linking the plug-in folder into the profile.",
)
@json_option
def install(profile: str, root: Path | None, entry_point: bool, json_: bool) -> None:
    """Install the Yui platform into Hermes profile PROFILE ("default" for ~/.hermes).

    Links the plug-in into the profile's plugins folder, adds yui to plugins.enabled and sets
    platforms.yui.enabled: true; nothing else in the profile changes, and a second run
    changes nothing.
    """
    from bridges.hermes.install import install as install_into
    from yui_cli.output import emit, progress

    done = install_into(profile, root, entry_point=entry_point)
    what = "; ".join(done["changed"]) or "already installed, nothing changed"
    emit(done, f"{profile}: {what}", json_=json_)
    progress(f"Next: hermes -p {profile} yui pair CODE, then hermes -p {profile} gateway restart")


def _profile(profile: str | None) -> tuple[str, Any]:
    """The profile's name and its state file (paired from a sibling profile if it wasn't);
    the toolkit's files are the profile's from here on."""
    from bridges.hermes import paths
    from state.host import HostState

    if profile is not None:
        if not paths.PROFILE_NAME.fullmatch(profile):
            from state.errors import BadInput

            raise BadInput(f"{profile!r} is not a Hermes profile name")
        os.environ["HERMES_HOME"] = str(paths.profile_home(paths.hermes_root(), profile))
    paths.use_profile_home()
    state = HostState(paths.state_path())
    paths.adopt_pairing(state)
    return paths.profile_name(), state


@hermes.command(name="pair")
@click.argument("code")
@click.option("--host-name", help="This computer's name in the app (default: the hostname).")
@profile_option
@json_option
def pair(code: str, host_name: str | None, profile: str | None, json_: bool) -> None:
    """Pair the profile with the agent the app's Add agent made (its 6-digit code)."""
    from bridges.client import host
    from yui_cli.output import emit, progress

    name, state = _profile(profile)
    answer = host.pair(code, ref=name, host_name=host_name, url=None, state=state)
    agent, connector = answer["agent"], answer["connector"]
    emit(
        {"agent": agent, "connector": connector, "profile": name, "state": str(state.path)},
        f"paired: {agent['name']} (@{agent['handle']}) on {connector['name']}",
        json_=json_,
    )
    progress(f"Next: hermes -p {name} gateway restart")


@hermes.command(name="add")
@click.option("--name", help="The agent's name in the app (default: from the profile's name).")
@profile_option
@json_option
def add(name: str | None, profile: str | None, json_: bool) -> None:
    """Add the profile's agent on a computer already paired (no code needed)."""
    from bridges.hermes.pairing import add_agent
    from yui_cli.output import emit, progress

    ref, state = _profile(profile)
    answer = add_agent(state, ref, name)
    agent = answer["agent"]
    done = "added" if answer.get("created") else "already there"
    emit({**answer, "profile": ref}, f"{done}: {agent['name']} (@{agent['handle']})", json_=json_)
    progress(f"Next: hermes -p {ref} gateway restart")


@hermes.command(name="status")
@profile_option
@json_option
def status(profile: str | None, json_: bool) -> None:
    """Show the computer's pairing and the profile's agents with their presence."""
    from bridges.client.host import host_status
    from yui_cli.output import emit

    name, state = _profile(profile)
    report = host_status(state)
    mine = [a for a in report["agents"] if (a.get("remote_ref") or a.get("ref")) == name]
    report = {**report, "profile": name, "agents": mine}
    agents = ", ".join(f"{a['name']} (@{a['handle']}) {a['presence']}" for a in mine)
    emit(
        report,
        f"profile {name} on {report['connector'].get('name')} [{report['relay']}]; "
        f"agents: {agents or f'none (hermes -p {name} yui pair CODE)'}; "
        f"outbox {report['outbox']}",
        json_=json_,
    )


@hermes.command(name="media")
@click.argument("source", metavar="FILE|URL")
@click.argument("caption", required=False)
@allow_private_media_option
@profile_option
@json_option
def media(
    source: str, caption: str | None, allow_private_media: bool, profile: str | None, json_: bool
) -> None:
    """Send a picture or video into the profile's Yui thread (a hand-over)."""
    from bridges import send
    from bridges.media import files, remote
    from state.errors import BadInput
    from yui_cli.output import emit

    remote.allow_private_media(allow_private_media)
    name, state = _profile(profile)
    loaded = files.load(source, sys.stdin.buffer)
    try:
        result = send.send_media(state, loaded, caption, name)
    except BadInput as exc:
        if not exc.message.startswith("no agent"):
            raise
        result = send.send_media(state, loaded, caption, None)  # a profile for hand-overs only
    emit(
        result,
        f"{'queued' if result['queued'] else 'sent'} {result['type']} ({result['bytes']:,} "
        f"bytes) to @{result['agent']}",
        json_=json_,
    )

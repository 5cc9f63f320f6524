"""`yui app`: the person's side of Yui as a command (what the phone does)."""

from __future__ import annotations

import sys

import click

from bridges.media import files
from people import person
from state.errors import BadInput, YuiError
from yui_cli import account_cmd, controls_cmd, group_cmd, web_cmd
from yui_cli.options import (
    agent_option,
    as_option,
    file_completion,
    json_option,
    table_option,
    url_option,
)
from yui_cli.output import Column, clock, emit, emit_rows, progress


@click.group()
def app() -> None:
    """Be the person: sign up, add agents, talk to them, read the thread.

    \b
    People live in $YUI_HOME/app.json (mode 600); --as NAME picks one, so two people can
    share a relay in a demo or a test.
    """


@app.command(name="signup")
@click.argument("name")
@url_option
@json_option
def app_signup(name: str, url: str | None, json_: bool) -> None:
    """Create a person on the relay (on the local relay this uses its service key)."""
    record = person.signup(name, url)
    emit(
        {"name": record.name, "user_id": record.user_id, "url": record.url},
        f"signed up {record.name} ({record.user_id}) on {record.url}",
        json_=json_,
    )


def read_password() -> str:
    """The new password: asked twice on a terminal (never echoed), else stdin's first line.
    Never a flag or an argument, which every local user reads in `ps`."""
    if sys.stdin.isatty():
        return str(
            click.prompt("New password", hide_input=True, confirmation_prompt=True, err=True)
        )
    password = sys.stdin.readline().rstrip("\r\n")
    if not password:
        raise BadInput("read no password: give it as the first line of stdin")
    return password


@app.command(name="set-password")
@click.option("--email", help="The e-mail address to sign in with (needed the first time).")
@as_option
@json_option
def app_set_password(email: str | None, as_: str | None, json_: bool) -> None:
    """Set the password the person signs in with through the official clients' auth
    (signInWithPassword), with the e-mail address that names them there.

    \b
    The password is asked on the terminal, or read from stdin's first line:
        yui app set-password --email ann@example.com
        printf '%s\\n' "$PASSWORD" | yui app set-password
    """
    you = person.PersonApp(as_)
    user = you.set_password(read_password(), email)
    emit(
        {"name": you.record.name, "user_id": you.user_id, "email": user["email"]},
        f"{you.record.name} signs in as {user['email']} with that password",
        json_=json_,
    )


@app.command(name="add-agent")
@click.argument("name")
@click.option("--handle", help="The @handle (default: made from the name).")
@as_option
@json_option
def app_add_agent(name: str, handle: str | None, as_: str | None, json_: bool) -> None:
    """Add an agent and print the 6-digit code that pairs a computer with it."""
    answer = person.PersonApp(as_).add_agent(name, handle)
    agent, pairing = answer["agent"], answer["pairing"]
    emit(
        {"agent": agent, **pairing},
        f"{agent['name']} (@{agent['handle']}): pairing code {pairing['code']}",
        json_=json_,
    )
    progress(f"On the agent's computer, within 10 minutes: yui pair {pairing['code']}")


@app.command(name="pair-code")
@agent_option
@as_option
@json_option
def app_pair_code(agent: str | None, as_: str | None, json_: bool) -> None:
    """A fresh pairing code for an existing agent (older unused codes stop working)."""
    pairing = person.PersonApp(as_).pair_code(agent)
    emit(pairing, f"pairing code {pairing['code']}", json_=json_)


@app.command(name="say")
@click.argument("text")
@agent_option
@as_option
@json_option
def app_say(text: str, agent: str | None, as_: str | None, json_: bool) -> None:
    """Send a message into an agent's thread. @Name or @handle of another of your agents
    makes it a mention: that agent answers here, and this thread's agent isn't asked.

    It says which agent got it (without --agent: the default one) and warns when that
    agent's bridge isn't running."""
    here, row = person.PersonApp(as_).say(text, agent)
    to = {key: here.get(key) for key in ("id", "name", "handle", "presence")}
    emit(
        {**row, "agent": to}, f"sent {row['id']} to {here['name']} (@{here['handle']})", json_=json_
    )
    if here.get("presence") not in (None, "online"):
        progress(
            f"@{here['handle']} is {str(here['presence']).replace('_', ' ')}: it reads this "
            f"once its bridge runs (yui status, on its computer)"
        )


@app.command(name="tap")
@click.argument("element_id", metavar="ID")
@click.argument("preset")
@click.argument("values", nargs=-1, metavar="KEY=VALUE...")
@click.option(
    "--echo",
    help="What the person sees as their reply (events without one stay hidden in the app).",
)
@agent_option
@as_option
@json_option
def app_tap(
    element_id: str,
    preset: str,
    values: tuple[str, ...],
    echo: str | None,
    agent: str | None,
    as_: str | None,
    json_: bool,
) -> None:
    """Tap a screen element: writes the event row the agent reads.

    \b
    Values: key=value, a bare key for true, a|b for a list, form.mood=4 for nesting.
    Example: yui app tap n1 choose choice=Walk --echo Walk
    """
    row = person.PersonApp(as_).tap(
        element_id, preset, person.tap_values(list(values)), echo, agent
    )
    emit(row, f"sent {row['id']}: {row['body']}", json_=json_)


@app.command(name="react")
@click.argument("msg", metavar="MSG")
@click.argument("emoji")
@click.option("--meaning", metavar="M", help='What the reaction says, e.g. "build it".')
@agent_option
@as_option
@json_option
def app_react(
    msg: str, emoji: str, meaning: str | None, agent: str | None, as_: str | None, json_: bool
) -> None:
    """React to an agent's message: 👍 👎 🤔 ❤️ ⏳ 🔥 (or up, down, think, heart, wait, fire;
    none takes it back). MSG is its id, or `last` for the newest in --agent's thread."""
    row = person.PersonApp(as_).react(msg, emoji, meaning, agent)
    emit(row, f"sent {row['id']}: {row['body'].splitlines()[0]}", json_=json_)


@app.command(name="reply")
@click.argument("msg", metavar="MSG")
@click.argument("text")
@agent_option
@as_option
@json_option
def app_reply(msg: str, text: str, agent: str | None, as_: str | None, json_: bool) -> None:
    """Reply to a message, quoting its first line. MSG is its id, or `last` for the newest
    agent message in --agent's thread; in a group the reply goes to the message's author."""
    row = person.PersonApp(as_).reply(msg, text, agent)
    emit(row, f"sent {row['id']}", json_=json_)


@app.command(name="photo")
@click.argument("file", metavar="FILE", shell_complete=file_completion)
@click.option(
    "--id", "element_id", default="c1", show_default=True, help="The camera element's id."
)
@agent_option
@as_option
@json_option
def app_photo(file: str, element_id: str, agent: str | None, as_: str | None, json_: bool) -> None:
    """Send a photo as the app's camera does: stored in the thread (jpg, png, webp, gif or
    heic), then the event the agent reads: [yui] c1 camera photo=<path>."""
    row = person.PersonApp(as_).photo(files.read_file(files.local_path(file)), element_id, agent)
    emit(row, f"sent {row['id']}: {row['body']}", json_=json_)


@app.command(name="stop")
@agent_option
@as_option
@json_option
def app_stop(agent: str | None, as_: str | None, json_: bool) -> None:
    """Stop the agent's turn: its answer in progress is dropped, and so is what waits."""
    row = person.PersonApp(as_).stop(agent)
    emit(row, f"sent stop {row['id']}", json_=json_)


@app.command(name="thread")
@agent_option
@click.option("--follow", "-f", is_flag=True, help="Keep printing new rows as they land.")
@click.option("--links", is_flag=True, help="Print each picture's and video's link too.")
@as_option
@json_option
def app_thread(agent: str | None, follow: bool, links: bool, as_: str | None, json_: bool) -> None:
    """Print an agent's thread, oldest first (✓ delivered, ✓✓ handled, a reaction in [ ]).

    \b
    A picture shows as [picture] and its caption (its link with --links, or in --json).
    --follow prints a row again when its marks change, and waits for a relay that restarts.
    """
    from people.follow import follow as following
    from yui_cli.thread_view import is_reaction, thread_line

    you = person.PersonApp(as_)
    if follow:

        def waiting(exc: YuiError, wait: float) -> None:
            progress(f"{exc.message}; trying again in {wait:.0f} s")

        rows = following(you, agent, on_wait=waiting)
    else:
        chosen, read = you.thread(agent)
        rows = ((chosen, row) for row in read)
    for chosen, row in rows:
        if json_:
            emit(row, "", json_=True)
        elif not is_reaction(row):
            emit(row, thread_line(chosen, row, links), json_=False)


@app.command(name="agents")
@as_option
@json_option
@table_option
def app_agents(as_: str | None, json_: bool, table_: bool) -> None:
    """List the person's agents with their presence (online, asleep, offline, pending…)."""
    columns: dict[str, Column] = {
        "NAME": "name",
        "HANDLE": lambda a: "@" + a["handle"],
        "PRESENCE": "presence",
        "HOST": "connector_name",
        "ID": "id",
    }
    emit_rows(person.PersonApp(as_).agents(), columns, json_=json_, table_=table_)


@app.command(name="hosts")
@as_option
@json_option
@table_option
def app_hosts(as_: str | None, json_: bool, table_: bool) -> None:
    """List the computers paired with the person's agents."""
    columns: dict[str, Column] = {
        "NAME": "name",
        "KIND": "kind",
        "LAST SEEN": lambda h: "removed" if h["revoked_at"] else clock(h["last_seen_at"]),
        "ID": "id",
    }
    emit_rows(person.PersonApp(as_).hosts(), columns, json_=json_, table_=table_)


@app.command(name="notifications")
@click.option("--limit", default=20, show_default=True, help="How many, newest first.")
@as_option
@json_option
@table_option
def app_notifications(limit: int, as_: str | None, json_: bool, table_: bool) -> None:
    """The pushes the person's phones were sent (the local relay records each one)."""
    columns: dict[str, Column] = {
        "SENT": lambda p: clock(p["created_at"]),
        "PUSH [STATUS]": lambda p: f"{p['title']}: {p['body']} [{p['status']}]",
    }
    emit_rows(person.PersonApp(as_).notifications(limit), columns, json_=json_, table_=table_)


@app.command(name="remove-host")
@click.argument("host_id", metavar="ID")
@as_option
@json_option
def app_remove_host(host_id: str, as_: str | None, json_: bool) -> None:
    """Remove a computer: its token, and any session made from it, stop working at once."""
    person.PersonApp(as_).remove_host(host_id)
    emit({"id": host_id, "revoked": True}, f"removed {host_id}", json_=json_)


app.add_command(controls_cmd.controls)
app.add_command(group_cmd.group)
app.add_command(web_cmd.web)
app.add_command(account_cmd.delete_account)

"""`yui app group`: group threads, as the person uses them in the app."""

from __future__ import annotations

from typing import Any

import click

from people import person
from people.groups import Groups
from yui_cli.options import as_option, group_option, json_option, table_option
from yui_cli.output import Column, clock, emit, emit_rows, progress


def _names(value: str) -> list[str]:
    return [name.strip() for name in value.split(",") if name.strip()]


def _summary(group: dict[str, Any]) -> str:
    members = ", ".join(a["name"] for a in group["members"])
    state = " (archived)" if group["archived_at"] else ""
    return (
        f"{group['title']}{state}: {members} (lead {group['members'][0]['name']});"
        f" max hops {group['max_hops']}, max turns {group['max_turns']}"
    )


@click.group(name="group")
def group() -> None:
    """Talk to two or more agents at once: they hand work to each other where you can see it.

    \b
    The lead answers whatever you don't address; @Name (or --to) picks who answers. Each of
    your messages buys a budget of handoffs (--max-hops) and agent turns (--max-turns); an ask
    past it waits in a guard row for `continue` (Let it) or `stop`.
    """


@group.command(name="create")
@click.argument("title")
@click.option("--with", "with_", required=True, metavar="A,B[,C]", help="Its agents.")
@click.option("--lead", metavar="A", help="Answers what isn't addressed (default: the first).")
@as_option
@json_option
def group_create(title: str, with_: str, lead: str | None, as_: str | None, json_: bool) -> None:
    """Make a group of your agents."""
    made = Groups(person.PersonApp(as_)).create(title, _names(with_), lead)
    emit(made, f"made {_summary(made)}\n{made['id']}", json_=json_)


@group.command(name="list")
@as_option
@json_option
@table_option
def group_list(as_: str | None, json_: bool, table_: bool) -> None:
    """Your groups, newest first."""
    columns: dict[str, Column] = {
        "TITLE": "title",
        "MEMBERS": lambda g: ", ".join(a["handle"] for a in g["members"]),
        "HOPS": "max_hops",
        "TURNS": "max_turns",
        "": lambda g: "archived" if g["archived_at"] else "",
        "ID": "id",
    }
    emit_rows(Groups(person.PersonApp(as_)).all(), columns, json_=json_, table_=table_)


@group.command(name="say")
@click.argument("text")
@group_option
@click.option("--to", metavar="A,B", help="Who answers (up to three; default: whom TEXT @s).")
@as_option
@json_option
def group_say(text: str, group: str | None, to: str | None, as_: str | None, json_: bool) -> None:
    """Say something to the group."""
    row = Groups(person.PersonApp(as_)).say(text, group, _names(to) if to else None)
    emit(row, f"sent {row['id']}", json_=json_)


@group.command(name="continue")
@click.argument("guard", required=False)
@group_option
@as_option
@json_option
def group_continue(guard: str | None, group: str | None, as_: str | None, json_: bool) -> None:
    """Let it: send the ask a guard holds, on a fresh budget (default: the newest guard)."""
    row = Groups(person.PersonApp(as_)).let_it(guard, group)
    emit(row, f"let it through: {row['body']}", json_=json_)


@group.command(name="stop")
@group_option
@as_option
@json_option
def group_stop(group: str | None, as_: str | None, json_: bool) -> None:
    """Stop: nothing more is handed on; asks not picked up yet are cancelled."""
    row = Groups(person.PersonApp(as_)).stop(group)
    emit(row, f"stopped {row['id']}", json_=json_)


@group.command(name="settings")
@group_option
@click.option(
    "--max-hops", type=click.IntRange(1, 5), help="Handoffs one message of yours allows (1 to 5)."
)
@click.option(
    "--max-turns",
    type=click.IntRange(1, 12),
    help="Agent turns one message of yours buys (1 to 12).",
)
@as_option
@json_option
def group_settings(
    group: str | None, max_hops: int | None, max_turns: int | None, as_: str | None, json_: bool
) -> None:
    """Show the group's settings, changing those given."""
    found = Groups(person.PersonApp(as_)).settings(group, max_hops, max_turns)
    emit(found, _summary(found), json_=json_)


def _asked(row: dict[str, Any], rows: dict[str, dict[str, Any]], names: dict[str, str]) -> str:
    """A handoff, drawn as the app's row between two bubbles."""
    g = row["meta"]["group"]
    asking = rows.get(g.get("msg", ""))
    words = person.first_line(asking, 80) if asking else ""
    line = f'── {g.get("from_name", "?")} → {names.get(row["agent_id"], "?")} · "{words}" ──'
    return line + (" (cancelled)" if g.get("cancelled") else "")


def group_line(row: dict[str, Any], rows: dict[str, dict[str, Any]], names: dict[str, str]) -> str:
    """One row of a group as the app shows it: your words (not the header the agents read),
    handoffs, guards with how to answer them, status lines."""
    g = (row.get("meta") or {}).get("group") or {}
    name = names.get(row["agent_id"], "?")
    if row["sender"] == "user":
        if g.get("control"):
            text = "you: (let it)" if g["control"] == "continue" else "you: (stop)"
        elif "from" in g:
            text = "  " + _asked(row, rows, names)
        elif row["kind"] == "event":
            text = f"you → {name}: (tap) {row['meta'].get('echo') or row['body']}"
        else:
            to = ", ".join(names.get(a, "?") for a in g.get("to", [])) or name
            text = f"you → {to}: {g.get('words', row['body'])}"
    elif "guard" in g:
        state = g["guard"].get("state")
        text = f"  {row['body']} [{state}]"  # it names its agent itself
        if state == "held":
            text += f"\n(yui app group continue {row['id']}, or yui app group stop)"
    elif "status" in g:
        text = f"{name} · {row['body']}"
    else:
        text = f"{name}: {row['body']}"
    return f"{clock(row['created_at'])}  {text.replace(chr(10), chr(10) + ' ' * 10)}"


@group.command(name="thread")
@group_option
@as_option
@json_option
def group_thread(group: str | None, as_: str | None, json_: bool) -> None:
    """Print the group's thread, oldest first."""
    you = person.PersonApp(as_)
    found, rows = Groups(you).thread(group)
    if not json_:
        progress(_summary(found))
    names = {a["id"]: a["name"] for a in you.agents()}
    by_id = {row["id"]: row for row in rows}
    for row in rows:
        copy = "copy_of" in ((row.get("meta") or {}).get("group") or {})
        if json_:
            emit(row, "", json_=True)
        elif not copy:  # the same message as its first addressee's, which is shown
            emit(row, group_line(row, by_id, names), json_=False)

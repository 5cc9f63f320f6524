"""`yui app controls`: the app's Controls as commands. Each writes one control request and
prints the host's one answer (exit 1 when it refuses, 75 when it doesn't answer in time)."""

from __future__ import annotations

import json
from typing import Any

import click

from people import person
from state.errors import BadInput, YuiError
from yui_cli.options import person_option
from yui_cli.output import emit, table


class HostRefused(YuiError):
    """The host refused a Controls request; its plain message, and its code as a hint."""


def _request(
    ctx: click.Context, op: str, section: str, item_id: str | None, **fields: Any
) -> dict[str, Any]:
    """Write one control request as the person and wait for the host's answer."""
    opts = ctx.obj
    return person.PersonApp(opts["as_"]).control(
        op, section, item_id, agent=opts["agent"], timeout=opts["timeout"], **fields
    )


def _ask(ctx: click.Context, op: str, section: str, item_id: str | None, **fields: Any) -> None:
    """Send one request, print its answer; a refusal exits 1 (after the JSON, with --json)."""
    answer = _request(ctx, op, section, item_id, **fields)
    if ctx.obj["json_"]:
        emit(answer, "", json_=True)
    elif answer.get("ok"):
        click.echo(_human(op, answer))
    if not answer.get("ok"):
        hint = f"{answer.get('error')}"
        if answer.get("error") == "conflict":
            hint += f": the host holds rev {answer.get('rev')}; get it, then put again"
        if answer.get("error") == "confirm":
            hint += ": add --yes"
        raise HostRefused(answer.get("message") or "refused", hint=hint)


def _human(op: str, answer: dict[str, Any]) -> str:
    if op == "list":
        rows = [
            (i["id"], i.get("title", ""), i["rev"], "read only" if i.get("read_only") else "")
            for i in answer["items"]
        ]
        return table(rows, ("ID", "TITLE", "REV", ""))
    if answer.get("deleted"):
        return f"deleted {answer.get('id')}"
    item = answer["item"]
    head = f"{item.get('id')}  rev {answer['rev']}" + ("  (read only)" if item["read_only"] else "")
    if op != "get":
        return f"{op} done: {head}"
    text = item.get("text")
    rest = {k: v for k, v in item.items() if k not in ("id", "rev", "read_only", "text")}
    body = text if isinstance(text, str) else json.dumps(rest, ensure_ascii=False, indent=1)
    return f"{head}\n{body}"


def _current_rev(ctx: click.Context, section: str, item_id: str) -> str:
    """The rev of what the host holds now: what the app would have from opening the item."""
    answer = _request(ctx, "get", section, item_id)
    if not answer.get("ok"):
        raise HostRefused(answer.get("message") or "refused", hint=answer.get("error"))
    return answer["rev"]


@click.group(name="controls")
@click.option("--agent", metavar="A", help="The agent's id, handle or name (default: default).")
@person_option("Act as this person (default: the last one).")
@click.option("--timeout", default=10.0, show_default=True, help="Seconds to wait for the host.")
@click.option("--json", "json_", is_flag=True, help="Print the host's answer as one JSON line.")
@click.option("--protocol", "v", default=1, hidden=True, type=int)
@click.pass_context
def controls(
    ctx: click.Context, agent: str | None, as_: str | None, timeout: float, json_: bool, v: int
) -> None:
    """Read and change what an agent is made of, on its host, with no chat turn.

    \b
    yui app controls report                           the sections its host serves
    yui app controls list soul
    yui app controls get soul SOUL.md
    yui app controls put soul SOUL.md --file soul.md [--rev REV]
    yui app controls act schedules morning pause
    yui app controls delete memory mem-3f2a --yes [--rev REV]
    """
    ctx.obj = {"agent": agent, "as_": as_, "timeout": timeout, "json_": json_, "v": v}


def _v(ctx: click.Context) -> dict[str, Any]:
    return {"v": ctx.obj["v"]} if ctx.obj["v"] != 1 else {}


@controls.command(name="report")
@click.pass_context
def controls_report(ctx: click.Context) -> None:
    """The sections the agent's host serves (none: it shows a "What it does" card)."""
    report = person.PersonApp(ctx.obj["as_"]).controls_report(ctx.obj["agent"])
    sections = (report or {}).get("sections", {})
    human = ", ".join(f"{k} ({m})" for k, m in sections.items()) or "no Controls"
    emit({"controls": report}, human, json_=ctx.obj["json_"])


@controls.command(name="list")
@click.argument("section")
@click.pass_context
def controls_list(ctx: click.Context, section: str) -> None:
    """The items of one section."""
    _ask(ctx, "list", section, None, **_v(ctx))


@controls.command(name="get")
@click.argument("section")
@click.argument("item_id", metavar="ID")
@click.pass_context
def controls_get(ctx: click.Context, section: str, item_id: str) -> None:
    """One item in full, with its rev."""
    _ask(ctx, "get", section, item_id, **_v(ctx))


@controls.command(name="put")
@click.argument("section")
@click.argument("item_id", metavar="ID")
@click.option("--text", help="The new text.")
@click.option("--file", "file_", type=click.File("r", encoding="utf-8"), help="Read it (- stdin).")
@click.option("--rev", help="The rev you edited (default: the host's current one).")
@click.pass_context
def controls_put(
    ctx: click.Context, section: str, item_id: str, text: str | None, file_: Any, rev: str | None
) -> None:
    """Save a new text; a stale --rev is refused with the host's current item."""
    if (text is None) == (file_ is None):
        raise BadInput("give the new text with --text or --file (- for stdin)")
    value = {"text": text if text is not None else file_.read()}
    rev = rev or _current_rev(ctx, section, item_id)
    _ask(ctx, "put", section, item_id, rev=rev, value=value, **_v(ctx))


@controls.command(name="act")
@click.argument("section")
@click.argument("item_id", metavar="ID")
@click.argument("verb")
@click.pass_context
def controls_act(ctx: click.Context, section: str, item_id: str, verb: str) -> None:
    """One tap: pause, resume or run a schedule; enable or disable a skill."""
    _ask(ctx, "act", section, item_id, verb=verb, **_v(ctx))


@controls.command(name="delete")
@click.argument("section")
@click.argument("item_id", metavar="ID")
@click.option("--yes", is_flag=True, help="Yes, delete it (the host refuses without).")
@click.option("--rev", help="The rev you saw (default: the host's current one).")
@click.pass_context
def controls_delete(
    ctx: click.Context, section: str, item_id: str, yes: bool, rev: str | None
) -> None:
    """Delete an item (it goes to the host's trash for 30 days)."""
    if rev is None and yes:
        rev = _current_rev(ctx, section, item_id)
    _ask(ctx, "delete", section, item_id, rev=rev, confirmed=yes or None, **_v(ctx))

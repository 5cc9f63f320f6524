"""`yui app controls`: the app's Controls as commands. Each writes one control request and
prints the host's one answer (exit 1 when it refuses, 75 when it doesn't answer in time)."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, TypeVar, cast

import click

from people import person
from state.errors import BadInput, YuiError
from yui_cli.options import (
    CONTROLS_TIMEOUT,
    agent_option,
    as_option,
    controls_timeout_option,
    json_option,
    rev_option,
    table_option,
)
from yui_cli.output import Column, emit, emit_rows

F = TypeVar("F", bound=Callable[..., Any])

ITEM_COLUMNS: dict[str, Column] = {
    "ID": "id",
    "TITLE": lambda i: i.get("title", ""),
    "REV": "rev",
    "": lambda i: "read only" if i.get("read_only") else "",
}


class HostRefused(YuiError):
    """The host refused a Controls request; its plain message, and its code as a hint."""


@dataclass(frozen=True)
class Asking:
    """Who asks, about which agent, how long the host gets to answer, and how to print it."""

    agent: str | None = None
    as_: str | None = None
    timeout: float = CONTROLS_TIMEOUT
    json_: bool = False
    v: int = 1

    def given(self, **options: Any) -> Asking:
        """These options over this: what a command was given wins, what it wasn't keeps."""
        return replace(
            self, **{k: v for k, v in options.items() if v is not None and v is not False}
        )


def asking_options(*, waits: bool = True) -> Callable[[F], F]:
    """`--agent`, `--as`, `--json` (and `--timeout`, when the host answers) on a command, as
    on every `yui app` command. They win over the same options given to the group (which
    still take them, as they always did), and reach the command as one `Asking`."""
    shared = [agent_option, as_option, *([controls_timeout_option] if waits else []), json_option]

    def decorate(func: F) -> F:
        @functools.wraps(func)
        def command(**kwargs: Any) -> Any:
            options = {k: kwargs.pop(k, None) for k in ("agent", "as_", "timeout", "json_")}
            group = click.get_current_context().find_object(Asking) or Asking()
            return func(group.given(**options), **kwargs)

        for option in reversed(shared):
            command = option(command)
        return cast(F, command)

    return decorate


def _request(
    asking: Asking, op: str, section: str, item_id: str | None, **fields: Any
) -> dict[str, Any]:
    """Write one control request as the person and wait for the host's answer."""
    return person.PersonApp(asking.as_).control(
        op, section, item_id, agent=asking.agent, timeout=asking.timeout, **fields
    )


def _ask(
    asking: Asking,
    op: str,
    section: str,
    item_id: str | None,
    table_: bool = False,
    **fields: Any,
) -> None:
    """Send one request, print its answer (a list as rows); a refusal exits 1 (after the
    JSON, with --json)."""
    version = {"v": asking.v} if asking.v != 1 else {}
    answer = _request(asking, op, section, item_id, **fields, **version)
    if asking.json_:
        emit(answer, "", json_=True)  # the whole answer, as the app reads it
    elif answer.get("ok") and op == "list":
        emit_rows(answer["items"], ITEM_COLUMNS, json_=False, table_=table_)
    elif answer.get("ok"):
        emit(answer, _human(op, answer), json_=False)
    if not answer.get("ok"):
        hint = f"{answer.get('error')}"
        if answer.get("error") == "conflict":
            hint += f": the host holds rev {answer.get('rev')}; get it, then put again"
        if answer.get("error") == "confirm":
            hint += ": add --yes"
        raise HostRefused(answer.get("message") or "refused", hint=hint)


def _human(op: str, answer: dict[str, Any]) -> str:
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


def _current_rev(asking: Asking, section: str, item_id: str) -> str:
    """The rev of what the host holds now: what the app would have from opening the item."""
    answer = _request(asking, "get", section, item_id)
    if not answer.get("ok"):
        raise HostRefused(answer.get("message") or "refused", hint=answer.get("error"))
    return answer["rev"]


@click.group(name="controls")
@agent_option
@as_option
@controls_timeout_option
@json_option
@click.option("--protocol", "v", default=1, hidden=True, type=int)
@click.pass_context
def controls(
    ctx: click.Context,
    agent: str | None,
    as_: str | None,
    timeout: float | None,
    json_: bool,
    v: int,
) -> None:
    """Read and change what an agent is made of, on its host, with no chat turn.

    \b
    yui app controls report --agent coach            the sections its host serves
    yui app controls list soul --json
    yui app controls get soul SOUL.md
    yui app controls put soul SOUL.md --file soul.md [--rev REV]
    yui app controls act schedules morning pause
    yui app controls delete memory mem-3f2a --yes [--rev REV]

    --agent, --as, --timeout and --json go after the command, as everywhere in yui app.
    Before it they work too; given in both places, the one after the command wins.
    """
    ctx.obj = Asking(v=v).given(agent=agent, as_=as_, timeout=timeout, json_=json_)


@controls.command(name="report")
@asking_options(waits=False)
def controls_report(asking: Asking) -> None:
    """The sections the agent's host serves (none: it shows a "What it does" card)."""
    report = person.PersonApp(asking.as_).controls_report(asking.agent)
    sections = (report or {}).get("sections", {})
    human = ", ".join(f"{k} ({m})" for k, m in sections.items()) or "no Controls"
    emit({"controls": report}, human, json_=asking.json_)


@controls.command(name="list")
@click.argument("section")
@asking_options()
@table_option
def controls_list(asking: Asking, section: str, table_: bool) -> None:
    """The items of one section, with their revs."""
    _ask(asking, "list", section, None, table_=table_)


@controls.command(name="get")
@click.argument("section")
@click.argument("item_id", metavar="ID")
@asking_options()
def controls_get(asking: Asking, section: str, item_id: str) -> None:
    """One item in full, with its rev."""
    _ask(asking, "get", section, item_id)


@controls.command(name="put")
@click.argument("section")
@click.argument("item_id", metavar="ID")
@click.option("--text", help="The new text.")
@click.option("--file", "file_", type=click.File("r", encoding="utf-8"), help="Read it (- stdin).")
@rev_option
@asking_options()
def controls_put(
    asking: Asking, section: str, item_id: str, text: str | None, file_: Any, rev: str | None
) -> None:
    """Save a new text; a stale --rev is refused with the host's current item."""
    if (text is None) == (file_ is None):
        raise BadInput("give the new text with --text or --file (- for stdin)")
    value = {"text": text if text is not None else file_.read()}
    rev = rev or _current_rev(asking, section, item_id)
    _ask(asking, "put", section, item_id, rev=rev, value=value)


@controls.command(name="act")
@click.argument("section")
@click.argument("item_id", metavar="ID")
@click.argument("verb")
@asking_options()
def controls_act(asking: Asking, section: str, item_id: str, verb: str) -> None:
    """One tap: pause, resume or run a schedule; enable or disable a skill."""
    _ask(asking, "act", section, item_id, verb=verb)


@controls.command(name="delete")
@click.argument("section")
@click.argument("item_id", metavar="ID")
@click.option("--yes", is_flag=True, help="Yes, delete it (the host refuses without).")
@rev_option
@asking_options()
def controls_delete(asking: Asking, section: str, item_id: str, yes: bool, rev: str | None) -> None:
    """Delete an item (it goes to the host's trash for 30 days)."""
    if rev is None and yes:
        rev = _current_rev(asking, section, item_id)
    _ask(asking, "delete", section, item_id, rev=rev, confirmed=yes or None)

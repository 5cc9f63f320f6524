"""`yui relay`: run the local relay (PostgreSQL with Yui's schema, behind the gateway)."""

from __future__ import annotations

import ipaddress
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import click

from state.errors import BadUsage, ExitStatus
from state.local_relay import relay_dir
from yui_cli.options import dir_option, json_option, table_option
from yui_cli.output import Column, emit, emit_rows, progress

if TYPE_CHECKING:  # imported when a command runs: `yui --help` stays light
    from relay import admin


def _port_from_url() -> int | None:
    """The port of `$YUI_URL` when it names this machine, so `up` serves where commands look."""
    parts = urlsplit(os.environ.get("YUI_URL", ""))
    if parts.hostname in ("127.0.0.1", "localhost") and parts.port:
        return parts.port
    return None


def _proxy(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> tuple[str, ...]:
    try:
        return tuple(str(ipaddress.ip_network(v, strict=False)) for v in values)
    except ValueError:
        raise click.BadParameter(
            "give an IP address or network, like 10.0.0.5 or 10.0.0.0/24"
        ) from None


def _origin(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> tuple[str, ...]:
    origins = []
    for value in values:
        parts = urlsplit(value)
        if (
            parts.scheme not in ("http", "https")
            or not parts.hostname
            or parts.path not in ("", "/")
        ):
            raise click.BadParameter(f"{value!r}: give an origin, like https://yui.example.com")
        origins.append(f"{parts.scheme}://{parts.netloc.lower()}")
    return tuple(origins)


def _exposure(
    proxies: tuple[str, ...],
    origins: tuple[str, ...],
    anonymous: bool | None = None,
    metrics_from: tuple[str, ...] = (),
) -> admin.Exposure:
    """Options given replace what was set; options left out keep it."""
    from relay import admin

    return admin.Exposure(
        trusted_proxies=proxies or None,
        allowed_origins=origins or None,
        anonymous_signin=anonymous,
        metrics_from=metrics_from or None,
    )


database_option = click.option(
    "--database",
    envvar="YUI_DATABASE_URL",
    metavar="URL",
    help="A PostgreSQL database made elsewhere (a managed one, a Supabase project's) to serve "
    "instead of the relay's own: postgresql://USER@HOST:PORT/DBNAME, or $YUI_DATABASE_URL. "
    "Keep its password out of the command line: $PGPASSWORD or ~/.pgpass.",
)
log_format_option = click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="The gateway's log lines; json: one object a line, a line per request (method, path "
    "without query, status, ms), never a token or a body.",
)


def _status_line(status: admin.RelayStatus) -> str:
    return (
        f"relay {status.url}: gateway {status.gateway}"
        f"{f' (pid {status.gateway_pid})' if status.gateway_pid else ''}, "
        f"postgres {status.postgres}, {status.migrations} migrations, "
        f"guide {status.guide_version or '-'}"
    )


@click.group()
def relay() -> None:
    """Run the local relay: a real PostgreSQL with row-level security, behind a gateway that
    speaks the hosted backend's HTTP contract.

    \b
    Everything lives under $YUI_HOME/relay (default ~/.yui/relay). As root, PostgreSQL runs
    as the `postgres` user and keeps its data where that user can reach it; `yui relay list`
    shows every relay on this machine, `yui relay destroy` removes one.
    """


@relay.command(name="up")
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    help="Port for the gateway (default: the one it had, $YUI_URL's, or 54321).",
)
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Address the gateway listens on."
)
@click.option(
    "--foreground", is_flag=True, help="Serve in this process until stopped (for systemd)."
)
@click.option(
    "--trusted-proxy",
    "proxies",
    multiple=True,
    callback=_proxy,
    metavar="ADDR",
    help="A reverse proxy (address or network) whose X-Forwarded-For is believed. "
    "Repeatable; none by default. Kept until set again.",
)
@click.option(
    "--allow-origin",
    "--cors-origin",
    "origins",
    multiple=True,
    callback=_origin,
    metavar="ORIGIN",
    help="A web origin (https://name[:port]) browsers may call the relay from, besides its "
    "own: its requests pass the Origin check and get CORS answers. --cors-origin is another "
    "name for it. Repeatable. Kept until set again.",
)
@click.option(
    "--allow-anonymous-signin/--no-allow-anonymous-signin",
    "anonymous",
    default=None,
    help="Whether the SDKs' auth.signInAnonymously may make a person with no credentials. "
    "Off by default. Kept until set again.",
)
@click.option(
    "--metrics-from",
    "metrics_from",
    multiple=True,
    callback=_proxy,
    metavar="ADDR",
    help="An address or network that may read /metrics (judged through --trusted-proxy "
    "like any caller). Repeatable; loopback only by default. Kept until set again.",
)
@database_option
@click.option(
    "--workers",
    type=click.IntRange(1, 64),
    default=1,
    show_default=True,
    help="Gateway processes sharing the port (the kernel spreads connections among them).",
)
@log_format_option
@dir_option
@json_option
def relay_up(
    port: int | None,
    host: str,
    foreground: bool,
    proxies: tuple[str, ...],
    origins: tuple[str, ...],
    anonymous: bool | None,
    metrics_from: tuple[str, ...],
    database: str | None,
    workers: int,
    log_format: str,
    folder: Path | None,
    json_: bool,
) -> None:
    """Start the relay, creating it on first use. Safe to run again.

    \b
    With --database it serves a database made elsewhere and runs no PostgreSQL of its own
    (recorded: later `up`s serve it too). The database user must own what the migrations
    make and be able to create the relay's roles; see the README's "Running a relay".
    """
    from relay import admin

    where = relay_dir(folder)
    port = port or _port_from_url()
    exposure = _exposure(proxies, origins, anonymous, metrics_from)
    serving = admin.Serving(workers=workers, log_format=log_format)
    if foreground:
        if workers > 1:
            raise click.BadParameter("--foreground serves one process", param_hint="--workers")
        admin.run_foreground(
            where, port, host, progress=progress, exposure=exposure, database=database,
            serving=serving,
        )  # fmt: skip
        return
    status = admin.up(
        where, port, host, progress=progress, exposure=exposure, database=database,
        serving=serving,
    )  # fmt: skip
    emit(status.as_dict(), _status_line(status), json_=json_)


@relay.command(name="down")
@dir_option
@json_option
def relay_down(folder: Path | None, json_: bool) -> None:
    """Stop the gateway and PostgreSQL. The data stays."""
    from relay import admin

    status = admin.down(relay_dir(folder), progress=progress)
    emit(status.as_dict(), _status_line(status), json_=json_)


@relay.command(name="status")
@dir_option
@json_option
@click.pass_context
def relay_status(ctx: click.Context, folder: Path | None, json_: bool) -> None:
    """Show whether the relay is running, where, and its schema and guide versions.

    Exits 0 when its gateway answers, else 75 (the relay can't be reached), after printing
    the status all the same.
    """
    from relay import admin

    status = admin.status(relay_dir(folder))
    emit(status.as_dict(), _status_line(status), json_=json_)
    if status.gateway != "running":
        progress(f"the relay's gateway is {status.gateway}: `yui relay up` starts it")
        ctx.exit(int(ExitStatus.UNREACHABLE))


@relay.command(name="migrate")
@database_option
@dir_option
@json_option
def relay_migrate(database: str | None, folder: Path | None, json_: bool) -> None:
    """Apply new migrations and publish this checkout's channel guide.

    \b
    To the relay in --dir (or $YUI_HOME/relay), which must exist: this never creates one,
    and leaves its PostgreSQL running or stopped as it found it. With --database, to that
    database (for a deploy pipeline, before starting the gateways).
    """
    from relay import admin

    applied = admin.migrate(relay_dir(folder), progress=progress, database=database)
    emit({"applied": applied}, f"{len(applied)} migrations applied", json_=json_)


@relay.command(name="serve")
@database_option
@click.option("--port", type=click.IntRange(1, 65535), required=True, help="Port to serve on.")
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Address the gateway listens on."
)
@log_format_option
@dir_option
def relay_serve(
    database: str | None, port: int, host: str, log_format: str, folder: Path | None
) -> None:
    """One more gateway on a shared database, in this process until stopped.

    \b
    Gateways keep nothing of their own: rate limits, the kill switch and Realtime's feed
    (LISTEN/NOTIFY) live in the database, so any number can serve it, here or on other
    machines, behind one load balancer. Each needs the relay folder's keys.json (the shared
    signing secret) and relay.json's settings; media bytes live in its media/ folder, which
    gateways on several machines must share (a network file system).
    """
    from relay import admin

    if not database:
        raise click.BadParameter("give the database every gateway serves", param_hint="--database")
    admin.serve_only(
        relay_dir(folder), database, port, host, progress=progress,
        serving=admin.Serving(log_format=log_format),
    )  # fmt: skip


def _size(entry: dict[str, Any]) -> str:
    return f"{entry['size'] / 1e6:.1f} MB"


def _folder(entry: dict[str, Any]) -> str:
    if entry["folder"] is None:
        return "(unknown: made before relays were listed)"
    return str(entry["folder"]) + ("" if entry["folder_exists"] else " (gone)")


@relay.command(name="list")
@json_option
@table_option
def relay_list(json_: bool, table_: bool) -> None:
    """Every relay on this machine, with its size.

    Those whose folder is gone (a deleted $YUI_HOME) are listed too, since their PostgreSQL
    data may live elsewhere (under root, in ~postgres). `yui relay destroy KEY` removes one.
    """
    from relay import inventory

    rows = [entry.as_dict() for entry in inventory.relays()]
    columns: dict[str, Column] = {
        "KEY": "key",
        "POSTGRES": "postgres",
        "SIZE": _size,
        "FOLDER": _folder,
    }
    emit_rows(rows, columns, json_=json_, table_=table_)


@relay.command(name="destroy")
@click.argument("key", required=False)
@click.option("--yes", is_flag=True, help="Don't ask: destroy at once (needed off a terminal).")
@dir_option
@json_option
def relay_destroy(key: str | None, yes: bool, folder: Path | None, json_: bool) -> None:
    """Stop a relay and remove all its data, wherever it lives.

    \b
    PostgreSQL's cluster and the relay folder (keys, media, logs) go, after a confirmation
    that counts the messages and media. KEY (from `yui relay list`) picks one whose folder
    may be gone; else the relay in --dir or $YUI_HOME/relay. It can't be undone.

    A relay serving a database made elsewhere (--database) loses only its folder here: the
    database is left for its owner to drop.
    """
    from relay import admin, inventory, processes

    cluster = inventory.find(None if key else relay_dir(folder), key)
    doomed = inventory.survey(cluster)
    if not yes:
        if not sys.stdin.isatty():
            raise BadUsage(f"destroying {doomed.summary()} needs --yes when no terminal can ask")
        click.confirm(f"Destroy {doomed.summary()}? It can't be undone", abort=True, err=True)
    gone = inventory.destroy(cluster, admin.stop_gateways, processes.stop_process)
    emit(
        {**gone.as_dict(), "messages": doomed.messages, "media": doomed.media},
        f"destroyed relay {gone.key}: {_size(gone.as_dict())} freed",
        json_=json_,
    )

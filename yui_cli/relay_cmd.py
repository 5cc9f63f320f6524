"""`yui relay`: run the local relay (PostgreSQL with Yui's schema, behind the gateway)."""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path
from urllib.parse import urlsplit

import click

from relay import admin
from state.local_relay import relay_dir
from yui_cli.options import dir_option, json_option
from yui_cli.output import emit, progress


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
    proxies: tuple[str, ...], origins: tuple[str, ...], anonymous: bool | None = None
) -> admin.Exposure:
    """Options given replace what was set; options left out keep it."""
    return admin.Exposure(
        trusted_proxies=proxies or None, allowed_origins=origins or None, anonymous_signin=anonymous
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
    as the `postgres` user and keeps its data where that user can reach it.
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
@dir_option
@json_option
def relay_up(
    port: int | None,
    host: str,
    foreground: bool,
    proxies: tuple[str, ...],
    origins: tuple[str, ...],
    anonymous: bool | None,
    folder: Path | None,
    json_: bool,
) -> None:
    """Start the relay, creating it on first use. Safe to run again."""
    where = relay_dir(folder)
    port = port or _port_from_url()
    exposure = _exposure(proxies, origins, anonymous)
    if foreground:
        admin.run_foreground(where, port, host, progress=progress, exposure=exposure)
        return
    status = admin.up(where, port, host, progress=progress, exposure=exposure)
    emit(status.as_dict(), _status_line(status), json_=json_)


@relay.command(name="down")
@dir_option
@json_option
def relay_down(folder: Path | None, json_: bool) -> None:
    """Stop the gateway and PostgreSQL. The data stays."""
    status = admin.down(relay_dir(folder), progress=progress)
    emit(status.as_dict(), _status_line(status), json_=json_)


@relay.command(name="status")
@dir_option
@json_option
def relay_status(folder: Path | None, json_: bool) -> None:
    """Show whether the relay is running, where, and its schema and guide versions."""
    status = admin.status(relay_dir(folder))
    emit(status.as_dict(), _status_line(status), json_=json_)


@relay.command(name="migrate")
@dir_option
@json_option
def relay_migrate(folder: Path | None, json_: bool) -> None:
    """Apply new migrations and publish this checkout's channel guide."""
    applied = admin.migrate(relay_dir(folder), progress=progress)
    emit({"applied": applied}, f"{len(applied)} migrations applied", json_=json_)

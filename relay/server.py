"""Run one gateway process for a relay folder: read its settings, serve until stopped."""

from __future__ import annotations

import argparse
import signal
import socket
from pathlib import Path

import uvicorn
from starlette.applications import Starlette
from uvicorn.config import LOGGING_CONFIG

from relay.gateway.app import GatewaySettings, create_app
from relay.gateway.functions import MAX_BODY
from relay.logs import LOG_FORMATS, setup_logging
from relay.metrics import DEFAULT_METRICS_FROM
from relay.protocol import GuardedHttpTools
from state.local_relay import RelayFiles

KEEP_ALIVE = 5  # seconds an idle connection is kept between two requests (uvicorn's)


def own_origins(port: int) -> tuple[str, ...]:
    """The origins a page served by this relay itself has."""
    return tuple(f"http://{name}:{port}" for name in ("127.0.0.1", "localhost", "[::1]"))


def settings_for(folder: Path, database: str | None = None) -> GatewaySettings:
    """The gateway's settings from the relay folder; `database` serves another database than
    the one it records (a gateway beside others on a shared one)."""
    files = RelayFiles(folder)
    config = files.config.read()
    port = config.get("port") or 0
    return GatewaySettings(
        conninfo=database or config["gateway_conninfo"],
        jwt_secret=files.keys.read()["jwt_secret"],
        folder=folder,
        trusted_proxies=tuple(config.get("trusted_proxies") or ()),
        origins=own_origins(port) + tuple(config.get("allowed_origins") or ()),
        anonymous_signin=bool(config.get("anonymous_signin")),
        metrics_from=tuple(config.get("metrics_from") or DEFAULT_METRICS_FROM),
    )


def config(app: Starlette, host: str, port: int, *, own_logs: bool = True) -> uvicorn.Config:
    """How the gateway serves: its own deadlines on HTTP, uvicorn's caps said out loud.
    Without `own_logs`, uvicorn's lines go through the root logger (JSON lines, say)."""
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        http=GuardedHttpTools,
        loop="uvloop",  # libuv under asyncio
        timeout_keep_alive=KEEP_ALIVE,
        ws_max_size=MAX_BODY,  # a Realtime frame from a client: a join, a heartbeat, a token
        # X-Forwarded-For is believed only by functions.client_ip, and only from the proxies
        # the operator named (uvicorn would believe any loopback peer).
        proxy_headers=False,
        log_level="warning",
        log_config=LOGGING_CONFIG if own_logs else None,
        access_log=False,
        lifespan="on",
    )


def _exit_cleanly(signum: int, frame: object) -> None:
    raise SystemExit(0)


def shared_socket(host: str, port: int) -> socket.socket:
    """A listening socket other gateway processes may bind too (SO_REUSEPORT): the kernel
    hands each new connection to one of them."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind(address)
    sock.set_inheritable(True)
    return sock


def serve(
    folder: Path,
    host: str,
    port: int,
    *,
    database: str | None = None,
    log_format: str = "text",
    reuse_port: bool = False,
) -> None:
    """Serve the gateway in this process until SIGINT or SIGTERM.

    uvicorn re-raises the signal that stopped it once it has shut down; with this handler in
    place that becomes a clean exit, so the caller's cleanup still runs.
    """
    signal.signal(signal.SIGTERM, _exit_cleanly)
    setup_logging(log_format)
    app = create_app(settings_for(folder, database))
    server = uvicorn.Server(config(app, host, port, own_logs=log_format != "json"))
    server.run(sockets=[shared_socket(host, port)] if reuse_port else None)


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m relay.gateway", description="One gateway process for a relay folder."
    )
    parser.add_argument("--dir", required=True, type=Path, help="the relay folder")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", required=True, type=int)
    parser.add_argument("--log-format", choices=LOG_FORMATS, default="text")
    parser.add_argument(
        "--reuse-port", action="store_true", help="share the port with other gateway processes"
    )
    args = parser.parse_args()
    serve(args.dir, args.host, args.port, log_format=args.log_format, reuse_port=args.reuse_port)

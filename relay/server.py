"""Run one gateway process for a relay folder: read its settings, serve until stopped."""

from __future__ import annotations

import argparse
import logging
import signal
from pathlib import Path

import uvicorn

from relay.gateway.app import GatewaySettings, create_app
from state.local_relay import RelayFiles


def own_origins(port: int) -> tuple[str, ...]:
    """The origins a page served by this relay itself has."""
    return tuple(f"http://{name}:{port}" for name in ("127.0.0.1", "localhost", "[::1]"))


def settings_for(folder: Path) -> GatewaySettings:
    files = RelayFiles(folder)
    config = files.config.read()
    return GatewaySettings(
        conninfo=config["gateway_conninfo"],
        jwt_secret=files.keys.read()["jwt_secret"],
        folder=folder,
        trusted_proxies=tuple(config.get("trusted_proxies") or ()),
        origins=own_origins(config["port"]) + tuple(config.get("allowed_origins") or ()),
    )


def _exit_cleanly(signum: int, frame: object) -> None:
    raise SystemExit(0)


def serve(folder: Path, host: str, port: int) -> None:
    """Serve the gateway in this process until SIGINT or SIGTERM.

    uvicorn re-raises the signal that stopped it once it has shut down; with this handler in
    place that becomes a clean exit, so the caller's cleanup still runs.
    """
    signal.signal(signal.SIGTERM, _exit_cleanly)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    config = uvicorn.Config(
        create_app(settings_for(folder)),
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="on",
    )
    uvicorn.Server(config).run()


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m relay.gateway", description="One gateway process for a relay folder."
    )
    parser.add_argument("--dir", required=True, type=Path, help="the relay folder")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", required=True, type=int)
    args = parser.parse_args()
    serve(args.dir, args.host, args.port)

"""The official Supabase clients, unchanged, pointed at the relay: supabase-py in this process,
supabase-js in a Node process (its packages from tests/js's lock file, `make js`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers.cli import ROOT

JS_DIR = ROOT / "tests" / "js"
JS_TIMEOUT = 60.0
# Node 20 has a WebSocket only behind this flag (22 has it always); supabase-js needs one.
NODE_FLAGS = ("--experimental-websocket", "--no-warnings", "--input-type=module")


@contextmanager
def python_client(url: str, anon_key: str, token: str | None = None) -> Iterator[Any]:
    """A supabase-py client as an app builds it; with `token`, every call carries it. Its
    connections are closed when the block ends (the client itself never closes them)."""
    from supabase import ClientOptions, create_client

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with httpx.Client(timeout=JS_TIMEOUT) as http:
        options = ClientOptions(headers=headers, httpx_client=http, persist_session=False)
        client = create_client(url, anon_key, options=options)
        if token:
            client.postgrest.auth(token)
        try:
            yield client
        finally:
            client.auth.close()


def node_ready() -> bool:
    return shutil.which("node") is not None and (JS_DIR / "node_modules" / "@supabase").is_dir()


def run_js(code: str, *, env: dict[str, str] | None = None, timeout: float = JS_TIMEOUT) -> Any:
    """Run an ES module with supabase-js importable (`import { createClient } from
    '@supabase/supabase-js'`) and return what its last stdout line says, as JSON. Values the
    script needs come from `env` (read them with `process.env.NAME`)."""
    if not node_ready():
        pytest.skip("supabase-js is not installed: Node and `make js` are needed")
    node = shutil.which("node")
    assert node is not None
    result = subprocess.run(
        [node, *NODE_FLAGS, "-e", code],
        cwd=JS_DIR,  # bare imports resolve from here, against tests/js/node_modules
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert result.returncode == 0, f"node exited {result.returncode}:\n{result.stderr[-3000:]}"
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    assert lines, f"the script printed nothing:\n{result.stderr[-3000:]}"
    return json.loads(lines[-1])


def js_file(name: str) -> str:
    """A script kept in tests/js (for the longer ones), read as code for `run_js`."""
    return Path(JS_DIR / name).read_text()

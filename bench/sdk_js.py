"""Realtime as a web app hears it: supabase-js 2.119, unchanged (its default protocol, vsn 2.0.0),
subscribed to the person's inserts into one thread with a filter, timed from the person's REST
insert (clock read just before) to the channel's callback (Node's clock, the same machine's).

Needs Node and supabase-js from tests/js's lock file (`make js`); without them the row says it
was not measured, and the rest of the bench runs as before.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from bench.relay import Person
from bench.report import percentile

JS_DIR = Path(__file__).resolve().parent.parent / "tests" / "js"
NODE_FLAGS = ("--experimental-websocket", "--no-warnings", "--input-type=module")  # Node 20
WARM_UP = 3
WAIT = 20.0

# The token comes on stdin (never a command line); each callback prints the row's id and when.
SCRIPT = r"""
import { createClient } from '@supabase/supabase-js'
import readline from 'node:readline'
const lines = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]()
const db = createClient(process.env.URL, process.env.ANON, {
  auth: { persistSession: false, autoRefreshToken: false },
})
await db.realtime.setAuth((await lines.next()).value)
const change = { event: 'INSERT', schema: 'public', table: 'yui_messages',
                 filter: `agent_id=eq.${process.env.AGENT}` }
db.channel('bench-js')
  .on('postgres_changes', change, (p) =>
    console.log(JSON.stringify({ id: p.new.id, at: performance.timeOrigin + performance.now() })))
  .subscribe((status) => console.log(JSON.stringify({ status })))
while (!(await lines.next()).done) {}
await db.removeAllChannels()
process.exit(0)
"""


def missing() -> str | None:
    """Why supabase-js can't be measured here, or None."""
    if shutil.which("node") is None:
        return "node is not installed"
    if not (JS_DIR / "node_modules" / "@supabase" / "supabase-js").is_dir():
        return "supabase-js is not installed (make js)"
    return None


def measure(person: Person, count: int) -> dict[str, Any]:
    """Insert → supabase-js callback for `count` messages, one at a time (after WARM_UP)."""
    reason = missing()
    if reason is not None:
        return {"skipped": reason}
    agent, _ = person.add_agent("supabase-js")
    node = shutil.which("node") or "node"
    relay = person.relay
    env = {**os.environ, "URL": relay.url, "ANON": relay.anon_key, "AGENT": str(agent["id"])}
    proc = subprocess.Popen(
        [node, *NODE_FLAGS, "-e", SCRIPT],
        cwd=JS_DIR,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    heard: queue.Queue[dict[str, Any]] = queue.Queue()
    threading.Thread(target=_read, args=(proc, heard), daemon=True).start()
    try:
        assert proc.stdin is not None
        proc.stdin.write(person.token + "\n")
        proc.stdin.flush()
        if _next(heard).get("status") != "SUBSCRIBED":
            raise RuntimeError("supabase-js did not subscribe")
        gaps = []
        for n in range(WARM_UP + count):
            sent = time.time()
            row = person.say(str(agent["id"]))
            while (line := _next(heard)).get("id") != row:
                pass
            if n >= WARM_UP:
                gaps.append(line["at"] - sent * 1000)
    finally:
        _stop(proc)
    return {
        "p50_ms": percentile(gaps, 50),
        "p99_ms": percentile(gaps, 99),
        "samples": len(gaps),
        "client": "supabase-js 2.119.0, vsn 2.0.0, Node " + _version(node),
    }


def _read(proc: subprocess.Popen[str], heard: queue.Queue[dict[str, Any]]) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        heard.put(json.loads(line))


def _next(heard: queue.Queue[dict[str, Any]]) -> dict[str, Any]:
    try:
        return heard.get(timeout=WAIT)
    except queue.Empty:
        raise RuntimeError(f"supabase-js heard nothing within {WAIT:g} s") from None


def _stop(proc: subprocess.Popen[str]) -> None:
    try:
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(10)
    except (OSError, subprocess.TimeoutExpired):
        proc.kill()
        proc.wait(5)
    if proc.stdout is not None:
        proc.stdout.close()


def _version(node: str) -> str:
    done = subprocess.run([node, "--version"], capture_output=True, text=True, check=False)
    return done.stdout.strip().lstrip("v")

"""Check an agent's reply before a person sees it: the bad lines of its ```yui fences, what an
app build would not draw, and the ops the phone will read (what `yui lint` prints)."""

from __future__ import annotations

from typing import Any

from yuilines.fences import Fence, find_fences
from yuilines.gates import MIN_BUILD, draws
from yuilines.gating import gate_name
from yuilines.parser import parse

Parsed = list[tuple[Fence, list[dict[str, Any]]]]


def parse_fences(text: str) -> Parsed:
    """Each ```yui fence of a reply with its ops, parsed once for both `check` and `reply_ops`."""
    return [(fence, parse(fence.body(text))) for fence in find_fences(text)]


def reply_ops(text: str, parsed: Parsed | None = None) -> list[dict[str, Any]]:
    """The ops of every fence in a reply, in the vectors' shape (no line, no message)."""
    return [
        {k: v for k, v in op.items() if k not in ("line", "message")}
        for _, ops in (parse_fences(text) if parsed is None else parsed)
        for op in ops
    ]


def check(text: str, build: int | None, parsed: Parsed | None = None) -> list[dict[str, Any]]:
    """Each bad line, and with a build each op it would not draw, with its line in the reply."""
    findings: list[dict[str, Any]] = []
    for fence, ops in parse_fences(text) if parsed is None else parsed:
        for op in ops:
            line = op["line"] + fence.first_line - 1
            if op["op"] == "error":
                findings.append({"line": line, "kind": "error", "message": op["message"]})
                continue
            name = gate_name(op)
            if build is not None and name is not None and not draws(name, build):
                first = MIN_BUILD[name].build
                message = f"build {build} does not draw {name} (first drawn by build {first})"
                findings.append({"line": line, "kind": "gated", "message": message, "name": name})
    return findings

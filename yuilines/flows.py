"""A `flow`: a plan with branches, written as a Mermaid flowchart or as a variant of a saved
flow (ref-specs §1.9.4, spec/FLOWS.md as the vectors show it).

Steps ride on node labels (`a[ask Ready? Yes|No]`) or on `%% id: preset ...` comments; edge
labels are the conditions that pick the next step.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from yuilines import catalogue as cat
from yuilines.mermaid import flowchart
from yuilines.props import LineError, read
from yuilines.tokens import NUMBER, number

_STEP_COMMENT = re.compile(r"%%\s*([A-Za-z0-9_-]+):\s*(.*)")
_ADD = re.compile(r"add\s+([A-Za-z0-9_-]+)\s+after\s+([A-Za-z0-9_-]+)\s*:\s*(.*)")
_COMPARE = re.compile(r"\s*([A-Za-z_][\w.-]*)\s*(>=|<=|!=|=|<|>|~)\s*(.*?)\s*")

Numbered = list[tuple[int, str]]
Errors = list[tuple[int, str]]


def step(text: str) -> tuple[str, dict[str, Any]] | None:
    """A step line (`ask Ready? Yes|No`) as (preset, props); None when its first word is not
    a preset; LineError when the preset cannot be a step."""
    head, _, _ = text.strip().partition(" ")
    preset = head.partition("@")[0]
    if preset not in cat.PRESETS:
        return None
    if preset not in cat.STEPS:
        raise LineError(f"{preset} cannot be a flow step")
    start = text.index(head) + len(head)
    return preset, read(preset, text, start)


def _comment_step(text: str) -> tuple[str, tuple[str, dict[str, Any]] | None] | None:
    m = _STEP_COMMENT.fullmatch(text.strip())
    if not m:
        return None
    return m.group(1), step(m.group(2))


def graph(lines: Numbered) -> tuple[dict[str, Any], Errors]:
    """The patch of an inline flow, and the lines that were bad steps."""
    errors: Errors = []
    source = "\n".join(text for _, text in lines)
    steps: dict[str, tuple[str, dict[str, Any]]] = {}
    header_at = next(i for i, (_, t) in enumerate(lines) if not t.strip().startswith("%%"))
    for lineno, text in lines:
        try:
            found = _comment_step(text)
        except LineError as exc:
            errors.append((lineno, str(exc)))
            continue
        if found and found[1] is not None:
            steps[found[0]] = found[1]
    chart = flowchart(lines[header_at][1].strip(), [t for _, t in lines[header_at + 1 :]])
    nodes = []
    for node in chart.nodes.values():
        entry = {"id": node["id"]}
        label = node.get("label")
        found_step = steps.get(node["id"])
        if found_step is None and label is not None:
            try:
                found_step = step(label)
            except LineError as exc:
                errors.append((lines[header_at][0], str(exc)))
            if found_step is not None:
                label = None
        if label is not None:
            entry["label"] = label
        if found_step is not None:
            entry["preset"], entry["props"] = found_step
        nodes.append(entry)
    has_step = {n["id"] for n in nodes if "preset" in n}
    edges = [_edge(e, e["from"] in has_step) for e in chart.edges]
    props: dict[str, Any] = {"dir": chart.direction}
    if nodes:
        targets = {e["to"] for e in edges}
        props["start"] = next((n["id"] for n in nodes if n["id"] not in targets), nodes[0]["id"])
        props["nodes"] = nodes
    if edges:
        props["edges"] = edges
    props["source"] = source
    return props, errors


def _edge(edge: dict[str, Any], from_step: bool) -> dict[str, Any]:
    out = {"from": edge["from"], "to": edge["to"]}
    label = edge.get("label")
    if label:
        out["label"] = label
        if label != "else":
            out["when"] = conditions(label, edge["from"] if from_step else None)
    return out


def conditions(label: str, answer_of: str | None) -> list[list[dict[str, Any]]]:
    """`b>=20 and k=Shop or k="Landing page"` as alternatives of conditions that all hold.
    A label with no comparison is the answer of the step the edge leaves."""
    alternatives = []
    for alt in _split(label, " or "):
        conds = []
        for part in _split(alt, " and "):
            m = _COMPARE.fullmatch(part)
            if m:
                cond = {"path": m.group(1), "op": m.group(2), "value": _value(m.group(3))}
            else:
                cond = {"op": "=", "value": _value(part.strip())}
                if answer_of is not None:
                    cond = {"path": answer_of, **cond}
            conds.append(cond)
        alternatives.append(conds)
    return alternatives


def _split(text: str, word: str) -> list[str]:
    """Split on `word` outside double quotes."""
    parts: list[str] = []
    buf: list[str] = []
    quoted, i = False, 0
    while i < len(text):
        if text[i] == '"':
            quoted = not quoted
        if not quoted and text.startswith(word, i):
            parts.append("".join(buf))
            buf, i = [], i + len(word)
            continue
        buf.append(text[i])
        i += 1
    parts.append("".join(buf))
    return parts


def _value(text: str) -> Any:
    if len(text) >= 2 and text[0] == '"' and text[-1] == '"':
        return text[1:-1]
    return number(text) if NUMBER.fullmatch(text) else text


def variant(lines: Numbered) -> tuple[dict[str, Any], Errors]:
    """The patch of a variant (`flow base as=name`): its changes, in order, and its source."""
    changes: list[dict[str, Any]] = []
    errors: Errors = []
    for lineno, text in lines:
        try:
            _change(text.strip(), changes.append)
        except LineError as exc:
            errors.append((lineno, str(exc)))
    props: dict[str, Any] = {"changes": changes} if changes else {}
    props["source"] = "\n".join(text for _, text in lines)
    return props, errors


def _change(text: str, add: Callable[[dict[str, Any]], None]) -> None:
    if not text or text == "#" or text.startswith("# "):
        return
    if text.startswith("%%"):
        found = _comment_step(text)
        if found and found[1] is not None:
            preset, props = found[1]
            add({"op": "step", "id": found[0], "preset": preset, "props": props})
        return
    first, _, rest = text.partition(" ")
    if first == "drop" and rest.strip():
        for node_id in rest.split():
            add({"op": "drop", "id": node_id})
        return
    m = _ADD.fullmatch(text)
    if not m:
        raise LineError("a variant line is drop, add ... after ...: or a %% step")
    found_step = step(m.group(3))
    if found_step is None:
        raise LineError("add needs a step: a preset line after the colon")
    add({"op": "add", "id": m.group(1), "after": m.group(2), "preset": found_step[0],
         "props": found_step[1]})  # fmt: skip


def step_texts(lines: list[str]) -> dict[str, str]:
    """Each step's YL text by node id, as the flow wrote it (a `%%` comment wins over a node
    label), for a build that gets the flow as a plan."""
    texts: dict[str, str] = {}
    header = next((i for i, t in enumerate(lines) if not t.strip().startswith("%%")), None)
    if header is None:
        return texts
    for node in flowchart(lines[header].strip(), lines[header + 1 :]).nodes.values():
        label = node.get("label")
        if label and label.split(maxsplit=1)[0] in cat.STEPS:
            texts[node["id"]] = label
    for text in lines:
        m = _STEP_COMMENT.fullmatch(text.strip())
        if m and m.group(2).split(maxsplit=1)[:1] and m.group(2).split()[0] in cat.STEPS:
            texts[m.group(1)] = m.group(2)
    return texts

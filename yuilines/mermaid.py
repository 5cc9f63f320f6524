"""The Mermaid a `diagram` or `flow` carries, read into nodes and edges (ref-specs §1.9.4).

Only what a phone draws is read: flowcharts (nodes, shapes, links, subgraphs), sequence
diagrams (actors, messages, notes, blocks) and state diagrams. A statement that cannot be read
stays in the source and is skipped; other diagram types keep only their source.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

NODE_ID = re.compile(r"[A-Za-z0-9_]+(?:-(?=[A-Za-z0-9_])[A-Za-z0-9_]+)*")
# Openers and closers of node labels, longest first, with the shape each draws.
SHAPES = (
    ("(((", ")))", "double"),
    ("([", "])", "stadium"),
    ("[[", "]]", "subroutine"),
    ("[(", ")]", "cylinder"),
    ("((", "))", "circle"),
    ("{{", "}}", "hexagon"),
    ("[/", "/]", "slant"),
    ("[\\", "\\]", "slant"),
    ("[", "]", None),
    ("(", ")", "round"),
    ("{", "}", "diamond"),
    (">", "]", "flag"),
)
_TEXT_LINK = (
    re.compile(r"(<?)--\s+(.+?)\s+-{2,}([>xo]?)"),
    re.compile(r"(<?)-\.\s+(.+?)\s+\.-([>xo]?)"),
    re.compile(r"(<?)==\s+(.+?)\s+={2,}([>xo]?)"),
)
_LINK = re.compile(r"(<?)(-{2,}[>xo]|={2,}[>xo]|-\.+-[>xo]|-{3,}|={3,}|-\.+-)")
_PIPE_LABEL = re.compile(r"\s*\|([^|]*)\|")
_SKIP_WORDS = ("classDef", "class", "style", "linkStyle", "click", "direction", "accTitle")
_ENTITIES = {"quot": '"', "amp": "&", "lt": "<", "gt": ">", "nbsp": " ", "apos": "'"}


@dataclass
class Graph:
    """A flowchart: nodes in order of first mention, edges in source order, subgraphs."""

    direction: str = "TD"
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    edges: list[dict[str, Any]] = field(default_factory=list)
    groups: list[dict[str, Any]] = field(default_factory=list)
    stack: list[dict[str, Any]] = field(default_factory=list)

    def node(self, node_id: str) -> dict[str, Any]:
        if node_id not in self.nodes:
            self.nodes[node_id] = {"id": node_id}
            if self.stack:
                self.stack[-1]["nodes"].append(node_id)
        return self.nodes[node_id]


def decode(label: str) -> str:
    """A node label as words: outer quotes off, `#quot;` codes decoded, `<br>` a space."""
    label = label.strip()
    if len(label) >= 2 and label[0] == '"' and label[-1] == '"':
        label = label[1:-1]
    label = re.sub(r"<br\s*/?>", " ", label)

    def entity(m: re.Match[str]) -> str:
        name = m.group(1)
        if name.isdigit():
            return chr(int(name))
        return _ENTITIES.get(name, m.group(0))

    return re.sub(r"#(\w+);", entity, label)


def statements(lines: list[str]) -> list[str]:
    """Lines after the header, split on `;`, skipping comments and styling lines."""
    out: list[str] = []
    for raw in lines:
        text = raw.strip()
        if not text or text.startswith("%%") or text.split(maxsplit=1)[0] in _SKIP_WORDS:
            continue
        out.extend(s.strip() for s in _split_statements(text) if s.strip())
    return out


def _split_statements(text: str) -> list[str]:
    """Split on `;` outside quotes, leaving entity codes (`#quot;`) whole."""
    parts, start, quoted = [], 0, False
    for m in re.finditer(r'"|#\w+;|;', text):
        if m.group(0) == '"':
            quoted = not quoted
        elif m.group(0) == ";" and not quoted:
            parts.append(text[start : m.start()])
            start = m.end()
    parts.append(text[start:])
    return parts


def flowchart(header: str, lines: list[str]) -> Graph:
    words = header.split()
    graph = Graph(direction=words[1] if len(words) > 1 else "TD")
    for text in statements(lines):
        first = text.split(maxsplit=1)[0]
        if first == "subgraph":
            _subgraph(graph, text[len("subgraph") :].strip())
        elif text == "end":
            if graph.stack:
                graph.stack.pop()
        else:
            _statement(graph, text)
    return graph


def _subgraph(graph: Graph, rest: str) -> None:
    m = re.fullmatch(r"(\S+?)\s*\[(.*)\]", rest)
    sub_id, label = (m.group(1), decode(m.group(2))) if m else (rest, rest)
    group: dict[str, Any] = {"id": sub_id, "label": label, "nodes": []}
    if graph.stack:
        group["in"] = graph.stack[-1]["id"]
    graph.groups.append(group)
    graph.stack.append(group)


def _statement(graph: Graph, text: str) -> None:
    """`a[x] --> b & c -->|yes| d`: read all of it or none of it."""
    pos, chain, found = 0, [], []
    group, pos = _node_group(text, pos)
    if group is None:
        return
    chain.append(group)
    while pos < len(text):
        link, pos = _link(text, pos)
        if link is None:
            return
        group, pos = _node_group(text, pos)
        if group is None:
            return
        found.append(link)
        chain.append(group)
    for defs in chain:
        for node_id, label, shape in defs:
            node = graph.node(node_id)
            if label is not None:
                node["label"] = label
            if shape is not None:
                node["shape"] = shape
    for i, link in enumerate(found):
        if link.pop("hidden", False):
            continue
        for src, *_ in chain[i]:
            for dst, *_ in chain[i + 1]:
                graph.edges.append({"from": src, "to": dst, **link})


NodeDef = tuple[str, str | None, str | None]


def _node_group(text: str, pos: int) -> tuple[list[NodeDef] | None, int]:
    defs: list[NodeDef] = []
    while True:
        node, pos = _node(text, pos)
        if node is None:
            return None, pos
        defs.append(node)
        m = re.compile(r"\s*&\s*").match(text, pos)
        if not m:
            return defs, pos
        pos = m.end()


def _node(text: str, pos: int) -> tuple[NodeDef | None, int]:
    while pos < len(text) and text[pos] in " \t":
        pos += 1
    m = NODE_ID.match(text, pos)
    if not m:
        return None, pos
    node_id, pos = m.group(0), m.end()
    label = shape = None
    for opener, closer, kind in SHAPES:
        if text.startswith(opener, pos):
            end = _closing(text, pos + len(opener), closer)
            if end < 0:
                return None, pos
            label, shape = decode(text[pos + len(opener) : end]), kind
            pos = end + len(closer)
            break
    cls = re.compile(r":::[\w-]+").match(text, pos)
    if cls:
        pos = cls.end()
    return (node_id, label, shape), pos


def _closing(text: str, start: int, closer: str) -> int:
    """Where a label's closer is, skipping a quoted label."""
    if text.startswith('"', start):
        quote = text.find('"', start + 1)
        if quote < 0:
            return -1
        return text.find(closer, quote + 1)
    return text.find(closer, start)


def _link(text: str, pos: int) -> tuple[dict[str, Any] | None, int]:
    while pos < len(text) and text[pos] in " \t":
        pos += 1
    if text.startswith("~~~", pos):
        end = pos
        while end < len(text) and text[end] == "~":
            end += 1
        return {"hidden": True}, end
    for regex, style in zip(_TEXT_LINK, (None, "dash", "thick"), strict=True):
        m = regex.match(text, pos)
        if m:
            return _link_props(m.group(1), style, m.group(3) != "", m.group(2)), m.end()
    m = _LINK.match(text, pos)
    if not m:
        return None, pos
    body = m.group(2)
    style = "dash" if "." in body else "thick" if "=" in body else None
    arrow = body[-1] in ">xo"
    pos = m.end()
    label = None
    pipe = _PIPE_LABEL.match(text, pos)
    if pipe:
        label, pos = pipe.group(1).strip(), pipe.end()
    return _link_props(m.group(1), style, arrow, label), pos


def _link_props(back: str, style: str | None, arrow: bool, label: str | None) -> dict[str, Any]:
    link: dict[str, Any] = {}
    if label:
        link["label"] = decode(label)
    if style:
        link["line"] = style
    if not arrow:
        link["plain"] = True
    if back:
        link["both"] = True
    return link


def diagram(lines: list[str]) -> dict[str, Any]:
    """The patch a `diagram` block sends: its type, what it reads, and its source."""
    source = "\n".join(lines)
    body = [ln for ln in lines if ln.strip()]
    start = next((i for i, ln in enumerate(body) if not ln.strip().startswith("%%")), None)
    header = body[start].strip() if start is not None else ""
    kind = header.split(maxsplit=1)[0] if header else ""
    rest = body[start + 1 :] if start is not None else []
    props: dict[str, Any]
    if kind in ("flowchart", "graph"):
        graph = flowchart(header, rest)
        props = {"type": "flow", "dir": graph.direction}
        props.update(_listed(nodes=list(graph.nodes.values()), edges=graph.edges))
        props.update(_listed(groups=graph.groups))
    elif kind == "sequenceDiagram":
        props = {"type": "sequence", **sequence(rest)}
    elif kind.startswith("stateDiagram"):
        props = {"type": "state", **state(rest)}
    else:
        props = {"type": "other"}
    props["source"] = source
    return props


def _listed(**lists: list[Any]) -> dict[str, Any]:
    return {key: value for key, value in lists.items() if value}


_MESSAGE = re.compile(r"([^\s\-+>)x]+)\s*(-{1,2})(>>|>|\)|x)\s*([+-]?)\s*([^\s:]+)\s*:\s*(.*)")
_NOTE = re.compile(r"[Nn]ote\s+(right of|left of|over)\s+([^:]+):\s*(.*)")
SEQUENCE_BLOCKS = frozenset(("alt", "opt", "loop", "par", "critical", "break", "rect", "box"))
_HEADS = {">>": None, ">": "open", ")": "async", "x": "cross"}


def sequence(lines: list[str]) -> dict[str, Any]:
    actors: dict[str, dict[str, Any]] = {}
    steps: list[dict[str, Any]] = []
    numbered = False

    def actor(name: str) -> None:
        actors.setdefault(name, {"id": name})

    for text in statements(lines):
        first, _, rest = text.partition(" ")
        if first == "autonumber":
            numbered = True
        elif first in ("participant", "actor"):
            name, _, label = rest.partition(" as ")
            entry: dict[str, Any] = {"id": name.strip()} | (
                {"label": label.strip()} if label else {}
            )
            if first == "actor":
                entry["actor"] = True
            actors[entry["id"]] = entry
        elif first in SEQUENCE_BLOCKS:
            steps.append({"type": "open", "block": first, "text": rest.strip()})
        elif first in ("else", "and"):
            steps.append({"type": "else", "text": rest.strip()})
        elif text == "end":
            steps.append({"type": "close"})
        elif note := _NOTE.fullmatch(text):
            on = [n.strip() for n in note.group(2).split(",")]
            for name in on:
                actor(name)
            side = note.group(1).split()[0]
            steps.append({"type": "note", "side": side, "on": on, "text": note.group(3)})
        elif msg := _MESSAGE.fullmatch(text):
            src, dashes, head, _, dst, words = msg.groups()
            actor(src)
            actor(dst)
            step = {"type": "msg", "from": src, "to": dst, "text": words.strip()}
            if dashes == "--":
                step["line"] = "dash"
            if _HEADS[head]:
                step["head"] = _HEADS[head]
            steps.append(step)
    out: dict[str, Any] = _listed(actors=list(actors.values()), steps=steps)
    if numbered:
        out["numbered"] = True
    return out


_TRANSITION = re.compile(r"(\S+)\s*-->\s*(\S+?)\s*(?::\s*(.*))?")
_STATE_AS = re.compile(r'state\s+"([^"]*)"\s+as\s+(\S+)')
_STATE_KIND = re.compile(r"state\s+(\S+)\s+<<(\w+)>>")
_STATE_OPEN = re.compile(r"state\s+(\S+)\s*\{")


def state(lines: list[str]) -> dict[str, Any]:
    graph = Graph()
    scope: list[str] = []

    def name(word: str, end: bool) -> str:
        if word != "[*]":
            graph.node(word)
            return word
        base = "_end" if end else "_start"
        node_id = f"{base}_{scope[-1]}" if scope else base
        graph.node(node_id)["shape"] = "end" if end else "start"
        return node_id

    for text in statements(lines):
        if m := _STATE_AS.fullmatch(text):
            graph.node(m.group(2))["label"] = m.group(1)
        elif m := _STATE_KIND.fullmatch(text):
            graph.node(m.group(1))["shape"] = m.group(2)
        elif m := _STATE_OPEN.fullmatch(text):
            node = graph.node(m.group(1))
            group = {"id": node["id"], "label": node.get("label", node["id"]), "nodes": []}
            graph.groups.append(group)
            graph.stack.append(group)
            scope.append(node["id"])
        elif text == "}":
            if scope:
                scope.pop()
                graph.stack.pop()
        elif text.startswith("direction "):
            graph.direction = text.split()[1]
        elif m := _TRANSITION.fullmatch(text):
            src, dst = name(m.group(1), False), name(m.group(2), True)
            edge: dict[str, Any] = {"from": src, "to": dst}
            if m.group(3):
                edge["label"] = m.group(3).strip()
            graph.edges.append(edge)
    out = {"dir": graph.direction}
    out.update(_listed(nodes=list(graph.nodes.values()), edges=graph.edges, groups=graph.groups))
    return out

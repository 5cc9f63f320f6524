"""The A2A plug-in's pure parts: reading a card (which protocol, which key scheme, what it
takes), the two dialects (what the bridge writes, what it reads), and the reply made of a
task's events. No server: the JSON here is what a2a-sdk 1.3 and 0.3.26 send (see
tests/test_a2a_bridge.py for the same against the real servers)."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from bridges.a2a.card import read_card
from bridges.a2a.reply import Files, TaskView, answer_text
from bridges.a2a.wire import V03, V10, Artifact, Event, Part, read
from state.errors import BadInput
from tests.helpers.media import PNG

URL = "http://agent.test/"


def card(**fields: object) -> dict[str, object]:
    return {"name": "Echo", "capabilities": {"streaming": True}, **fields}


def interface(version: str, binding: str = "JSONRPC", url: str = URL) -> dict[str, str]:
    return {"url": url, "protocolBinding": binding, "protocolVersion": version}


# --- the card ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("doc", "version", "endpoint"),
    [
        (card(supportedInterfaces=[interface("1.0")]), "1.0", URL),
        (card(url=URL, preferredTransport="JSONRPC", protocolVersion="0.3.0"), "0.3", URL),
        # a 1.x server with 0.3 compatibility: both faces in one card, 0.3 named first
        (
            card(
                supportedInterfaces=[interface("0.3"), interface("1.0", url="/v1")],
                url=URL,
                protocolVersion="0.3",
                preferredTransport="JSONRPC",
            ),
            "1.0",
            "http://agent.test/v1",
        ),
        (card(supportedInterfaces=[interface("1.0", "GRPC"), interface("0.3")]), "0.3", URL),
        (
            card(
                url="http://x.test/rpc",
                preferredTransport="GRPC",
                additionalInterfaces=[{"url": "http://x.test/j", "transport": "JSONRPC"}],
            ),
            "0.3",
            "http://x.test/j",
        ),
    ],
)
def test_the_card_picks_json_rpc_and_the_newest_protocol(doc, version, endpoint) -> None:
    found = read_card(doc, URL + ".well-known/agent-card.json")
    assert (found.dialect.version, found.url) == (version, endpoint)


def test_a_card_without_json_rpc_says_what_it_offers() -> None:
    doc = card(supportedInterfaces=[interface("1.0", "GRPC"), interface("1.0", "HTTP+JSON")])
    with pytest.raises(BadInput) as refused:
        read_card(doc, URL)
    assert refused.value.message == (
        "the agent offers only GRPC, HTTP+JSON; yui run-a2a speaks A2A over JSON-RPC (1.x or 0.3)"
    )


@pytest.mark.parametrize(
    ("security", "header", "bearer"),
    [
        (
            {
                "securitySchemes": {"b": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}},
                "securityRequirements": [{"schemes": {"b": {"list": []}}}],
            },
            "Authorization",
            True,
        ),
        (
            {
                "securitySchemes": {"k": {"type": "apiKey", "in": "header", "name": "X-Key"}},
                "security": [{"k": []}],
            },
            "X-Key",
            False,
        ),
        (  # the merged card of a 1.x server with 0.3 compatibility
            {
                "securitySchemes": {
                    "k": {
                        "apiKeySecurityScheme": {"location": "header", "name": "X-Key"},
                        "type": "apiKey",
                        "in": "header",
                        "name": "X-Key",
                    }
                },
                "securityRequirements": [{"schemes": {"k": {}}}],
                "security": [{"k": []}],
            },
            "X-Key",
            False,
        ),
    ],
)
def test_the_key_goes_as_the_card_says(security, header, bearer) -> None:
    found = read_card(card(supportedInterfaces=[interface("1.0")], **security), URL)
    assert found.needs_key and found.auth is not None
    assert (found.auth.header, found.auth.bearer) == (header, bearer)
    assert found.auth.value("k1") == ("Bearer k1" if bearer else "k1")


def test_a_scheme_the_bridge_cannot_follow_is_named() -> None:
    oauth: dict[str, object] = {"oauth2SecurityScheme": {"flows": {}}}
    found = read_card(
        card(
            supportedInterfaces=[interface("1.0")],
            securitySchemes={"o": oauth},
            securityRequirements=[{"schemes": {"o": {"list": ["read"]}}}],
        ),
        URL,
    )
    assert found.needs_key and found.auth is None and found.cannot == ("OAuth 2",)


def test_what_the_card_takes() -> None:
    found = read_card(
        card(
            supportedInterfaces=[interface("1.0")],
            defaultInputModes=["text/plain"],
            skills=[{"id": "s", "inputModes": ["image/*"]}],
        ),
        URL,
    )
    assert found.accepts("image/png") and found.accepts("text/plain")
    assert not found.accepts("application/json")
    assert read_card(card(supportedInterfaces=[interface("1.0")]), URL).accepts("video/mp4")


# --- the dialects ------------------------------------------------------------------------------


def test_each_dialect_writes_its_own_message() -> None:
    parts = [
        Part("text", text="hi", metadata={"yui": "channel_guide", "version": "v1"}),
        Part("data", data={"preset": "choose"}),
        Part("file", raw=PNG, media_type="image/png", name="dot.png"),
    ]
    blob = base64.b64encode(PNG).decode()
    assert V10.message(parts, "yui-k", "c1", "t1") == {
        "messageId": "yui-k",
        "contextId": "c1",
        "taskId": "t1",
        "role": "ROLE_USER",
        "parts": [
            {"text": "hi", "metadata": {"yui": "channel_guide", "version": "v1"}},
            {"data": {"preset": "choose"}, "mediaType": "application/json"},
            {"raw": blob, "mediaType": "image/png", "filename": "dot.png"},
        ],
    }
    assert V03.message(parts, "yui-k", "c1", None) == {
        "messageId": "yui-k",
        "contextId": "c1",
        "role": "user",
        "kind": "message",
        "parts": [
            {"kind": "text", "text": "hi", "metadata": {"yui": "channel_guide", "version": "v1"}},
            {"kind": "data", "data": {"preset": "choose"}},
            {"kind": "file", "file": {"bytes": blob, "mimeType": "image/png", "name": "dot.png"}},
        ],
    }
    assert V10.send_params({}, blocking=False) == {
        "message": {},
        "configuration": {"returnImmediately": True},
    }
    assert V03.send_params({}, blocking=False) == {
        "message": {},
        "configuration": {"blocking": False},
    }
    assert V10.headers == {"A2A-Version": "1.0"} and V03.headers == {}


@pytest.mark.parametrize(
    "result",
    [
        {
            "statusUpdate": {
                "taskId": "t",
                "contextId": "c",
                "status": {
                    "state": "TASK_STATE_INPUT_REQUIRED",
                    "timestamp": "ts",
                    "message": {"role": "ROLE_AGENT", "parts": [{"text": "Which day?"}]},
                },
            }
        },
        {
            "kind": "status-update",
            "taskId": "t",
            "contextId": "c",
            "final": False,
            "status": {
                "state": "input-required",
                "timestamp": "ts",
                "message": {
                    "kind": "message",
                    "role": "agent",
                    "parts": [{"kind": "text", "text": "Which day?"}],
                },
            },
        },
    ],
)
def test_a_status_update_reads_the_same_from_either_dialect(result) -> None:
    assert read(result) == Event(
        task_id="t",
        context_id="c",
        state="input-required",
        status=(Part("text", "Which day?"),),
        at="ts",
    )


def test_tasks_artifacts_and_messages_from_either_dialect() -> None:
    task10 = {
        "id": "t",
        "contextId": "c",
        "status": {"state": "TASK_STATE_WORKING"},
        "artifacts": [
            {"artifactId": "a", "parts": [{"url": "http://x/p.png", "mediaType": "image/png"}]}
        ],
    }
    task03 = {
        "kind": "task",
        "id": "t",
        "contextId": "c",
        "status": {"state": "working"},
        "artifacts": [
            {
                "artifactId": "a",
                "parts": [
                    {"kind": "file", "file": {"uri": "http://x/p.png", "mimeType": "image/png"}}
                ],
            }
        ],
    }
    for task in (task10, {"task": task10}, task03):
        event = read(task)
        assert event.snapshot and event.state == "working"
        assert event.artifacts[0].parts == (
            Part("file", url="http://x/p.png", media_type="image/png"),
        )
    piece = read(
        {
            "artifactUpdate": {
                "taskId": "t",
                "append": True,
                "artifact": {"artifactId": "a", "parts": [{"text": "x"}]},
            }
        }
    )
    assert piece.append and piece.artifacts[0].parts == (Part("text", "x"),)
    assert read({"message": {"role": "ROLE_AGENT", "parts": [{"text": "Hi"}]}}).message == (
        Part("text", "Hi"),
    )
    with pytest.raises(ValueError, match="unknown kind"):
        read({"nothing": 1})


# --- the reply ---------------------------------------------------------------------------------


def view(*events: Event) -> TaskView:
    seen = TaskView()
    for event in events:
        seen.apply(event)
    return seen


def text(*parts: str) -> tuple[Part, ...]:
    return tuple(Part("text", p) for p in parts)


def artifact(name: str, *parts: str, append: bool = False) -> Event:
    return Event(task_id="t", artifacts=(Artifact(name, text(*parts)),), append=append)


def test_artifacts_by_id_then_the_final_status_when_it_adds_words(tmp_path: Path) -> None:
    files = Files(tmp_path)
    streamed = view(
        Event(task_id="t", state="working", status=text("Thinking…")),  # progress: left out
        artifact("a", "One, "),
        artifact("b", "Notes."),
        artifact("a", "two.", append=True),
        Event(task_id="t", state="completed", status=text("Done.")),
    )
    assert answer_text(streamed, "Echo", files) == "One, two.\n\nNotes.\n\nDone."
    repeated = view(
        artifact("a", "Done."), Event(task_id="t", state="completed", status=text("Done."))
    )
    assert answer_text(repeated, "Echo", files) == "Done."
    replaced = view(artifact("a", "draft"), artifact("a", "final"), Event(state="completed"))
    assert answer_text(replaced, "Echo", files) == "final"
    old_style = view(Event(task_id="t", state="completed", status=text("In the status.")))
    assert answer_text(old_style, "Echo", files) == "In the status."


@pytest.mark.parametrize(
    ("state", "said", "line"),
    [
        ("failed", "the oven\n is on fire", "Echo couldn't finish this: the oven is on fire"),
        ("rejected", "", "Echo turned this down: it gave no reason"),
        ("canceled", "shutting down", "Echo called this off: shutting down"),
        ("input-required", "", "Echo needs more from you to go on."),
        ("auth-required", "", "Echo asks you to sign in first."),
        ("auth-required", "Sign in at https://x.test", "Sign in at https://x.test"),
    ],
)
def test_an_end_or_a_question_in_one_line(state, said, line, tmp_path: Path) -> None:
    ended = view(artifact("a", "partial"), Event(task_id="t", state=state, status=text(said)))
    if state in ("input-required", "auth-required"):
        ended = view(Event(task_id="t", state=state, status=text(said)))
    assert answer_text(ended, "Echo", Files(tmp_path)) == line
    assert ended.done


def test_files_and_data_become_media_lines_and_json(tmp_path: Path) -> None:
    parts = (
        Part("text", "Here:"),
        Part("file", raw=PNG, media_type="image/png", name="dot.png"),
        Part("file", raw=b"%PDF-1.4", media_type="application/pdf", name="r.pdf"),
        Part("file", url="http://127.0.0.1:9/x.png", name="x.png"),
        Part("data", data={"a": 1}),
    )
    shown = answer_text(view(Event(message=parts)), "Echo", Files(tmp_path))
    (kept,) = tmp_path.glob("a2a-*.png")
    assert kept.read_bytes() == PNG and kept.stat().st_mode & 0o777 == 0o600
    assert shown == (
        f"Here:\n\n```yui\nimage {kept}\n```\n\n📎 r.pdf (a file Yui can't show)\n\n"
        '📎 x.png: http://127.0.0.1:9/x.png\n\n```json\n{\n  "a": 1\n}\n```'
    )

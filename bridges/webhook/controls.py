"""Controls served by an author's webhook (`yui run-webhook --controls`).

The report: at start the bridge asks `GET <webhook URL>` with `x-yui-kind: controls` (signed
like every call, over the empty body) and reads `{"v": 1, "sections": {"soul": "rw", …}}`.
A GET keeps the webhook the one source of what it serves, and a webhook that never heard of
Controls answers it 404 or 405 (or its usual page), which means none: the bridge says so once
and serves nothing.

Each request: the bridge runs every check first, then POSTs the request on its own, signed,
with `x-yui-kind: control` and `{"agent": {…}, "control": {v, op, section, id?, rev?, value?,
verb?, confirmed?}}` (a put or delete is preceded by a `get`, for the rev check and the trash
copy). The webhook answers `{"ok": true, "items": […]}` (list), `{"ok": true, "item": {…}}`
(get, put, act), `{"ok": true}` (delete), or `{"ok": false, "error": code, "message": …}`.
Its answer goes through the same checks as any item before it is written: shape, 32 KB, and
every key-shaped line hidden.
"""

from __future__ import annotations

import json
import logging
import uuid
from typing import TYPE_CHECKING, Any

import urllib3

from bridges.client.rows import AgentInfo
from bridges.controls.provider import ControlError, ControlsProvider, V
from bridges.controls.text import MESSAGES, redact_text
from state.errors import Unreachable

if TYPE_CHECKING:  # the plug-in builds its Controls: no import cycle at run time
    from bridges.webhook.plugin import WebhookAgent

log = logging.getLogger("yui.webhook")

KIND = "x-yui-kind"
MAX_ANSWER = 256 * 1024  # bytes of a Controls answer read at most
MAX_MESSAGE = 200
# Refusals a webhook may give in its own words; any other code reads as `failed`.
PASSED = frozenset(
    {
        "not_found",
        "conflict",
        "bad_verb",
        "bad_value",
        "read_only",
        "too_big",
        "empty",
        "unsafe",
        "keep_soul",
        "bundled",
        "no_frontmatter",
        "bad_schedule",
        "not_allowed",
        "failed",
    }
)


class WebhookControls(ControlsProvider):
    """Controls that ask the webhook, one signed call per step."""

    def __init__(self, hook: WebhookAgent, timeout: float = 10.0) -> None:
        self.hook = hook
        self.timeout = min(timeout, hook.timeout)
        self._sections: dict[str, str] = {}

    def sections(self) -> dict[str, str]:
        return dict(self._sections)

    def load_report(self) -> None:
        """Ask the webhook what it serves; `Unreachable` while it can't be asked."""
        headers = {**self.hook.signed_headers(_key(), b""), KIND: "controls"}
        try:
            with self.hook.call("GET", None, headers, self.timeout) as resp:
                if resp.status == 429 or resp.status >= 500:
                    raise Unreachable(f"the webhook answered {resp.status}")
                report = _json(resp) if 200 <= resp.status < 300 else None
        except urllib3.exceptions.HTTPError as exc:
            raise Unreachable(f"the webhook can't be asked for its Controls: {exc}") from None
        sections = report.get("sections") if isinstance(report, dict) else None
        if not isinstance(report, dict) or report.get("v") != V or not isinstance(sections, dict):
            log.warning(
                "--controls: the webhook gave no Controls report (GET with %s: controls); "
                "it serves none",
                KIND,
            )
            sections = {}
        self._sections = {k: v for k, v in sections.items() if isinstance(v, str)}

    def list(self, agent: AgentInfo, section: str) -> list[dict[str, Any]]:
        items: Any = self._ask(agent, {"op": "list", "section": section}).get("items")
        return items  # its shape is checked with every other answer's

    def get(self, agent: AgentInfo, section: str, item_id: str) -> dict[str, Any] | None:
        try:
            return self._ask(agent, {"op": "get", "section": section, "id": item_id}).get("item")
        except ControlError as refusal:
            if refusal.code == "not_found":
                return None
            raise

    def put(
        self, agent: AgentInfo, section: str, item_id: str, value: dict[str, Any], rev: str
    ) -> dict[str, Any]:
        control = {"op": "put", "section": section, "id": item_id, "rev": rev, "value": value}
        item: Any = self._ask(agent, control).get("item")
        return item

    def act(self, agent: AgentInfo, section: str, item_id: str, verb: str) -> dict[str, Any]:
        control = {"op": "act", "section": section, "id": item_id, "verb": verb}
        item: Any = self._ask(agent, control).get("item")
        return item

    def delete(self, agent: AgentInfo, section: str, item_id: str, rev: str) -> None:
        control = {"op": "delete", "section": section, "id": item_id, "rev": rev}
        self._ask(agent, {**control, "confirmed": True})

    def _ask(self, agent: AgentInfo, control: dict[str, Any]) -> dict[str, Any]:
        """One signed POST; the webhook's answer if it says ok, else its refusal."""
        raw = json.dumps({"agent": agent.as_payload(), "control": {"v": V, **control}}).encode()
        headers = {**self.hook.signed_headers(_key(), raw), KIND: "control"}
        try:
            with self.hook.call("POST", raw, headers, self.timeout) as resp:
                if not 200 <= resp.status < 300:
                    raise ControlError("failed", detail=f"the webhook answered {resp.status}")
                answer = _json(resp)
        except urllib3.exceptions.HTTPError:
            raise ControlError("failed", detail="the webhook didn't answer") from None
        if not isinstance(answer, dict):
            raise ControlError("failed", detail="the webhook's answer isn't a JSON object")
        if answer.get("ok") is True:
            return answer
        said = answer.get("error")
        code = said if isinstance(said, str) and said in PASSED else "failed"
        message = answer.get("message")
        if isinstance(message, str) and message.strip():
            message = redact_text(" ".join(message.split())[:MAX_MESSAGE])[0]
        else:
            message = MESSAGES[code]
        raise ControlError(code, message)


def _key() -> str:
    """A Standard Webhooks id for one call (never retried, so never repeated)."""
    return "ctl_" + uuid.uuid4().hex


def _json(resp: urllib3.BaseHTTPResponse) -> Any:
    """The answer's JSON, or None when it is too big or not JSON."""
    body = resp.read(MAX_ANSWER + 1, decode_content=True) or b""
    if len(body) > MAX_ANSWER:
        return None
    try:
        return json.loads(body.decode("utf-8", errors="replace").removeprefix("\ufeff"))
    except (ValueError, RecursionError):
        return None

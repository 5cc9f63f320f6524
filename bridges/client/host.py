"""A host's standing with its relay: pairing, the session, heartbeats, and REST as the host.

The connector token (`yui_ct_…`) is traded for a 60-minute session JWT, renewed 10 minutes
before it expires; a REST or Storage call answered 401 gets one fresh session and one retry
(the session is the client's `Renewable` auth). A refusal of the token itself (removed in the
app, suspended) is final and surfaces as `Refused`/`Suspended`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import email.utils
import socket
import threading
import time
from typing import Any

from bridges.client.http import Response
from bridges.client.relay import (
    CONNECT,
    Params,
    RelayClient,
    client_for,
    error_code,
    raise_for_status,
)
from bridges.client.rows import AgentInfo
from bridges.client.storage import Bucket
from state.errors import BadInput, Unreachable
from state.host import HostState, Secret, utc_iso
from state.rules import checked_ref

REFRESH_MARGIN = 600.0  # seconds before expiry that a session is renewed
FLOOR_MARGIN = dt.timedelta(seconds=2)  # the relay's Date header has one-second resolution
PUSH = "yui-push"


def relay_time(response: Response) -> dt.datetime:
    """The relay's clock, from its `Date` header (this machine's when it has none)."""
    header = response.headers.get("date")
    if header:
        try:
            return email.utils.parsedate_to_datetime(header).astimezone(dt.UTC)
        except (TypeError, ValueError):
            pass
    return dt.datetime.now(dt.UTC)


def _expiry(iso: str) -> float:
    return dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def pair(
    code: str,
    *,
    ref: str,
    host_name: str | None,
    url: str | None,
    state: HostState,
    kind: str = "http",
) -> dict[str, Any]:
    """Claim a 6-digit code; keep the token; the agent's floor starts at the relay's now.

    A machine already paired presents its token, so the relay binds the new agent to the same
    host instead of making another one.
    """
    code = code.strip()
    if not (len(code) == 6 and code.isdigit()):
        raise BadInput(f"a pairing code is 6 digits, not {code!r}")
    checked_ref(ref)
    snapshot = state.snapshot()
    client = client_for(url or snapshot.url)
    body = {
        "action": "pair",
        "code": code,
        "remote_ref": ref,
        "kind": kind,
        "serving": [],
        "host_name": host_name or socket.gethostname().split(".")[0] or "My computer",
    }
    token = snapshot.token.reveal() if snapshot.token else None
    response = client.function(CONNECT, body, auth=token)
    if response.status_code == 409:
        raise BadInput(
            f"this computer already serves an agent as {ref!r}", hint="pair with another --ref"
        )
    if response.status_code == 401:
        raise BadInput(
            "that code is wrong, used or expired",
            hint="codes last 10 minutes and die after too many wrong tries; make a fresh one"
            " in the app",
        )
    if response.status_code == 429 and error_code(response) == "too_many_attempts":
        raise BadInput(
            "too many wrong pairing codes from this address",
            hint="wait 10 minutes, then try the right code again",
        )
    raise_for_status(response, "pairing")
    answer = response.json()
    new_token = answer.get("connector_token") or token
    if not new_token:
        raise BadInput("the relay paired the agent but sent no connector token")
    state.set_pairing(token=new_token, connector=answer["connector"], url=client.url)
    floor = relay_time(response) - FLOOR_MARGIN
    state.setdefault_floors([str(answer["agent"]["id"])], floor)
    state.remember_session_agent(answer["agent"])  # `yui send --agent` knows it at once
    return answer


class HostSession:
    """The session of one paired host; safe to share between threads."""

    def __init__(self, state: HostState, url: str | None = None) -> None:
        pairing = state.pairing()
        self.state = state
        self.token: Secret = pairing.token
        self.client: RelayClient = client_for(url or pairing.url)
        self.bucket = Bucket(self.client, self)  # the media bucket, as this host
        self.connector = pairing.connector
        self._lock = threading.Lock()
        self._jwt: str | None = None
        self._expires = 0.0
        self.user_id = ""
        self.agents: dict[str, AgentInfo] = {}  # the agents this process serves or writes as
        self.every_agent: dict[str, AgentInfo] = {}  # all the host's, whatever `only` says
        self.only: tuple[str, ...] = ()  # a bridge's --agent: serve only the agents named
        self.guide: dict[str, Any] | None = None
        self.app_build: int | None = None  # the person's oldest app build: what it can draw
        self.relay_now = dt.datetime.now(dt.UTC)

    def __repr__(self) -> str:
        return f"HostSession({self.client.url!r})"

    # --- the token trade -----------------------------------------------------------------

    def connect(self, action: str, **body: Any) -> dict[str, Any]:
        """A yui-connect call with the connector token."""
        response = self.client.function(
            CONNECT, {"action": action, **body}, auth=self.token.reveal()
        )
        raise_for_status(response, f"{CONNECT} {action}")
        self.relay_now = relay_time(response)
        return response.json()

    def open(self, serving: list[str] | None = None) -> dict[str, Any]:
        """Trade the token for a session (also a heartbeat) and learn the host's agents."""
        body: dict[str, Any] = {} if serving is None else {"serving": serving}
        with self._lock:
            answer = self.connect("session", **body)
            self._jwt = answer["access_token"]
            self._expires = _expiry(answer["expires_at"])
            self.user_id = str(answer["user_id"])
            self.guide = answer.get("guide") or self.guide
            self.app_build = answer.get("app_build")
            self.set_agents(answer.get("agents", []))
            self.state.save_session(
                {
                    "access_token": self._jwt,
                    "expires_at": answer["expires_at"],
                    "user_id": self.user_id,
                    "agents": answer.get("agents", []),
                    "guide": self.guide,
                    "app_build": self.app_build,
                }
            )
        return answer

    def resume(self, min_left: float = 60.0) -> bool:
        """Use the session a bridge saved, if it has `min_left` seconds to live; True if it
        did. A restart or a `yui send` then costs no token trade of its own."""
        saved = self.state.load_session()
        if not saved or _expiry(saved["expires_at"]) - time.time() < min_left:
            return False
        with self._lock:
            self._jwt, self._expires = saved["access_token"], _expiry(saved["expires_at"])
            self.user_id = saved["user_id"]
            self.guide = saved.get("guide") or self.guide
            self.app_build = saved.get("app_build")
            self.set_agents(saved.get("agents", []))
        return True

    def offline(self) -> bool:
        """Without a relay: the person and agents from the last session, to queue a message."""
        saved = self.state.load_session()
        if not saved:
            return False
        self.user_id = saved["user_id"]
        self.set_agents(saved.get("agents", []))
        return True

    def set_agents(self, agents: list[dict[str, Any]]) -> list[AgentInfo]:
        """Replace the served agents (those `only` names, when it names any); returns the ones
        not seen before."""
        self.every_agent = {str(a["id"]): AgentInfo.from_session(a) for a in agents}
        fresh = {
            agent_id: info
            for agent_id, info in self.every_agent.items()
            if not self.only or any(info.named(name) for name in self.only)
        }
        new = [info for agent_id, info in fresh.items() if agent_id not in self.agents]
        self.agents = fresh
        return new

    def refresh_agents(self) -> None:
        """Learn the host's agents again (one paired since the saved session, say) with a
        read that is no heartbeat, and keep them in the saved session for the next command."""
        agents = self.connect("status")["agents"]
        self.set_agents(agents)
        self.state.save_session_agents(agents)

    def current(self) -> str:
        """The session JWT as it is now, without renewing it (for the live feed)."""
        return self._jwt or ""

    def ensure(self) -> str:
        """A session JWT with at least ten minutes to live."""
        if self._jwt is None or self._expires - time.time() < REFRESH_MARGIN:
            self.open()
        assert self._jwt is not None
        return self._jwt

    def bearer(self) -> str:
        """The token the client sends for this host: a live session JWT."""
        return self.ensure()

    def renew(self) -> None:
        """A fresh session, after the relay answered 401 to the one sent."""
        self.open()

    def agent(self, wanted: str | None, *, refresh: bool = False) -> AgentInfo:
        """The agent an id, handle, ref or name names (exactly, any case); none given: the
        first. With `refresh`, a name the saved session doesn't know gets one fresh look at
        the relay before it is refused (an agent paired since, or by another command)."""
        if refresh and (not self.agents or not self._known(wanted)):
            with contextlib.suppress(Unreachable):
                self.refresh_agents()
        if not self.agents:
            raise BadInput("this host serves no agent yet", hint="pair one: yui pair <code>")
        if wanted is None:
            return next(iter(self.agents.values()))
        for agent in self.agents.values():
            if agent.named(wanted):
                return agent
        listed = ", ".join(a.handle for a in self.agents.values())
        raise BadInput(f"no agent {wanted!r} on this host (agents: {listed})")

    def _known(self, wanted: str | None) -> bool:
        return wanted is None or any(a.named(wanted) for a in self.agents.values())

    # --- REST as the host --------------------------------------------------------------

    def rest(
        self,
        method: str,
        table: str,
        *,
        params: Params | None = None,
        body: Any = None,
        prefer: str | None = None,
    ) -> Response:
        """A REST call as the host (a 401 gets one new session and one retry)."""
        return self.client.rest(method, table, auth=self, params=params, body=body, prefer=prefer)

    def rows(self, table: str, params: Params) -> list[dict[str, Any]]:
        response = self.rest("GET", table, params=params)
        raise_for_status(response, f"reading {table}")
        return response.json()

    def mark(self, ids: list[str], *columns: str) -> None:
        """Set `delivered_at` (alone, only where unset: the first pickup counts), `handled_at`,
        or both (rows whose delivered mark this bridge hasn't written: it rides with the ack)."""
        if not ids:
            return
        params = [("id", f"in.({','.join(ids)})")]
        if columns == ("delivered_at",):
            params.append(("delivered_at", "is.null"))
        now = utc_iso()
        response = self.rest(
            "PATCH",
            "yui_messages",
            params=params,
            body=dict.fromkeys(columns, now),
            prefer="return=minimal",
        )
        what = " and ".join(c.removesuffix("_at") for c in columns)
        raise_for_status(response, f"marking {len(ids)} rows {what}")

    def notify(self, message_id: str, *, handoff: bool) -> None:
        """Ask the relay to push a new agent row to the person's phones (best effort)."""
        with contextlib.suppress(Unreachable):
            self.client.function(
                PUSH,
                {"action": "notify", "message_id": message_id, "handoff": handoff},
                auth=self.token.reveal(),
                timeout=10,
            )


def host_status(state: HostState, url: str | None = None) -> dict[str, Any]:
    """The host, its agents with presence, and what it still owes the relay.

    Presence comes from a read-only call that doesn't count as a heartbeat; when the relay
    can't be reached, the agents of the last session are listed without it.
    """
    session = HostSession(state, url)
    report = {**state.snapshot().redacted(), "url": session.client.url, "relay": "reachable"}
    try:
        answer = session.connect("status")
        report["connector"] = answer["connector"]
        report["agents"] = answer["agents"]
    except Unreachable:
        session.offline()
        report["relay"] = "unreachable"
        report["agents"] = [
            {**a.as_payload(), "presence": "unknown"} for a in session.agents.values()
        ]
    report.pop("floors", None)
    return report


def fetch_guide(state: HostState, url: str | None = None) -> dict[str, Any]:
    """The relay's current channel guide (public: no pairing needed)."""
    client = client_for(url or state.snapshot().url)
    guide = client.call(CONNECT, {"action": "guide"}).get("guide")
    if not guide:
        raise Unreachable("the relay has no channel guide published yet")
    return guide

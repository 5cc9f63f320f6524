"""An A2A agent's card: where it answers, in which protocol, what it takes, how to sign in.

The card is at `<base URL>/.well-known/agent-card.json` (older agents: `agent.json`). A 1.0 card
lists `supportedInterfaces`, each with its binding and protocol version; a 0.3 card names one
`url` with a `preferredTransport` and `additionalInterfaces`; a 1.x server with 0.3
compatibility serves both at once. The bridge speaks JSON-RPC, 1.x when offered, else 0.3.
Security schemes it can follow are a bearer token and an API key in a header; the key itself
comes from the person running the bridge, never from the card.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin, urlsplit

import requests

from bridges.a2a.wire import V03, V10, Dialect
from bridges.client.relay import USER_AGENT
from state.errors import BadInput, Unreachable

CARD_PATH = "/.well-known/agent-card.json"
OLD_CARD_PATH = "/.well-known/agent.json"  # before 0.3.x renamed it
MAX_CARD = 1024 * 1024  # bytes
CARD_TIMEOUT = 20.0  # seconds


@dataclass(frozen=True)
class Auth:
    """How the key goes: `Authorization: Bearer <key>`, or the key alone in an API-key header."""

    scheme: str  # its name in the card
    header: str
    bearer: bool

    def value(self, key: str) -> str:
        return f"Bearer {key}" if self.bearer else key

    @property
    def words(self) -> str:
        return "a bearer token" if self.bearer else f"an API key in {self.header}"


@dataclass(frozen=True)
class Card:
    name: str
    url: str  # the JSON-RPC endpoint
    dialect: Dialect
    streaming: bool
    input_modes: frozenset[str]  # media types it takes; empty: it names none, so anything
    auth: Auth | None  # the scheme the bridge would use, if the card names one it can
    needs_key: bool  # the card requires some scheme
    cannot: tuple[str, ...] = ()  # schemes it requires that the bridge can't follow
    fetched: float = 0.0  # time.monotonic() when read

    @property
    def protocol(self) -> str:
        return f"A2A {self.dialect.version} over JSON-RPC"

    @property
    def where(self) -> str:
        """The endpoint's host and port (a URL's path or query may carry a token)."""
        return urlsplit(self.url).netloc.rpartition("@")[2]

    def accepts(self, media_type: str) -> bool:
        """Whether the agent takes a part of this type (a part it doesn't list is refused)."""
        family = media_type.split("/", 1)[0]
        modes = self.input_modes
        return not modes or bool({media_type, "*/*", f"{family}/*"} & modes)


def card_url(url: str) -> str:
    """The card's URL: the URL itself when it names a JSON file, else the well-known path."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("the agent's URL must be http:// or https:// with a host")
    if parts.path.endswith(".json"):
        return url.strip()
    return url.strip().rstrip("/") + CARD_PATH


def fetch_card(url: str, session: requests.Session, timeout: float = CARD_TIMEOUT) -> Card:
    """Read and understand the card of the agent at `url` (its base URL or its card's)."""
    first = card_url(url)
    tried = [first]
    if first.endswith(CARD_PATH):
        tried.append(first.removesuffix(CARD_PATH) + OLD_CARD_PATH)
    where = urlsplit(first).netloc.rpartition("@")[2]
    for attempt in tried:
        try:
            with session.get(
                attempt,
                headers={"accept": "application/json", "user-agent": USER_AGENT},
                timeout=timeout,
                stream=True,
                allow_redirects=True,
            ) as resp:
                if resp.status_code == 404:
                    continue
                if resp.status_code >= 500 or resp.status_code == 429:
                    raise Unreachable(f"the agent at {where} answered {resp.status_code}")
                if resp.status_code >= 300:
                    raise BadInput(f"the agent card at {where} answered {resp.status_code}")
                raw = resp.raw.read(MAX_CARD + 1, decode_content=True)
        except requests.RequestException as exc:
            raise Unreachable(f"can't reach the agent at {where}: {type(exc).__name__}") from None
        if len(raw) > MAX_CARD:
            raise BadInput(f"the agent card at {where} is over {MAX_CARD} bytes")
        try:
            doc = json.loads(raw)
        except ValueError:
            raise BadInput(f"the agent card at {where} is not JSON") from None
        return read_card(doc, attempt)
    raise BadInput(f"no agent card at {where} ({CARD_PATH})", hint="is it an A2A agent's base URL?")


def read_card(doc: Any, url: str) -> Card:
    """The card `doc`, read from `url` (relative endpoints are resolved against it)."""
    if not isinstance(doc, dict):
        raise BadInput("the agent card is not a JSON object")
    name = str(doc.get("name") or "")
    endpoint, dialect = _endpoint(doc, url)
    caps = _obj(doc.get("capabilities"))
    modes = set(_strings(doc.get("defaultInputModes")))
    for skill in _dicts(doc.get("skills")):
        modes.update(_strings(skill.get("inputModes")))
    auth, needs_key, cannot = _auth(doc)
    return Card(
        name=name.strip() or "The agent",
        url=endpoint,
        dialect=dialect,
        streaming=caps.get("streaming") is True,
        input_modes=frozenset(modes),
        auth=auth,
        needs_key=needs_key,
        cannot=cannot,
        fetched=time.monotonic(),
    )


def _endpoint(doc: dict[str, Any], url: str) -> tuple[str, Dialect]:
    """The JSON-RPC interface to use: 1.x when the card offers it, else 0.x."""
    offered: list[tuple[str, str, str]] = []  # (url, binding, version)
    for item in _dicts(doc.get("supportedInterfaces")):
        binding = str(item.get("protocolBinding") or item.get("transport") or "")
        offered.append(
            (str(item.get("url") or ""), binding, str(item.get("protocolVersion") or ""))
        )
    if isinstance(doc.get("url"), str):  # a 0.3 card (or a 1.x card's 0.3 face)
        version = str(doc.get("protocolVersion") or "0.3")
        offered.append((doc["url"], str(doc.get("preferredTransport") or "JSONRPC"), version))
        for item in _dicts(doc.get("additionalInterfaces")):
            offered.append((str(item.get("url") or ""), str(item.get("transport") or ""), version))
    rpc = [(u, v) for u, binding, v in offered if binding.upper() == "JSONRPC" and u]
    for wanted, dialect in (("1.", V10), ("0.", V03)):
        for endpoint, version in rpc:
            if (version or "0.3").startswith(wanted):
                return urljoin(url, endpoint), dialect
    bindings = sorted({binding or "?" for _, binding, _ in offered})
    if not bindings:
        raise BadInput("the agent card names no interface to call")
    raise BadInput(
        f"the agent offers only {', '.join(bindings)}; yui run-a2a speaks A2A over JSON-RPC "
        "(1.x or 0.3)"
    )


def _auth(doc: dict[str, Any]) -> tuple[Auth | None, bool, tuple[str, ...]]:
    """The scheme to use, whether the card requires one, and the required ones we can't do."""
    schemes = _obj(doc.get("securitySchemes"))
    usable = {name: auth for name, raw in schemes.items() if (auth := _scheme(name, raw))}
    required: list[list[str]] = []
    for item in _dicts(doc.get("securityRequirements")):  # 1.0: {"schemes": {name: {...}}}
        if isinstance(item.get("schemes"), dict) and item["schemes"]:
            required.append(list(item["schemes"]))
    for item in _dicts(doc.get("security")):  # 0.3: {name: [scopes]}
        if item and not required:
            required.append(list(item))
    for names in required:
        if len(names) == 1 and names[0] in usable:
            return usable[names[0]], True, ()
    if required:
        cannot = tuple(_kind(schemes.get(n)) for names in required for n in names)
        return None, True, tuple(dict.fromkeys(cannot))
    return next(iter(usable.values()), None), False, ()


def _scheme(name: str, raw: Any) -> Auth | None:
    if not isinstance(raw, dict):
        return None
    http = raw.get("httpAuthSecurityScheme")
    key = raw.get("apiKeySecurityScheme")
    if isinstance(http, dict) or raw.get("type") == "http":
        scheme = (http if isinstance(http, dict) else raw).get("scheme")
        if isinstance(scheme, str) and scheme.lower() == "bearer":
            return Auth(name, "Authorization", bearer=True)
    if isinstance(key, dict) or raw.get("type") == "apiKey":
        spec = key if isinstance(key, dict) else raw
        where = spec.get("location", spec.get("in"))
        header = spec.get("name")
        if where == "header" and isinstance(header, str) and header:
            return Auth(name, header, bearer=False)
    return None


def _kind(raw: Any) -> str:
    """A scheme the bridge can't follow, in a word (oauth2, openIdConnect, mutualTLS, …)."""
    if not isinstance(raw, dict):
        return "an unknown scheme"
    for key, word in (
        ("oauth2SecurityScheme", "OAuth 2"),
        ("openIdConnectSecurityScheme", "OpenID Connect"),
        ("mtlsSecurityScheme", "mutual TLS"),
        ("httpAuthSecurityScheme", "HTTP auth other than bearer"),
        ("apiKeySecurityScheme", "an API key outside a header"),
    ):
        if key in raw:
            return word
    return str(raw.get("type") or "an unknown scheme")


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []

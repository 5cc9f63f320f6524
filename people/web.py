"""The web app's one-time sign-in link: `yui app web` opens the page already signed in as a
person of this machine, with no password typed.

The secret is made here and only its SHA-256 goes to the relay, written as the person (their
app token), so the relay's policy decides whose link it is. It rides in the link's fragment
(`#signin=…`), which a browser never sends to a server, so no access log holds it; the page
trades it once, within ten minutes, for a session.
"""

from __future__ import annotations

import hashlib
import html
import os
import secrets
from pathlib import Path

from bridges.client.relay import raise_for_status
from people.person import PersonApp
from state.errors import Unreachable
from state.paths import ensure_private_dir, yui_home

SECRET_PREFIX = "yui_web_"  # relay/gateway/webapp.py refuses any other


def page_url(relay_url: str) -> str:
    """Where the relay serves the web app."""
    return relay_url.rstrip("/") + "/app/"


def signin_link(app: PersonApp) -> str:
    """A link that signs `app`'s person in once, in the next ten minutes."""
    secret = SECRET_PREFIX + secrets.token_urlsafe(32)
    response = app.client.rest(
        "POST",
        "yui_signin_links",
        auth=app.token(),
        body={"secret_hash": hashlib.sha256(secret.encode()).hexdigest()},
        prefer="return=minimal",
    )
    if response.status_code == 429:
        raise Unreachable(
            "too many sign-in links in the last hour", hint="use one you have, or wait a while"
        )
    raise_for_status(response, "making a sign-in link")
    return f"{page_url(app.record.url)}#signin={secret}"


def opener(link: str) -> Path:
    """A page in the person's private folder (mode 600) that goes on to `link`: a browser is
    started with its path, so the secret never shows in the process list as an argument."""
    path = ensure_private_dir(yui_home()) / "web-signin.html"
    target = html.escape(link, quote=True)
    page = f'<!doctype html><meta http-equiv="refresh" content="0;url={target}">\n'
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(page)
    path.chmod(0o600)
    return path

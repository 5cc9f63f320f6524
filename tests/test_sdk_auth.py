"""The official clients' `auth` against the relay's /auth/v1, each unchanged: signing up and in
with a password, refreshing, reading and changing the user, signing out; anonymous sign-in only
where the relay allows it; a CLI person signing in with the password `yui app set-password`
set; and every refusal (wrong password, used or revoked refresh token, the kill switch, the
rate limits) as the SDK's own error with GoTrue's status and code.

Each test names its own client address (the session relay trusts its loopback proxy), so the
per-address buckets are its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import requests
from click.testing import CliRunner

from tests.helpers.cli import ROOT, yui
from tests.helpers.relay import LocalRelay, fresh_ip, running_relay
from tests.helpers.sdk import run_js
from yui_cli.main import cli

PASSWORD = "correct horse 42"


def new_email() -> str:
    return f"p-{uuid.uuid4().hex[:10]}@example.com"


@contextmanager
def py_client(relay: LocalRelay, ip: str) -> Iterator[Any]:
    """A supabase-py client as a script builds one, its session in memory, no timer thread."""
    from supabase import ClientOptions, create_client

    with httpx.Client(timeout=30) as http:
        options = ClientOptions(
            headers={"x-forwarded-for": ip},
            httpx_client=http,
            persist_session=False,
            auto_refresh_token=False,
        )
        yield create_client(relay.url, relay.anon_key, options=options)


def refused(call: Callable[[], Any]) -> tuple[int, str | None]:
    """The status and code of the AuthApiError a supabase-py call raises."""
    from supabase_auth.errors import AuthApiError

    with pytest.raises(AuthApiError) as caught:
        call()
    return caught.value.status, caught.value.code


# supabase-js, with a session persisted in a storage the script can look into.
JS_CLIENT = """
import { createClient } from '@supabase/supabase-js'
const store = new Map()
const storage = {
  getItem: (k) => store.get(k) ?? null,
  setItem: (k, v) => { store.set(k, v) },
  removeItem: (k) => { store.delete(k) },
}
const client = () => createClient(process.env.URL, process.env.ANON, {
  auth: { storage, persistSession: true, autoRefreshToken: false, detectSessionInUrl: false },
  global: { headers: { 'x-forwarded-for': process.env.IP } },
})
const sb = client()
const events = []
sb.auth.onAuthStateChange((event) => { events.push(event) })
const brief = (error) => error && { name: error.name, status: error.status, code: error.code }
const email = process.env.EMAIL, password = process.env.PASSWORD
const out = {}
"""


def js(relay: LocalRelay, ip: str, body: str, **env: str) -> Any:
    return run_js(
        JS_CLIENT + body + "\nconsole.log(JSON.stringify(out))",
        env={"URL": relay.url, "ANON": relay.anon_key, "IP": ip, "PASSWORD": PASSWORD, **env},
    )


# --- the whole round, each client ---------------------------------------------------------


def test_supabase_py_signs_up_in_refreshes_reads_and_signs_out(relay: LocalRelay) -> None:
    email, events = new_email(), []
    with py_client(relay, fresh_ip()) as client:
        client.auth.on_auth_state_change(lambda event, session: events.append(event))
        options = {"data": {"name": "Ann"}}
        made = client.auth.sign_up({"email": email, "password": PASSWORD, "options": options})
        assert made.session is not None and made.user is not None
        assert (made.user.email, made.user.user_metadata, made.user.role) == (
            email,
            {"name": "Ann"},
            "yui_user",
        )
        again = {"email": email.upper(), "password": PASSWORD}
        assert refused(lambda: client.auth.sign_up(again)) == (422, "user_already_exists")
        long = {"email": new_email(), "password": "é" * 37}  # 37 characters, 74 bytes
        assert refused(lambda: client.auth.sign_up(long)) == (422, "validation_failed")
        wrong = {"email": email, "password": PASSWORD + "!"}
        assert refused(lambda: client.auth.sign_in_with_password(wrong)) == (
            400,
            "invalid_credentials",
        )
        first = client.auth.sign_in_with_password({"email": email.upper(), "password": PASSWORD})
        assert first.user is not None and first.user.id == made.user.id
        assert first.session is not None and first.session.expires_at is not None

        # The signed-in client reads through PostgREST with the session's token.
        own = client.table("yui_users").select("id,email").execute().data
        assert own == [{"id": made.user.id, "email": email}]

        renewed = client.auth.refresh_session()
        assert renewed.session is not None
        assert renewed.session.refresh_token != first.session.refresh_token
        used = first.session.refresh_token
        assert refused(lambda: client.auth.refresh_session(used)) == (
            400,
            "refresh_token_not_found",
        )
        user = client.auth.get_user()
        assert user is not None and user.user.email == email

        client.auth.update_user({"password": PASSWORD + "2", "data": {"name": "Ann B"}})
        assert client.auth.get_user().user.user_metadata == {"name": "Ann B"}

        last = renewed.session
        client.auth.sign_out()
        assert client.auth.get_session() is None
        assert refused(lambda: client.auth.refresh_session(last.refresh_token)) == (
            400,
            "refresh_token_not_found",
        )
        # The sign-in is over: GoTrue's answer to a token of an ended session.
        assert refused(lambda: client.auth.get_user(last.access_token)) == (
            403,
            "session_not_found",
        )
        assert refused(lambda: client.auth.sign_in_with_password(again)) == (
            400,
            "invalid_credentials",
        )  # the old password is gone
        client.auth.sign_in_with_password({"email": email, "password": PASSWORD + "2"})
    assert events == [
        "SIGNED_IN",
        "SIGNED_IN",
        "TOKEN_REFRESHED",
        "USER_UPDATED",
        "SIGNED_OUT",
        "SIGNED_IN",
    ]


JS_ROUND = """
let r = await sb.auth.signUp({ email, password, options: { data: { name: 'Jo' } } })
out.signUp = { error: r.error, name: r.data.user?.user_metadata?.name,
               role: r.data.user?.role, anonymous: r.data.user?.is_anonymous }
r = await sb.auth.signUp({ email: 'x' + email, password: 'short' })
out.weak = { ...brief(r.error), reasons: r.error?.reasons }
r = await sb.auth.signInWithPassword({ email, password: password + '!' })
out.wrong = brief(r.error)
r = await sb.auth.signInWithPassword({ email, password })
const first = r.data.session
out.persisted = [...store.values()].some((v) => v.includes(first.refresh_token))
out.rows = (await sb.from('yui_users').select('email')).data
r = await sb.auth.refreshSession()
out.rotated = r.data.session.refresh_token !== first.refresh_token
r = await sb.auth.refreshSession({ refresh_token: first.refresh_token })
out.reused = brief(r.error)
// A client that finds its persisted session about to expire refreshes it by itself.
const key = [...store.keys()].find((k) => k.endsWith('-auth-token'))
const saved = JSON.parse(store.get(key))
store.set(key, JSON.stringify({ ...saved, expires_at: Math.floor(Date.now() / 1000) + 5 }))
const later = client()
const laterEvents = []
later.auth.onAuthStateChange((event) => { laterEvents.push(event) })
r = await later.auth.getSession()
out.autoRefreshed = r.data.session.refresh_token !== saved.refresh_token
r = await sb.auth.getUser()
out.user = { error: r.error, email: r.data.user?.email }
r = await sb.auth.updateUser({ data: { name: 'Jo B' } })
out.renamed = r.data.user?.user_metadata?.name
const last = (await sb.auth.getSession()).data.session
out.signOut = (await sb.auth.signOut()).error
out.storedAfter = store.size
out.events = [...events]
r = await sb.auth.refreshSession({ refresh_token: last.refresh_token })
out.afterSignOut = brief(r.error)
out.laterEvents = laterEvents
"""


def test_supabase_js_signs_up_in_refreshes_reads_and_signs_out(relay: LocalRelay) -> None:
    email = new_email()
    out = js(relay, fresh_ip(), JS_ROUND, EMAIL=email)
    assert out["signUp"] == {"error": None, "name": "Jo", "role": "yui_user", "anonymous": False}
    assert out["weak"] == {
        "name": "AuthWeakPasswordError",
        "status": 422,
        "code": "weak_password",
        "reasons": ["length"],
    }
    assert out["wrong"] == {"name": "AuthApiError", "status": 400, "code": "invalid_credentials"}
    assert out["persisted"] and out["rows"] == [{"email": email}]
    assert out["rotated"] and out["autoRefreshed"]
    assert out["reused"] == {
        "name": "AuthApiError",
        "status": 400,
        "code": "refresh_token_not_found",
    }
    assert out["user"] == {"error": None, "email": email}
    assert out["renamed"] == "Jo B"
    assert (out["signOut"], out["storedAfter"]) == (None, 0)
    assert out["afterSignOut"]["code"] == "refresh_token_not_found"
    assert out["events"] == [
        "INITIAL_SESSION",
        "SIGNED_IN",
        "SIGNED_IN",
        "TOKEN_REFRESHED",
        "USER_UPDATED",
        "SIGNED_OUT",
    ]
    assert "TOKEN_REFRESHED" in out["laterEvents"]


def test_sign_out_local_and_others_end_only_those_sign_ins(relay: LocalRelay) -> None:
    email, ip = new_email(), fresh_ip()
    with py_client(relay, ip) as a, py_client(relay, ip) as b, py_client(relay, ip) as c:
        a.auth.sign_up({"email": email, "password": PASSWORD})
        b.auth.sign_in_with_password({"email": email, "password": PASSWORD})
        c.auth.sign_in_with_password({"email": email, "password": PASSWORD})
        b_token = b.auth.get_session().refresh_token
        a.auth.sign_out({"scope": "others"})
        assert refused(lambda: b.auth.refresh_session(b_token)) == (400, "refresh_token_not_found")
        assert c.auth.get_session() is not None  # c only learns on its next refresh
        assert refused(lambda: c.auth.refresh_session()) == (400, "refresh_token_not_found")
        a.auth.refresh_session()  # a's own sign-in lives on
        a_token = a.auth.get_session().refresh_token
        a.auth.sign_out({"scope": "local"})
        assert refused(lambda: a.auth.refresh_session(a_token)) == (400, "refresh_token_not_found")


# --- who may sign in ----------------------------------------------------------------------


def test_a_person_from_the_cli_signs_in_with_the_password_set_on_stdin(
    relay_env: LocalRelay, tmp_path: Path
) -> None:
    home, email, secret = tmp_path / "cli", new_email(), "cli pass 7"
    made = json.loads(yui("app", "signup", "Carol", "--json", home=home).stdout)

    def set_password(*flags: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(ROOT / "bin" / "yui"), "app", "set-password", *flags],
            input=secret + "\n",
            env={**os.environ, "YUI_HOME": str(home), "NO_COLOR": "1"},
            capture_output=True,
            text=True,
            timeout=60,
        )

    missing = set_password()
    assert missing.returncode == 1 and "--email" in missing.stderr
    empty = CliRunner().invoke(cli, ["app", "set-password"], input="", env={"YUI_HOME": str(home)})
    assert empty.exit_code == 1 and "read no password" in empty.stderr
    done = set_password("--email", email.upper(), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"name": "Carol", "user_id": made["user_id"], "email": email}
    assert secret not in done.stdout + done.stderr + missing.stderr

    with py_client(relay_env, fresh_ip()) as client:
        signed = client.auth.sign_in_with_password({"email": email, "password": secret})
    assert signed.user is not None and signed.user.id == made["user_id"]
    body = (
        "const r = await sb.auth.signInWithPassword({ email, password }); out.id = r.data.user?.id"
    )
    out = js(relay_env, fresh_ip(), body, EMAIL=email, PASSWORD=secret)
    assert out == {"id": made["user_id"]}
    log = Path(relay_env.home) / "relay" / "logs" / "gateway.log"
    assert secret not in log.read_text()


def test_a_suspended_person_can_neither_sign_in_nor_refresh(relay: LocalRelay) -> None:
    email = new_email()
    with py_client(relay, fresh_ip()) as client:
        made = client.auth.sign_up({"email": email, "password": PASSWORD})
        assert made.user is not None and made.session is not None
        relay.sql("select yui_suspend('user', %s, true, 'test')", (made.user.id,))
        try:
            creds = {"email": email, "password": PASSWORD}
            assert refused(lambda: client.auth.sign_in_with_password(creds)) == (
                400,
                "user_banned",
            )
            assert refused(lambda: client.auth.refresh_session()) == (400, "user_banned")
            token = made.session.access_token
            assert refused(lambda: client.auth.get_user(token)) == (403, "user_banned")
        finally:
            relay.sql("select yui_suspend('user', %s, false)", (made.user.id,))
        assert client.auth.sign_in_with_password(creds).session is not None


def test_wrong_passwords_are_rate_limited_per_account_and_per_address(relay: LocalRelay) -> None:
    email, ip = new_email(), fresh_ip()
    right, wrong = {"email": email, "password": PASSWORD}, {"email": email, "password": "nope!!"}
    with py_client(relay, ip) as client:
        client.auth.sign_up(right)
    with relay.limits(signin_account_burst=3, signin_account_per_min=0):
        with py_client(relay, ip) as client:
            for _ in range(3):
                assert refused(lambda: client.auth.sign_in_with_password(wrong))[0] == 400
            limited = (429, "over_request_rate_limit")
            assert refused(lambda: client.auth.sign_in_with_password(right)) == limited
        with py_client(relay, fresh_ip()) as elsewhere:  # the account's bucket, any address
            assert refused(lambda: elsewhere.auth.sign_in_with_password(right)) == limited
    other = new_email()  # a real account, tried with its right password last
    with py_client(relay, fresh_ip()) as client:
        client.auth.sign_up({"email": other, "password": PASSWORD})
    with relay.limits(signin_address_burst=2, signin_address_per_min=0):
        out = js(
            relay,
            fresh_ip(),
            """
            for (const guess of ['a@x.io', 'b@x.io', process.env.OTHER]) {
              const r = await sb.auth.signInWithPassword({ email: guess, password })
              out[guess === process.env.OTHER ? 'right' : guess] = brief(r.error)
            }
            """,
            OTHER=other,
        )
    assert out["a@x.io"]["code"] == out["b@x.io"]["code"] == "invalid_credentials"
    assert out["right"] == {
        "name": "AuthApiError",
        "status": 429,
        "code": "over_request_rate_limit",
    }


def test_refreshes_keep_the_persons_refresh_rate(relay: LocalRelay) -> None:
    with py_client(relay, fresh_ip()) as client:
        client.auth.sign_up({"email": new_email(), "password": PASSWORD})
        with relay.limits(refresh_burst=1, refresh_per_min=0):
            client.auth.refresh_session()
            kept = client.auth.get_session().refresh_token
            assert refused(lambda: client.auth.refresh_session()) == (
                429,
                "over_request_rate_limit",
            )
            assert client.auth.get_session().refresh_token == kept  # a refusal uses nothing up


# --- anonymous sign-in --------------------------------------------------------------------


ANONYMOUS = """
const r = await sb.auth.signInAnonymously({ options: { data: { name: 'Visitor' } } })
out.error = brief(r.error)
const user = r.data.user
out.user = user && { anonymous: user.is_anonymous, name: user.user_metadata.name }
if (r.data.session) out.rows = (await sb.from('yui_users').select('name')).data
"""


def test_anonymous_sign_in_is_refused_unless_the_relay_allows_it(relay: LocalRelay) -> None:
    with py_client(relay, fresh_ip()) as client:
        assert refused(client.auth.sign_in_anonymously) == (422, "anonymous_provider_disabled")
    out = js(relay, fresh_ip(), ANONYMOUS)
    assert out == {
        "error": {"name": "AuthApiError", "status": 422, "code": "anonymous_provider_disabled"},
        "user": None,
    }


@pytest.fixture(scope="module")
def open_relay(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRelay]:
    """A relay started with `--allow-anonymous-signin`."""
    home = tmp_path_factory.mktemp("open-relay")
    flags = ("--trusted-proxy", "127.0.0.1", "--allow-anonymous-signin")
    with running_relay(home, *flags) as running:
        yield running


@pytest.mark.integration  # its relay is its own (open_relay), which conftest doesn't see
def test_anonymous_sign_in_where_the_relay_allows_it(open_relay: LocalRelay) -> None:
    config = json.loads((Path(open_relay.home) / "relay" / "relay.json").read_text())
    assert config["anonymous_signin"] is True
    changed = yui("relay", "up", "--no-allow-anonymous-signin", home=open_relay.home, check=False)
    assert changed.returncode == 1 and "yui relay down" in changed.stderr  # not under a gateway
    out = js(open_relay, fresh_ip(), ANONYMOUS)
    assert out == {
        "error": None,
        "user": {"anonymous": True, "name": "Visitor"},
        "rows": [{"name": "Visitor"}],
    }
    with py_client(open_relay, fresh_ip()) as client:
        made = client.auth.sign_in_anonymously()
        assert made.user is not None and made.user.is_anonymous
        client.auth.update_user({"email": (email := new_email()), "password": PASSWORD})
        assert client.auth.get_user().user.is_anonymous is False  # kept, with credentials now
        again = client.auth.sign_in_with_password({"email": email, "password": PASSWORD})
        assert again.user is not None and again.user.id == made.user.id


# --- everything else answers in GoTrue's shape --------------------------------------------


def test_what_isnt_served_answers_gotrue_errors(relay: LocalRelay) -> None:
    with py_client(relay, fresh_ip()) as client:
        otp = {"email": new_email()}
        assert refused(lambda: client.auth.sign_in_with_otp(otp)) == (404, "not_found")
        assert refused(lambda: client.auth.get_user("not-a-jwt")) == (403, "bad_jwt")
        assert refused(lambda: client.auth.get_user(relay.service_key)) == (403, "bad_jwt")
    out = js(relay, fresh_ip(), "out.otp = brief((await sb.auth.signInWithOtp({ email })).error)",
             EMAIL=new_email())  # fmt: skip
    assert out == {"otp": {"name": "AuthApiError", "status": 404, "code": "not_found"}}
    modern = relay.http("GET", "/auth/v1/nowhere", headers={"x-supabase-api-version": "2024-01-01"})
    legacy = relay.http("PATCH", "/auth/v1/user")
    assert (modern.status_code, modern.json()["code"]) == (404, "not_found")
    assert modern.headers["x-supabase-api-version"] == "2024-01-01"
    assert legacy.status_code == 405
    assert {k: legacy.json()[k] for k in ("code", "error_code")} == {
        "code": 405,
        "error_code": "method_not_allowed",
    }
    huge = relay.http("POST", "/auth/v1/signup", body={"email": "x" * 70_000})
    assert (huge.status_code, huge.json()["error_code"]) == (413, "validation_failed")
    settings = requests.get(relay.url + "/auth/v1/settings", timeout=10).json()
    assert settings["external"] == {"email": True, "phone": False, "anonymous_users": False}

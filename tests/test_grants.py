"""Who may execute which function (issue 14, 0020_grants.sql), against the real relay.

Nothing in our schemas is executable by PUBLIC, a function a later migration adds is executable
by nobody until it says who, and each role executes exactly the functions listed here. A new
function a role must call joins its list, with the reason next to its grant in the migration.
"""

from __future__ import annotations

import psycopg
import pytest

from tests.helpers.relay import Host, LocalRelay

# Every schema but PostgreSQL's own: public, storage, yui_meta, and any a migration adds.
FUNCTIONS = """
select n.nspname || '.' || p.proname
from pg_proc p join pg_namespace n on n.oid = p.pronamespace
where n.nspname !~ '^pg_' and n.nspname <> 'information_schema'
"""

# A signed-out client calls nothing: signing up and pairing go through /functions/v1, whose
# code runs as service_role.
ANON: frozenset[str] = frozenset()
# It only switches to the request's role.
AUTHENTICATOR: frozenset[str] = frozenset()
# The request's identity, for policies, column defaults and invoker triggers.
IDENTITY = frozenset(
    {"public.yui_claims", "public.yui_claim_uuid", "public.yui_uid", "public.yui_caller",
     "public.yui_limited_caller"}
)  # fmt: skip
MEDIA = frozenset({"public.yui_media_agent", "public.yui_media_quota_ok"})
# The app: its policies and its agent list.
YUI_USER = IDENTITY | MEDIA | {
    "public.yui_owns_agent", "public.yui_owned_agents", "public.yui_presence",
}  # fmt: skip
# A host: its gate in the policies, and its notes on a group through rpc.
YUI_CONNECTOR = IDENTITY | MEDIA | {
    "public.yui_cid", "public.yui_connector_serves", "public.yui_served_agents",
    "public.yui_group_notes",
}  # fmt: skip
# The gateway's own functions (pairing, rates, presence) and the operator's commands.
SERVICE_ROLE = IDENTITY | {
    "public.yui_cid", "public.yui_connector_serves", "public.yui_owns_agent",
    "public.yui_presence", "public.yui_media_agent", "public.yui_limit", "public.yui_take",
    "public.yui_serving", "public.yui_serving_bye", "public.yui_suspend", "public.yui_retention",
    "public.yui_media_names", "public.yui_media_orphans", "public.yui_pair_claim",
}  # fmt: skip


def executable_by(relay: LocalRelay, role: str) -> set[str]:
    rows = relay.sql(FUNCTIONS + " and has_function_privilege(%s, p.oid, 'EXECUTE')", (role,))
    return {name for (name,) in rows}


def test_no_function_in_our_schemas_is_executable_by_public(relay: LocalRelay) -> None:
    public = relay.sql(
        FUNCTIONS + " and exists (select 1 from aclexplode(coalesce(p.proacl,"
        " acldefault('f', p.proowner))) a where a.grantee = 0 and a.privilege_type = 'EXECUTE')"
    )
    assert public == []


@pytest.mark.parametrize(
    ("role", "allowed"),
    [
        ("anon", ANON),
        ("authenticator", AUTHENTICATOR),
        ("yui_user", YUI_USER),
        ("yui_connector", YUI_CONNECTOR),
        ("service_role", SERVICE_ROLE),
    ],
)
def test_each_role_executes_exactly_its_list(
    relay: LocalRelay, role: str, allowed: frozenset[str]
) -> None:
    found = executable_by(relay, role)
    assert (sorted(found - allowed), sorted(allowed - found)) == ([], [])


def test_a_function_a_later_migration_adds_is_executable_by_nobody(relay: LocalRelay) -> None:
    """Migrations run as the database's superuser; the default they get is owner only."""
    with psycopg.connect(relay.superuser) as conn:
        conn.execute("create function public.yui_probe() returns int language sql as 'select 1'")
        roles = conn.execute(
            "select r from unnest(array['public', 'anon', 'yui_user', 'yui_connector',"
            " 'service_role']) r where has_function_privilege(r, 'public.yui_probe()', 'EXECUTE')"
        ).fetchall()
        conn.rollback()
    assert roles == []


def plain(relay: LocalRelay, token: str | None = None, apikey: bool = True) -> tuple[int, str]:
    """Call yui_plain, an internal helper of the mention triggers, through /rest/v1/rpc."""
    answer = relay.http(
        "POST", "/rest/v1/rpc/yui_plain", token=token, apikey=apikey, body={"body": "hi", "n": 10}
    )
    payload = answer.json()
    return answer.status_code, payload.get("code", "") if isinstance(payload, dict) else ""


def test_an_internal_helper_is_not_callable_over_rest(relay: LocalRelay) -> None:
    assert plain(relay, apikey=False) == (401, "42501")  # no key at all
    assert plain(relay) == (401, "42501")  # the anon key
    person = relay.person()
    assert plain(relay, token=person.token) == (403, "42501")
    _, code = person.add_agent("Helper")
    assert plain(relay, token=Host.pair(relay, code).jwt) == (403, "42501")


def test_what_a_role_needs_still_answers(relay: LocalRelay) -> None:
    person = relay.person()
    answer = relay.http("POST", "/rest/v1/rpc/yui_uid", token=person.token, body={})
    assert (answer.status_code, answer.json()) == (200, person.id)

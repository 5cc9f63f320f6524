"""The official clients reach the relay at all: a person reads their own agents, and only
theirs, with supabase-py and with supabase-js, each unchanged."""

from __future__ import annotations

from tests.helpers.relay import LocalRelay
from tests.helpers.sdk import python_client, run_js

READ_AGENTS = """
import { createClient } from '@supabase/supabase-js'
const db = createClient(process.env.URL, process.env.ANON, {
  global: { headers: { Authorization: `Bearer ${process.env.TOKEN}` } },
  auth: { persistSession: false, autoRefreshToken: false },
})
const { data, error } = await db.from('yui_agents').select('name').order('name')
console.log(JSON.stringify({ data, error }))
"""


def test_supabase_py_reads_the_persons_own_agents(relay: LocalRelay) -> None:
    ann, bob = relay.person("Ann"), relay.person("Bob")
    ann.add_agent("Coach")
    bob.add_agent("Other")
    with python_client(relay.url, relay.anon_key, ann.token) as client:
        rows = client.table("yui_agents").select("name").execute().data
    assert [row["name"] for row in rows] == ["Coach"]


def test_supabase_js_reads_the_persons_own_agents(relay: LocalRelay) -> None:
    ann, bob = relay.person("Ann"), relay.person("Bob")
    ann.add_agent("Coach")
    bob.add_agent("Other")
    answer = run_js(READ_AGENTS, env={"URL": relay.url, "ANON": relay.anon_key, "TOKEN": ann.token})
    assert answer == {"data": [{"name": "Coach"}], "error": None}

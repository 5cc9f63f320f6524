"""Helpers the tests share: a real relay and its people, fake peers, the CLI as a process.

Test modules import shared code from here only (tests/test_helpers_layout.py checks it);
fixtures come from tests/conftest.py.

- a2a, a2a_agents: test A2A agents written once, served by a2a-sdk 1.3 here and the real 0.3 apart
- bridge: a scriptable fake webhook; `yui run-webhook` and `yui run-model` as real processes
- cli: the checkout's root, and `yui` run as a process in a home of its own
- controls: an author's webhook serving Controls, and the engine's handling of control rows
- crash: the randomized crash tests' writer, wait and count of duplicates, losses, reorderings
- faultproxy: a TCP proxy that delays, refuses, resets or black-holes on the test's word
- fuzzing: hypothesis settings and strategies, and a raw HTTP server for byte-exact answers
- groups: a person with three agents in a group
- http: a free loopback port, and the threaded HTTP server every fake server is built on
- media: small real media files, and what the relay's bucket holds
- model: a fake OpenAI-compatible chat-completions server
- push: yui-push as the app and a host call it
- phoenix: a raw Realtime websocket, frame by frame (vsn 1.0.0)
- relay: the relay over HTTP (people, hosts), and a second gateway process
- sdk: the official Supabase clients (supabase-py here, supabase-js in Node) on the relay
- sdk_realtime: their Realtime driven from a test (supabase-js in Node by JSON lines, realtime-py)
- talk: rows written and read as the app and as hosts
"""

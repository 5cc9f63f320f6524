"""The web app's build counts among a person's apps (0031_web_builds.sql): bridges gate replies
for the oldest build among the person's phones and web app, so a person with only the web app
gets the screens the page draws, and an older phone still sets the floor."""

from __future__ import annotations

import secrets

from tests.helpers.relay import Host, LocalRelay, Person


def gated_for(host: Host) -> int | None:
    """The app build a host's bridge gates this person's replies for (yui-connect session)."""
    return host.session()["app_build"]


def paired(relay: LocalRelay, person: Person) -> Host:
    _, code = person.add_agent("Coach")
    return Host.pair(relay, code, ref="coach")


def test_the_page_s_build_is_what_a_bridge_gates_for(relay: LocalRelay) -> None:
    person = relay.person()
    host = paired(relay, person)
    assert gated_for(host) is None  # no app has said: older than every gated preset

    said = relay.fn("yui-web", {"action": "seen", "build": 413}, person.token)
    assert said.status_code == 200, said.text
    assert gated_for(host) == 413

    phone = relay.fn(
        "yui-push",
        {"action": "register", "token": secrets.token_hex(32), "build": 69},
        person.token,
    )
    assert phone.status_code == 200, phone.text
    assert gated_for(host) == 69  # an older phone still sets the floor


def test_only_a_person_says_a_build_and_only_a_build(relay: LocalRelay) -> None:
    person = relay.person()
    for build in (0, -3, 10**7, "413", True, None, 4.5):
        answer = relay.fn("yui-web", {"action": "seen", "build": build}, person.token)
        assert (answer.status_code, answer.json()["error"]) == (400, "invalid_build"), build
    assert relay.fn("yui-web", {"action": "seen", "build": 413}, None).status_code == 401
    host_token = paired(relay, person).token
    assert relay.fn("yui-web", {"action": "seen", "build": 413}, host_token).status_code == 401
    assert relay.sql("select count(*) from yui_web_builds where user_id = %s", (person.id,)) == [
        (0,)
    ]

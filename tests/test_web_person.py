"""The rest of the person's side in the browser: a password sign-in on a phone-width dark window,
@mentions completed from the keyboard, replies and reactions written as `yui app` writes them,
adding an agent, a group, the notifications, Controls, and removing a computer."""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.helpers.a2a import wait_for
from tests.helpers.bridge import FakeWebhook, Machine, run_model
from tests.helpers.browser import PHONE, chromium, page_for
from tests.helpers.groups import race_week
from tests.helpers.relay import LocalRelay

if TYPE_CHECKING:
    from playwright.sync_api import Browser


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as launched:
        yield launched


def person(machine: Machine, name: str) -> dict[str, Any]:
    """A person with Coach (paired to this machine) and Planner (not paired yet)."""
    machine.yui("app", "signup", name)
    coach = json.loads(machine.yui("app", "add-agent", "Coach", "--json").stdout)
    machine.yui("app", "add-agent", "Planner")
    machine.yui("pair", coach["code"], "--ref", "coach")
    return dict(coach["agent"])


# Buttons, fields and links with no name a screen reader could say.
UNNAMED = """() => [...document.querySelectorAll('button, input, textarea, a, [role=option]')]
  .filter((el) => el.offsetParent !== null || el.type === 'file')
  .filter((el) => !(el.getAttribute('aria-label') || el.labels?.length || el.textContent.trim()))
  .map((el) => el.outerHTML)"""


def last_row(relay: LocalRelay, agent_id: str) -> tuple[Any, ...]:
    """The person's newest row in a thread: its body and its meta as the database holds them."""
    return relay.sql(
        "select body, meta::text from yui_messages where agent_id = %s and sender = 'user'"
        " order by created_at desc, id desc limit 1",
        (agent_id,),
    )[0]


def sent_alike(relay: LocalRelay, agent_id: str, cli: Any) -> None:
    """The row the page has just written is the row the `yui app` command `cli()` writes."""
    from_page = last_row(relay, agent_id)
    cli()
    assert last_row(relay, agent_id) == from_page


def test_password_sign_in_mentions_replies_and_reactions(
    relay: LocalRelay, machine: Machine, browser: Browser, webhook: FakeWebhook
) -> None:
    coach = person(machine, "Jo")
    machine.yui("app", "set-password", "--email", "jo@example.com", input="secret-words\n")
    bridge = machine.bridge(webhook.url)
    bridge.wait("start")
    page = page_for(browser, viewport=PHONE, dark=True)
    page.goto(f"{relay.url}/app/")
    page.get_by_label("E-mail address").fill("jo@example.com")
    page.get_by_label("Password").fill("wrong-words")
    page.get_by_label("Password").press("Enter")
    page.get_by_role("alert").get_by_text("Invalid login credentials").wait_for()
    page.get_by_label("Password").fill("secret-words")
    page.get_by_role("button", name="Sign in").click()

    agents = page.get_by_role("list", name="Your agents")
    agents.get_by_text("online").wait_for()  # Coach's bridge runs
    assert agents.get_by_text("not paired yet").count() == 1  # Planner's doesn't
    assert page.evaluate("matchMedia('(prefers-color-scheme: dark)').matches")
    agents.get_by_role("button", name="Coach").first.click()
    box = page.get_by_label("Message Coach", exact=True)
    assert page.get_by_role("navigation").is_hidden()  # a phone shows one thing at a time
    mine = page.locator("article[data-sender=user]")

    box.fill("hi")
    box.press("Enter")
    answer = page.locator("article[data-sender=agent]").filter(has_text="echo: hi")
    answer.wait_for()
    answer_id = str(answer.get_attribute("data-id"))
    answer = page.locator(f"article[data-id='{answer_id}']")
    answer.get_by_role("button", name="Reply to this message").click()
    page.get_by_text("Replying to: echo: hi").wait_for()
    box.fill("thanks")
    box.press("Enter")
    mine.filter(has_text="thanks").locator("blockquote").get_by_text("echo: hi").wait_for()
    sent_alike(
        relay, coach["id"], lambda: machine.yui("app", "reply", answer_id, "thanks", "--as", "Jo")
    )

    answer.get_by_role("button", name="React to this message").click()
    page.get_by_role("menuitem", name="React 🔥").click()
    answer.get_by_label("reacted 🔥").wait_for()  # the relay's update, heard live
    sent_alike(
        relay, coach["id"], lambda: machine.yui("app", "react", answer_id, "fire", "--as", "Jo")
    )

    box.press_sequentially("ask @pla")
    page.get_by_role("option", name="Planner @planner").wait_for()
    box.press("Enter")  # picks the agent
    assert box.input_value() == "ask @Planner "
    box.press_sequentially("about lunch")
    box.press("Enter")  # sends
    mine.filter(has_text="ask @Planner about lunch").wait_for()
    sent_alike(
        relay,
        coach["id"],
        lambda: machine.yui("app", "say", "ask @Planner about lunch", "--agent", "coach"),
    )
    page.context.close()


def test_agents_groups_notifications_controls_and_computers(
    relay: LocalRelay, machine: Machine, browser: Browser, webhook: FakeWebhook
) -> None:
    person(machine, "Kim")
    token = json.loads((machine.home / "app.json").read_text())["people"]["Kim"]["access_token"]
    phone = {"action": "register", "token": "cd" * 32, "environment": "sandbox", "name": "phone"}
    assert relay.fn("yui-push", phone, token).status_code == 200
    bridge = machine.bridge(webhook.url)
    bridge.wait("start")
    link = json.loads(machine.yui("app", "web", "--json").stdout)["link"]
    page = page_for(browser)
    page.goto(link)
    page.get_by_role("button", name="Add an agent").click()
    page.get_by_label("Its name").fill("Scout")
    page.get_by_label("Its name").press("Enter")
    code = page.get_by_label("Pairing code")
    code.wait_for()
    assert (
        code.inner_text().startswith("yui pair ") and len(code.inner_text()) == len("yui pair ") + 6
    )
    page.get_by_role("list", name="Your agents").get_by_text("Scout").wait_for()

    page.get_by_role("button", name="Controls of Planner").click()
    page.get_by_text("Its computer serves no Controls").wait_for()

    page.get_by_role("button", name="New group").click()
    page.get_by_label("Title").fill("Lunch crew")
    page.get_by_role("checkbox", name="Coach").check()
    page.get_by_role("checkbox", name="Planner").check()
    page.get_by_role("button", name="Make the group").click()
    page.get_by_label("Message Lunch crew", exact=True).fill("where to?")
    page.get_by_label("Message Lunch crew", exact=True).press("Enter")
    log = page.get_by_role("log", name="Messages with Lunch crew")
    log.get_by_text("echo:").first.wait_for()
    assert log.locator("article[data-sender=user] p").inner_text() == "where to?"
    (group,) = relay.sql(
        "select t.title, m.body from yui_messages m join yui_threads t on t.id = m.thread_id"
        " where m.sender = 'user' and t.title = 'Lunch crew'"
    )
    header, words = group[1].split("\n")
    assert header.startswith('[yui] group "Lunch crew"') and "lead=coach" in header
    assert words == "where to?"

    pushed = "select count(*) from yui_notifications n join yui_users u on u.id = n.user_id"
    wait_for(lambda: relay.sql(pushed + " where u.name = 'Kim'")[0][0], why="a push")
    page.get_by_role("button", name="Notifications").click()
    page.get_by_role("region", name="Notifications").get_by_text("Coach").first.wait_for()

    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Computers").click()
    page.get_by_role("button", name=re.compile("^Remove ")).click()
    page.get_by_text("No computer is paired.").wait_for()
    assert relay.sql(
        "select count(*) from yui_connectors c join yui_users u on u.id = c.user_id"
        " where u.name = 'Kim' and c.revoked_at is null"
    ) == [(0,)]

    page.get_by_role("button", name="Coach").first.click()
    box = page.get_by_label("Message Coach", exact=True)
    box.wait_for()
    unnamed = page.evaluate(UNNAMED)
    assert unnamed == []  # a screen reader can name every control
    page.wait_for_function("() => window.yui.view?.channel")  # opened: focus stays put
    box.focus()
    page.keyboard.press("Tab")  # from the message box, by keyboard: on to Send
    assert page.evaluate("document.activeElement.getAttribute('aria-label')") == "Send"

    page.get_by_role("button", name="Sign out").click()
    page.get_by_role("form", name="Sign in").wait_for()
    page.reload()
    page.get_by_role("form", name="Sign in").wait_for()  # signed out for good, here
    page.context.close()


def test_controls_read_and_change_an_agents_soul(
    relay: LocalRelay, machine: Machine, browser: Browser, tmp_path: Path
) -> None:
    machine.yui("app", "signup", "Lee")
    added = json.loads(machine.yui("app", "add-agent", "Qwen", "--json").stdout)
    machine.yui("pair", added["code"], "--ref", "qwen")
    soul = tmp_path / "soul.md"
    soul.write_text("# Qwen\nBe brief.\n")
    bridge = run_model(machine, "http://127.0.0.1:9/v1", "--system", str(soul))
    bridge.wait("controls", agent="qwen")
    link = json.loads(machine.yui("app", "web", "--json").stdout)["link"]
    page = page_for(browser)
    page.goto(link)
    page.get_by_role("button", name="Controls of Qwen").click()
    page.get_by_role("button", name="soul (rw)").click()
    panel = page.get_by_role("region", name="Controls of Qwen")
    panel.locator(".controls-detail li button").first.click()
    text = panel.get_by_role("textbox")
    text.wait_for()
    assert text.input_value() == "# Qwen\nBe brief.\n"
    text.fill("# Qwen\nBe very brief.\n")
    panel.get_by_role("button", name="Save").click()
    page.get_by_role("status").get_by_text("Saved.").wait_for()
    assert soul.read_text() == "# Qwen\nBe very brief.\n"
    page.context.close()


def test_a_held_ask_in_a_group_is_let_through_then_the_group_stopped(
    relay: LocalRelay, browser: Browser
) -> None:
    group = race_week(relay)
    limits = relay.rest(
        "PATCH", "yui_threads", group.a.token,
        params={"id": f"eq.{group.id}"}, body={"max_hops": 1, "max_turns": 4},
    )  # fmt: skip
    assert limits.status_code == 204, limits.text
    secret = "yui_web_" + secrets.token_urlsafe(32)
    link = {"secret_hash": hashlib.sha256(secret.encode()).hexdigest()}
    assert relay.rest("POST", "yui_signin_links", group.a.token, body=link).status_code == 201
    page = page_for(browser)
    page.goto(f"{relay.url}/app/#signin={secret}")
    page.get_by_role("button", name="Race week").click()
    box = page.get_by_label("Message Race week", exact=True)
    box.fill("@Sage plan the wind-downs")
    box.press("Enter")
    page.locator("article[data-sender=user]").first.wait_for()
    (ask,) = group.asks("sage")
    group.answer("sage", "Four minutes a night. @quill cards?", ask["id"], "quill")
    group.answer("quill", "Cards done. @coach check?", group.asks("quill")[-1]["id"], "coach")
    let_it = page.get_by_role("group", name="Held").get_by_role("button", name="Let it")
    let_it.wait_for()
    (guard,) = [g for g in group.guards() if g["sender"] == "agent"]
    let_it.click()
    page.locator("article[data-sender=user]").filter(has_text="Let it").wait_for()
    let_it.wait_for(state="hidden")  # the guard is no longer held
    assert page.locator(f"article[data-id='{guard['id']}'] [aria-label=Held]").count() == 1
    page.get_by_role("button", name="Stop the group").click()
    page.locator("article[data-sender=user]").filter(has_text="Stop").wait_for()
    controls = [r["meta"]["group"] for r in group.rows() if "control" in r["meta"]["group"]]
    assert controls == [
        {"thread": group.id, "control": "continue", "guard": guard["id"]},
        {"thread": group.id, "control": "stop"},
    ]
    (after,) = [g for g in group.guards() if g["sender"] == "agent"]
    assert after["meta"]["group"]["guard"]["state"] == "continued"
    page.context.close()


def test_the_account_is_deleted_from_the_page(
    relay: LocalRelay, machine: Machine, browser: Browser
) -> None:
    person(machine, "Lou")
    lou = json.loads((machine.home / "app.json").read_text())["people"]["Lou"]["user_id"]
    link = json.loads(machine.yui("app", "web", "--json").stdout)["link"]
    page = page_for(browser)
    page.goto(link)
    page.get_by_role("button", name="Account").click()
    panel = page.get_by_role("form", name="Your account")
    panel.get_by_role("button", name="Delete my account").click()
    panel.get_by_text("Tick the box first").wait_for()  # nothing goes without it
    assert relay.sql("select count(*) from yui_users where id = %s", (lou,)) == [(1,)]

    panel.get_by_label("Delete everything of mine").check()
    panel.get_by_role("button", name="Delete my account").click()
    page.get_by_text("Your account is deleted").wait_for()
    assert relay.sql("select count(*) from yui_users where id = %s", (lou,)) == [(0,)]
    page.reload()
    page.get_by_role("form", name="Sign in").wait_for()  # the session went with the account
    page.context.close()

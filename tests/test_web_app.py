"""The web app in a real browser (Debian's Chromium through Playwright), against the real relay,
a real `yui run-webhook` and the example agent: signing in with the one-time link, a tap that
writes exactly what `yui app tap` writes, Stop, photos both ways, and two people who never see
each other's things."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from bridges.webhook.example import make_server
from tests.helpers.bridge import Call, FakeWebhook, Machine, reply
from tests.helpers.browser import PAGE_BUILD, chromium, page_for
from tests.helpers.http import LoopbackServer
from tests.helpers.media import PNG, SIGNED
from tests.helpers.relay import LocalRelay
from yuilines.events import event_meta

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as launched:
        yield launched


@pytest.fixture
def example_agent() -> Iterator[str]:
    with LoopbackServer.serving(make_server(0)) as server:
        yield server.url


def person_with_agent(machine: Machine, name: str, agent: str) -> dict[str, Any]:
    """A person signed up on `machine`, with an agent paired to it; the agent's list row."""
    machine.yui("app", "signup", name)
    added = json.loads(machine.yui("app", "add-agent", agent, "--json").stdout)
    machine.yui("pair", added["code"], "--ref", agent.lower())
    return dict(added["agent"])


def signed_in(browser: Browser, machine: Machine, name: str, **context: Any) -> Page:
    """A page of its own, opened with the link `yui app web` prints, showing the agents."""
    link = json.loads(machine.yui("app", "web", "--as", name, "--json").stdout)["link"]
    page = page_for(browser, **context)
    page.goto(link)
    page.get_by_role("navigation", name="Agents and groups").wait_for()
    return page


def thread_of(page: Page, agent: str) -> Any:
    page.get_by_role("button", name=agent).first.click()
    return page.get_by_role("log", name=f"Messages with {agent}")


def say(page: Page, agent: str, text: str) -> None:
    box = page.get_by_label(f"Message {agent}", exact=True)
    box.fill(text)
    box.press("Enter")


def rows(relay: LocalRelay, agent_id: str, kind: str) -> list[tuple[Any, ...]]:
    """The thread's rows of one kind, as the database holds them (meta as its JSON text)."""
    return relay.sql(
        "select sender, kind, body, meta::text from yui_messages"
        " where agent_id = %s and kind = %s order by created_at, id",
        (agent_id, kind),
    )


def test_the_link_signs_in_once_and_a_tap_writes_what_yui_app_tap_writes(
    relay: LocalRelay, machine: Machine, browser: Browser, example_agent: str
) -> None:
    agent = person_with_agent(machine, "Ann", "Example")
    bridge = machine.bridge(example_agent)
    bridge.wait("start")
    link = json.loads(machine.yui("app", "web", "--json").stdout)["link"]
    assert link.startswith(f"{relay.url}/app/#signin=yui_web_")
    page = page_for(browser)
    page.goto(link)
    page.get_by_role("navigation", name="Agents and groups").wait_for()
    assert "#" not in page.url  # the secret left the address
    log = thread_of(page, "Example")
    page.wait_for_function("() => window.yui.view.channel.state === 'joined'")  # live

    say(page, "Example", "hi")
    for choice in ("Coffee", "Walk", "Nap"):
        log.get_by_role("button", name=choice).wait_for()
    log.get_by_role("button", name="Walk").click()
    log.get_by_text("Walk it is.").wait_for()
    mine = log.locator("article[data-sender=user]")
    assert mine.count() == 2
    page.wait_for_function(
        "() => [...document.querySelectorAll('article[data-sender=user] .tick')]"
        ".every(t => t.dataset.tick === 'handled')"
    )
    assert mine.last.inner_text().startswith("Walk")  # the echo, not the event line

    machine.yui("app", "tap", "n1", "choose", "choice=Walk", "--echo", "Walk")
    from_page, from_cli = rows(relay, agent["id"], "event")
    # The page said its build, which the bridges now gate this person's replies for.
    assert relay.sql(
        "select b.app_build from yui_web_builds b join yui_agents a on a.user_id = b.user_id"
        " where a.id = %s",
        (agent["id"],),
    ) == [(PAGE_BUILD,)]
    assert from_page == from_cli  # sender, kind, body and meta, byte for byte

    second = page_for(browser)  # the same link again: used up
    second.goto(link)
    second.get_by_role("alert").get_by_text("used or has expired").wait_for()
    second.get_by_role("form", name="Sign in").wait_for()
    second.context.close()
    page.context.close()


class SlowAgent(FakeWebhook):
    """A webhook that holds its first answer until told, and answers the rest at once."""

    def __init__(self) -> None:
        self.release = threading.Event()
        super().__init__(self.answer)

    def answer(self, call: Call) -> tuple[int, dict[str, str], bytes]:
        if len(self.calls) == 1:
            self.release.wait(30)
            return reply("the late answer")
        return reply("a fresh answer")


def test_stop_while_a_slow_agent_works(
    relay: LocalRelay, machine: Machine, browser: Browser
) -> None:
    agent = person_with_agent(machine, "Bea", "Slow")
    with SlowAgent() as slow:
        bridge = machine.bridge(slow.url)
        bridge.wait("start")
        page = signed_in(browser, machine, "Bea")
        log = thread_of(page, "Slow")
        say(page, "Slow", "think hard")
        slow.wait_calls(1)
        stop = page.get_by_role("button", name="Stop", exact=True)
        page.locator(".typing").wait_for()  # the dots, while the turn runs
        stop.click()
        log.get_by_text("Stopped.").wait_for()
        stop.wait_for(state="hidden")
        slow.release.set()  # the agent answers now: too late
        say(page, "Slow", "again")
        log.get_by_text("a fresh answer").wait_for()
        assert log.get_by_text("the late answer").count() == 0
        answers = [r[2] for r in rows(relay, agent["id"], "text") if r[0] == "agent"]
        assert answers == ["a fresh answer"]
    page.context.close()


def test_a_photo_goes_to_the_bridge_and_a_picture_comes_back(
    relay: LocalRelay, machine: Machine, browser: Browser, tmp_path: Path
) -> None:
    picture = tmp_path / "reply.png"
    picture.write_bytes(PNG)

    def answer(call: Call) -> tuple[int, dict[str, str], bytes]:
        return reply(f'Nice.\n```yui\nimage {picture} "Back to you"\n```')

    lens = person_with_agent(machine, "Cy", "Lens")
    with FakeWebhook(answer) as hook:
        bridge = machine.bridge(hook.url)
        bridge.wait("start")
        page = signed_in(browser, machine, "Cy")
        log = thread_of(page, "Lens")
        shot = tmp_path / "shot.png"
        shot.write_bytes(PNG)
        page.locator("#photo").set_input_files(str(shot))
        (call,) = hook.wait_calls(1)
        (message,) = call.payload["messages"]
        local = Path(message["event"]["value"]["photo"])
        assert call.payload["text"] == f"[yui] c1 camera photo={local}"
        assert local.read_bytes() == PNG and local.is_relative_to(machine.home)
        ((_, _, body, meta),) = rows(relay, lens["id"], "event")  # as `yui app photo` writes
        path = json.loads(meta)["value"]["photo"]
        assert path.split("/")[1:3] == [lens["id"], "user"]  # the person's side of the thread
        assert body == f"[yui] c1 camera photo={path}" and path.endswith(".png")
        assert json.loads(meta) == event_meta("c1", "camera", {"photo": path})
        mine = log.locator("article[data-sender=user] img")
        mine.wait_for()
        picture_back = log.locator("article[data-sender=agent] img")
        picture_back.wait_for()
        page.wait_for_function(
            "() => [...document.querySelectorAll('article img')].every(i => i.naturalWidth > 0)"
        )
        assert SIGNED.match(str(picture_back.get_attribute("src")))
    page.context.close()


def test_two_people_never_see_each_others_agents_threads_or_pictures(
    relay: LocalRelay, machine: Machine, browser: Browser, tmp_path: Path
) -> None:
    diary = person_with_agent(machine, "Dee", "Diary")
    person_with_agent(machine, "Eve", "Ledger")
    shot = tmp_path / "secret.png"
    shot.write_bytes(PNG)
    dee = signed_in(browser, machine, "Dee")
    eve = signed_in(browser, machine, "Eve", dark=True)
    thread_of(dee, "Diary")
    say(dee, "Diary", "dear diary")
    dee.locator("#photo").set_input_files(str(shot))
    dee.locator("article[data-sender=user] img").wait_for()
    ((_, _, _, meta),) = rows(relay, diary["id"], "event")
    path = json.loads(meta)["value"]["photo"]

    eve.get_by_role("button", name="Ledger").first.wait_for()
    assert eve.get_by_role("button", name="Diary").count() == 0
    seen = eve.evaluate(
        """async (path) => {
            const db = window.yui.person.db;
            const rows = await db.from('yui_messages').select('body');
            const agents = await db.from('yui_agent_list').select('name');
            const link = await db.storage.from('yui-media').createSignedUrl(path, 60);
            const file = await db.storage.from('yui-media').download(path);
            return { bodies: rows.data.map(r => r.body), agents: agents.data.map(a => a.name),
                     link: link.data, file: file.data };
        }""",
        path,
    )
    assert seen == {"bodies": [], "agents": ["Ledger"], "link": None, "file": None}
    dee.context.close()
    eve.context.close()

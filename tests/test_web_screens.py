"""Yui Lines screens in the web app, in a real browser: a scripted agent (through a real
`yui run-webhook`) answers with one preset per message, each is drawn (not as words) and
photographed into docs/screens/; a form with every field type is filled and submitted and the
agent's webhook reads the line the seed's rules give; a plan folds its answers into one event;
later replies patch earlier screens; a timer's end reaches the agent."""

from __future__ import annotations

import json
import os
import re
import struct
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.helpers.bridge import Call, FakeWebhook, Machine
from tests.helpers.browser import PAGE_BUILD, PHONE, chromium, page_for
from tests.helpers.cli import ROOT
from tests.helpers.media import MP4, SIGNED
from tests.helpers.relay import LocalRelay

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Locator, Page

SHOTS = ROOT / "docs" / "screens"
TALL_PHONE = {"width": PHONE["width"], "height": 1800}


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the screenshots go: docs/screens/ under `make screens` (YUI_SCREENS=docs), else a
    temporary folder, so a test run leaves the tree as it found it (each carries the time)."""
    if os.environ.get("YUI_SCREENS") == "docs":
        return SHOTS
    return tmp_path_factory.mktemp("screens")


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as launched:
        yield launched


def png(width: int, height: int, top: tuple[int, int, int], bottom: tuple[int, int, int]) -> bytes:
    """A real picture: a vertical gradient from `top` to `bottom`."""
    rows = b""
    for y in range(height):
        t = y / max(height - 1, 1)
        pixel = bytes(round(a + (b - a) * t) for a, b in zip(top, bottom, strict=True))
        rows += b"\x00" + pixel * width

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    image = chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")
    return b"\x89PNG\r\n\x1a\n" + image


def pictures(folder: Path) -> list[Path]:
    colours = [
        ((255, 183, 77), (229, 57, 53)),
        ((129, 212, 250), (30, 136, 229)),
        ((165, 214, 167), (46, 125, 50)),
    ]
    paths = []
    for i, (top, bottom) in enumerate(colours):
        path = folder / f"picture{i}.png"
        path.write_bytes(png(160, 100, top, bottom))
        paths.append(path)
    return paths


# One message per preset, each `=== name` then its lines; {a} {b} {c} are pictures and {clip}
# a video, local files the bridge stores and swaps for signed links on their way.
SCRIPT = """
=== ask
ask Ready to start the run?
=== choose
choose tag=Tonight title="Dinner plan" "What sounds good?" Pasta|Curry|Salad +other
=== pick
pick Which kit do you have? Dumbbells|Bands|"Pull-up bar"|Kettlebell max=3
=== slide
slide How did you sleep? 1-5 Awful|Great
=== form
{form}
=== camera
camera Show me your fridge +say
=== mic
mic Tell me about your day
=== timer
timer 40/20x8 Tabata
=== say
say A plain bubble with **bold** and _italic_ words.
=== list
list Groceries Eggs Milk "Rye bread" Apples +check
=== table
table Sets Exercise|Reps|Weight Squat|5|100 Bench|5|80 Deadlift|3|140 units=||kg
=== card
card "Morning run" "Five easy kilometres by the river." tag=Plan sub="Tomorrow, 7:00"
~card cta="Sounds good" img={a}
=== image
image {b} "The view from the top" +edit
=== gallery
gallery Trip {a}|Dawn {b}|Lake {c}|Forest +pick
=== video
video {clip} "A short clip"
=== compare
compare {a} {b} "Before and after" mode=side
=== storyboard
storyboard Morning {a}|Wake {b}|Run {c}|Rest +reorder
=== chart
chart bar "Runs this week" x=Mon|Tue|Wed|Thu|Fri y=3|5|2|6|4 y2=2|4|3|5|5
~chart names=Planned|Done unit=km
=== stat
stat 72.5kg Weight delta=-1.2 spark=74.1|73.6|73|72.9|72.5 good=down
=== math
math caption="Kinetic energy" E = \\frac{{1}}{{2}} m v^2
=== step
step Boil salted water time=10m
step Add the pasta
step Drain and serve
=== calc
calc "Ohm's law" f="I = V / R" V=0-12@5V R=1-100@10ohm unit=A digits=3
=== deck
deck Intro
page Welcome body="Three slides about sleep." points=Dark|Cool|Quiet
chart line Hours x=Mon|Tue|Wed y=6|7.5|8
choose Which matters most? Dark|Cool|Quiet
end
=== plan
{plan}
=== flow
flow Weekend submit=Go
flowchart TD
  a[ask Busy this weekend?] -->|Yes| b[choose Rest how? Nap|Read]
  a -->|No| c[slide Energy 1-5]
end
=== project
project Garden "Raised beds by the fence." status=Active progress=40 cta="Open plan"
~project facts="Beds: 3|Water: daily" next=Seeds|Soil
=== narrate
narrate "A tour"
page Hello body="This is the garden."
page Beds body="Three of them."
end
=== timeline
timeline Trip
done Booked the flights at=Mon
done Packed at=Tue
now At the airport
next Land in Lisbon at="18:40"
end
=== sketch
sketch Login frame=phone
row Email
row Password +hi note="show it"
row Sign in +button
after Fixed
row Email
row Sign in +button
end
=== shapes
shapes Flow w=10 h=6
shape circle Start at=2,3
shape arrow from=3,3 to=6,3
shape box End at=8,3 +fill
end
=== map
map Trip
pin@lis 38.72,-9.14 Lisbon
pin@mad 40.42,-3.70 Madrid +pulse
route lis|mad +arrow
end
=== game
game tictactoe
=== custom
custom {{"type":"stack","children":[{{"type":"text","text":"Hello","size":"lg"}},\
{{"type":"badge","text":"new"}},{{"type":"button","text":"Wave","action":"wave"}}]}}
=== metronome
metronome 90
"""


def screens(folder: Path) -> dict[str, str]:
    """The scripted agent's messages by preset, its pictures written into `folder`."""
    a, b, c = pictures(folder)
    clip = folder / "clip.mp4"
    clip.write_bytes(MP4)
    text = SCRIPT.replace("\\\n", "").format(a=a, b=b, c=c, clip=clip, form=FORM, plan=PLAN)
    messages = {}
    for block in text.split("=== ")[1:]:
        name, _, body = block.partition("\n")
        messages[name] = f"```yui\n{body.strip()}\n```"
    return messages


FORM = (
    'form "Check in" name! mood:1-5 notes:long when:date at:time mail:email tel:phone '
    "site:url ok:yes pic:photo kind:A|B|C n:number v:voice"
)
PLAN = (
    "plan@trip Weekend submit=Send\n"
    "ask@busy Busy on Saturday?\nchoose@where Where to? Park|Beach\nslide@energy Energy 1-5\nend"
)
DIAGRAM = "```yui\ndiagram Steps\nflowchart LR\n  a --> b\nend\n```"


class ScriptedAgent(FakeWebhook):
    """Answers "everything" with one message per preset, "form"/"plan"/"diagram" with that
    screen alone, "patch" with a patch of the plan, "page"/"more" with a list on a page and a
    patch of it by its id, "timer" with a two-second timer, and anything else "Got it."."""

    def __init__(self, messages: dict[str, str]) -> None:
        self.messages = messages
        super().__init__(self.answer)

    def answer(self, call: Call) -> tuple[int, dict[str, str], bytes]:
        text = call.payload["text"]
        if text == "everything":
            replies = list(self.messages.values())
        elif text == "form":
            replies = [f"```yui\n{FORM}\n```"]
        elif text == "plan":
            replies = [f"Plan:\n```yui\n{PLAN}\n```"]
        elif text == "diagram":
            replies = [DIAGRAM]
        elif text == "timer":
            replies = ["```yui\ntimer 2 Tea\n```"]
        elif text == "patch":  # a later reply changes the plan above
            replies = ['```yui\n~plan title="Weekend, booked"\n```']
        elif text == "page":  # an @id on a page lasts: a later reply patches it by that id
            replies = ["```yui\n>2 list@today Today Eggs Milk +check\n```"]
        elif text == "more":
            replies = ["```yui\n~today items=Eggs|Milk|Tea\n```"]
        else:
            replies = ["Got it."]
        return 200, {"content-type": "application/json"}, json.dumps({"replies": replies}).encode()

    def events(self) -> list[str]:
        return [c.payload["text"] for c in self.calls if c.payload["text"].startswith("[yui] ")]


def open_thread(
    browser: Browser, machine: Machine, name: str, agent: str, **context: Any
) -> tuple[Page, Locator]:
    link = json.loads(machine.yui("app", "web", "--as", name, "--json").stdout)["link"]
    page = page_for(browser, **context)
    page.goto(link)
    page.get_by_role("navigation", name="Agents and groups").wait_for()
    page.get_by_role("button", name=agent).first.click()
    return page, page.get_by_role("log", name=f"Messages with {agent}")


def say(page: Page, agent: str, text: str) -> None:
    box = page.get_by_label(f"Message {agent}", exact=True)
    box.fill(text)
    box.press("Enter")


def events(relay: LocalRelay, agent_id: str, wanted: int = 0) -> list[tuple[str, str]]:
    """The thread's event rows (body, meta as JSON text) in order, once there are `wanted`."""
    deadline = time.monotonic() + 20
    while True:
        rows = relay.sql(
            "select body, meta::text from yui_messages where agent_id = %s and kind = 'event'"
            " order by created_at, id",
            (agent_id,),
        )
        if len(rows) >= wanted or time.monotonic() > deadline:
            return rows
        time.sleep(0.1)


@pytest.fixture
def scripted(tmp_path: Path) -> Iterator[ScriptedAgent]:
    """The scripted agent; a test pairs its person's agent, then starts the bridge to it."""
    with ScriptedAgent(screens(tmp_path)) as agent:
        yield agent


def person_with_agent(
    machine: Machine, name: str, agent: str, scripted: ScriptedAgent
) -> dict[str, Any]:
    """A person signed up on `machine` with an agent paired to it, bridged to `scripted`."""
    machine.yui("app", "signup", name)
    added = json.loads(machine.yui("app", "add-agent", agent, "--json").stdout)
    machine.yui("pair", added["code"], "--ref", agent.lower())
    # The person has opened the page before, which said its build (yui-web `seen`, tested in
    # test_web_app and test_web_build): the bridge gates this person's replies for it from its
    # start. Without it a bridge would gate for the oldest phone and send timelines as words.
    machine.relay.sql(
        "insert into yui_web_builds (user_id, app_build)"
        " select user_id, %s from yui_agents where id = %s",
        (PAGE_BUILD, added["agent"]["id"]),
    )
    machine.bridge(scripted.url).wait("start")
    return dict(added["agent"])


def test_every_preset_is_drawn_and_photographed(
    relay: LocalRelay,
    machine: Machine,
    browser: Browser,
    scripted: ScriptedAgent,
    tmp_path: Path,
    shots: Path,
) -> None:
    agent = person_with_agent(machine, "Ivy", "Showcase", scripted)
    # Phone-wide and tall enough that the longest screen (the form) fits on one screenshot.
    page, log = open_thread(browser, machine, "Ivy", "Showcase", viewport=TALL_PHONE)
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    say(page, "Showcase", "everything")
    names = list(scripted.messages)
    drawn = log.locator(".yl-message")
    drawn.nth(len(names) - 1).wait_for()
    page.wait_for_function(
        "() => [...document.querySelectorAll('.yl-message img')]"
        ".every(i => i.complete && i.naturalWidth > 0)"
    )
    shots.mkdir(parents=True, exist_ok=True)
    for name in names:
        preset = "plan" if name == "flow" else name  # a flow comes to this build as a plan
        message = log.locator(f".yl-message:has(> .yl-screen > .yl-node[data-preset={preset}])")
        assert message.count() >= 1, f"{name} was not drawn"
        message = message.first
        assert message.locator(".yl-fallback").count() == 0, f"{name} was drawn as words"
        message.scroll_into_view_if_needed()
        message.locator("xpath=ancestor::article[1]").screenshot(path=str(shots / f"{name}.png"))
    # Nothing is wider than a phone: no screen scrolls sideways (a table may, inside itself).
    wide = page.evaluate(
        """() => [...document.querySelectorAll('.yl-message')]
            .filter(m => m.scrollWidth > m.clientWidth + 1)
            .map(m => m.querySelector('.yl-node')?.dataset.preset)"""
    )
    assert wide == []
    # Every control says what it is to a screen reader.
    unlabelled = page.evaluate(
        """() => [...document.querySelectorAll(
              '.yl-message :is(button, input, textarea, select)')]
            .filter(el => !(el.labels?.length || el.ariaLabel || el.getAttribute('aria-labelledby')
              || el.textContent.trim() || el.closest('fieldset')?.querySelector('legend')))
            .map(el => el.outerHTML.slice(0, 120))"""
    )
    assert unlabelled == []
    # Pictures come from signed links, signed afresh with the person's own token.
    for img in log.locator(".yl-message img").all():
        assert SIGNED.match(str(img.get_attribute("src")))
    assert not [e for e in errors if "Content Security Policy" in e or "yui screens" in e]

    # A tap on each kind of control writes the line the seed's rules give.
    def screen(preset: str) -> Locator:
        return log.locator(f".yl-node[data-preset={preset}]").first

    screen("ask").get_by_role("button", name="Yes").click()
    screen("choose").get_by_role("button", name="Curry").click()
    for kit in ("Dumbbells", "Bands", "Done"):
        screen("pick").get_by_role("button", name=kit).click()
    screen("slide").get_by_label("How did you sleep?").press("ArrowRight")
    screen("card").get_by_role("button", name="Sounds good").click()
    screen("gallery").get_by_role("button", name="Pick Lake").click()
    screen("gallery").get_by_role("button", name="Done").click()
    screen("storyboard").get_by_role("button", name="Move frame 2 earlier").click()
    screen("storyboard").get_by_role("button", name="Send order").click()
    screen("step").get_by_role("button", name="Done").click()
    screen("calc").get_by_role("button", name="Send").click()
    screen("deck").get_by_role("button", name="Next").click()
    screen("deck").get_by_role("button", name="Done").click()
    screen("game").get_by_role("button", name="Cell 5, empty").click()
    screen("custom").get_by_role("button", name="Wave").click()
    screen("image").get_by_label("What should change in the picture").fill("Less sky")
    screen("image").get_by_role("button", name="Send").click()
    camera = screen("camera")
    camera.get_by_label("Show me your fridge").set_input_files(str(pictures(tmp_path)[0]))
    camera.get_by_label("Words with the photo").fill("mostly empty")
    camera.get_by_role("button", name="Send photo").click()
    (person,) = relay.sql("select user_id from yui_agents where id = %s", (agent["id"],))[0]
    expected = [
        "[yui] n1 ask answer=Yes",
        "[yui] n1 choose choice=Curry",
        "[yui] n1 pick picked=Dumbbells|Bands",
        "[yui] n1 slide value=4",
        '[yui] n1 card cta="Sounds good"',
        "[yui] n1 gallery picked=1",
        "[yui] n1 storyboard order=1|0|2",
        "[yui] n1 step done index=0",
        "[yui] n1 calc result=0.5 values.V=5 values.R=10",
        "[yui] n1 deck done pages=2",
        "[yui] n1 game kind=tictactoe move=5 o= x=5",  # the seed's own example
        "[yui] c1 custom action=wave",
        '[yui] n1 image edit.box=0|0|100|100 edit.instruction="Less sky"',
        f'[yui] n1 camera photo={person}/{agent["id"]}/user/<new>.jpg words="mostly empty"',
    ]
    photo = re.compile(r"(?<=/user/)[0-9a-f-]{36}(?=\.jpg)")  # a fresh name for each photo
    written = [photo.sub("<new>", body) for body, _ in events(relay, agent["id"], len(expected))]
    assert sorted(written) == sorted(expected)
    page.context.close()


def test_a_form_with_every_field_type_reaches_the_webhook_as_the_seed_writes_it(
    relay: LocalRelay,
    machine: Machine,
    browser: Browser,
    scripted: ScriptedAgent,
    tmp_path: Path,
    shots: Path,
) -> None:
    agent = person_with_agent(machine, "Jo", "Forms", scripted)
    page, log = open_thread(browser, machine, "Jo", "Forms", viewport=TALL_PHONE, dark=True)
    say(page, "Forms", "form")
    form = log.get_by_role("form", name="Check in")
    form.wait_for()
    form.get_by_role("button", name="Submit").click()  # the required name is empty: nothing goes
    form.get_by_label("name").fill("Ann")
    form.get_by_label("mood").fill("4")
    form.get_by_label("notes").fill("slept badly")
    form.get_by_label("when").fill("2026-12-02")
    form.get_by_label("at").fill("07:30")
    form.get_by_label("mail").fill("ann@example.com")
    form.get_by_label("tel").fill("+44 20 7946 0000")
    form.get_by_label("site").fill("https://example.com/a")
    form.get_by_label("ok").check()
    photo = tmp_path / "fridge.png"
    photo.write_bytes(png(40, 30, (200, 200, 200), (90, 90, 90)))
    form.get_by_label("pic").set_input_files(str(photo))
    form.get_by_label("B", exact=True).check()
    form.get_by_label("n", exact=True).fill("12.5")
    form.get_by_label("v", exact=True).fill("hello there")
    form.locator("xpath=ancestor::article[1]").screenshot(path=str(shots / "form-filled-dark.png"))
    form.get_by_role("button", name="Submit").click()
    log.get_by_text("Got it.").wait_for()

    ((body, meta),) = events(relay, agent["id"])
    path = json.loads(meta)["value"]["form"]["pic"]
    assert path.split("/")[1:3] == [agent["id"], "user"] and path.endswith(".jpg")
    line = (
        '[yui] n1 form form.name=Ann form.mood=4 form.notes="slept badly" form.when=2026-12-02'
        ' form.at=07:30 form.mail=ann@example.com form.tel="+44 20 7946 0000"'
        " form.site=https://example.com/a form.ok form.pic={} form.kind=B form.n=12.5"
        ' form.v="hello there"'
    )
    assert body == line.format(path)
    # The agent reads the same line, the photo swapped for the file the bridge fetched.
    local = machine.home / "cache" / "media" / path.replace("/", "-")
    assert scripted.events() == [line.format(local)]
    assert local.read_bytes()[:3] == b"\xff\xd8\xff"  # stored as the phone stores it: a JPEG
    echo = (
        "name: Ann, mood: 4, notes: slept badly, when: 2026-12-02, at: 07:30,"
        " mail: ann@example.com, tel: +44 20 7946 0000, site: https://example.com/a, ok: Yes,"
        " pic: Photo, kind: B, n: 12.5, v: hello there"
    )
    assert log.locator("article[data-sender=user]").last.inner_text().startswith(echo)

    machine.yui(
        "app",
        "tap",
        "n1",
        "form",
        "form.name=Ann",
        "form.mood=4",
        "form.notes=slept badly",
        "form.when=2026-12-02",
        "form.at=07:30",
        "form.mail=ann@example.com",
        "form.tel=+44 20 7946 0000",
        "form.site=https://example.com/a",
        "form.ok",
        f"form.pic={path}",
        "form.kind=B",
        "form.n=12.5",
        "form.v=hello there",
        "--echo",
        echo,
    )
    from_page, from_cli = events(relay, agent["id"])
    assert from_page == from_cli  # body and meta, byte for byte
    page.context.close()


def test_a_plan_a_patch_a_page_a_timer_and_a_gated_preset_across_replies(
    relay: LocalRelay, machine: Machine, browser: Browser, scripted: ScriptedAgent
) -> None:
    agent = person_with_agent(machine, "Kit", "Planner", scripted)
    page, log = open_thread(browser, machine, "Kit", "Planner")
    say(page, "Planner", "plan")
    plan = log.locator(".yl-node[data-preset=plan]")
    # By keyboard alone: Enter and Space press, the arrow keys turn pages and move a slider.
    plan.get_by_role("button", name="Yes").press("Enter")  # a plan's step sends nothing alone
    page.keyboard.press("ArrowRight")
    plan.get_by_role("button", name="Beach").press(" ")
    page.keyboard.press("ArrowRight")
    plan.get_by_label("Energy").press("ArrowRight")  # from the middle, 3, to 4
    assert events(relay, agent["id"]) == []
    plan.get_by_role("button", name="Send").press("Enter")
    log.get_by_text("Got it.").wait_for()
    ((body, meta),) = events(relay, agent["id"])
    assert body == "[yui] trip plan plan.busy=Yes plan.where=Beach plan.energy=4"
    assert json.loads(meta)["echo"] == "Busy on Saturday? Yes\nWhere to? Beach\nEnergy: 4"

    say(page, "Planner", "patch")
    log.get_by_text("Updated above.").wait_for()
    plan.get_by_role("heading", name="Weekend, booked").wait_for()

    say(page, "Planner", "page")
    today = log.locator(".yl-node[data-id=today]")
    today.get_by_label("Milk").wait_for()
    say(page, "Planner", "more")
    today.get_by_label("Tea").wait_for()
    assert log.get_by_text("Updated above.").count() == 2

    say(page, "Planner", "timer")  # starting stays on the page; the end goes to the agent
    tea = log.locator(".yl-node[data-preset=timer]")
    tea.get_by_role("button", name="Start").click()
    tea.get_by_text("Done", exact=True).wait_for()
    assert [body for body, _ in events(relay, agent["id"], 2)][1:] == [
        "[yui] n1 timer done rounds=1"
    ]

    say(page, "Planner", "diagram")  # this browser's build doesn't draw a diagram: its words
    log.get_by_text("There's a diagram here.").wait_for()
    page.context.close()

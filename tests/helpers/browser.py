"""A real browser for the web app's tests: Debian's Chromium driven by Playwright for Python.

No browser is ever downloaded: Playwright launches /usr/bin/chromium (`bin/ensure-chromium`,
which `make test` runs, installs it). A test module opens one browser for all its tests:

    @pytest.fixture(scope="module")
    def browser() -> Iterator[Browser]:
        with chromium() as launched:
            yield launched

and one context per person (`page_for`), so two people never share cookies or storage.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.helpers.cli import ROOT
from tests.helpers.relay import fresh_ip

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page, Playwright

CHROMIUM = Path(os.environ.get("YUI_CHROMIUM", "/usr/bin/chromium"))
WEB_DIST = ROOT / "web" / "dist"
# Chromium as root in a container: no sandbox (it needs user namespaces), no GPU, and nothing
# that reaches out on its own (updates, sync, QUIC probes), so a test only sees its own traffic.
CHROMIUM_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
TIMEOUT_MS = 20_000  # for any one wait on the page (an element, a navigation)
PHONE = {"width": 390, "height": 844}  # a phone-width window
DESKTOP = {"width": 1100, "height": 800}
# The build the page draws for (web/src/screens/index.js SCREENS_BUILD), which it tells the
# relay when it opens (yui-web `seen`).
PAGE_BUILD = 413


def missing() -> str | None:
    """Why the browser tests can't run here, or None when they can."""
    try:
        import playwright  # noqa: F401
    except ImportError:
        return "Playwright for Python is not installed (`make setup` installs the dev extra)"
    if not CHROMIUM.is_file():
        return f"no Chromium at {CHROMIUM} (bin/ensure-chromium installs Debian's package)"
    if not (WEB_DIST / "index.html").is_file():
        return "the web app isn't built (`make web` builds web/dist)"
    return None


def launch(driver: Playwright) -> Browser:
    """Debian's Chromium, headless. Playwright gives every launch a fresh profile of its own
    (--user-data-dir in a new temporary folder, removed at close): it refuses that flag among
    the arguments."""
    return driver.chromium.launch(
        executable_path=str(CHROMIUM),
        args=list(CHROMIUM_ARGS),
        headless=True,
        chromium_sandbox=False,
        timeout=TIMEOUT_MS * 3,
    )


@contextmanager
def chromium() -> Iterator[Browser]:
    """A browser for a test module; skips it when Chromium, Playwright or the built page is
    missing."""
    reason = missing()
    if reason:
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        browser = launch(driver)
        try:
            yield browser
        finally:
            browser.close()


def page_for(
    browser: Browser, *, viewport: dict[str, int] | None = None, dark: bool = False
) -> Page:
    """A new page in a context of its own (its own cookies and storage: one person), from a
    client address of its own (the session relay believes X-Forwarded-For from loopback), so
    its sign-ins count in a throttle bucket no other test fills."""
    context = browser.new_context(
        viewport=viewport or DESKTOP,  # type: ignore[arg-type]
        color_scheme="dark" if dark else "light",
        extra_http_headers={"x-forwarded-for": fresh_ip()},
    )
    context.set_default_timeout(TIMEOUT_MS)
    return context.new_page()

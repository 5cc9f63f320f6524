"""The web app's load, as a browser on this machine sees it: Debian's Chromium (headless, through
Playwright) opens `/app/` on the relay with an empty cache, `count` times, each in a fresh
context; timed from the navigation's start to the sign-in form on screen (the scripts fetched
and run, the relay's config read: the page marks the moment), with the bytes that crossed the
wire for it (gzip as served) beside the bytes they unpack to.

Without Chromium, Playwright or a built page, the row says it was not measured.
"""

from __future__ import annotations

from typing import Any

from rich.table import Table

from bench.report import percentile
from tests.helpers.browser import PHONE, launch, missing

WAIT_MS = 20_000
# Every byte the page took: its document and each resource, as the browser counted them.
SIZES = """() => {
  const entries = [...performance.getEntriesByType('navigation'),
                   ...performance.getEntriesByType('resource')];
  const sum = (key) => entries.reduce((n, e) => n + (e[key] || 0), 0);
  return { wire: sum('transferSize'), unpacked: sum('decodedBodySize'), files: entries.length,
           load_ms: performance.getEntriesByType('navigation')[0].loadEventEnd };
}"""
# From the navigation's start to the sign-in form, on the page's own clock (the page marks it).
READY = "() => performance.getEntriesByName('yui-ready')[0].startTime"


def measure(url: str, count: int) -> dict[str, Any]:
    """`count` cold loads of `url`/app/."""
    reason = missing()
    if reason is not None:
        return {"skipped": reason}
    from playwright.sync_api import sync_playwright

    ready: list[float] = []
    loaded: list[float] = []
    sizes: dict[str, Any] = {}
    with sync_playwright() as driver:
        browser = launch(driver)
        try:
            for _ in range(count):
                context = browser.new_context(viewport=PHONE)  # type: ignore[arg-type]
                page = context.new_page()
                page.goto(f"{url}/app/", timeout=WAIT_MS)
                page.get_by_role("form", name="Sign in").wait_for(timeout=WAIT_MS)
                ready.append(float(page.evaluate(READY)))
                page.wait_for_load_state("load")
                sizes = page.evaluate(SIZES)
                loaded.append(float(sizes.pop("load_ms")))
                context.close()
            version = browser.version
        finally:
            browser.close()
    return {
        "ready_p50_ms": percentile(ready, 50),
        "ready_p99_ms": percentile(ready, 99),
        "load_p50_ms": percentile(loaded, 50),
        "samples": len(ready),
        "wire_bytes": sizes["wire"],
        "unpacked_bytes": sizes["unpacked"],
        "files": sizes["files"],
        "browser": f"Chromium {version}",
    }


def table(row: dict[str, Any]) -> Table | str:
    """The page's load and size (or why they weren't measured)."""
    if "skipped" in row:
        return f"The web app's load: not measured ({row['skipped']})"
    grid = Table(
        title=f"The web app on loopback ({row['browser']}, headless, empty cache)",
        title_justify="left",
    )
    grid.add_column("figure")
    grid.add_column("value", justify="right")
    for label, value in (
        (f"/app/ → the sign-in form on screen, p50 of {row['samples']} (ms)", row["ready_p50_ms"]),
        (f"/app/ → the sign-in form on screen, p99 of {row['samples']} (ms)", row["ready_p99_ms"]),
        ("/app/ → the load event, p50 (ms)", row["load_p50_ms"]),
        (f"bytes transferred, {row['files']} files (gzip as served)", row["wire_bytes"]),
        ("bytes once unpacked", row["unpacked_bytes"]),
    ):
        grid.add_row(label, f"{value:,.0f}")
    return grid

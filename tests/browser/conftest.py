"""Headless Chromium (the system's ``chromium``, driven by Playwright for Python) against
a live server. Skipped, saying why, where Playwright or Chromium is missing;
``scripts/test.sh`` installs both where it can.

Screenshots go to ``$SCREENSHOTS_DIR`` (default: ``browser-screenshots`` under pytest's
temporary directory); docs/images holds the ones docs/howto/admin.md shows, taken with
``SCREENSHOTS_DIR=docs/images``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="session")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = os.environ.get("SCREENSHOTS_DIR")
    path = Path(where) if where else tmp_path_factory.getbasetemp() / "browser-screenshots"
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One Chromium per module, stopped after it: Playwright's sync API holds an event
    loop in this thread while it runs, which later tests calling asyncio.run must not
    find."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("Playwright for Python is not installed (pip install playwright)")
    if CHROMIUM is None:
        pytest.skip("no chromium on PATH (Debian: apt-get install chromium)")
    # Playwright's sync API runs an event loop in this thread; the ORM calls the test
    # makes between page actions are still plain synchronous calls.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as p:
            chromium = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            yield chromium
            chromium.close()
    finally:
        del os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"]


@pytest.fixture
def page(browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A page 1,400 px wide, or as wide as its module's ``WIDTH`` (the 1,280 px tests)."""
    width = getattr(request.module, "WIDTH", None)
    size = {"width": width, "height": 900} if width else {"width": 1400, "height": 1000}
    context = browser.new_context(viewport=size)
    page = context.new_page()
    page.set_default_timeout(15_000)
    yield page
    context.close()


def messages_after(page: Any, click: Any) -> str:
    """Call ``click`` (a click that submits a form), wait until the page it leads to has
    loaded whole, and return the text of its messages. Read any sooner, the message list
    can be found before its items are parsed: the page arrives in chunks, and on a busy
    machine ``<ul class="messagelist">`` was in the DOM with no ``<li>`` yet (an empty
    text, where the message was on the page: CI at 3de1ba7, the clean-up's)."""
    with page.expect_navigation(wait_until="load"):
        click()
    return str(page.inner_text(".messagelist"))

"""Headless Chromium for the browser tests: Debian's ``chromium`` driven by playwright (no browser download).

`.ci/run` installs ``chromium`` when it is missing; without it these tests fail, they are never skipped.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from playwright.async_api import Browser, async_playwright

from tests.maya_tools.test_transports import http_server

ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    # Pages share renderer processes where site isolation allows, instead of new ones for each test's
    # context: 19 renderers for tests/browser instead of 32, about 2 s less CPU (16.6 s against 18.6 s
    # of busy CPU, four runs each, alternating).
    "--renderer-process-limit=1",
    # Chromium 15x's headless mode builds each window's omnibox popups as WebUI pages in a renderer of
    # their own (chrome://omnibox-popup.top-chrome), about 0.4 s of CPU per browser context, for a
    # window nobody types into. Merged with playwright's own --disable-features.
    "--disable-features=WebUIOmniboxPopup,WebUIOmniboxAimPopup",
]
IMG = Path(__file__).resolve().parents[2] / "docs" / "img"
WIDTH = 360


def chromium_path() -> str:
    path = shutil.which("chromium")
    assert path is not None, (
        "the browser tests need Debian's `chromium` on PATH; `.ci/run` installs it "
        "(apt-get install chromium), or install it yourself"
    )
    return path


@pytest.fixture(scope="package")
def anyio_backend() -> str:
    """One event loop for the browser tests a worker runs in a row, so one Chromium serves them (each
    test gets its own context). pytest ends it when the worker moves on to a test of another package.

    Not per session: anyio marks the thread as running asyncio for as long as a runner lives, so a
    later synchronous test on the same worker that calls ``anyio.run`` (``maya-tools eval``) would fail."""
    return "asyncio"


@pytest.fixture(scope="package")
async def chromium() -> AsyncIterator[Browser]:
    """Debian's Chromium and playwright's node driver, started once for the browser tests a worker runs
    in a row: the two cost about two seconds of CPU."""
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=chromium_path(), args=ARGS)
        try:
            yield browser
        finally:
            await browser.close()


@pytest.fixture
def http_url(tmp_path: Path) -> Iterator[str]:
    """A real `maya-tools serve --transport streamable-http` (embedded backend) on a free loopback port."""
    with http_server(tmp_path) as url:
        yield url

"""Re-make the card screenshots in docs/img: the terminal chat's card of a ``replace_node`` and of a
``change_pool_tier`` plan (``maya-tools chat --offline`` in tmux, ``tmux capture-pane -p``), and the
form message of a ``remove_node_pool`` (what a form-elicitation client shows), each as text and as a
PNG that headless Chromium renders from a <pre> page.

Needs tmux and Debian's chromium. Everything runs against the embedded reference backend with an
in-memory card store; nothing is approved. Usage: ``.venv/bin/python -m scripts.card_screenshots``
"""

from __future__ import annotations

import html
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp_types import ElicitResult

ROOT = Path(__file__).resolve().parent.parent
IMG = ROOT / "docs" / "img"
MAYA = str(Path(sys.executable).parent / "maya-tools")
ENV = {**os.environ, "MAYA_CARD_STORE": ":memory:", "DOOR_API_URL": ""}
SESSION = "maya-card-shots"
BAR = "─" * 78
WAIT = 60.0  # seconds for the chat to show a card


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], check=True, capture_output=True, text=True).stdout


def shown_card(before: int) -> str:
    """The last card the chat printed (between its two bars), once its [y/N] question is on screen."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        screen = tmux("capture-pane", "-p", "-J", "-S", "-", "-t", SESSION)
        if screen.count("[y/N]") > before:
            end = screen.rindex(BAR)
            return screen[screen.rindex(BAR, 0, end) : end + len(BAR)] + "\n" + screen[end + len(BAR) :].strip()
        time.sleep(0.2)  # a script polling a real terminal, not a test
    raise RuntimeError(f"no card after {WAIT} s:\n{screen}")


def terminal_cards() -> dict[str, str]:
    """The chat's card for a node replacement and for a tier change, as tmux shows them."""
    tmux("new-session", "-d", "-s", SESSION, "-x", "140", "-y", "70", "-e", "MAYA_CARD_STORE=:memory:",
         "-e", "DOOR_API_URL=", f"{MAYA} chat --offline")  # fmt: skip
    try:
        cards = {}
        asks = {
            "terminal-card-replace": "replace node payments-prod-workers-abc12 on payments-prod",
            "terminal-card-plan": "move workers on payments-prod to dks.c5.2xlarge",
        }
        for n, (name, request) in enumerate(asks.items()):
            tmux("send-keys", "-t", SESSION, request, "Enter")
            cards[name] = f"you › {request}\n" + shown_card(n)
            tmux("send-keys", "-t", SESSION, "n", "Enter")
        return cards
    finally:
        tmux("kill-session", "-t", SESSION)


async def remove_form() -> str:
    """The form message of removing pool ``workers`` (pool ``batch`` is added first, approved, so that
    ``workers`` is not the last pool, R-DEL-01), as the server sends it."""
    asked: list[str] = []

    async def answer(context: Any, params: Any) -> ElicitResult:
        asked.append(params.message)
        if "Add node pool" in params.message:
            return ElicitResult(action="accept", content={"approve": True})
        return ElicitResult(action="decline")

    server = StdioServerParameters(command=MAYA, args=["serve", "--log-level", "WARNING"], env=ENV)
    async with Client(server, elicitation_callback=answer) as client:
        add = {"cluster": "payments-prod", "name": "batch", "size": "dks.m5.xlarge", "count": 2}
        await client.call_tool("add_node_pool", add)
        await client.call_tool("list_nodes", {"cluster": "payments-prod", "pool": "workers", "wait_for_fresh": True})
        removed = await client.call_tool("remove_node_pool", {"cluster": "payments-prod", "pool": "workers"})
    if len(asked) != 2 or removed.is_error:
        raise RuntimeError(f"the removal was not asked about: {removed.content}")
    return asked[-1]


async def to_png(texts: dict[str, str]) -> None:
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=shutil.which("chromium"), args=["--no-sandbox"])
        page = await browser.new_page(viewport={"width": 1100, "height": 200})
        for name, text in texts.items():
            await page.set_content(
                "<!doctype html><meta charset='utf-8'><body style='margin:0;background:#1e1e1e'>"
                "<pre style='margin:0;padding:16px;font:14px/1.35 DejaVu Sans Mono,monospace;color:#e8e8e8;"
                f"white-space:pre-wrap;width:1068px'>{html.escape(text)}</pre>"
            )
            (IMG / f"{name}.png").write_bytes(await page.screenshot(full_page=True))
        await browser.close()


def main() -> None:
    texts = terminal_cards()
    texts["form-remove"] = anyio.run(remove_form)
    IMG.mkdir(exist_ok=True)
    for name, text in texts.items():
        (IMG / f"{name}.txt").write_text(text.rstrip() + "\n")
    anyio.run(to_png, texts)
    for name in texts:
        print(f"docs/img/{name}.txt, docs/img/{name}.png")  # noqa: T201 - the script's own output


if __name__ == "__main__":
    main()

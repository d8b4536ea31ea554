"""``maya-tools chat``: talk to Maya in the terminal; she changes node pools only after you approve.

The chat is an MCP client of the maya-tools server: by default it starts ``maya-tools serve`` over
stdio (as an IDE would), or it joins a streamable-HTTP server (``--url``, ``--token``). With
``ANTHROPIC_API_KEY`` set, a model (``MAYA_MODEL``) reads your request and picks the tools; without
it, or with ``--offline``, a small deterministic interpreter does (``maya_tools.chat.interpreter``).

Either way, a change shows its confirmation card here and asks you y/N (``ApprovalPrompt``); that is
the only way a card is approved. Ctrl-C stops the current turn and keeps the conversation; Ctrl-D
or ``/quit`` leaves.

Pieces: ``terminal`` (input, output, Ctrl-C, approval), ``model`` (the Anthropic loop),
``offline`` (the interpreter's answers), ``settings`` (the chat's environment).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Protocol

import anyio
import httpx2
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

import prompts
from maya_tools.chat.model import ModelChat, change_tools, list_all_tools, model_tools
from maya_tools.chat.offline import OfflineChat
from maya_tools.chat.settings import DEFAULT_MODEL, ChatSettings
from maya_tools.chat.terminal import CARD_COMMAND, ApprovalPrompt, Terminal, ctrl_c_abandons_turns

if TYPE_CHECKING:  # imported in ``run`` only with a key: the offline chat never loads the SDK (a second)
    from anthropic import AsyncAnthropic

QUIT = frozenset({"/quit", "/exit", "quit", "exit", ":q"})
NO_KEY = (
    "ANTHROPIC_API_KEY is not set, so Maya runs offline: a small built-in interpreter (no model) reads "
    "your requests. Type /help to see what it understands; set ANTHROPIC_API_KEY for the model."
)
DESCRIPTION = "Talk to Maya in the terminal; a change happens only after you approve its card."
EPILOG = """\
With ANTHROPIC_API_KEY set, a model reads your requests; without it, or with --offline, a small
built-in interpreter does (type /help in the chat to see what it understands). By default the chat
starts `maya-tools serve` over stdio: with no DOOR_API_URL that server uses the embedded reference
backend and its demo seed, so nothing reaches Door. Ctrl-C stops a turn; Ctrl-D or /quit leaves."""
CHOSEN_OFFLINE = "Offline mode (--offline): a small built-in interpreter (no model) reads your requests. Type /help."


class Session(Protocol):
    async def turn(self, text: str) -> None: ...

    def abandon(self) -> None: ...


async def backend_description(client: Client) -> str:
    """Where the server's clusters live, as its ``list_clusters`` says."""
    try:
        result = await client.call_tool("list_clusters", {})
    except MCPError:
        return "unknown (list_clusters failed)"
    data = result.structured_content
    if result.is_error or not isinstance(data, dict):
        return "unknown (list_clusters failed)"
    return str(data.get("backend", "unknown"))


async def open_session(
    client: Client,
    terminal: Terminal,
    *,
    anthropic_client: AsyncAnthropic | None,
    model: str,
    user: str | None = None,
    offline_reason: str = NO_KEY,
) -> Session:
    """A model session when there is a model client, else an offline one (and the chat says so)."""
    where = await backend_description(client)
    if anthropic_client is None:
        terminal.line(offline_reason)
        terminal.line(f"Clusters: {where}.")
        return OfflineChat(client, terminal)
    listed = await list_all_tools(client)
    tools = model_tools(listed)
    system = prompts.system_prompt(backend_description=where, user=user)
    terminal.line(f"Maya ({model}) · {len(tools)} tools · clusters: {where}.")
    return ModelChat(
        anthropic_client, client, terminal, model=model, system=system, tools=tools, changes=change_tools(listed)
    )


async def repl(terminal: Terminal, session: Session, approval: ApprovalPrompt | None = None) -> None:
    """Read requests until Ctrl-D or /quit. Ctrl-C abandons the running turn, never the session.
    ``/card`` (or ``/card <id>``) shows the last card asked about whole, its exact request included."""
    terminal.line(
        "Every change shows you a card and waits for your y (/card shows its exact request). "
        "Ctrl-C stops a turn; Ctrl-D or /quit leaves."
    )
    while True:
        try:
            if terminal.queued:  # typed at a card's [y/N] question: the card was declined, the request stays
                text = terminal.queued.popleft()
                terminal.line(f"you › {text}")
            else:
                text = terminal.ask("you › ")
        except EOFError:
            terminal.line()
            return
        except KeyboardInterrupt:
            terminal.line("\n  (nothing to stop; Ctrl-D or /quit leaves)")
            continue
        said = text.strip()
        if not said:
            continue
        if said.lower() in QUIT:
            return
        if approval is not None and said.split(maxsplit=1)[0].lower() == CARD_COMMAND:
            await approval.show_card(said.split(maxsplit=1)[1] if " " in said else None)
            continue
        with anyio.CancelScope() as scope:
            terminal.turn = scope
            try:
                await session.turn(said)
            finally:
                terminal.turn = None
        if scope.cancelled_caught:
            session.abandon()
            terminal.line("\n  (turn abandoned; the conversation goes on)")


@asynccontextmanager
async def connect(
    approval: ApprovalPrompt, settings: ChatSettings, *, url: str | None = None, token: str | None = None
) -> AsyncIterator[Client]:
    """The MCP client: ``maya-tools serve`` over stdio, or a streamable-HTTP server at ``url``."""
    async with AsyncExitStack() as stack:
        if url is None:
            server = StdioServerParameters(
                command=sys.executable,
                args=["-m", "maya_tools.cli", "serve", "--log-level", "WARNING"],
                env=dict(settings.server_env),
            )
            client = Client(server, elicitation_callback=approval)
        else:
            bearer = token or settings.door_token
            headers = {"Authorization": f"Bearer {bearer}"} if bearer else {}
            http = await stack.enter_async_context(
                httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=600))
            )
            client = Client(streamable_http_client(url, http_client=http), elicitation_callback=approval)
        yield await stack.enter_async_context(client)


async def run(
    settings: ChatSettings,
    terminal: Terminal,
    *,
    offline: bool = False,
    url: str | None = None,
    token: str | None = None,
) -> int:
    approval = ApprovalPrompt(terminal)
    key = None if offline else settings.anthropic_api_key
    reason = CHOSEN_OFFLINE if offline else NO_KEY
    async with AsyncExitStack() as stack:
        anthropic_client = None
        if key is not None:
            from anthropic import AsyncAnthropic

            anthropic_client = await stack.enter_async_context(AsyncAnthropic(api_key=key))
        client = await stack.enter_async_context(connect(approval, settings, url=url, token=token))
        approval.client = client
        session = await open_session(
            client,
            terminal,
            anthropic_client=anthropic_client,
            model=settings.model,
            user=settings.user,
            offline_reason=reason,
        )
        with ctrl_c_abandons_turns(terminal):
            await repl(terminal, session, approval)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="maya-tools chat",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--offline", action="store_true", help="use the built-in interpreter, not a model")
    parser.add_argument("--model", help=f"the Anthropic model (default: MAYA_MODEL, else {DEFAULT_MODEL})")
    parser.add_argument("--url", help="a streamable-HTTP maya-tools server, e.g. http://127.0.0.1:8765/mcp")
    parser.add_argument("--token", help="your Door token for --url (default: DOOR_TOKEN)")
    args = parser.parse_args(argv)
    settings = ChatSettings.from_env()
    if args.model:
        from dataclasses import replace

        settings = replace(settings, model=args.model)
    terminal = Terminal()
    try:
        return anyio.run(lambda: run(settings, terminal, offline=args.offline, url=args.url, token=args.token))
    except KeyboardInterrupt:
        terminal.line("\n(bye)")
        return 130

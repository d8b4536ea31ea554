"""The ``maya-tools`` command: one entry point, one subcommand per job.

``serve`` speaks MCP on stdout when on stdio, so it never prints: logs go to stderr.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from maya_tools.runtime import Transport
    from maya_tools.settings import Settings

USAGE = """usage: maya-tools COMMAND [options]   (maya-tools --version: the installed version)

commands:
  demo                walk the API page's examples through the MCP server, with approvals (start here)
  chat                talk to Maya in the terminal; changes wait for your y on a card (--offline: no model)
  eval                score tool choice on the versioned request set (offline always; live with ANTHROPIC_API_KEY)
  serve               run the MCP server (stdio by default; --transport streamable-http)
  cards               read the card store: list, show CARD_ID, audit CARD_ID (changes nothing)
  reference-backend   run the Door API reference backend on its own
"""

UVICORN_LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "loggers": {name: {"handlers": [], "propagate": True} for name in ("uvicorn", "uvicorn.error", "uvicorn.access")},
}
"""uvicorn's loggers, its access log included, without handlers of their own: they reach the one stderr
handler ``serve`` configures (uvicorn's own config sends the access log to stdout), in its format."""


def _serve(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="maya-tools serve",
        description="Run the maya-tools MCP server. Without DOOR_API_URL it uses the embedded reference "
        "backend (demo seed); logs go to stderr.",
    )
    parser.add_argument(
        "--transport",
        choices=["stdio", "streamable-http"],
        default="stdio",
        help="stdio for an IDE (default), or streamable-http where each request brings its own Door token",
    )
    parser.add_argument(
        "--auth",
        choices=["oauth", "door-token"],
        help="HTTP only: oauth (an OAuth 2.1 protected resource; the default whenever MAYA_OAUTH_ISSUER is set) "
        "or door-token (each request's bearer is the caller's Door token: loopback only, one person)",
    )
    parser.add_argument("--host", default="127.0.0.1", help="HTTP only (default: %(default)s, loopback)")
    parser.add_argument("--port", type=int, default=8765, help="HTTP only (default: %(default)s)")
    parser.add_argument("--read-only", action="store_true", help="register only the read tools")
    parser.add_argument("--card-store", help="SQLite file for cards (default: under the user's state directory)")
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR (default: %(default)s)")
    args = parser.parse_args(argv)
    # force: this handler is the process's only one, whatever configured logging before (the MCP
    # SDK's RichHandler in a process that built a server already), so every line goes through it.
    logging.basicConfig(
        stream=sys.stderr, level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s", force=True
    )

    from maya_tools.settings import ConfigError, Settings, check_replicas, check_request_state_key, choose_auth

    transport: Transport = "stdio" if args.transport == "stdio" else "streamable-http"
    try:  # settings it cannot use are refused first, in one line, before the server's imports (~0.6 s)
        settings = Settings.from_env(read_only=args.read_only or None, card_store=args.card_store)
        check_request_state_key(settings)
        check_replicas(settings, transport)
        settings = choose_auth(settings, transport, args.host, args.auth)
        if settings.policy_file is not None:
            from maya_tools.policy import with_policy

            settings = with_policy(settings, transport)  # one line naming the rule and field, exit 2
    except ConfigError as error:
        print(f"maya-tools serve: {error}", file=sys.stderr)
        return 2
    if settings.oauth:
        from maya_tools.auth import CredentialKeyError, parse_credential_keys

        try:  # its format, before anything is opened; the runtime parses it again to use it
            parse_credential_keys(settings.credential_key)
        except CredentialKeyError as error:
            print(f"maya-tools serve: {error}", file=sys.stderr)
            return 2

    from confirmation_cards.stores import is_postgres  # imported per command: `chat` and the rest do not need it
    from maya_tools.channels.page import PATH
    from maya_tools.log_redaction import install as redact_page_links
    from maya_tools.server import build_server

    redact_page_links(PATH)  # before the first request can be logged, on either transport

    try:
        if settings.card_store != ":memory:" and not is_postgres(settings.card_store):
            from pathlib import Path

            Path(settings.card_store).parent.mkdir(parents=True, exist_ok=True)
        page_url = None if transport == "stdio" else settings.public_url or f"http://{args.host}:{args.port}"
        server = build_server(settings, transport=transport, page_url=page_url)  # checks the settings again
        if is_postgres(settings.card_store):
            import anyio

            anyio.run(_reach_store, settings)  # one line and exit 2 when it does not answer, not a traceback
        if transport == "stdio":
            import anyio

            anyio.run(server.run_stdio_async)
            return 0
    except (ConfigError, ConnectionError) as error:
        print(f"maya-tools serve: {error}", file=sys.stderr)
        return 2

    import uvicorn

    from maya_tools.http import build_app

    app = build_app(server, settings, host=args.host)
    logger = logging.getLogger("maya_tools")
    if settings.oauth:
        logger.info(
            "MCP over streamable HTTP at http://%s:%d/mcp: an OAuth protected resource (%s) of %s",
            args.host,
            args.port,
            settings.resource_url,
            settings.oauth_issuer,
        )
    else:
        logger.warning(
            "--auth door-token: each request's bearer is the caller's own Door token, passed through to Door. "
            'The MCP spec forbids token passthrough ("MCP servers MUST NOT accept any tokens that were not '
            'explicitly issued for the MCP server"); this mode is for one person on this machine only. '
            "Serve others with --auth oauth (docs/deploy.md)."
        )
        logger.info("MCP over streamable HTTP at http://%s:%d/mcp", args.host, args.port)
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level.lower(), log_config=UVICORN_LOGGING)
    return 0


async def _reach_store(settings: Settings) -> None:
    """Open the PostgreSQL card store once (creating or migrating its schema) before serving anyone."""
    from confirmation_cards.stores import open_store

    store = await open_store(settings.card_store, pool_size=1, connect_seconds=settings.store_connect_seconds)
    await store.close()


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in {"-h", "--help"}:
        print(USAGE, end="")
        return 0 if args else 2
    if args[0] in {"-V", "--version"}:
        from importlib import metadata

        print(f"maya-tools {metadata.version('maya-tools')}")
        return 0
    command, rest = args[0], args[1:]
    if command == "serve":
        return _serve(rest)
    if command == "cards":
        from maya_tools.cards_cli import main as cards_main

        return cards_main(rest)
    if command == "demo":
        from maya_tools.demo import main as demo_main

        return demo_main(rest)
    if command == "chat":
        from maya_tools.chat.app import main as chat_main

        return chat_main(rest)
    if command == "eval":
        from maya_tools.chat.evaluation import main as eval_main

        return eval_main(rest)
    if command == "reference-backend":
        from maya_tools.embedded import run_reference_backend

        return run_reference_backend(rest)
    print(f"maya-tools: unknown command {command!r}\n\n{USAGE}", end="", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())

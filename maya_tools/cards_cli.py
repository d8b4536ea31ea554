"""``maya-tools cards``: an operator's read-only view of the card store (list, show, audit).

It reads the store ``MAYA_CARD_STORE`` (or ``--card-store``) names, SQLite file or PostgreSQL, and
changes nothing: no card is approved, declined or expired from here. Strings that came from Door
(pool and cluster names) are printed on one line without control characters; no token is in the
store, so none can be printed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio

from confirmation_cards import Card, CardStatus, CardStore, render_text
from confirmation_cards.audit_log import audit_line
from confirmation_cards.models import AuditEvent
from confirmation_cards.render import clean_text, when
from confirmation_cards.stores import is_postgres, open_store
from maya_tools.settings import ConfigError, Settings


def _parser() -> argparse.ArgumentParser:
    # Accepted before or after the command; SUPPRESS keeps a command's parser from resetting them.
    common = argparse.ArgumentParser(add_help=False, argument_default=argparse.SUPPRESS)
    common.add_argument("--card-store", help="SQLite file or postgresql:// URL (default: MAYA_CARD_STORE)")
    common.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser = argparse.ArgumentParser(
        prog="maya-tools cards",
        description="Read the card store: cards, one card, its audit trail. Changes nothing.",
        parents=[common],
    )
    commands = parser.add_subparsers(dest="command", required=True)
    listing = commands.add_parser("list", help="the newest cards, one per line", parents=[common])
    listing.add_argument("--status", choices=[s.value for s in CardStatus], help="only cards with this status")
    listing.add_argument("--limit", type=int, default=50, help="at most this many, newest first (default: 50)")
    show = commands.add_parser("show", help="one card as a person saw it, and what became of it", parents=[common])
    show.add_argument("card_id")
    audit = commands.add_parser(
        "audit",
        help="the audit trail, oldest first: one card's, or every card's since a moment (default: the last 24h)",
        description="With --json, exactly the JSON lines MAYA_AUDIT_LOG writes (docs/audit.md).",
        parents=[common],
    )
    audit.add_argument("card_id", nargs="?", help="only this card's events (default: every card's)")
    audit.add_argument("--since", help=f"only events from then on: {SINCE_FORMS}")
    return parser


SINCE_FORMS = "30m, 24h or 7d before now, or an ISO date or time: 2026-12-01, 2026-12-01T09:30Z (UTC without an offset)"
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class SinceError(ValueError):
    """``--since`` is neither a duration nor an ISO date or time."""


def parse_since(text: str, now: datetime) -> datetime:
    """The moment ``--since`` names: ``30m``/``24h``/``7d`` (also ``s``) before ``now``, or an ISO 8601
    date or time (taken as UTC when it names no offset). Raises ``SinceError`` naming the accepted forms."""
    value = text.strip()
    duration = re.fullmatch(r"(\d{1,7})([smhd])", value)
    if duration is not None:
        return now - timedelta(seconds=int(duration[1]) * _UNITS[duration[2]])
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise SinceError(
            f"--since: {clean_text(text, 40)!r} is not a duration, a date or a time; use {SINCE_FORMS}."
        ) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def main(argv: Sequence[str]) -> int:
    args = _parser().parse_args(argv)
    args.card_store = getattr(args, "card_store", None)  # the parsers share these actions: no defaults set
    args.json = getattr(args, "json", False)
    args.since_at = None
    if args.command == "audit":
        try:  # one card's whole trail by default; every card's of the last 24 hours
            since = args.since or (None if args.card_id else "24h")
            args.since_at = None if since is None else parse_since(since, datetime.now(UTC))
        except SinceError as error:
            print(f"maya-tools cards audit: {error}", file=sys.stderr)
            return 2
    try:
        location = Settings.from_env(card_store=args.card_store).card_store
    except ConfigError as error:
        print(f"maya-tools cards: {error}", file=sys.stderr)
        return 2
    if not is_postgres(location) and location != ":memory:" and not Path(location).is_file():
        print(
            f"maya-tools cards: there is no card store at {location} (set MAYA_CARD_STORE or --card-store).",
            file=sys.stderr,
        )
        return 2
    return anyio.run(_run, args, location)


async def _run(args: argparse.Namespace, location: str) -> int:
    store = await open_store(location, pool_size=1)
    try:
        return await _command(store, args)
    finally:
        await store.close()


async def _command(store: CardStore, args: argparse.Namespace) -> int:
    if args.command == "audit" and args.card_id is None:
        return _print_audit(await store.audit_since(args.since_at), args.json)
    if args.command == "list":
        cards = await store.list(CardStatus(args.status) if args.status else None)
        newest = list(reversed(cards))[: max(args.limit, 0)]
        if args.json:
            print(json.dumps([card.model_dump(mode="json") for card in newest], indent=2))
            return 0
        for card in newest:
            print(
                f"{card.id}  {card.status.value:<15}  {card.action:<17}  {clean_text(card.target, 40):<24}  "
                f"{clean_text(card.cluster_name, 40):<16}  {when(card.created_at)}"
            )
        print(f"{len(newest)} of {len(cards)} card(s){' with status ' + args.status if args.status else ''}.")
        return 0
    found = await store.get(args.card_id)
    if found is None:
        print(f"maya-tools cards: no card {clean_text(args.card_id, 80)!r} in this store.", file=sys.stderr)
        return 1
    card = found
    if args.command == "show":
        if args.json:
            print(card.model_dump_json(indent=2))
            return 0
        print(render_text(card))
        said = card.result.message if card.result is not None else ""
        print(f"\nstatus: {card.status.value}{os.linesep + said if said else ''}")
        return 0
    since = args.since_at
    events = [(event, card) for event in await store.audit(card.id) if since is None or event.at >= since]
    return _print_audit(events, args.json)


def _print_audit(rows: list[tuple[AuditEvent, Card]], as_json: bool) -> int:
    """Print audit rows as the audit log's JSON lines, or as a table a person reads."""
    for event, card in rows:
        if as_json:
            print(audit_line(event, card))
            continue
        extra = " ".join(
            f"{name}={value}"
            for name, value in (
                ("door", event.status_code),
                ("operation", event.operation_id),
                ("request", event.request_id),
                ("rule", event.rule),
            )
            if value is not None
        )
        status = event.status.value if event.status is not None else "-"
        where = f"{clean_text(card.cluster_name, 40)}/{clean_text(card.target, 40)}"
        print(
            f"{event.seq:>6}  {when(event.at)}  {event.event:<15}  {status:<15}  {card.action:<17}  {where}  "
            f"{clean_text(event.by or '-', 80)}  {extra}  {clean_text(event.detail, 300)}".rstrip()
        )
    if not as_json:
        print(f"{len(rows)} event(s).")
    return 0

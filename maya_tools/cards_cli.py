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
import sys
from collections.abc import Sequence
from pathlib import Path

import anyio

from confirmation_cards import CardStatus, CardStore, render_text
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
    commands.add_parser("audit", help="one card's audit trail, oldest first", parents=[common]).add_argument("card_id")
    return parser


def main(argv: Sequence[str]) -> int:
    args = _parser().parse_args(argv)
    args.card_store = getattr(args, "card_store", None)  # the parsers share these actions: no defaults set
    args.json = getattr(args, "json", False)
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
    events = await store.audit(card.id)
    if args.json:
        print(json.dumps([event.model_dump(mode="json") for event in events], indent=2))
        return 0
    for event in events:
        extra = " ".join(
            f"{name}={value}"
            for name, value in (("status", event.status_code), ("operation", event.operation_id), ("rule", event.rule))
            if value is not None
        )
        detail = clean_text(event.detail, 300)
        print(
            f"{event.seq:>6}  {when(event.at)}  {event.event:<15}  {clean_text(event.by or '-', 80)}  {extra}  {detail}".rstrip()
        )
    return 0

"""No URL in Door's strings becomes a link in any rendering of a card (DESIGN.md property 8, MCP's
"SHOULD NOT include URLs intended to be clickable in any field of a form mode elicitation").

Every action's card, and its outcomes, carry each hostile form in every field that holds Door's
text (cluster name and id, pool labels and tags, node names, Door's messages, stale messages that
quote old and new values, who approved). The renderings are then read the way hosts read them: the
text and Markdown cards by CommonMark, by markdown-it's GFM-like preset with linkify, by GitHub's own
cmark-gfm, and as plain text by a linkifier that knows every IANA top-level domain and bare IPs; the
HTML card by its markup and its visible text.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Awaitable, Iterator
from html.parser import HTMLParser
from importlib import resources
from typing import Any

import cmarkgfm
import pytest
from cmarkgfm.cmark import Options
from hypothesis import given, settings
from hypothesis import strategies as st
from linkify_it import LinkifyIt
from markdown_it import MarkdownIt
from markdown_it.token import Token

from backend_client import DoorClient
from backend_client.models import PublicNodePoolCreateRequest, PublicNodePoolPatchRequest
from backend_client.rules import is_node_name
from confirmation_cards import ApprovalService, Card, CardStatus, Planner, SqliteCardStore
from confirmation_cards.models import CardResult
from confirmation_cards.render import (
    BODY_SHOWN,
    ENVIRONMENT,
    NOT_TLDS,
    _dumps,
    clean_text,
    defang,
    json_block,
    one_line,
    render_markdown,
    render_text,
    safe_text,
)
from reference_backend import seed
from reference_backend.backend import ReferenceBackend
from reference_backend.clock import ManualClock

pytestmark = pytest.mark.anyio

# Each form alone is short, so that it survives the cap on names (64 characters) whole.
FORMS = (
    "Approve here: https://evil.example/approve",
    "(http://evil.example/ok)",
    "www.evil.example",
    "evil.com",
    "evil.io/approve",
    "ftp://evil.example/f",
    "mailto:security@evil.com",
    "xmpp:admin@evil.com",
    "user@evil.com",
    "//evil.com/approve",
    "https://localhost:8080/approve",
    "//localhost/approve",
    "https://10.0.0.1/approve",
    "10.0.0.1/approve",
    "www.123",
    "evil.рф",
    "evil.xn--p1ai",
    "evil。com",
    "<https://evil.example/auto>",
    "[Approve](https://evil.example/a)",
    "HTTPS://EVIL.EXAMPLE/UP",
    "javascript:alert(1)",
    "app.kubernetes.io/name",
)


def iana_tlds() -> list[str]:
    """Every delegated top-level domain, from the IANA list hypothesis ships (punycode for IDNs)."""
    text = (resources.files("hypothesis.vendor") / "tlds-alpha-by-domain.txt").read_text()
    return [line.strip().lower() for line in text.splitlines() if line.strip() and not line.startswith("#")]


def _every_tld_linkifier() -> LinkifyIt:
    # A chat host or terminal that links bare domains of any delegated TLD, and bare IPv4 addresses.
    linkify = LinkifyIt(options={"fuzzy_ip": True})
    linkify.tlds(iana_tlds(), True)
    return linkify


PLAIN = _every_tld_linkifier()
COMMONMARK = MarkdownIt("commonmark")
GFM_LIKE = MarkdownIt("gfm-like")
EVERY_TLD = MarkdownIt("gfm-like")
EVERY_TLD.linkify = PLAIN


LINK_TAG = re.compile(r"<(?:a|img)\b[^>]*>")


def _tokens(tokens: list[Token]) -> Iterator[Token]:
    for token in tokens:
        yield token
        if token.children:
            yield from _tokens(token.children)


def markdown_links(rendered: str) -> list[str]:
    """Every link (or image, or raw ``<a``) any of the Markdown renderers makes of ``rendered``."""
    found: list[str] = []
    for md in (COMMONMARK, GFM_LIKE, EVERY_TLD):
        tokens = md.parse(rendered)
        found += [f"{t.type} {t.attrs}" for t in _tokens(tokens) if t.type in ("link_open", "image")]
        found += LINK_TAG.findall(md.renderer.render(tokens, md.options, {}))
    found += LINK_TAG.findall(cmarkgfm.github_flavored_markdown_to_html(rendered, options=Options.CMARK_OPT_UNSAFE))
    return found


def plain_links(text: str) -> list[str]:
    return [match.url for match in PLAIN.match(text) or []]


class _VisibleText(HTMLParser):
    """The HTML card's text as a browser shows it, without ``<pre>``/``<code>`` (the exact request)."""

    def __init__(self) -> None:
        super().__init__()
        self.inside: list[str] = []
        self.text: list[str] = []
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("a", "img", "link", "iframe") or any(name in ("href", "src") for name, _ in attrs):
            self.links.append(tag)
        if tag in ("pre", "code", "style"):
            self.inside.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if self.inside and self.inside[-1] == tag:
            self.inside.pop()

    def handle_data(self, data: str) -> None:
        if not self.inside:
            self.text.append(data)


def html_links(card: Card) -> list[str]:
    page = ENVIRONMENT.get_template("card.html.j2").render(card=card, view="ask", form="csrf")
    parser = _VisibleText()
    parser.feed(page)
    return parser.links + plain_links(" ".join(parser.text))


def outside_fence(rendered: str) -> str:
    return re.sub(r"(`{3,})json\n.*?\n\1", "", rendered, flags=re.DOTALL)


def assert_no_links(card: Card) -> None:
    text, markdown = render_text(card), render_markdown(card)
    assert markdown_links(text) == [], text
    # Hosts that show the text card as plain text linkify all of it, the JSON of the body included.
    assert plain_links(text) == [], text
    assert markdown_links(markdown) == [], markdown
    # Markdown never links inside code; what a host shows outside it must not link either.
    visible = " ".join(t.content for t in _tokens(COMMONMARK.parse(markdown)) if t.type == "text")
    assert plain_links(visible) == [], visible
    assert html_links(card) == [], card


def hostile_world(backend: ReferenceBackend, index: int, form: str) -> tuple[str, str]:
    """A cluster named ``form`` (any text) with an id that is a host name, whose pool carries
    ``form`` in its labels and tags, and a node whose name is a host (R-RNODE-03 allows dots)."""
    node = form if is_node_name(form) else f"www.node{index}.evil.com"
    cluster = backend.install_cluster(
        cluster_id=f"www.c{index}.evil.com",
        name=form,
        organisation=seed.DEMO_ORGANISATION,
        tags=[form],
        pools=[
            PublicNodePoolCreateRequest(name="spare", size="dks.c5.large", count=1),
            PublicNodePoolCreateRequest(
                name="workers", size="dks.c5.large", count=2, labels={form: form, "k": form}, tags={form: form}
            ),
        ],
    )
    backend.install_pool(
        cluster, PublicNodePoolCreateRequest(name="odd", size="dks.c5.large", count=1), node_names=[node]
    )
    backend.commit()
    return cluster.id, node


def every_action(planner: Planner, cluster: str, node: str, form: str) -> list[Awaitable[Card]]:
    return [
        planner.add_node_pool(
            cluster,
            PublicNodePoolCreateRequest(
                name="batch", size="dks.m5.xlarge", count=1, labels={form: form}, tags={"note": form}
            ),
        ),
        planner.scale_node_pool(cluster, "workers", PublicNodePoolPatchRequest(count=3)),
        planner.scale_node_pool(
            cluster, "workers", PublicNodePoolPatchRequest(auto_scale=True, min_nodes=1, max_nodes=4)
        ),
        planner.relabel_node_pool(
            cluster, "workers", PublicNodePoolPatchRequest(labels={form: form + " new"}, tags={"t": form})
        ),
        planner.remove_node_pool(cluster, "spare"),
        planner.replace_node(cluster, node),
        planner.replace_node(cluster, "unlisted." + (node if len(node) < 200 else "x.com")),
    ]


def outcomes(card: Card, form: str) -> Iterator[Card]:
    """The card as each outcome leaves it, Door's words and who decided carrying ``form``."""
    said = f"Door said: {form}; see {form}"
    warned = (*card.warnings, card.warnings[0].model_copy(update={"message": said}))
    yield card.model_copy(
        update={
            "status": CardStatus.EXECUTED,
            "approved_by": form,
            "warnings": warned,
            "result": CardResult(status_code=202, operation_id=form, message=said),
        }
    )
    yield card.model_copy(
        update={
            "status": CardStatus.FAILED,
            "approved_by": form,
            "result": CardResult(status_code=409, rule=form, message=said),
        }
    )
    yield card.model_copy(update={"status": CardStatus.DECLINED, "declined_by": form})
    yield card.model_copy(
        update={"status": CardStatus.OUTCOME_UNKNOWN, "approved_by": form, "result": CardResult(message=said)}
    )


@pytest.mark.parametrize("form", FORMS)
async def test_no_form_of_url_in_doors_strings_becomes_a_link_in_any_card_of_any_action(
    planner: Planner, backend: ReferenceBackend, form: str
) -> None:
    cluster, node = hostile_world(backend, FORMS.index(form), form)
    cards = [await plan for plan in every_action(planner, cluster, node, form)]
    assert {card.action for card in cards} == {
        "add_node_pool",
        "scale_node_pool",
        "relabel_node_pool",
        "remove_node_pool",
        "replace_node",
    }
    for card in cards:
        assert card.warnings, card.action  # every card here has a warning that names Door's strings
        assert_no_links(card)
        for outcome in outcomes(card, form):
            assert_no_links(outcome)


@pytest.mark.parametrize("form", FORMS)
async def test_a_stale_card_quoting_doors_old_and_new_labels_makes_no_link(
    planner: Planner,
    backend: ReferenceBackend,
    admin: DoorClient,
    store: SqliteCardStore,
    service: ApprovalService,
    clock: ManualClock,
    form: str,
) -> None:
    cluster, _ = hostile_world(backend, FORMS.index(form), form)
    card = await store.create(
        await planner.relabel_node_pool(cluster, "workers", PublicNodePoolPatchRequest(labels={"k": "v"}))
    )
    await admin.update_node_pool(cluster, "workers", PublicNodePoolPatchRequest(labels={form: "then " + form}))
    clock.advance(200)

    stale = await service.approve(card.id, approver=form, door=admin)

    assert stale.status is CardStatus.STALE and stale.result is not None
    assert "labels" in stale.result.message, stale.result.message
    assert_no_links(stale)


async def test_a_refusal_by_door_naming_a_hostile_cluster_makes_no_link(
    planner: Planner, backend: ReferenceBackend, admin: DoorClient, store: SqliteCardStore, service: ApprovalService
) -> None:
    """Door's own message (R-DEL-02, "the last pool of <cluster name>") reaches the card's result."""
    form = FORMS[0]
    cluster, _ = hostile_world(backend, 0, form)
    card = await store.create(await planner.remove_node_pool(cluster, "spare"))
    for pool in ("workers", "odd"):
        await admin.remove_node_pool(cluster, pool)

    failed = await service.approve(card.id, approver="ada", door=admin)

    assert failed.result is not None, failed
    assert "evil" in failed.result.message, failed.result.message
    assert_no_links(failed)


def test_the_bracketed_forms_are_the_well_known_defanged_ones() -> None:
    assert clean_text("Approve here: https://evil.example/approve") == "Approve here: https[://]evil[.]example/approve"
    assert clean_text("user@evil.com") == "user[@]evil[.]com"
    assert clean_text("mailto:security@evil.com") == "mailto[:]security[@]evil[.]com"
    assert clean_text("https://localhost:8080/x") == "https[://]localhost[:]8080/x"
    assert clean_text("//10.0.0.1/x") == "[//]10.0.0[.]1/x"
    assert clean_text("www.123") == "www[.]123"
    assert clean_text("evil。com") == "evil[。]com"
    assert safe_text("evil.com") == "evil\\[.\\]com"  # shows as evil[.]com once Markdown is rendered


def test_ordinary_values_stay_as_door_wrote_them() -> None:
    for value in ("dks.m5.large", "dks.c5.2xlarge", "dks.r5.xlarge", "0.25", "1.2.3", "v1.32.4", "12:10:00 UTC"):
        assert clean_text(value) == value
    assert clean_text("Door said: no. Try again, e.g. later") == "Door said: no. Try again, e.g. later"
    # A real domain in a label key is a bare domain to linkify-it and chat hosts.
    assert clean_text("app.kubernetes.io/name") == "app[.]kubernetes[.]io/name"
    assert one_line("app.kubernetes.io/name\n") == "app.kubernetes.io/name"  # data passed back stays exact


def test_the_tier_words_left_alone_are_not_top_level_domains() -> None:
    assert NOT_TLDS.isdisjoint(iana_tlds())
    assert "new" in iana_tlds() and clean_text("dks.new.large") == "dks[.]new.large"


def test_a_host_under_every_delegated_top_level_domain_is_defanged() -> None:
    hosts = [h for tld in iana_tlds() for h in (f"evil.{tld}", f"x.evil.{tld}/approve", f"mail.evil.{tld}.")]
    assert len(plain_links(" ".join(hosts))) == len(hosts)  # the linkifier knows every TLD
    assert plain_links(" ".join(clean_text(host) for host in hosts)) == []
    assert markdown_links("\n\n".join(safe_text(host) for host in hosts)) == []


FRAGMENTS = st.sampled_from(
    [
        "http",
        "https",
        "ftp",
        "mailto",
        "xmpp",
        "javascript",
        "www",
        "localhost",
        "evil",
        "user",
        "com",
        "io",
        "xn--p1ai",
        "рф",
        "example",
        "large",
        "10",
        "0",
        "255",
        ":",
        "//",
        "://",
        "@",
        ".",
        "。",
        "/",
        "(",
        ")",
        "[",
        "]",
        "<",
        ">",
        "\\",
        "_",
        "-",
        "*",
        "~",
        " ",
        "\u200b",
        "\n",
        "Approve",
    ]
)
HOSTILE_TEXT = st.lists(FRAGMENTS | st.text(max_size=3), max_size=24).map("".join)


@settings(max_examples=int(os.environ.get("DEFANG_EXAMPLES", 150)), deadline=None, database=None)
@given(HOSTILE_TEXT, st.integers(min_value=8, max_value=400))
def test_no_cleaned_string_links_in_any_renderer(text: str, limit: int) -> None:
    cleaned = clean_text(text, limit)
    assert plain_links(cleaned) == [], cleaned
    once = defang(one_line(text, 10_000))
    assert defang(once) == once  # idempotent: a second pass finds nothing left
    escaped = safe_text(text, limit)
    assert markdown_links(f"“{escaped}”") == [], escaped
    assert plain_links(escaped) == [], escaped


@settings(max_examples=int(os.environ.get("DEFANG_EXAMPLES", 100)), deadline=None, database=None)
@given(st.dictionaries(HOSTILE_TEXT, HOSTILE_TEXT | st.integers(), max_size=6))
def test_the_text_cards_json_is_the_exact_body_and_links_nowhere(body: dict[str, Any]) -> None:
    block = json_block(body, plain_text=True)
    fence, _, rest = block.partition("json\n")
    shown = rest[: rest.rindex("\n" + fence)]
    if len(_dumps(body, indent=2)) <= BODY_SHOWN:
        assert json.loads(shown) == body
    assert plain_links(block) == [], block


async def test_the_text_cards_request_line_is_defanged_and_the_markdown_cards_code_span_exact(
    planner: Planner, backend: ReferenceBackend
) -> None:
    cluster, node = hostile_world(backend, 0, "evil.com")
    card = await planner.replace_node(cluster, node)
    path = f"/v1/public/clusters/{cluster}/nodes/{node}"
    assert f"Exact request: DELETE {clean_text(path, 400)}\n" in render_text(card)
    assert clean_text(path, 400) != path
    assert f"`DELETE {path}`" in render_markdown(card)

"""The team's policy through the MCP server (issue 28), on both protocol generations, in memory.

A deny rule and a limit refuse before any card (Door sees only GETs, the store holds no card). A
card that waits for other approvers is offered as an approval in none of the caller's channels:
the form is never shown and the tool answers ``pending`` at once, saying who must approve and
where; an Apps client's view gets the reason and no secret, and ``decide_card`` refuses with it; a
URL-only client gets no link, and the approval page refuses with it. Nothing reaches Door.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer

from backend_client.tls import verifying_tls
from confirmation_cards import CardStatus, SqliteCardStore
from confirmation_cards.policy import parse_policy
from maya_tools.channels.app_secret import META_KEY
from maya_tools.server import MayaServer, build_server
from maya_tools.settings import Settings
from reference_backend.backend import ReferenceBackend
from reference_backend.seed import DEMO_ADMIN_TOKEN
from tests.maya_tools.conftest import MODES, Person, operations
from tests.maya_tools.test_app_card import apps_client, model_visible
from tests.maya_tools.test_approval_page import Browser, UrlOnlyClient, form_token, origin

pytestmark = pytest.mark.anyio

SCALE = ("scale_node_pool", {"cluster": "payments-prod", "pool": "workers", "count": 4})
FOUR_EYES = {
    "rule": [
        {
            "name": "prod-four-eyes",
            "clusters": ["tag:prod"],
            "approvals": 1,
            "approvers": {"claim": "groups", "any_of": ["platform"]},
            "self_approval": False,
        }
    ]
}
LIMITS = {
    "rule": [
        {"name": "cap", "clusters": ["*"], "max_count": 3},
        {
            "name": "no-prod-scaling",
            "clusters": ["tag:prod"],
            "pools": ["work*"],
            "actions": ["relabel"],
            "deny": "Relabels go through a ticket.",
        },
    ]
}
WAITING = "needs 1 approval from platform (rule prod-four-eyes); you cannot approve your own change"


def policy_server(card_store: Path, backend: ReferenceBackend, policy: dict[str, Any]) -> MayaServer:
    settings = Settings(
        card_store=str(card_store),
        door_token=DEMO_ADMIN_TOKEN,
        approver="tester",
        public_url="https://maya.example.test",
        policy=parse_policy(policy),
    )
    return build_server(settings, backend=backend)


def mutations(backend: ReferenceBackend) -> list[str]:
    return [r["method"] for r in backend.request_log if r["method"] != "GET"]


@pytest.mark.parametrize("mode", MODES)
async def test_deny_and_max_count_refuse_before_any_card_and_door_sees_only_gets(
    card_store: Path, backend: ReferenceBackend, mode: str
) -> None:
    server = policy_server(card_store, backend, LIMITS)
    person = Person("accept")
    async with Client(server, mode=mode, elicitation_callback=person) as client:
        too_many = await client.call_tool(*SCALE)
        relabel = await client.call_tool(
            "relabel_node_pool", {"cluster": "payments-prod", "pool": "workers", "labels": {"team": "x"}}
        )
        fine = await client.call_tool("scale_node_pool", {"cluster": "payments-prod", "pool": "workers", "count": 3})

    said = json.dumps([c.model_dump(mode="json") for c in too_many.content])
    assert too_many.is_error and "POLICY 'cap' (count)" in said and "max_count = 3" in said
    denied = json.dumps([c.model_dump(mode="json") for c in relabel.content])
    assert relabel.is_error and "no-prod-scaling" in denied and "Relabels go through a ticket." in denied
    assert not fine.is_error and fine.structured_content is not None
    assert fine.structured_content["status"] == "executed"
    assert mutations(backend) == ["PATCH"]  # only the allowed change, after its approval
    cards = await SqliteCardStore(card_store).list()
    assert [c.body for c in cards] == [{"count": 3}]
    assert cards[0].policy is not None and cards[0].policy.rules == ("cap",)


@pytest.mark.parametrize("mode", MODES)
async def test_a_waiting_card_is_pending_at_once_and_the_form_is_never_offered(
    card_store: Path, backend: ReferenceBackend, door: httpx2.AsyncClient, mode: str
) -> None:
    server = policy_server(card_store, backend, FOUR_EYES)
    person = Person("accept")
    async with Client(server, mode=mode, elicitation_callback=person) as client:
        result = await client.call_tool(*SCALE)
        data = result.structured_content
        assert data is not None and data["status"] == "pending" and data["changed"] is False, result
        card_id = data["card"]["id"]
        shown = await client.call_tool("get_card", {"card_id": card_id})

    assert person.messages == []  # never asked: an approval there could not count
    assert WAITING in data["message"] and f"https://maya.example.test/cards/{card_id}" in data["message"]
    text = " ".join(getattr(c, "text", "") for c in shown.content)
    assert "Waiting: needs 1 approval from platform (rule prod-four-eyes)" in text
    assert mutations(backend) == [] and await operations(door) == []
    stored = await SqliteCardStore(card_store).get(card_id)
    assert stored is not None and stored.status is CardStatus.PENDING and stored.approvals == ()


@pytest.mark.parametrize("mode", MODES)
async def test_the_apps_view_gets_the_reason_and_no_secret_and_decide_card_refuses_with_it(
    card_store: Path, backend: ReferenceBackend, mode: str
) -> None:
    server = policy_server(card_store, backend, FOUR_EYES)
    person = Person("accept")
    async with apps_client(server, mode, person) as client:
        result = await client.call_tool(*SCALE)
        data = result.structured_content
        assert data is not None and data["status"] == "pending"
        card_id = data["card"]["id"]
        assert result.meta is not None
        approval = result.meta[META_KEY]
        refused = await client.call_tool("decide_card", {"card_id": card_id, "secret": "x" * 43, "decision": "approve"})

    assert approval == {"cardId": card_id, "waiting": WAITING}  # the view disables Approve with it
    assert "secret" not in approval and person.messages == []
    said = json.dumps([c.model_dump(mode="json") for c in refused.content])
    assert refused.is_error and WAITING in said and f"/cards/{card_id}" in said
    assert mutations(backend) == []
    assert (await SqliteCardStore(card_store).get(card_id)).status is CardStatus.PENDING  # type: ignore[union-attr]
    assert "x" * 43 not in model_visible(result)


@pytest.mark.parametrize("mode", MODES)
async def test_a_url_only_client_gets_no_link_and_the_approval_page_refuses_with_the_reason(
    card_store: Path, backend: ReferenceBackend, mode: str
) -> None:
    server = policy_server(card_store, backend, FOUR_EYES)
    browser = Browser()
    async with UrlOnlyClient(server, mode=mode, elicitation_callback=browser) as client:
        result = await client.call_tool(*SCALE)
        data = result.structured_content
        assert data is not None and data["status"] == "pending" and browser.urls == []
        card_id = data["card"]["id"]
        # A link minted anyway (as one made before the policy applied would be): the page still refuses.
        runtime = server.pages.runtime
        assert runtime is not None
        card = await runtime.service.get(card_id)
        link = await server.pages.link_for(runtime, card, token=DEMO_ADMIN_TOKEN, approver="tester (approval page)")
        assert link is not None
        async with httpx2.AsyncClient(verify=verifying_tls(), timeout=10) as http:
            page = await http.get(link)
            headers = {"Origin": origin(link), "Sec-Fetch-Site": "same-origin"}
            posted = await http.post(link, data={"csrf": form_token(page.text), "decision": "approve"}, headers=headers)

    assert page.status_code == 403 and posted.status_code == 403
    for html in (page.text, posted.text):
        assert "It cannot be approved here." in html and "prod-four-eyes" in html
        assert re.search(r'value="approve"', html) is None  # no Approve button on the page
    assert mutations(backend) == []
    stored = await SqliteCardStore(card_store).get(card_id)
    assert stored is not None and stored.status is CardStatus.PENDING and stored.approvals == ()


async def test_without_a_policy_the_form_approves_as_before(
    server: MCPServer[Any], backend: ReferenceBackend, card_store: Path
) -> None:
    person = Person("accept")
    async with Client(server, elicitation_callback=person) as client:
        result = await client.call_tool(*SCALE)

    assert result.structured_content is not None and result.structured_content["status"] == "executed"
    assert len(person.messages) == 1 and mutations(backend) == ["PATCH"]
    [card] = await SqliteCardStore(card_store).list()
    assert card.policy is None and card.approvals == ()


@pytest.mark.parametrize("mode", MODES)
async def test_the_approval_page_refuses_a_waiting_plan_card_before_it_starts(
    card_store: Path, backend: ReferenceBackend, mode: str
) -> None:
    server = policy_server(card_store, backend, FOUR_EYES)
    browser = Browser()
    move = ("change_pool_tier", {"cluster": "payments-prod", "pool": "workers", "size": "dks.c5.2xlarge"})
    async with UrlOnlyClient(server, mode=mode, elicitation_callback=browser) as client:
        result = await client.call_tool(*move)
        data = result.structured_content
        assert data is not None and data["status"] == "pending" and browser.urls == [], result
        runtime = server.pages.runtime
        assert runtime is not None
        card = await runtime.service.get(data["card"]["id"])
        assert card.steps
        link = await server.pages.link_for(runtime, card, token=DEMO_ADMIN_TOKEN, approver="tester (approval page)")
        assert link is not None
        async with httpx2.AsyncClient(verify=verifying_tls(), timeout=10) as http:
            page = await http.get(link)
            headers = {"Origin": origin(link), "Sec-Fetch-Site": "same-origin"}
            posted = await http.post(link, data={"csrf": form_token(page.text), "decision": "approve"}, headers=headers)

    assert posted.status_code == 403 and "It cannot be approved here." in posted.text
    assert mutations(backend) == []
    stored = await SqliteCardStore(card_store).get(card.id)
    assert stored is not None and stored.status is CardStatus.PENDING


@pytest.mark.parametrize("mode", MODES)
async def test_a_rule_the_requester_meets_alone_is_approved_in_their_form_once(
    card_store: Path, backend: ReferenceBackend, mode: str
) -> None:
    one = {"rule": [{"name": "note-it", "clusters": ["tag:prod"], "approvals": 1}]}  # anyone, the requester too
    server = policy_server(card_store, backend, one)
    person = Person("accept")
    async with Client(server, mode=mode, elicitation_callback=person) as client:
        result = await client.call_tool(*SCALE)

    assert result.structured_content is not None and result.structured_content["status"] == "executed"
    assert len(person.messages) == 1 and mutations(backend) == ["PATCH"]
    [card] = await SqliteCardStore(card_store).list()
    assert card.policy is not None and [a.rules for a in card.approvals] == [("note-it",)]

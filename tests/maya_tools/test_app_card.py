"""Channel 1, the MCP Apps card: a client that declared the Apps extension gets the pending card and
its view, never an elicitation; only the view's one-time secret (in the result's `_meta`) decides it."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.extension import advertise
from mcp.server.apps import APP_MIME_TYPE, EXTENSION_ID
from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult

from confirmation_cards import CardStatus, SqliteCardStore
from maya_tools.channels.app_card import view_html
from maya_tools.channels.app_secret import APP_URI, META_KEY
from maya_tools.server import build_server
from maya_tools.settings import Settings
from reference_backend.backend import ReferenceBackend
from reference_backend.clock import ManualClock
from reference_backend.seed import DEMO_ADMIN_TOKEN, DEMO_CLUSTER_ID, DEMO_MEMBER_TOKEN
from tests.conftest import auth
from tests.maya_tools.conftest import MODES, Person, operations, pool

pytestmark = pytest.mark.anyio

SCALE = ("scale_node_pool", {"cluster": "payments-prod", "pool": "workers", "count": 4})
APPS = advertise(EXTENSION_ID, {"mimeTypes": [APP_MIME_TYPE]})


def apps_client(server: MCPServer[Any], mode: str, person: Person | None = None) -> Client:
    """An Apps host that also declares form elicitation (it must not be asked)."""
    return Client(server, mode=mode, extensions=[APPS], elicitation_callback=person or Person())


def model_visible(result: CallToolResult) -> str:
    """What a model may read of a result: its content and structuredContent, as JSON."""
    return json.dumps(
        {
            "content": [c.model_dump(mode="json") for c in result.content],
            "structuredContent": result.structured_content,
        }
    )


def approval_of(result: CallToolResult) -> dict[str, str]:
    assert result.meta is not None and META_KEY in result.meta, result
    approval: dict[str, str] = result.meta[META_KEY]
    return approval


async def show(client: Client) -> tuple[CallToolResult, str, str]:
    result = await client.call_tool(*SCALE)
    assert not result.is_error, result
    data = result.structured_content
    assert data is not None and data["status"] == "pending" and data["changed"] is False
    approval = approval_of(result)
    assert approval["cardId"] == data["card"]["id"]
    assert approval["secret"] not in model_visible(result), "the secret travels in _meta only"
    return result, approval["cardId"], approval["secret"]


async def decide(client: Client, card_id: str, secret: str, decision: str = "approve") -> CallToolResult:
    return await client.call_tool("decide_card", {"card_id": card_id, "secret": secret, "decision": decision})


@pytest.mark.parametrize("mode", MODES)
async def test_the_view_s_secret_approves_once_and_door_applies_the_change_once(
    server: MCPServer[Any], door: httpx2.AsyncClient, card_store: Path, mode: str
) -> None:
    person = Person("accept")
    async with apps_client(server, mode, person) as client:
        result, card_id, secret = await show(client)
        assert "waits for your decision on the card your MCP client shows" in model_visible(result)
        assert await operations(door) == [], "nothing executes before the view decides"
        done = await decide(client, card_id, secret)
        again = await decide(client, card_id, secret)
        card_read = (await client.call_tool("get_card", {"card_id": card_id})).model_dump_json()
    assert person.messages == [], "an Apps client gets no elicitation, even though it declares it"
    assert not done.is_error and done.structured_content is not None
    assert done.structured_content["status"] == "executed" and done.structured_content["changed"] is True
    assert getattr(done.content[0], "text", "").startswith("executed: Door applied the change."), "not JSON"
    assert again.is_error and "nothing was changed" in str(again.content)
    assert secret not in card_read
    [op] = await operations(door)
    assert op["kind"] == "pool.update"
    assert done.structured_content["operation_id"] == op["id"], "the view follows this operation"
    assert (await pool(door, "workers") or {}).get("count") == 4
    store = SqliteCardStore(card_store)
    [card] = await store.list()
    assert card.status is CardStatus.EXECUTED
    approved = [e for e in await store.audit(card.id) if e.event == "approved"]
    assert len(approved) == 1 and "MCP Apps card" in (approved[0].by or "")


@pytest.mark.parametrize("mode", MODES)
async def test_decline_from_the_view_changes_nothing(
    server: MCPServer[Any], door: httpx2.AsyncClient, mode: str
) -> None:
    async with apps_client(server, mode) as client:
        _, card_id, secret = await show(client)
        done = await decide(client, card_id, secret, "decline")
        late = await decide(client, card_id, secret, "approve")
    assert done.structured_content is not None and done.structured_content["status"] == "declined"
    assert done.structured_content.get("operation_id") is None, "nothing to follow"
    assert late.is_error
    assert await operations(door) == []


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "arguments",
    [
        {"secret": "x" * 43, "decision": "approve"},
        {"secret": "", "decision": "approve"},
        {"decision": "approve"},
        {"secret": "{secret}", "card_id": "card_someone_else", "decision": "approve"},
    ],
    ids=["wrong secret", "empty secret", "no secret", "another card id"],
)
async def test_a_call_without_the_view_s_secret_is_refused_and_changes_nothing(
    server: MCPServer[Any], door: httpx2.AsyncClient, mode: str, arguments: dict[str, str]
) -> None:
    """What the model can do: call the app-only tool (it is in tools/list) with anything but the secret."""
    async with apps_client(server, mode) as client:
        _, card_id, secret = await show(client)
        given = {"card_id": card_id, **{k: v.replace("{secret}", secret) for k, v in arguments.items()}}
        refused = await client.call_tool("decide_card", given)
        assert refused.is_error
        assert (await client.call_tool("get_card", {"card_id": card_id})).structured_content["card"][
            "status"
        ] == "pending"
        assert await operations(door) == []
        # A refused call spends nothing: the view's own secret still decides.
        done = await decide(client, card_id, secret)
    assert done.structured_content is not None and done.structured_content["status"] == "executed"


async def test_another_principal_s_call_with_the_secret_is_refused(
    server: MCPServer[Any], backend: ReferenceBackend, door: httpx2.AsyncClient, settings: Settings
) -> None:
    other = build_server(dataclasses.replace(settings, door_token=DEMO_MEMBER_TOKEN), backend=backend)
    async with apps_client(server, "auto") as mine:
        _, card_id, secret = await show(mine)
        async with apps_client(other, "auto") as theirs:
            refused = await decide(theirs, card_id, secret)
        assert refused.is_error and await operations(door) == []
        done = await decide(mine, card_id, secret)
    assert done.structured_content is not None and done.structured_content["status"] == "executed"


async def test_a_newer_showing_of_the_same_card_replaces_the_older_secret(
    server: MCPServer[Any], door: httpx2.AsyncClient
) -> None:
    async with apps_client(server, "legacy") as client:
        _, card_id, old = await show(client)
        _, again_id, new = await show(client)
        assert again_id == card_id and new != old
        assert (await decide(client, card_id, old)).is_error
        done = await decide(client, card_id, new)
    assert done.structured_content is not None and done.structured_content["status"] == "executed"
    assert len(await operations(door)) == 1


@pytest.mark.parametrize("mode", MODES)
async def test_a_client_without_the_apps_extension_gets_no_secret(server: MCPServer[Any], mode: str) -> None:
    async with Client(server, mode=mode) as client:
        result = await client.call_tool(*SCALE)
    assert META_KEY not in (result.meta or {})


async def test_change_tools_are_bound_to_the_card_view_and_decide_card_is_app_only(server: MCPServer[Any]) -> None:
    async with apps_client(server, "auto") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    for name in ("add_node_pool", "scale_node_pool", "relabel_node_pool", "remove_node_pool", "replace_node"):
        assert (tools[name].meta or {})["ui"] == {"resourceUri": APP_URI}
    decide_card = tools["decide_card"]
    assert (decide_card.meta or {})["ui"]["visibility"] == ["app"]
    assert decide_card.annotations is not None and decide_card.annotations.read_only_hint is False


async def test_the_view_is_one_self_contained_html_document(server: MCPServer[Any]) -> None:
    async with Client(server) as client:
        read = await client.read_resource(APP_URI)
    [content] = read.contents
    assert content.mime_type == APP_MIME_TYPE
    html = getattr(content, "text", "")
    assert html == view_html() and html.startswith("<!doctype html>")
    assert "/* maya-tools card view, bundled by web/card-view/build.mjs" in html and "/*CARD_VIEW_JS*/" not in html
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", html, re.IGNORECASE)
    assert not re.search(r"""@import|url\(\s*["']?(https?:)?//""", html), "no stylesheet loads"
    assert "var(--color-background-primary, light-dark(" in html and 'data-theme="dark"' in html


@pytest.mark.parametrize("mode", MODES)
async def test_an_expired_card_is_not_approved_from_the_view(
    server: MCPServer[Any], door: httpx2.AsyncClient, clock: ManualClock, mode: str
) -> None:
    async with apps_client(server, mode) as client:
        _, card_id, secret = await show(client)
        clock.advance(11 * 60)  # past the 10-minute default expiry
        refused = await decide(client, card_id, secret)
        status = (await client.call_tool("get_card", {"card_id": card_id})).structured_content
    assert refused.is_error and "nothing was changed" in str(refused.content)
    assert status is not None and status["card"]["status"] == "expired"
    assert await operations(door) == []


@pytest.mark.parametrize("mode", MODES)
async def test_a_target_changed_since_the_view_showed_it_makes_the_card_stale(
    server: MCPServer[Any], door: httpx2.AsyncClient, clock: ManualClock, mode: str
) -> None:
    async with apps_client(server, mode) as client:
        _, card_id, secret = await show(client)
        response = await door.patch(
            f"/v1/public/clusters/{DEMO_CLUSTER_ID}/node-pools/workers",
            json={"count": 3},
            headers=auth(DEMO_ADMIN_TOKEN),
        )
        assert response.status_code == 202
        clock.advance(300)
        done = await decide(client, card_id, secret)
    data = done.structured_content
    assert data is not None and data["status"] == "stale" and data["changed"] is False
    assert (await pool(door, "workers") or {}).get("count") == 3
    assert [op["kind"] for op in await operations(door)].count("pool.update") == 1  # only the other person's


async def test_fifty_concurrent_approvals_from_the_view_execute_once(
    server: MCPServer[Any], door: httpx2.AsyncClient
) -> None:
    async with apps_client(server, "legacy") as client:
        _, card_id, secret = await show(client)
        results: list[CallToolResult] = []

        async def press() -> None:
            results.append(await decide(client, card_id, secret))

        async with anyio.create_task_group() as group:
            for _ in range(50):
                group.start_soon(press)
    assert sum(1 for r in results if not r.is_error) == 1
    assert [op["kind"] for op in await operations(door)] == ["pool.update"]


@pytest.mark.parametrize("mode", MODES)
async def test_the_view_can_follow_the_operation_its_approval_started(
    server: MCPServer[Any], clock: ManualClock, mode: str
) -> None:
    """What the view reads after Approve: get_cluster_operations of the card's cluster (by id) lists
    the operation decide_card named, running, then succeeded once Door's workers are Running."""
    async with apps_client(server, mode) as client:
        shown, card_id, secret = await show(client)
        assert shown.structured_content is not None
        cluster_id = shown.structured_content["card"]["cluster_id"]
        done = await decide(client, card_id, secret)
        assert done.structured_content is not None
        operation_id = done.structured_content["operation_id"]

        async def followed() -> dict[str, Any]:
            read = await client.call_tool("get_cluster_operations", {"cluster": cluster_id})
            assert not read.is_error and read.structured_content is not None
            [op] = [o for o in read.structured_content["operations"] if o["id"] == operation_id]
            return op

        running = await followed()
        clock.advance(600)
        settled = await followed()
    assert running["status"] == "running" and running["message"] == "2/4 workers Running"
    assert settled["status"] == "succeeded" and settled["message"] == "4/4 workers Running"

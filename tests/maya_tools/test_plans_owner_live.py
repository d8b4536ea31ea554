"""A plan acts only as its own person, through a real ``serve --auth oauth``, SIGKILL and restarts (issue 26,
points 1, 2 and 4; DESIGN.md property 13).

The real test provider signs ada in (the SDK's OAuth client), her Door token is connected in the
server's database, a real ``maya-tools reference-backend`` on a manual clock is Door, and Door's
request log says whose token every call carried. Holding Door's clock holds the plan in its wait
step, so the test decides when the server dies, when ada disconnects and when the workers come up.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from backend_client.tls import verifying_tls
from maya_tools.auth import Principal, open_credentials, parse_credential_keys
from reference_backend.seed import DEMO_ADMIN_TOKEN, DEMO_CLUSTER_ID, DEMO_MEMBER_TOKEN
from tests.maya_tools.auth.test_serve_oauth import World
from tests.maya_tools.channels.live import LiveBrowser, digest, signed_in_client
from tests.maya_tools.conftest import Person
from tests.maya_tools.live import REF_ADMIN, Proc, base_env, free_port, wait_until
from tests.maya_tools.test_plans_live import DoorClock  # it moves any world with an admin plane
from tests.oidc import ADMIN, SERVER_CLIENT_ID, SERVER_CLIENT_SECRET, OpenIDProvider

pytestmark = [pytest.mark.anyio, pytest.mark.http]

MOVE = ("change_pool_tier", {"cluster": "payments-prod", "pool": "workers", "size": "dks.c5.2xlarge"})
NEW = "workers-c5-2xlarge"
MODES = ["legacy", "modern"]


class Site:
    """The provider and Door, started once; each test gets its own server and card store (``world``)."""

    def __init__(self, tmp: Path, provider: OpenIDProvider, door: Proc, port: int) -> None:
        self.tmp, self.provider, self.door, self.port = tmp, provider, door, port


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    tmp = tmp_path_factory.mktemp("plan-owner")
    port, door_port = free_port(), free_port()
    public_url = f"http://127.0.0.1:{port}"
    door = Proc(
        [
            "reference-backend",
            "--port",
            str(door_port),
            "--state",
            str(tmp / "door.sqlite3"),
            "--admin-token",
            REF_ADMIN,
            "--manual-clock",
        ],
        door_port,
        base_env(),
    )
    try:
        with OpenIDProvider([public_url + "/mcp"], redirect_uris=[public_url + "/auth/callback"]).running() as provider:
            yield Site(tmp, provider, door, port)
    finally:
        door.stop()


def server_env(site: Site, store: Path, key: str, **more: str) -> dict[str, str]:
    return {
        **base_env(),
        "DOOR_API_URL": f"http://127.0.0.1:{site.door.port}",
        "MAYA_CARD_STORE": str(store),
        "MAYA_OAUTH_ISSUER": site.provider.issuer,
        "MAYA_PUBLIC_URL": f"http://127.0.0.1:{site.port}",
        "MAYA_OAUTH_CLIENT_ID": SERVER_CLIENT_ID,
        "MAYA_OAUTH_CLIENT_SECRET": SERVER_CLIENT_SECRET,
        "MAYA_CREDENTIAL_KEY": key,
        "MAYA_PLAN_POLL_SECONDS": "0.1",
        "MAYA_SETTLE_SECONDS": "1",
        "MAYA_SWEEP_SECONDS": "0.2",
        **more,
    }


@pytest.fixture
def world(site: Site) -> Iterator[World]:
    store = site.tmp / f"cards-{secrets.token_hex(4)}.sqlite3"
    key = secrets.token_hex(32)
    response = World(site.provider, site.door, site.door, "", store, key).admin(
        "POST", "/_reference/reset", json={"seed": "demo"}
    )
    assert response.status_code == 200, response.text
    server = Proc(
        ["serve", "--transport", "streamable-http", "--port", str(site.port)], site.port, server_env(site, store, key)
    )
    world = World(site.provider, server, site.door, f"http://127.0.0.1:{site.port}", store, key)
    anyio.run(world.connect_door, ADMIN, DEMO_ADMIN_TOKEN)
    try:
        yield world
    finally:
        server.stop()


def plan_card(world: World) -> dict[str, Any]:
    with sqlite3.connect(f"file:{world.card_store}?mode=ro", uri=True) as db:
        [row] = db.execute("SELECT data FROM cards").fetchall()
    card: dict[str, Any] = json.loads(row[0])
    return card


def step(world: World, index: int) -> str:
    try:
        return str(plan_card(world)["steps"][index - 1]["status"])
    except (sqlite3.Error, ValueError):
        return "unknown"  # no card yet, or mid-write


def requests_since(world: World, seq: int) -> list[dict[str, Any]]:
    return [r for r in world.door_requests() if r["seq"] > seq]


def last_seq(world: World) -> int:
    return int(world.admin("GET", "/_reference/requests").json()["next"])


def pools(world: World) -> dict[str, str]:
    """The cluster's pools and their lifecycles, read on Door's public API as ada (logged: read it last)."""
    with httpx2.Client(verify=verifying_tls(), base_url=world.door_url, timeout=10) as http:
        cluster = http.get(
            f"/v1/public/clusters/{DEMO_CLUSTER_ID}", headers={"Authorization": f"Bearer {DEMO_ADMIN_TOKEN}"}
        )
    assert cluster.status_code == 200, cluster.text
    return {p["name"]: p["lifecycle"] for p in cluster.json()["node_pools"]}


async def disconnect_in_the_database(world: World) -> None:
    """What Disconnect on ``/connect`` leaves in the database, written while no server runs."""
    credentials = await open_credentials(world.card_store, parse_credential_keys(world.key))
    try:
        assert await credentials.delete(Principal(issuer=world.provider.issuer, subject=ADMIN.sub, name=None))
    finally:
        await credentials.close()


async def approve_and_kill_after_step_1(world: World, mode: str) -> None:
    """ada approves the move; the server is SIGKILLed once step 1 is recorded, while the plan waits."""

    def kill() -> None:
        wait_until(lambda: step(world, 1) == "done", "step 1 to be recorded", timeout=60)
        world.server.kill()

    async def arrange() -> None:
        threading.Thread(target=kill, daemon=True).start()

    with pytest.raises(Exception):  # noqa: B017 (the server died under the call: any transport error)
        async with signed_in_client(world, ADMIN, mode, elicitation_callback=Person("accept", arrange)) as client:
            await client.call_tool(*MOVE)
    assert step(world, 1) == "done" and plan_card(world)["status"] == "executing"


@pytest.mark.parametrize("mode", MODES)
async def test_a_server_restarted_with_its_own_door_token_continues_a_person_s_plan_only_with_theirs(
    world: World, mode: str
) -> None:
    """Point 1: the restarted server has ``DOOR_TOKEN`` (here mel's); Door sees every later call with ada's."""
    with DoorClock(world) as clock:
        await approve_and_kill_after_step_1(world, mode)
        since = last_seq(world)
        world.server.env = {**world.server.env, "DOOR_TOKEN": DEMO_MEMBER_TOKEN}
        world.server.start()
        clock.start()
        wait_until(lambda: plan_card(world)["status"] != "executing", "the restarted server to finish", timeout=90)

    card = plan_card(world)
    assert card["status"] == "executed", card["result"]
    after = requests_since(world, since)
    assert after and {r["token"] for r in after if r["path"].startswith("/v1/")} == {digest(DEMO_ADMIN_TOKEN)}
    (delete,) = [r for r in after if r["method"] == "DELETE"]
    assert (delete["user"], delete["status"]) == ("ada", 202), delete


@pytest.mark.parametrize("door_token", ["", DEMO_MEMBER_TOKEN], ids=["no DOOR_TOKEN", "with DOOR_TOKEN"])
async def test_a_restarted_server_without_the_person_s_credential_stops_the_plan_saying_what_ran(
    world: World, door_token: str
) -> None:
    """Point 2: ada disconnected while the server was down. Nothing more reaches Door, and the card never says
    "nothing was changed" while Door holds the plan's new pool."""
    await approve_and_kill_after_step_1(world, "modern")
    await disconnect_in_the_database(world)
    since = last_seq(world)
    world.server.env = {**world.server.env, "DOOR_TOKEN": door_token}
    world.server.start()
    wait_until(lambda: plan_card(world)["status"] != "executing", "the restarted server to settle it", timeout=60)

    card = plan_card(world)
    said = card["result"]["message"]
    assert card["status"] == "stopped", said
    assert "Nothing was changed" not in said and "nothing was changed" not in said
    assert "Step done: 1 (add pool workers-c5-2xlarge" in said and "no Door token connected" in said
    assert [r for r in requests_since(world, since) if r["path"].startswith("/v1/")] == []
    assert pools(world).get(NEW) == "active" and pools(world).get("workers") == "active"


@pytest.mark.parametrize("mode", MODES)
async def test_disconnecting_on_connect_while_a_plan_waits_stops_it_before_another_request(
    world: World, mode: str
) -> None:
    """Point 4: ada presses Disconnect on ``/connect`` while her plan waits for its workers; the plan stops
    before its next poll, the old pool is never removed, and the card says so."""
    disconnected_at: list[int] = []
    started = last_seq(world)

    async def disconnect_once_waiting() -> None:
        await anyio.to_thread.run_sync(lambda: wait_until(lambda: step(world, 2) == "waiting", "the wait", timeout=60))
        browser = LiveBrowser(world, ADMIN)
        try:
            await browser.disconnect()
        finally:
            await browser.aclose()
        disconnected_at.append(last_seq(world))

    async def arrange() -> None:
        pass

    # Bounded: a plan that went on after the disconnect would wait on Door's held clock for ever.
    with anyio.fail_after(90):
        async with anyio.create_task_group() as group:
            group.start_soon(disconnect_once_waiting)
            async with signed_in_client(world, ADMIN, mode, elicitation_callback=Person("accept", arrange)) as client:
                result = await client.call_tool(*MOVE)

    assert result.structured_content is not None
    card = plan_card(world)
    said = card["result"]["message"]
    assert card["status"] == "stopped", said
    assert "no Door token connected" in said and "Step done: 1" in said
    assert [s["status"] for s in card["steps"]] == ["done", "skipped", "skipped"]
    calls = requests_since(world, started)
    assert [r["method"] for r in calls if r["method"] != "GET"] == ["POST"]
    # At most the poll already under way when Disconnect returned; none once the card was settled.
    late = [r for r in calls if r["seq"] > disconnected_at[0] and r["path"].startswith("/v1/")]
    assert len(late) <= 3, late

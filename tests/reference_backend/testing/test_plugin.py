"""The pytest plugin, as a project that only installed maya-tools uses it: `def test_x(door): ...`."""

from __future__ import annotations

from importlib.metadata import entry_points

import pytest

from reference_backend.backend import ReferenceBackend
from reference_backend.clock import ManualClock
from reference_backend.seed import DEMO_CLUSTER_ID, DEMO_POOL_ID
from tests.reference_backend.testing.pytester_runs import run

USER_SUITE = '''
import anyio
import httpx2
import pytest

from backend_client import DoorClient, Forbidden, ServiceUnavailable
from backend_client.models import PublicNodePoolPatchRequest
from reference_backend.seed import DEMO_CLUSTER_ID

POOLS = f"/v1/public/clusters/{DEMO_CLUSTER_ID}/node-pools"


def test_the_door_fixture_is_a_live_backend_with_two_tokens_and_an_admin_plane(door):
    assert door.url.startswith("http://127.0.0.1:")
    scaled = httpx2.patch(f"{door.url}{POOLS}/workers", json={"count": 3}, headers=door.headers())
    assert scaled.status_code == 202
    refused = httpx2.patch(f"{door.url}{POOLS}/workers", json={"count": 5}, headers=door.headers(door.member_token))
    assert refused.status_code == 403  # R-AUTH-03
    door.admin.advance(130)
    state = httpx2.get(f"{door.url}/v1/public/clusters/{DEMO_CLUSTER_ID}/state", headers=door.headers()).json()
    assert state["operations"][0]["status"] == "succeeded"
    assert [(r["method"], r["status"], r["user"]) for r in door.admin.requests()] == [
        ("PATCH", 202, "ada"), ("PATCH", 403, "mel"), ("GET", 200, "ada")
    ]


def test_each_test_gets_a_fresh_world(door):
    pools = httpx2.get(f"{door.url}{POOLS}", headers=door.headers()).json()["items"]
    assert [p["count"] for p in pools] == [2]
    assert door.admin.requests()[0]["path"] == POOLS


def test_faults_and_the_typed_client(door):
    door.admin.add_fault(route="PATCH /v1/public/clusters/{cluster_id}/node-pools/{pool_name}", status=503, count=1)
    patch = PublicNodePoolPatchRequest(count=4)

    async def scale():
        async with DoorClient(door.url, door.super_admin_token) as client:
            with pytest.raises(ServiceUnavailable):
                await client.update_node_pool(DEMO_CLUSTER_ID, "workers", patch)
            cluster = await client.update_node_pool(DEMO_CLUSTER_ID, "workers", patch)
            assert cluster.pool("workers").count == 4
        async with DoorClient(door.url, door.member_token) as member:
            with pytest.raises(Forbidden):
                await member.update_node_pool(DEMO_CLUSTER_ID, "workers", patch)

    anyio.run(scale)
    assert [r["status"] for r in door.admin.requests() if r["method"] == "PATCH"] == [503, 202, 403]


@pytest.mark.door(seed="empty")
def test_the_empty_seed_knows_no_token(door):
    assert httpx2.get(f"{door.url}/v1/public/clusters", headers=door.headers()).status_code == 401
    door.admin.put_token(door.super_admin_token, user="ada", organisation="payments", role="super_admin")
    assert httpx2.get(f"{door.url}/v1/public/clusters", headers=door.headers()).json()["items"] == []


@pytest.mark.door(snapshot="worlds/scaled.json")
def test_a_marker_starts_from_a_snapshot_beside_the_test(door):
    pools = httpx2.get(f"{door.url}{POOLS}", headers=door.headers()).json()["items"]
    assert [(p["name"], p["count"]) for p in pools] == [("workers", 7)]
    assert door.admin.save_snapshot() == open("worlds/scaled.json", "rb").read()


@pytest.mark.anyio
async def test_door_app_is_the_backend_in_process(door_app):
    transport = httpx2.ASGITransport(app=door_app)
    async with httpx2.AsyncClient(transport=transport, base_url="http://door.test") as client:
        headers = {"Authorization": "Bearer demo-admin-token"}
        assert (await client.patch(f"{POOLS}/workers", json={"count": 3}, headers=headers)).status_code == 202
        door_app.state.backend.clock.advance(130)
        state = (await client.get(f"/v1/public/clusters/{DEMO_CLUSTER_ID}/state", headers=headers)).json()
    assert state["operations"][0]["status"] == "succeeded"


@pytest.mark.door(seed="mars")
def test_an_unknown_seed_is_named(door):
    pass


@pytest.mark.door(snapshot="worlds/absent.json")
def test_a_missing_snapshot_is_named(door_app):
    pass
'''


def scaled_snapshot() -> bytes:
    backend = ReferenceBackend(ManualClock())
    cluster = backend.cluster(DEMO_CLUSTER_ID)
    assert cluster is not None
    cluster.pools[DEMO_POOL_ID].count = 7  # a world only a snapshot can give: seven workers declared, two running
    return backend.save_snapshot()


def test_the_package_declares_the_plugin_as_a_pytest11_entry_point() -> None:
    plugins = {e.name: e.value for e in entry_points(group="pytest11")}
    assert plugins.get("door-reference-backend") == "reference_backend.testing.plugin"


def test_a_users_project_gets_the_fixtures_from_the_installed_package(pytester: pytest.Pytester) -> None:
    """No conftest, no `-p`: the fixtures, the marker and the admin plane, in a real pytest process."""
    pytester.makepyfile(test_user=USER_SUITE)
    (pytester.path / "worlds").mkdir()
    (pytester.path / "worlds" / "scaled.json").write_bytes(scaled_snapshot())
    result = run(pytester, "--strict-markers")  # the plugin registers its marker
    result.assert_outcomes(passed=6, errors=2)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at setup of test_an_unknown_seed_is_named*",
            "@pytest.mark.door(seed='mars'): the seeds are demo, empty",
            "*ERROR at setup of test_a_missing_snapshot_is_named*",
            "the door fixtures cannot start from snapshot */worlds/absent.json: *No such file or directory*",
        ]
    )


def test_the_command_line_chooses_the_world_for_unmarked_tests(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_options="""
        import httpx2

        def test_the_world(door, door_app):
            pools = httpx2.get(f"{door.url}/v1/public/clusters/3f9c1a2e-7b4d-4c58-9e21-5d6f8a0b1c2d/node-pools",
                               headers=door.headers())
            print("STATUS", pools.status_code, door_app.state.backend.cluster("3f9c1a2e-7b4d-4c58-9e21-5d6f8a0b1c2d") is None)
        """
    )
    (pytester.path / "scaled.json").write_bytes(scaled_snapshot())
    empty = run(pytester, "-s", "--door-seed", "empty")
    empty.assert_outcomes(passed=1)
    empty.stdout.fnmatch_lines(["*STATUS 401 True*"])
    from_file = run(pytester, "-s", "--door-snapshot", "scaled.json")
    from_file.assert_outcomes(passed=1)
    from_file.stdout.fnmatch_lines(["*STATUS 200 False*"])
    help_text = run(pytester, "--help")
    help_text.stdout.fnmatch_lines(["*--door-seed*", "*--door-snapshot*", "*--loopback-only*"])


def test_the_docs_example_suite_passes_as_a_users_project(pytester: pytest.Pytester) -> None:
    """docs/reference-backend.md's `test_door_example.py`, as written, in its own pytest process."""
    from tests.docs import REPO, blocks

    (example,) = [
        b for b in blocks(REPO / "docs" / "reference-backend.md") if b.text.startswith("# test_door_example.py")
    ]
    pytester.makepyfile(test_door_example=example.text)
    run(pytester, "--strict-markers").assert_outcomes(passed=3)

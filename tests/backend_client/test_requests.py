"""What the client puts on the wire: routes, exact bodies, headers (godo-style assertions)."""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest

from backend_client import DoorClient
from backend_client.errors import DoorError, DoorResponseError, NotFound
from backend_client.models import PublicNodePoolCreateRequest, PublicNodePoolPatchRequest
from tests.backend_client.fakes import (
    BASE_URL,
    CLUSTER_ID,
    TOKEN,
    FakeDoor,
    cluster,
    make_client,
    node_list,
    ok,
    pool,
    problem,
    sent_json,
)

pytestmark = pytest.mark.anyio

POOLS = f"/clusters/{CLUSTER_ID}/node-pools"


def _door() -> FakeDoor:
    answer = ok(cluster(), 202)
    return FakeDoor(
        {
            f"POST {POOLS}": [answer],
            f"PATCH {POOLS}/workers": [answer],
            f"DELETE {POOLS}/batch": [answer],
        }
    )


async def test_patch_sends_count_zero_when_it_is_zero() -> None:
    door = _door()
    async with make_client(door) as client:
        await client.update_node_pool(
            CLUSTER_ID, "workers", PublicNodePoolPatchRequest(count=0, auto_scale=True, max_nodes=3)
        )
    assert sent_json(door.requests[0]) == {"count": 0, "auto_scale": True, "max_nodes": 3}


async def test_patch_omits_count_when_it_is_not_set() -> None:
    door = _door()
    async with make_client(door) as client:
        await client.update_node_pool(CLUSTER_ID, "workers", PublicNodePoolPatchRequest(labels={"team": "pay"}))
    assert sent_json(door.requests[0]) == {"labels": {"team": "pay"}}


async def test_patch_sends_null_bounds_when_set_to_none() -> None:
    door = _door()
    async with make_client(door) as client:
        await client.update_node_pool(CLUSTER_ID, "workers", PublicNodePoolPatchRequest(max_nodes=None))
    assert sent_json(door.requests[0]) == {"max_nodes": None}


async def test_empty_patch_is_sent_as_an_empty_object_for_door_to_refuse() -> None:
    door = _door()
    async with make_client(door) as client:
        await client.update_node_pool(CLUSTER_ID, "workers", PublicNodePoolPatchRequest())
    assert door.requests[0].content == b"{}"


async def test_add_sends_exactly_the_fields_set() -> None:
    door = _door()
    async with make_client(door) as client:
        result = await client.add_node_pool(
            CLUSTER_ID, PublicNodePoolCreateRequest(name="batch", size="dks.m5.xlarge", count=1)
        )
    request = door.requests[0]
    assert request.method == "POST"
    assert request.url == f"{BASE_URL}/v1/public{POOLS}"
    assert sent_json(request) == {"name": "batch", "size": "dks.m5.xlarge", "count": 1}
    assert request.headers["content-type"] == "application/json"
    assert result == cluster()


async def test_add_without_count_leaves_the_default_to_door() -> None:
    door = _door()
    async with make_client(door) as client:
        await client.add_node_pool(CLUSTER_ID, PublicNodePoolCreateRequest(name="batch", size="dks.m5.xlarge"))
    assert sent_json(door.requests[0]) == {"name": "batch", "size": "dks.m5.xlarge"}


async def test_bearer_token_and_idempotency_key_headers() -> None:
    door = _door()
    async with make_client(door) as client:
        await client.update_node_pool(
            CLUSTER_ID, "workers", PublicNodePoolPatchRequest(count=4), idempotency_key="card-123"
        )
        await client.update_node_pool(CLUSTER_ID, "workers", PublicNodePoolPatchRequest(count=4))
    keyed, plain = door.requests
    assert keyed.headers["authorization"] == f"Bearer {TOKEN}"
    assert keyed.headers["idempotency-key"] == "card-123"
    assert "idempotency-key" not in plain.headers
    assert all(name.lower() != "x-api-key" for name in keyed.headers)


async def test_remove_pool_is_a_delete_without_body() -> None:
    door = _door()
    async with make_client(door) as client:
        await client.remove_node_pool(CLUSTER_ID, "batch", idempotency_key="k1")
    request = door.requests[0]
    assert request.method == "DELETE"
    assert request.content == b""
    assert request.headers["idempotency-key"] == "k1"


async def test_read_routes() -> None:
    door = FakeDoor(
        {
            "GET /machine-tiers": [httpx2.Response(200, json={"items": []})],
            "GET /clusters": [httpx2.Response(200, json={"items": [], "total": 0})],
            f"GET /clusters/{CLUSTER_ID}/node-pools": [
                httpx2.Response(
                    200, json={"cluster_id": CLUSTER_ID, "items": [pool().model_dump(mode="json")], "total": 1}
                )
            ],
            f"GET /clusters/{CLUSTER_ID}/nodes": [ok(node_list())],
            f"GET /clusters/{CLUSTER_ID}/node-pools/workers/nodes": [ok(node_list())],
            f"DELETE /clusters/{CLUSTER_ID}/nodes/payments-prod-workers-abc12": [
                httpx2.Response(202, json={"cluster_id": CLUSTER_ID, "node_name": "payments-prod-workers-abc12"})
            ],
        }
    )
    async with make_client(door) as client:
        assert (await client.list_machine_tiers()).items == []
        assert (await client.list_clusters(name="payments-prod")).total == 0
        assert (await client.list_node_pools(CLUSTER_ID)).items[0].name == "workers"
        assert (await client.list_nodes(CLUSTER_ID)).total == 1
        assert (await client.list_nodes(CLUSTER_ID, "workers")).items[0].pool == "workers"
        pending = await client.replace_node(CLUSTER_ID, "payments-prod-workers-abc12")
    assert pending.node_name == "payments-prod-workers-abc12"
    assert door.requests[1].url.params["name"] == "payments-prod"
    assert all(r.headers["authorization"] == f"Bearer {TOKEN}" for r in door.requests)


async def test_names_are_escaped_so_they_cannot_reach_another_route() -> None:
    door = FakeDoor({})
    async with make_client(door, max_retries=0) as client:
        with pytest.raises(Exception):  # noqa: B017 (the fake answers 404 to any route)
            await client.list_nodes(CLUSTER_ID, "../../machine-tiers")
    assert door.requests[0].url.raw_path.decode().endswith("/node-pools/..%2F..%2Fmachine-tiers/nodes")


async def test_base_url_may_include_the_api_prefix() -> None:
    assert DoorClient("https://door.example/v1/public/", "t").base_url == "https://door.example/v1/public"
    assert DoorClient("https://door.example", "t").base_url == "https://door.example/v1/public"


async def test_an_injected_http_client_is_used_and_left_open() -> None:
    door = FakeDoor({"GET /machine-tiers": [httpx2.Response(200, json={"items": []})]})
    async with httpx2.AsyncClient(transport=httpx2.MockTransport(door)) as http:
        async with DoorClient(BASE_URL, TOKEN, http_client=http) as client:
            await client.list_machine_tiers()
        assert not http.is_closed
    assert "authorization" not in {k.lower() for k in http.headers}


def test_an_empty_token_is_refused() -> None:
    with pytest.raises(ValueError):
        DoorClient(BASE_URL, "")


async def test_resolve_cluster_by_id_then_by_name() -> None:
    listing = httpx2.Response(200, json={"items": [cluster().model_dump(mode="json")], "total": 1})
    door = FakeDoor(
        {
            f"GET /clusters/{CLUSTER_ID}": [ok(cluster())],
            "GET /clusters/payments-prod": [problem(404, "Not Found", rule="R-AUTH-04")],
            "GET /clusters": [listing],
        }
    )
    async with make_client(door) as client:
        assert (await client.resolve_cluster(CLUSTER_ID)).name == "payments-prod"
        assert (await client.resolve_cluster("payments-prod")).id == CLUSTER_ID
    assert door.requests[-1].url.params["name"] == "payments-prod"


async def test_resolve_cluster_with_no_match_is_not_found() -> None:
    door = FakeDoor(
        {
            "GET /clusters/nope": [problem(404, "Not Found", rule="R-AUTH-04")],
            "GET /clusters": [httpx2.Response(200, json={"items": [], "total": 0})],
        }
    )
    async with make_client(door) as client:
        with pytest.raises(NotFound) as caught:
            await client.resolve_cluster("nope")
    assert "'nope'" in str(caught.value)
    assert caught.value.rule == "R-AUTH-04"


async def test_resolve_cluster_with_no_match_does_not_claim_door_refused_the_listing() -> None:
    """Door answered GET /clusters with 200 and no match; the 404 is the client's conclusion."""
    door = FakeDoor(
        {
            "GET /clusters/nope": [problem(404, "Not Found", rule="R-AUTH-04")],
            "GET /clusters": [httpx2.Response(200, json={"items": [], "total": 0})],
        }
    )
    async with make_client(door) as client:
        with pytest.raises(NotFound) as caught:
            await client.resolve_cluster("nope")
    said = str(caught.value)
    assert "Door refused" not in said and "with 404" not in said
    assert said.startswith("No cluster of yours has the id or name 'nope' (R-AUTH-04)")
    assert "list_clusters shows yours" in said and repr(caught.value) == f"NotFound({said!r})"


async def test_a_success_body_of_the_wrong_shape_is_a_response_error() -> None:
    door = FakeDoor({f"GET /clusters/{CLUSTER_ID}": [httpx2.Response(200, json={"id": CLUSTER_ID})]})
    async with make_client(door) as client:
        with pytest.raises(DoorResponseError) as caught:
            await client.get_cluster(CLUSTER_ID)
    assert "not a Cluster" in str(caught.value)


async def test_clients_sharing_one_http_client_never_send_each_others_token() -> None:
    """The MCP server shares one ``httpx2.AsyncClient`` between callers with different tokens."""

    def answer(request: httpx2.Request) -> httpx2.Response:
        # Door (or a proxy in front of it) setting a cookie must not tie a later caller to this one.
        return httpx2.Response(200, json={"items": []}, headers={"Set-Cookie": "session=alice-session; Path=/"})

    door = FakeDoor({"GET /machine-tiers": [answer]})
    transport = httpx2.MockTransport(door)
    async with httpx2.AsyncClient(
        transport=transport, headers={"X-Owner": "mcp"}, auth=httpx2.BasicAuth("owner", "owner-password")
    ) as http:
        owner_headers = dict(http.headers)
        alice = DoorClient(BASE_URL, "alice-token", http_client=http)
        bob = DoorClient(BASE_URL, "bob-token", http_client=http)
        await alice.list_machine_tiers()
        await bob.list_machine_tiers()
        await alice.aclose()  # one caller leaving does not close the client for the others
        await bob.list_machine_tiers(max_age=0)  # past the catalog cache: a request again
        await bob.aclose()
        assert not http.is_closed
        assert dict(http.headers) == owner_headers
    first, second, third = door.requests
    assert first.headers["authorization"] == "Bearer alice-token"
    assert second.headers["authorization"] == third.headers["authorization"] == "Bearer bob-token"
    for request in (second, third):
        assert "alice" not in str(request.headers)
        assert "cookie" not in request.headers


async def test_a_client_it_made_itself_is_closed_on_exit() -> None:
    class Transport(httpx2.MockTransport):
        closed = False

        async def aclose(self) -> None:
            Transport.closed = True

    async with DoorClient(BASE_URL, TOKEN, transport=Transport(FakeDoor({}))):
        pass
    assert Transport.closed


async def test_the_timeout_applies_to_every_request_even_on_an_injected_client() -> None:
    door = FakeDoor({"GET /machine-tiers": [httpx2.Response(200, json={"items": []})]})
    http = httpx2.AsyncClient(transport=httpx2.MockTransport(door), timeout=300)
    async with http, DoorClient(BASE_URL, TOKEN, http_client=http, timeout=7.5) as client:
        await client.list_machine_tiers()
    assert door.requests[0].extensions["timeout"] == {"connect": 7.5, "read": 7.5, "write": 7.5, "pool": 7.5}


async def test_contradictory_or_negative_settings_are_refused() -> None:
    async with httpx2.AsyncClient() as http:
        with pytest.raises(ValueError):
            DoorClient(BASE_URL, TOKEN, http_client=http, transport=httpx2.MockTransport(FakeDoor({})))
    with pytest.raises(ValueError):
        DoorClient(BASE_URL, TOKEN, max_retries=-1)


async def test_resolve_cluster_refuses_to_guess_between_clusters_of_one_name() -> None:
    twin = cluster().model_copy(update={"id": "00000000-0000-4000-8000-000000000002"})
    listing = [cluster().model_dump(mode="json"), twin.model_dump(mode="json")]
    door = FakeDoor(
        {
            "GET /clusters/payments-prod": [problem(404, "Not Found", rule="R-AUTH-04")],
            "GET /clusters": [httpx2.Response(200, json={"items": listing, "total": 2})],
        }
    )
    async with make_client(door) as client:
        with pytest.raises(DoorError) as caught:
            await client.resolve_cluster("payments-prod")
    assert not isinstance(caught.value, NotFound)
    assert CLUSTER_ID in str(caught.value) and twin.id in str(caught.value)


@pytest.fixture
def self_signed(tmp_path: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 that no CA signed, and its key (`.ci/run` installs ``openssl`` when missing)."""
    import shutil
    import subprocess

    openssl = shutil.which("openssl")
    assert openssl is not None, "this test needs the `openssl` command: apt-get install openssl"
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


async def test_a_client_of_its_own_refuses_a_certificate_it_cannot_verify(self_signed: tuple[Path, Path]) -> None:
    """The client a DoorClient makes for itself verifies Door's certificate, with the one verifying
    TLS context the process builds (``verifying_tls``): a self-signed server gets no request."""
    import asyncio
    import contextlib
    import ssl

    from backend_client.errors import DoorConnectionError
    from backend_client.tls import verifying_tls

    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(*self_signed)
    requests: list[bytes] = []

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ssl.SSLError, ConnectionError):  # the client gives up in the handshake
            requests.append(await reader.readline())
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=served)
    port = server.sockets[0].getsockname()[1]
    async with server:

        async def no_wait(seconds: float) -> None:
            return None

        async with DoorClient(f"https://127.0.0.1:{port}", TOKEN, sleep=no_wait, max_retries=0) as door:
            with pytest.raises(DoorConnectionError, match="CERTIFICATE_VERIFY_FAILED"):
                await door.list_clusters()
    assert requests in ([], [b""])  # no request line was ever sent
    assert verifying_tls() is verifying_tls() and verifying_tls().verify_mode == ssl.CERT_REQUIRED

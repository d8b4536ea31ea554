"""``DoorClient``: the typed async client of the Door DKS node-pool API.

Every answer is parsed into the ``models`` contract; every refusal becomes a class of the
``errors`` tree. Reads and keyed mutations are retried on connection failures and 5xx with the
policy in ``_constants``; a mutation without an idempotency key is never sent twice: after an
ambiguous failure the client reads the cluster back to learn whether the change took effect.
"""

from __future__ import annotations

import logging
import random
import re
from collections.abc import Awaitable, Callable, Collection
from types import TracebackType
from typing import Any, Self, TypeVar

import anyio
import httpx2
from pydantic import BaseModel

from backend_client import paths, rules
from backend_client._catalog import CatalogCache
from backend_client._constants import (
    API_PREFIX,
    CATALOG_TTL,
    DEFAULT_FRESH_TIMEOUT,
    DEFAULT_MAX_RETRIES,
    DEFAULT_OPERATION_TIMEOUT,
    DEFAULT_POLL_INTERVAL,
    DEFAULT_TIMEOUT,
    IDEMPOTENCY_HEADER,
    KEY_IN_FLIGHT_POLL,
    KEY_IN_FLIGHT_RULES,
    KEY_IN_FLIGHT_WAIT,
    USER_AGENT,
)
from backend_client._operations import ProgressCallback, follow_operation
from backend_client._parse import parse, parse_with
from backend_client._retry import (
    REPLAY_SAFE_METHODS,
    is_ambiguous,
    is_retryable,
    replay_safe,
    retry_delay,
)
from backend_client._secret import Secret
from backend_client._settle import settle
from backend_client.errors import (
    DoorConnectionError,
    DoorError,
    DoorStatusError,
    DoorTimeoutError,
    NotFound,
    cluster_not_found,
    make_status_error,
)
from backend_client.models import (
    Cluster,
    ClusterList,
    ClusterState,
    MachineTierList,
    NodeDeletePending,
    NodeList,
    NodePoolList,
    Operation,
    PublicNodePoolCreateRequest,
    PublicNodePoolPatchRequest,
)
from backend_client.node_counts import NodePage
from backend_client.tls import verifying_tls

__all__ = ["DoorClient"]

log = logging.getLogger("backend_client")

M = TypeVar("M", bound=BaseModel)
R = TypeVar("R")

Sleep = Callable[[float], Awaitable[None]]

# A Door id (a UUID) is looked up by id first, anything else by name first.
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")

# Failures that happen before the request leaves the client: nothing can have changed.
_NOT_SENT = (httpx2.ConnectError, httpx2.ConnectTimeout, httpx2.PoolTimeout, httpx2.UnsupportedProtocol)


class DoorClient:
    """The Door DKS public API (``/v1/public``), typed and async.

    ``base_url`` is the API host (``https://dks-api.apps.door.cloud``), with or without
    ``/v1/public``. ``token`` is sent only as ``Authorization: Bearer``. Pass ``http_client`` (left
    open on ``aclose``) or ``transport`` to reach an app in-process; ``sleep`` is awaited for every
    wait (retries, freshness polling, operation polling) so tests can make time pass without waiting.
    """

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        http_client: httpx2.AsyncClient | None = None,
        transport: httpx2.AsyncBaseTransport | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
        sleep: Sleep = anyio.sleep,
    ) -> None:
        if not token:
            raise ValueError("a Door token is required")
        if http_client is not None and transport is not None:
            raise ValueError("pass either http_client or transport, not both")
        if max_retries < 0:
            raise ValueError("max_retries must be ≥ 0")
        base = base_url.rstrip("/")
        self.base_url = base if base.endswith(API_PREFIX) else base + API_PREFIX
        self._token = Secret(token)
        self._timeout = timeout
        self.max_retries = max_retries
        self._sleep = sleep
        self._rng = random.Random()
        self._owns_client = http_client is None
        networked = http_client is None and transport is None  # its own client, on the network: the shared TLS context
        verify = verifying_tls() if networked else True
        self._http = http_client or httpx2.AsyncClient(transport=transport, timeout=timeout, verify=verify)
        self._catalog = CatalogCache(self._http, self.base_url, token)

    def __repr__(self) -> str:
        return f"DoorClient(base_url={self.base_url!r})"

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the HTTP client if this instance made it (an injected one is left to its owner)."""
        if self._owns_client:
            await self._http.aclose()

    # --- catalog and clusters ---------------------------------------------------------------------

    async def list_machine_tiers(self, *, max_age: float = CATALOG_TTL) -> MachineTierList:
        """``GET /machine-tiers``: the sizes a pool may have. A catalog read less than ``max_age``
        seconds ago through the same connection pool is reused (``max_age=0`` reads it again)."""
        cached = self._catalog.get(max_age)
        if cached is not None:
            return cached
        tiers = await self._get("/machine-tiers", MachineTierList)
        self._catalog.put(tiers)
        return tiers

    async def list_clusters(self, name: str | None = None) -> ClusterList:
        """``GET /clusters``: the clusters of the caller's organisation, optionally one exact name."""
        params = {"name": name} if name is not None else None
        return await self._get("/clusters", ClusterList, params=params)

    async def resolve_cluster(self, name_or_id: str) -> Cluster:
        """The cluster with that id, else the one with that name; ``NotFound`` when there is none.

        One request when the guess is right: a UUID is read by id first, anything else by
        ``?name=`` first (the list embeds the whole cluster), then the other way."""
        if _UUID.fullmatch(name_or_id):
            try:
                return await self.get_cluster(name_or_id)
            except NotFound:
                pass
        matches = [c for c in (await self.list_clusters(name=name_or_id)).items if c.name == name_or_id]
        if len(matches) > 1:
            ids = ", ".join(c.id for c in matches)
            raise DoorError(f"Several clusters are named {name_or_id!r} ({ids}); use the cluster id.")
        if matches:
            return matches[0]
        if not _UUID.fullmatch(name_or_id):
            try:
                return await self.get_cluster(name_or_id)
            except NotFound:
                pass
        raise cluster_not_found(self.base_url, name_or_id)

    async def get_cluster(self, cluster_id: str) -> Cluster:
        """``GET /clusters/{id}``: the cluster with its pools and capacity totals (R-POOL-03)."""
        return await self._get(paths.cluster(cluster_id), Cluster)

    async def get_cluster_state(self, cluster_id: str) -> ClusterState:
        """``GET /clusters/{id}/state``: the phase and the operations, newest first (R-OP-03)."""
        return await self._get(paths.cluster_state(cluster_id), ClusterState)

    # --- pools ------------------------------------------------------------------------------------

    async def list_node_pools(self, cluster_id: str) -> NodePoolList:
        """``GET /clusters/{id}/node-pools`` (R-POOL-01)."""
        return await self._get(paths.pools(cluster_id), NodePoolList)

    async def add_node_pool(
        self, cluster_id: str, request: PublicNodePoolCreateRequest, *, idempotency_key: str | None = None
    ) -> Cluster:
        """``POST /clusters/{id}/node-pools`` → the cluster with the new pool (R-ADD-*)."""

        def applied(cluster: Cluster) -> bool:
            pool = cluster.pool(request.name)
            return pool is not None and pool.size == request.size

        return await self._mutate_pool(
            "POST",
            cluster_id,
            paths.pools(cluster_id),
            body=request.body(),
            idempotency_key=idempotency_key,
            applied=applied,
        )

    async def update_node_pool(
        self,
        cluster_id: str,
        pool_name: str,
        patch: PublicNodePoolPatchRequest,
        *,
        idempotency_key: str | None = None,
    ) -> Cluster:
        """``PATCH /clusters/{id}/node-pools/{name}`` with exactly the fields set on ``patch`` (R-PATCH-*)."""

        def applied(cluster: Cluster) -> bool:
            # The patch is in force when applying it again would change nothing.
            pool = cluster.pool(pool_name)
            return pool is not None and rules.merge_patch(pool, patch) == pool

        return await self._mutate_pool(
            "PATCH",
            cluster_id,
            paths.pool(cluster_id, pool_name),
            body=patch.body(),
            idempotency_key=idempotency_key,
            applied=applied,
        )

    async def remove_node_pool(self, cluster_id: str, pool_name: str, *, idempotency_key: str | None = None) -> Cluster:
        """``DELETE /clusters/{id}/node-pools/{name}`` → the cluster, the pool now ``deleting`` (R-DEL-*)."""
        return await self._mutate_pool(
            "DELETE",
            cluster_id,
            paths.pool(cluster_id, pool_name),
            body=None,
            idempotency_key=idempotency_key,
            applied=lambda cluster: cluster.pool(pool_name) is None,
        )

    # --- nodes ------------------------------------------------------------------------------------

    async def list_nodes(
        self,
        cluster_id: str,
        pool: str | None = None,
        *,
        fresh: bool = False,
        fresh_timeout: float = DEFAULT_FRESH_TIMEOUT,
    ) -> NodeList:
        """The cluster's workers, or one pool's (R-NODE-01..06).

        With ``fresh=True`` a cold or stale snapshot is read again after its ``next_refresh_at``
        (measured on the server's clock, bounded by ``FRESH_POLL_MIN``/``FRESH_POLL_MAX``) until it
        is fresh; after ``fresh_timeout`` seconds the last snapshot is returned as it is, its
        ``cold``/``stale`` flags telling the caller it may be out of date.
        """
        response = await self._read_nodes(cluster_id, pool, fresh, fresh_timeout)
        return parse(response, NodeList)

    async def node_page(
        self,
        cluster_id: str,
        pool: str | None = None,
        *,
        offset: int = 0,
        limit: int | None = None,
        fresh: bool = False,
        fresh_timeout: float = DEFAULT_FRESH_TIMEOUT,
        pools: Collection[str] = (),
    ) -> NodePage:
        """As ``list_nodes``, but only ``limit`` workers from ``offset`` are parsed into models; every worker
        is counted by pool and status (``NodePage.counts``; ``pools``, the cluster's names, count faster)."""
        from backend_client.nodes import node_page

        response = await self._read_nodes(cluster_id, pool, fresh, fresh_timeout)
        return parse_with(response, "NodeList", lambda body: node_page(body, offset=offset, limit=limit, pools=pools))

    async def _read_nodes(
        self, cluster_id: str, pool: str | None, fresh: bool, fresh_timeout: float
    ) -> httpx2.Response:
        from backend_client.nodes import read_nodes  # msgspec and its decoders load on the first node list

        path = paths.nodes(cluster_id, pool)
        return await read_nodes(
            lambda: self._request("GET", path), self._sleep, fresh=fresh, fresh_timeout=fresh_timeout
        )

    async def replace_node(
        self, cluster_id: str, node_name: str, *, idempotency_key: str | None = None
    ) -> NodeDeletePending:
        """``DELETE /clusters/{id}/nodes/{name}``: Door replaces the worker, the pool keeps its count (R-RNODE-*)."""

        async def read_back() -> NodeDeletePending | None:
            # A replacement shows as a running node.replace operation on the node (R-OP-03, R-RNODE-05).
            state = await self.get_cluster_state(cluster_id)
            if any(op.kind == "node.replace" and op.target == node_name for op in state.running()):
                return NodeDeletePending(cluster_id=cluster_id, node_name=node_name)
            return None

        return await self._mutate(
            "DELETE",
            paths.node(cluster_id, node_name),
            NodeDeletePending,
            body=None,
            idempotency_key=idempotency_key,
            read_back=read_back,
        )

    # --- operations -------------------------------------------------------------------------------

    async def wait_for_operation(
        self,
        cluster_id: str,
        *,
        operation_id: str | None = None,
        target: str | None = None,
        timeout: float = DEFAULT_OPERATION_TIMEOUT,  # noqa: ASYNC109 (the contract's name; time may be simulated)
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        on_progress: ProgressCallback | None = None,
    ) -> Operation:
        """Follow one operation in ``GET …/state`` until it finishes, and return it.

        The operation is the one with ``operation_id``, else the newest on ``target`` (a pool or node
        name), else the newest running one (else the newest). ``on_progress`` gets every state read.
        Raises ``OperationFailed`` (with Door's error), ``OperationTimeout`` after ``timeout``
        seconds, or ``OperationNotFound``.
        """
        return await follow_operation(
            self.get_cluster_state,
            self._sleep,
            cluster_id,
            operation_id=operation_id,
            target=target,
            timeout=timeout,
            poll_interval=poll_interval,
            on_progress=on_progress,
        )

    # --- plumbing ---------------------------------------------------------------------------------

    def _headers(self, idempotency_key: str | None) -> dict[str, str]:
        headers = {
            "Authorization": f"Bearer {self._token.value}",
            "Accept": "application/json, application/problem+json",
            "User-Agent": USER_AGENT,
        }
        if idempotency_key is not None:
            headers[IDEMPOTENCY_HEADER] = idempotency_key
        return headers

    async def _send_once(
        self,
        method: str,
        url: str,
        *,
        body: dict[str, Any] | None,
        params: dict[str, str] | None,
        idempotency_key: str | None,
    ) -> httpx2.Response:
        request = self._http.build_request(
            method, url, json=body, params=params, headers=self._headers(idempotency_key), timeout=self._timeout
        )
        # An injected client may be shared by callers with other tokens: Door authenticates by the
        # bearer token alone, so neither the shared cookie jar nor the client's own auth may ride along.
        request.headers.pop("cookie", None)
        try:
            response = await self._http.send(request, auth=None)
        except httpx2.TimeoutException as exc:
            raise DoorTimeoutError(
                method, url, request_sent=not isinstance(exc, _NOT_SENT), reason=type(exc).__name__
            ) from exc
        except httpx2.TransportError as exc:
            reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            raise DoorConnectionError(method, url, request_sent=not isinstance(exc, _NOT_SENT), reason=reason) from exc
        if response.is_success:
            return response
        error = make_status_error(response, redact=(self._token.value,))
        if error.rule == "R-ADD-03":
            self._catalog.forget()  # Door no longer knows a tier the cached catalog has
        raise error

    async def _request(
        self,
        method: str,
        path: str,
        *,
        body: dict[str, Any] | None = None,
        params: dict[str, str] | None = None,
        idempotency_key: str | None = None,
    ) -> httpx2.Response:
        """One call, retried per the policy when it is replay-safe; raises the last error otherwise."""
        url = self.base_url + path
        may_retry = replay_safe(method, idempotency_key)
        attempt = 0
        reached = False  # whether an earlier attempt may have reached Door (a mutation only)
        in_flight_waited = 0.0
        while True:
            try:
                return await self._send_once(method, url, body=body, params=params, idempotency_key=idempotency_key)
            except DoorError as error:
                error.reached_before = reached
                if method.upper() not in REPLAY_SAFE_METHODS and is_ambiguous(error):
                    reached = True
                retry_after = error.retry_after if isinstance(error, DoorStatusError) else None
                if (
                    idempotency_key is not None
                    and isinstance(error, DoorStatusError)
                    and error.status_code == 409
                    and error.rule in KEY_IN_FLIGHT_RULES
                    and in_flight_waited < KEY_IN_FLIGHT_WAIT
                ):
                    # The first request with this key is still being handled: wait for its answer,
                    # which the next try replays. Not a retry: nothing is sent twice.
                    delay = min(
                        retry_after if retry_after is not None else KEY_IN_FLIGHT_POLL,
                        KEY_IN_FLIGHT_WAIT - in_flight_waited,
                    )
                    log.info("%s %s: the first request with this key is in flight; waiting %.2f s", method, url, delay)
                    await self._sleep(delay)
                    in_flight_waited += delay
                    continue
                retryable = is_retryable(error, keyed=idempotency_key is not None)
                if not (may_retry and attempt < self.max_retries and retryable):
                    raise
                delay = retry_delay(attempt, retry_after, rng=self._rng)
                log.info(
                    "retrying %s %s in %.2f s (attempt %d of %d): %s",
                    method,
                    url,
                    delay,
                    attempt + 1,
                    self.max_retries,
                    type(error).__name__,
                )
                await self._sleep(delay)
                attempt += 1

    async def _get(self, path: str, model: type[M], *, params: dict[str, str] | None = None) -> M:
        return parse(await self._request("GET", path, params=params), model)

    async def _mutate(
        self,
        method: str,
        path: str,
        model: type[M],
        *,
        body: dict[str, Any] | None,
        idempotency_key: str | None,
        read_back: Callable[[], Awaitable[M | None]],
    ) -> M:
        """A mutation; without a key, an ambiguous failure is settled by ``read_back`` (the result if
        Door's state shows the change, else None)."""
        try:
            response = await self._request(method, path, body=body, idempotency_key=idempotency_key)
        except DoorError as error:
            if idempotency_key is not None or not is_ambiguous(error):
                raise
            return await settle(f"{method} {self.base_url}{path}", error, read_back)
        return parse(response, model)

    async def _mutate_pool(
        self,
        method: str,
        cluster_id: str,
        path: str,
        *,
        body: dict[str, Any] | None,
        idempotency_key: str | None,
        applied: Callable[[Cluster], bool],
    ) -> Cluster:
        """A pool mutation answered with the cluster; ``applied`` tells from a cluster read whether it took effect."""

        async def read_back() -> Cluster | None:
            cluster = await self.get_cluster(cluster_id)
            return cluster if applied(cluster) else None

        return await self._mutate(
            method, path, Cluster, body=body, idempotency_key=idempotency_key, read_back=read_back
        )

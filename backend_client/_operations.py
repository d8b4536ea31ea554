"""Following one operation of ``GET …/state`` to its end (``DoorClient.wait_for_operation``)."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable

import anyio

from backend_client.errors import OperationFailed, OperationNotFound, OperationTimeout
from backend_client.models import ClusterState, Operation

Sleep = Callable[[float], Awaitable[None]]
ProgressCallback = Callable[[ClusterState], Awaitable[None] | None]


async def follow_operation(
    read_state: Callable[[str], Awaitable[ClusterState]],
    sleep: Sleep,
    cluster_id: str,
    *,
    operation_id: str | None,
    target: str | None,
    timeout: float,  # noqa: ASYNC109 (the contract's name; time may be simulated)
    poll_interval: float,
    on_progress: ProgressCallback | None,
) -> Operation:
    """See ``DoorClient.wait_for_operation``; ``read_state`` reads the cluster state, ``sleep`` waits."""
    started = anyio.current_time()
    waited = 0.0
    while True:
        state = await read_state(cluster_id)
        operation = _pick_operation(state, operation_id, target)
        if operation is None:
            wanted = operation_id or target
            what = f"matching {wanted!r}" if wanted else "at all"
            raise OperationNotFound(f"Cluster {cluster_id} has no operation {what}; nothing to wait for.")
        operation_id = operation.id  # follow this one, even if a newer one starts on the target
        if on_progress is not None:
            result = on_progress(state)
            if inspect.isawaitable(result):
                await result
        if operation.status == "succeeded":
            return operation
        if operation.status == "failed":
            raise OperationFailed(operation)
        remaining = timeout - max(waited, anyio.current_time() - started)
        if remaining <= 0:
            raise OperationTimeout(operation, timeout)
        delay = min(poll_interval, remaining)
        await sleep(delay)
        waited += delay


def _pick_operation(state: ClusterState, operation_id: str | None, target: str | None) -> Operation | None:
    operations = state.operations  # newest first (R-OP-03)
    if operation_id is not None:
        return next((op for op in operations if op.id == operation_id), None)
    if target is not None:
        return next((op for op in operations if op.target == target), None)
    return next((op for op in operations if op.status == "running"), operations[0] if operations else None)

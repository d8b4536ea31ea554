"""A client of the admin plane (``/_reference/…``): the clock, faults, the request log, the world's setters
and snapshots, for tests that drive a live reference backend (docs/reference-backend.md lists the routes).

Synchronous on purpose: it works the same from a plain test function and from an async one (the
backend answers from its own thread). Every refusal raises ``AdminError`` with the status and the
problem's detail; the admin token is sent only as the bearer header.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

import httpx2
from pydantic import TypeAdapter

from backend_client.models import Phase
from reference_backend.faults import FaultSpec, FaultView
from reference_backend.request_log import RequestRecord

_FAULTS = TypeAdapter(list[FaultView])
_RECORDS = TypeAdapter(list[RequestRecord])


class AdminError(Exception):
    """The admin plane refused a call: ``status`` and the problem's ``detail``."""

    def __init__(self, method: str, path: str, status: int, detail: str) -> None:
        super().__init__(f"the admin plane answered {status} to {method} {path}: {detail}")
        self.status = status
        self.detail = detail


class ReferenceAdmin:
    """The admin plane of one reference backend; ``close()`` (or ``with``) releases its connections."""

    def __init__(self, url: str, admin_token: str, *, transport: httpx2.BaseTransport | None = None) -> None:
        self._http = httpx2.Client(
            base_url=url.rstrip("/"),
            headers={"Authorization": f"Bearer {admin_token}"},
            transport=transport,
            timeout=60.0,
        )

    def __repr__(self) -> str:
        return f"ReferenceAdmin({str(self._http.base_url)!r})"

    def __enter__(self) -> ReferenceAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # --- the clock ------------------------------------------------------------------------------

    def now(self) -> datetime:
        """The backend's simulated time."""
        return datetime.fromisoformat(self._call("GET", "/clock").json()["now"])

    def advance(self, seconds: float) -> datetime:
        """Move simulated time on by ``seconds``: every transition due by then happens, in order."""
        return datetime.fromisoformat(self._call("POST", "/clock/advance", {"seconds": float(seconds)}).json()["now"])

    def set_clock(self, when: datetime) -> datetime:
        """Jump forward to ``when`` (never backwards: ``AdminError`` 409)."""
        return datetime.fromisoformat(self._call("PUT", "/clock", {"now": when.isoformat()}).json()["now"])

    # --- faults and the request log ---------------------------------------------------------------

    def add_fault(self, spec: FaultSpec | None = None, **fields: Any) -> FaultView:
        """Install a fault rule (``FaultSpec``'s fields: ``route``, ``status``, ``count``, ``when``, ``latency_ms``, …)."""
        body = (spec or FaultSpec.model_validate(fields)).model_dump(mode="json")
        return FaultView.model_validate(self._call("POST", "/faults", body).json())

    def faults(self) -> list[FaultView]:
        return _FAULTS.validate_python(self._call("GET", "/faults").json())

    def clear_faults(self) -> None:
        self._call("DELETE", "/faults")

    def requests(self, since: int = 0) -> list[RequestRecord]:
        """The requests answered outside the admin plane after seq ``since``, oldest first (no tokens:
        each record's ``token`` is a digest prefix and ``user`` the user Door issued it to)."""
        return _RECORDS.validate_python(self._call("GET", "/requests", params={"since": since}).json()["items"])

    # --- the world --------------------------------------------------------------------------------

    def reset(self, seed: Literal["demo", "empty"] = "demo") -> None:
        self._call("POST", "/reset", {"seed": seed})

    def add_cluster(self, **fields: Any) -> dict[str, Any]:
        """A cluster whose pools' workers are born Running (``name``, ``organisation``, ``phase``, ``id``, ``node_pools``, …)."""
        answer: dict[str, Any] = self._call("POST", "/clusters", fields).json()
        return answer

    def set_phase(self, cluster_id: str, phase: Phase) -> None:
        self._call("PUT", f"/clusters/{cluster_id}/phase", {"phase": phase})

    def set_credit(self, organisation: str, credit: float) -> None:
        self._call("PUT", f"/organisations/{organisation}", {"credit": float(credit)})

    def put_token(
        self, token: str, *, user: str, organisation: str, role: Literal["super_admin", "member"]
    ) -> None:
        self._call("PUT", f"/tokens/{token}", {"user": user, "organisation": organisation, "role": role})

    def delete_token(self, token: str) -> None:
        self._call("DELETE", f"/tokens/{token}")

    def set_inventory(self, available: bool) -> None:
        self._call("PUT", "/inventory", {"available": available})

    # --- snapshots --------------------------------------------------------------------------------

    def save_snapshot(self) -> bytes:
        """The whole world as a snapshot file's bytes (sorted keys; the same world gives the same bytes)."""
        return self._call("GET", "/snapshot").content

    def restore_snapshot(self, snapshot: bytes) -> datetime:
        """Replace the world, its clock's time included, with a snapshot's; returns that time."""
        answer = self._call("PUT", "/snapshot", content=snapshot)
        return datetime.fromisoformat(answer.json()["now"])

    def _call(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        *,
        content: bytes | None = None,
        params: dict[str, Any] | None = None,
    ) -> httpx2.Response:
        headers = {"Content-Type": "application/json"} if content is not None else None
        response = self._http.request(
            method, "/_reference" + path, json=body, content=content, params=params, headers=headers
        )
        if response.is_error:
            try:
                detail = str(response.json().get("detail"))
            except ValueError:
                detail = response.text[:300]
            raise AdminError(method, "/_reference" + path, response.status_code, detail)
        return response

"""A tier plan whose node reads carry the odd ``Date`` lines proxies send, through a real `maya-tools
serve` and a real `maya-tools reference-backend`.

The reference backend's fault rule ``headers`` adds a ``Date`` line to every answer, after the one
uvicorn writes: Door's replies then carry two dates (uvicorn's, on the wall
clock, and one on Door's simulated clock without a zone), as behind a proxy that adds its own. Read
with ``email.utils`` that was a naive datetime, and the plan's wait step raised ``TypeError`` with
the new pool added; the plan must now wait as usual and end ``executed``.
"""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest

from backend_client.tls import verifying_tls
from reference_backend.seed import DEMO_ADMIN_TOKEN, DEMO_CLUSTER_ID
from tests.maya_tools.live import running
from tests.maya_tools.test_plans_live import FAST, DoorClock, call, plan_card

pytestmark = [pytest.mark.anyio, pytest.mark.http]

ADMIN = {"Authorization": f"Bearer {DEMO_ADMIN_TOKEN}"}
ODD_DATES = {
    "a second Date without a zone": "Thu, 01 Oct 2026 12:00:00",
    "two more Dates in one line": "Thu, 01 Oct 2026 12:00:00 GMT, Thu, 01 Oct 2026 12:00:00",
}


@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize("odd", list(ODD_DATES))
async def test_a_plan_whose_node_reads_carry_odd_date_lines_waits_and_ends_executed(
    tmp_path: Path, odd: str, mode: str
) -> None:
    with running(tmp_path, **FAST) as live, DoorClock(live) as clock:

        async def after_planning() -> None:
            # From the approval on, every answer of Door passes the proxy: the wait step is what once raised.
            live.fault(route="*", status=None, count=None, headers={"Date": ODD_DATES[odd]})
            clock.start()

        data = await call(live, after_planning, mode=mode)

        assert data is not None, "the server died during the call"
        assert (data["status"], data["changed"]) == ("executed", True), data["message"]
        card = plan_card(live.card_store)
        assert [s["status"] for s in card["steps"]] == ["done", "done", "done"]
        assert (live.changes("pool.create"), live.changes("pool.delete")) == (1, 1)
        # What the plan's node reads carried: uvicorn's Date, then the proxy's.
        with httpx2.Client(verify=verifying_tls(), base_url=live.door_url, timeout=10) as http:
            answer = http.get(f"/v1/public/clusters/{DEMO_CLUSTER_ID}/nodes", headers=ADMIN)
        dates = answer.headers.get_list("date")
        assert len(dates) == 2 and dates[0].endswith(" GMT") and dates[1] == ODD_DATES[odd], dates
        nodes_read = [r for r in live.admin("GET", "/_reference/requests").json()["items"] if r["path"].endswith("/nodes")]
        assert len(nodes_read) >= 3  # the planner's read, and the wait's reads of the new pool's workers

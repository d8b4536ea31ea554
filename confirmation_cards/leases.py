"""Who is running an executing card: its executor (host, pid and instance) and the lease it renews.

A card whose executor is gone (a dead pid on this host, or a lapsed lease elsewhere) is an orphan,
which any server on the store settles or continues (``ApprovalService.settle_orphans``), never
while its own process still runs it.
"""

from __future__ import annotations

import os
import socket
from datetime import datetime, timedelta

from confirmation_cards.stores import Lease

LEASE = timedelta(seconds=30)
"""An executing card belongs to its executor this long after the last renewal."""

HOST = socket.gethostname()


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def executor_alive(lease: Lease, now: datetime, *, mine: str) -> bool:
    """Whether the card's executor may still be running it (``mine``: the asking service's executor).

    On this host the process table answers (a live pid is never overtaken, whatever its lease);
    elsewhere the lease, which the executor renews while its call runs.
    """
    if lease.executor is None or lease.executor == mine:
        return False  # from before leases, or ours but no longer running here (the caller filters those)
    host, _, rest = lease.executor.partition(":")
    pid_text = rest.partition(":")[0]
    if host == HOST and pid_text.isdigit():
        return pid_alive(int(pid_text))
    return lease.until is not None and lease.until > now

"""The audit as JSON lines an auditor reads outside the server (``MAYA_AUDIT_LOG``; docs/audit.md).

``audit_line`` makes one line of one audit row and its card; the log and ``maya-tools cards audit
--json`` both print it, so the two are the same text. The line is built from the row and from the
card's fields that never change after it is planned (action, cluster, target, principal), so a line
written at the moment of the event and one printed from the store a week later are equal.

``AuditLog`` is the card store's observer (``open_store(observer=…)``): the store hands it each row
after the row's transaction committed, so nothing reaches the log that the store did not keep and
nothing the store kept skips it (only a process killed between the commit and the write loses a
line; the store still has it, and ``cards audit`` prints it). Writing never holds a card up: rows go
into a bounded queue that one thread writes, a line per ``write`` on a file opened ``O_APPEND``;
a write that fails (a full disk, a path that cannot be written) is logged once, then again only
when writing works again, with how many lines were lost, and the card goes on.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import queue
import threading
from datetime import UTC, datetime

from pydantic import JsonValue

from confirmation_cards.models import AuditEvent, Card

FORMAT = 1
"""``v`` of every line: raised when a field changes meaning or goes away (a new field does not raise it)."""

QUEUE_LINES = 10_000
"""Lines waiting for the writer at most; beyond it a line is dropped (and counted) rather than wait."""

STDERR = "-"

log = logging.getLogger("confirmation_cards.audit_log")


def _when(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def audit_record(event: AuditEvent, card: Card) -> dict[str, JsonValue]:
    """The fields of one audit line, in their documented order (docs/audit.md). Never a secret: the
    store holds none (DESIGN.md property 7), and ``principal`` is a fingerprint."""
    return {
        "v": FORMAT,
        "ts": _when(event.at),
        "seq": event.seq,
        "card_id": event.card_id,
        "event": event.event,
        "status": None if event.status is None else event.status.value,
        "by": event.by,
        "action": card.action,
        "cluster": card.cluster_name,
        "cluster_id": card.cluster_id,
        "target": card.target,
        "principal": card.principal,
        "door_status": event.status_code,
        "operation_id": event.operation_id,
        "request_id": event.request_id,
        "rule": event.rule,
        "rules": [] if card.policy is None else list(card.policy.rules),
        "detail": event.detail,
        "replica": event.replica,
    }


def audit_line(event: AuditEvent, card: Card) -> str:
    """One audit row as one line of JSON, without its newline: ASCII only (every other character
    escaped), so a line never holds a line break, a control character or bytes a terminal acts on."""
    return json.dumps(audit_record(event, card), ensure_ascii=True, separators=(",", ":"))


class AuditLog:
    """Appends every committed audit row to ``target`` (a file path, or ``"-"`` for stderr) as a JSON line.

    Pass it to ``open_store(observer=…)``; ``close`` writes what is queued and stops the writer."""

    def __init__(self, target: str, *, queue_lines: int = QUEUE_LINES) -> None:
        self.target = target
        self.lost = 0
        """Lines not written (the queue was full, or a write failed), since the log was opened."""
        self._queue: queue.Queue[bytes | None] = queue.Queue(maxsize=queue_lines)
        self._failing = False
        self._lock = threading.Lock()
        self._check()
        self._thread = threading.Thread(target=self._run, name="maya-audit-log", daemon=True)
        self._thread.start()

    def __call__(self, event: AuditEvent, card: Card) -> None:
        """The store's observer: queue the line and return at once."""
        data = (audit_line(event, card) + "\n").encode("ascii")
        try:
            self._queue.put_nowait(data)
        except queue.Full:
            self._lose(OSError(errno.ENOBUFS, f"more than {self._queue.maxsize} lines are waiting to be written"))

    def flush(self) -> None:
        """Wait until every line queued so far has been written (or counted lost)."""
        self._queue.join()

    def close(self, timeout: float = 5.0) -> None:
        """Write what is queued (waiting at most ``timeout`` seconds), then stop the writer."""
        self._queue.put(None)
        self._thread.join(timeout)

    def _check(self) -> None:
        """Say at start, once, when the file cannot be written; the server starts anyway."""
        if self.target == STDERR:
            return
        try:
            # O_NONBLOCK: a FIFO nobody reads yet is not waited for here (ENXIO); its writer thread waits.
            os.close(os.open(self.target, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NONBLOCK, 0o600))
        except OSError as error:
            if error.errno != errno.ENXIO:
                self._failed(error)

    def _open(self) -> int:
        # Opened for each line: a rotated or recreated file is picked up, and no descriptor is held.
        return os.open(self.target, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)

    def _run(self) -> None:
        while True:
            data = self._queue.get()
            try:
                if data is None:
                    return
                self._write(data)
            finally:
                self._queue.task_done()

    def _write(self, data: bytes) -> None:
        try:
            fd = 2 if self.target == STDERR else self._open()
            try:
                written = os.write(fd, data)
            finally:
                if fd != 2:
                    os.close(fd)
            if written != len(data):
                raise OSError(errno.ENOSPC, f"only {written} of the line's {len(data)} bytes were written")
        except OSError as error:
            self._lose(error)
            return
        with self._lock:
            recovered, self._failing = self._failing, False
            lost = self.lost
        if recovered:
            log.warning("The audit log %s is written again; %d line(s) were lost meanwhile.", self._name(), lost)

    def _lose(self, error: OSError) -> None:
        with self._lock:
            self.lost += 1
        self._failed(error)

    def _failed(self, error: OSError) -> None:
        with self._lock:
            first, self._failing = not self._failing, True
        if first:
            log.error(
                "The audit log %s cannot be written (%s); cards go on and the card store keeps the audit "
                "(maya-tools cards audit prints it). Check MAYA_AUDIT_LOG's path and its disk.",
                self._name(),
                error.strerror or error,
            )

    def _name(self) -> str:
        return "on stderr" if self.target == STDERR else repr(self.target)

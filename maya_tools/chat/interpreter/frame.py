"""A request being completed (``Frame``), and the two ways a request stops short of a call: a
Refusal (a rule says no whatever the parts) and a Question (a part is missing or ambiguous)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from maya_tools.chat.interpreter.sentence import Intent, Reading

MAX_COUNT = 200  # R-ADD-04 / R-PATCH-06


@dataclass(frozen=True)
class Frame:
    """A request being completed: its intent, the names chosen so far, and the other parts."""

    intent: Intent
    clusters: tuple[str, ...] = ()
    cluster: str | None = None
    pools: tuple[str, ...] = ()
    pool: str | None = None
    node: str | None = None
    name: str | None = None
    size: str | None = None
    count: int | None = None
    delta: int | None = None
    low: int | None = None
    high: int | None = None
    labels: dict[str, str] | None = None
    tags: dict[str, str] | None = None
    card: str | None = None
    refers_cluster: bool = False
    refers_pool: bool = False
    factor: float | None = None
    start: int | None = None
    auto: bool | None = None
    keep_name: bool = False
    label_mode: str = "set"
    drop_keys: tuple[str, ...] = ()
    label_key: str = "labels"
    bad_name: bool = False
    soft_off: bool = False
    family: str | None = None
    follow: str | None = None
    one_word_clusters: bool = False
    asked_read: bool = False  # the words asked for this read (not a fallback for words with no verb)
    spec: tuple[str, ...] | None = None  # the tiers with the memory or vCPU per node said ("16 GiB")
    spec_said: str = ""


class Refusal(Exception):
    """The request breaks a rule whatever its parts: say which and what to do instead."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


class Question(Exception):
    """A part is missing or ambiguous: ask this, and keep the frame for the answer."""

    def __init__(self, text: str, frame: Frame) -> None:
        super().__init__(text)
        self.text = text
        self.frame = frame


def from_reading(intent: Intent, r: Reading, base: Frame | None = None) -> Frame:
    """``base`` with every part ``r`` names put in (a name given again replaces the one chosen)."""
    f = base or Frame(intent)
    f = replace(f, intent=intent, refers_cluster=r.refers_cluster, refers_pool=r.refers_pool)
    if r.clusters or r.cluster_typed:
        f = replace(f, clusters=r.clusters, cluster=r.cluster_typed, one_word_clusters=r.one_word_clusters)
    if r.pools or r.pool_typed:
        f = replace(f, pools=r.pools, pool=r.pool_typed)
    if r.node:
        f = replace(f, node=r.node)
    parts: dict[str, Any] = {
        "name": r.name,
        "size": r.size,
        "count": r.count,
        "delta": r.delta,
        "low": r.low,
        "high": r.high,
        "labels": r.labels,
        "tags": r.tags,
        "card": r.card,
        "factor": r.factor,
        "start": r.start,
        "auto": r.auto,
    }
    if r.name is not None:
        f = replace(f, bad_name=r.bad_name)
    f = replace(f, soft_off=r.soft_off, family=r.family or f.family, follow=r.follow or f.follow)
    f = replace(f, keep_name=f.keep_name or r.keep_name)
    if r.spec is not None:
        f = replace(f, spec=r.spec, spec_said=r.spec_said)
    if r.labels is not None or r.tags is not None:
        f = replace(f, label_mode=r.label_mode, drop_keys=r.drop_keys, label_key=r.label_key)
    if r.factor is not None:
        f = replace(f, delta=None, count=None)
    elif r.delta is not None or r.count is not None:
        f = replace(f, factor=None)
    return replace(f, **{k: v for k, v in parts.items() if v is not None})

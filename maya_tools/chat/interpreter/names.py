"""Names as the server lists them, and what a word in a request may name.

A word names a cluster or pool when it is that name, one dash-separated part of it ("prod" for
``payments-prod``), or a close typo of it (``difflib``, ratio ≥ 0.8). A word that could name two
things names both: the caller asks which, it never picks one silently.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from maya_tools.chat.interpreter.words import VOCABULARY

FUZZY_CUTOFF = 0.8


@dataclass(frozen=True)
class PoolInfo:
    """What the interpreter knows of a pool: enough to turn "2 more" into a count."""

    count: int | None = None
    auto_scale: bool = False
    min_nodes: int | None = None
    max_nodes: int | None = None
    size: str | None = None
    labels: Mapping[str, str] | None = None


@dataclass(frozen=True)
class TierInfo:
    """One machine tier of the catalog, enough to read "the one with 16 GiB"."""

    vcpu: float | None = None
    memory_gib: float | None = None
    price_per_hour: float | None = None


@dataclass(frozen=True)
class World:
    """The clusters the server lists, their pools and (when read) their nodes. Empty: names pass as typed."""

    clusters: Mapping[str, Mapping[str, PoolInfo]] = field(default_factory=dict)
    nodes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    ids: Mapping[str, str] = field(default_factory=dict)  # cluster id -> its name
    tiers: Mapping[str, TierInfo] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> World:
        """``{"clusters": {name: {"id": ..., "pools": {pool: {"count": 2, "size": ..., ...}}, "nodes": [...]}},
        (a cluster's ``nodes`` a list, or a map of pool to list, or each pool's own ``nodes`` list),
        "tiers": {id: {"vcpu": 2, "memory_gib": 4, "price_per_hour": 0.085, ...}}}``; every key but a
        pool's name is optional, and keys the interpreter does not use (``disk_gb``) are skipped."""
        clusters: dict[str, dict[str, PoolInfo]] = {}
        nodes: dict[str, tuple[str, ...]] = {}
        ids: dict[str, str] = {}
        pool_keys = set(PoolInfo.__dataclass_fields__)
        for name, cluster in (data.get("clusters") or {}).items():
            pools = cluster.get("pools") or {}
            clusters[name] = {p: PoolInfo(**{k: v for k, v in i.items() if k in pool_keys}) for p, i in pools.items()}
            listed = _node_names(cluster.get("nodes"), pools)
            if listed:
                nodes[name] = listed
            if cluster.get("id"):
                ids[str(cluster["id"]).lower()] = name
        tier_keys = set(TierInfo.__dataclass_fields__)
        tiers = {
            t: TierInfo(**{k: v for k, v in (info or {}).items() if k in tier_keys})
            for t, info in (data.get("tiers") or {}).items()
        }
        return cls(clusters, nodes, ids, tiers)

    def all_nodes(self, cluster: str | None = None) -> tuple[str, ...]:
        if cluster is not None:
            return tuple(self.nodes.get(cluster, ()))
        return tuple(n for names in self.nodes.values() for n in names)

    def pools(self, cluster: str | None = None) -> tuple[str, ...]:
        if cluster is not None:
            return tuple(self.clusters.get(cluster, {}))
        return tuple(sorted({p for pools in self.clusters.values() for p in pools}))

    def clusters_with(self, pool: str) -> tuple[str, ...]:
        return tuple(c for c, pools in self.clusters.items() if pool in pools)

    def pool(self, cluster: str, pool: str) -> PoolInfo | None:
        return self.clusters.get(cluster, {}).get(pool)

    def node_cluster(self, word: str) -> str | None:
        """The cluster a node name belongs to: listed there, or named after it (``payments-prod-workers-abc12``)."""
        for cluster, names in self.nodes.items():
            if word in names:
                return cluster
        for cluster in sorted(self.clusters, key=len, reverse=True):
            rest = word.removeprefix(cluster + "-")
            if rest != word and rest and rest not in self.clusters.get(cluster, {}):
                return cluster
        return None


def candidates(word: str, names: Iterable[str]) -> tuple[str, ...]:
    """Every name ``word`` may stand for: itself, names it is a dash part of, or close typos."""
    names = tuple(names)
    if word in names:
        return (word,)
    if word in VOCABULARY or word.isdigit() or len(word) < 3:
        return ()
    parts = tuple(n for n in names if word in n.split("-"))
    if parts:
        return parts
    short = tuple(n for n in names if any(_abbreviates(word, part) for part in n.split("-")))
    if short:  # "stg" for payments-staging; two names it could shorten are both candidates (asked about)
        return short
    if len(word) < 4:
        return ()
    close = difflib.get_close_matches(word, names, n=5, cutoff=FUZZY_CUTOFF)
    # a shared prefix lifts difflib's ratio ("payments-dev" is 0.8 of "payments-prod"): a typo also
    # changes few letters, so another cluster's name is never read as a listed one (property 3); when
    # one is that close, every close name stays a candidate (two are asked about, property 4)
    if not any(edits(word, n) <= max(1, len(n) // 6) for n in close):
        return ()
    return tuple(sorted(close))


def _abbreviates(word: str, part: str) -> bool:
    """``word`` is ``part`` with vowels dropped ("stg" for staging, "prd" for prod, "wrkrs" for workers)."""
    if len(word) < 3 or len(part) < 4 or not word.isalpha() or re.search(r"[aeiou]", word[1:]) or word[0] != part[0]:
        return False
    rest = iter(part[1:])
    return all(ch in rest for ch in word[1:]) and len(word) >= len(re.sub(r"[aeiou]", "", part)) - 2


def edits(a: str, b: str) -> int:
    """Edits (insert, delete, change, swap of two neighbours) from ``a`` to ``b``."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        row = [i]
        for j, cb in enumerate(b, 1):
            cost = min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cost = min(cost, prev2[j - 2] + 1)
            row.append(cost)
        prev2, prev = prev, row
    return prev[-1]


def _node_names(listed: Any, pools: Mapping[str, Any]) -> tuple[str, ...]:
    """A cluster's node names however a world file lists them: one list, a map of pool to list, or a
    list in each pool (a map's keys are pools, never nodes)."""
    names: list[str] = []
    if isinstance(listed, Mapping):
        for group in listed.values():
            names += [str(n) for n in group or ()]
    elif listed:
        names += [str(n) for n in listed]
    for info in pools.values():
        names += [str(n) for n in (info or {}).get("nodes") or ()]
    return tuple(dict.fromkeys(names))

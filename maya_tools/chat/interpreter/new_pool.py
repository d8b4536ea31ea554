"""A new pool's parts said in any order: "name: canary. machine: c5 xlarge. count: one", "prod needs
a pool called cache, r5 xlarge, 2", "same tier as workers", "start it at 2" (issue 22)."""

from __future__ import annotations

import re

from maya_tools.chat.interpreter.names import World
from maya_tools.chat.interpreter.words import NUMBER_WORDS, VOCABULARY

# "key: value" where the value ends the clause: a label, or one of a new pool's parts by name
_COLON = re.compile(
    r"(?<![\w.=-])([A-Za-z][A-Za-z0-9_./-]*)\s*:\s+(?![\d.\-–]+\s*(?:[,;]|$))([A-Za-z0-9_.-]*[A-Za-z0-9_])"
    r"(?=\s*(?:[,.;)/]|$)|\s+(?:and|&)\s|\s+[—–-]\s)"
)
_PART_KEYS = {
    "machine": "size",
    "machines": "size",
    "tier": "size",
    "type": "size",
    "instance": "size",
    "flavor": "size",
    "flavour": "size",
    "size": "size",
    "nodes": "count",
    "count": "count",
    "name": "name",
}


def colon_pairs(said: str, world: World) -> str:
    """``said`` with each "key: value" written "key=value" (the reader's pair form), a new pool's
    parts under their slot's name ("machine: ..." is the size); a listed cluster or pool before a
    colon ("prod: add pool etl") or a number after one ("min: 2") stays as it is."""

    def pair(m: re.Match[str]) -> str:
        key, value = m[1].lower(), m[2]
        listed = {*world.clusters, *world.pools(), *(p for c in world.clusters for p in c.split("-"))}
        if (
            key in listed
            or key in {"pool", "nodepool", "cluster", "labels", "label", "tags", "tag"}
            or (key in VOCABULARY and key not in _PART_KEYS)
        ):
            return m[0]
        slot = _PART_KEYS.get(key)
        if slot == "count" and value.lower() in NUMBER_WORDS:
            value = str(NUMBER_WORDS[value.lower()])
        return f"{slot or m[1]}={value}"

    return _COLON.sub(pair, said)


_POOL_WORD = r"(?:node\s*)?pool|nodepool"
_NAME = r"[a-z0-9][a-z0-9-]*[a-z0-9]|[a-z0-9]"
_NOT_NAMES = frozenset(
    {
        "separate",
        "dedicated",
        "small",
        "big",
        "large",
        "bigger",
        "extra",
        "additional",
        "second",
        "new",
        "fresh",
        "temporary",
        "tiny",
        "spare",
        "fixed",
        "autoscaling",
        "autoscaled",
        "memory-heavy",
        "please",
        "pls",
        "asap",
    }
)


def new_name(text: str, request: str, world: World, clusters: tuple[str, ...], pools: tuple[str, ...]) -> str | None:
    """The name a new pool is given where the reader's explicit forms miss it: after a colon ("new
    pool on prod: etl, ..."), quoted next to "pool" ("a pool 'edge'"), or a pool another cluster has,
    asked for by name on a cluster that lacks it ("staging: add pool workers, c5 xlarge")."""
    listed = set(world.pools())

    def free(word: str) -> bool:
        return word not in _NOT_NAMES and not word.isdigit() and word not in world.clusters and "." not in word

    after_colon = rf"\b(?:new|another|second|extra|separate)\s+(?:{_POOL_WORD})\b[^:,.]*:\s*({_NAME})\s*(?:[,/]|$)"
    if (m := re.search(after_colon, text)) and free(m[1]) and m[1] not in listed:
        return m[1]
    form = re.search(
        rf"(?:^|[/,;]\s*)(?:{_POOL_WORD})\s*:\s*({_NAME})\s*(?:[,/;]|$)", text
    )  # "pool: api-edge / tier: ..."
    if form and free(form[1]) and form[1] not in listed and re.search(r"\bdks\.|\bsize:", text):
        return form[1]
    quoted = re.search(
        rf"\b(?:{_POOL_WORD})\s+(?:called\s+|named\s+)?[\"'`‘“]([a-z0-9][a-z0-9-]*)[\"'`’”]", request.lower()
    ) or re.search(
        rf"[\"'`‘“]([a-z0-9][a-z0-9-]*)[\"'`’”]\s+(?:{_POOL_WORD})\b", request.lower()
    )  # "a 'batch-spot' pool"
    if quoted and free(quoted[1]) and quoted[1] not in listed:
        return quoted[1]
    verb = rf"\b(?:create|add|make|provision|spin\s+up|set\s+up|build)\s+(?:a\s+|an\s+|new\s+|another\s+)*(?:{_POOL_WORD})\s+"
    taken = re.search(verb + rf"(?:called\s+|named\s+)?({_NAME})\b", text)
    if taken and taken[1] in pools and re.search(r"\bdks\.", text):  # with a tier: a pool to create, its name taken
        return taken[1]
    if len(clusters) == 1:
        here = set(world.pools(clusters[0]))
        for pool in pools:
            if pool not in here and re.search(rf"\b(?:{_POOL_WORD})\s+{re.escape(pool)}\b", text):
                return pool  # another cluster's pool name, new on this one
    return None


def same_tier(text: str, world: World, cluster: str | None) -> str | None:
    """ "same tier as workers", "like batch's machines": the tier of the pool named after it."""
    m = re.search(
        r"\b(?:same\s+(?:tier|size|machines?|machine\s+type|instance\s+type|type|nodes?)\s+as|like)\s+(?:the\s+)?([a-z0-9][a-z0-9-]*)",
        text,
    )
    if m is None:
        return None
    holders = [cluster] if cluster else list(world.clusters_with(m[1]))
    sizes = {info.size for c in holders if (info := world.pool(c, m[1])) is not None and info.size}
    return sizes.pop() if len(sizes) == 1 else None

"""Requests typed as commands, the way people type in an IDE chat panel: a tool's own name
(``scale_node_pool cluster=payments-prod pool=workers count=5``), a slash command (``/add-pool``),
CLI flags (``--count +2``, ``--keep-name``), JSON bits (``{"auto_scale": true, "max_nodes": 6}``)
and short forms ("np", "sts"). Each becomes the plain words the reader already reads, so a command
gets no path around the reading, the frame or the safety guard that every sentence passes."""

from __future__ import annotations

import json
import re

_I = re.IGNORECASE
# A tool's name (or a slash command) opening the request, as the verb the reader knows.
_TOOLS = {
    "add_node_pool": "add pool",
    "add-pool": "add pool",
    "addpool": "add pool",
    "scale_node_pool": "scale",
    "scale-pool": "scale",
    "scale": "scale",
    "relabel_node_pool": "relabel",
    "relabel": "relabel",
    "remove_node_pool": "remove pool",
    "remove-pool": "remove pool",
    "delete-pool": "remove pool",
    "replace_node": "replace node",
    "replace-node": "replace node",
    "change_pool_tier": "change tier of",
    "change-tier": "change tier of",
    "get_cluster_operations": "show operations on",
    "operations": "show operations on",
    "list_nodes": "list nodes on",
    "list_node_pools": "list pools on",
    "list_clusters": "list clusters",
    "list_machine_tiers": "list machine tiers",
    "get_cluster": "show cluster",
}
_TOOL = re.compile(r"^\s*/?(" + "|".join(sorted(map(re.escape, _TOOLS), key=len, reverse=True)) + r")\b(?!-)", _I)
_ONLY_SLASH = {"scale", "relabel", "operations"}  # plain words too: only their slash form is a command
_FLAGS = (
    (r"--count[\s=]+([+-]\d+)", r" \1 "),  # "--count +2": relative
    (r"--(?:count|nodes|replicas)[\s=]+(\d+)", r" count=\1 "),
    (r"--min(?:[-_]nodes)?[\s=]+(\d+)", r" min \1 "),
    (r"--max(?:[-_]nodes)?[\s=]+(\d+)", r" max \1 "),
    (r"--(?:tier|size|machine|type|instance-type)[\s=]+(\S+)", r" size=\1 "),
    (r"--cluster[\s=]+(\S+)", r" cluster=\1 "),
    (r"--name[\s=]+(\S+)", r" name=\1 "),
    (r"--pool[\s=]+(\S+)", r" pool \1 "),
    (r"--node(?:[-_]name)?[\s=]+(\S+)", r" node \1 "),
    (r"--keep[-_]name\b", " keep the name "),
    (r"--no[-_]auto[-_]?scal\w*", " no autoscaling "),
    (r"--auto[-_]?scal\w*", " autoscale "),
    (r"--labels?[\s=]+", " labels "),
    (r"--tags?[\s=]+", " tags "),
    (r"--follow[\s=]+(\S+)", r" follow \1 "),
)
_ARGS = (
    (r"\bauto_scale\s*=\s*(?:true|yes|on|1)\b", " autoscale "),
    (r"\bauto_scale\s*=\s*(?:false|no|off|0)\b", " no autoscaling "),
    (r"\bkeep_name\s*=\s*(?:true|yes|1)\b", " keep the name "),
    (r"\bkeep_name\s*=\s*(?:false|no|0)\b", " "),
    (r"\bnode_name\s*=\s*", " node "),
    (r"\bfollow\s*=\s*", " follow "),
    (r"\b(?:labels|tags)\s*=\s*(?=\{)", lambda m: m[0].split("=")[0].strip() + " "),
    (r"(?<=[a-z])\s*(?:=>|->|→)\s*(?=\d)", " to "),  # "workers => 7" ("2 → 5" stays: from 2 to 5)
    (r"\bnp\b", "node pool"),
    (r"\bsts\b", "status"),
    (r"\bw/o\b", "without"),
    (r"\bw/\s*", "with "),
    (r"(?<![\w.])([a-z][a-z0-9-]*)\s*\+=\s*(\d+)", r"\1 +\2"),  # "workers += 4"
    (r"(?<![\w.])([a-z][a-z0-9-]*)\s*-=\s*(\d+)", r"\1 minus \2"),
    (r"^([a-z][a-z0-9-]*)\s+x\s*2$", r"double \1"),  # "workers x2": the count times two
    (r"^([a-z][a-z0-9-]*)\s+x\s*3$", r"triple \1"),
    (r"^([a-z][a-z0-9-]*)\s+x\s*4$", r"quadruple \1"),
    (r"\b2x\s+(?=the\b)", "double "),  # "2x the workers pool"; "2x c5.large" stays a count
    (r"\b3x\s+(?=the\b)", "triple "),
    (r"\b4x\s+(?=the\b)", "quadruple "),
)
_PART_KEYS = {"name", "size", "count", "cluster", "pool"}


def commands(said: str) -> str:
    """``said`` with a command's tool name, flags and JSON arguments written as the reader's words."""
    if (m := _TOOL.match(said)) and (m[1].lower() not in _ONLY_SLASH or said.lstrip().startswith("/")):
        said = _TOOLS[m[1].lower()] + " " + said[m.end() :]
    for pattern, words in _FLAGS:
        said = re.sub(pattern, words, said, flags=_I)
    said = re.sub(r"\{[^{}]*\}", _json_words, said)
    for pattern, new in _ARGS:
        said = re.sub(pattern, new, said, flags=_I)
    return " ".join(said.split())


def _json_words(m: re.Match[str]) -> str:
    """A JSON object's keys that are a tool's arguments as words ("min 1 max 6 autoscale"), any other
    keys left as the object (the reader takes them for labels)."""
    try:
        data = json.loads(m[0])
    except ValueError:
        return m[0]
    if not isinstance(data, dict):
        return m[0]
    words: list[str] = []
    rest: dict[str, object] = {}
    for key, value in data.items():
        k = str(key).lower()
        if k == "auto_scale" and isinstance(value, bool):
            words.append("autoscale" if value else "no autoscaling")
        elif k in ("min_nodes", "max_nodes") and isinstance(value, int):
            words.append(f"{k[:3]} {value}")
        elif k == "keep_name" and value is True:
            words.append("keep the name")
        elif k in _PART_KEYS and isinstance(value, str | int):
            words.append(f"{k}={value}")
        elif k in ("labels", "tags") and isinstance(value, dict):
            words.append(k + " " + " ".join(f"{a}={b}" for a, b in value.items()))
        else:
            rest[str(key)] = value
    if rest:
        words.append(json.dumps(rest))
    return " " + " ".join(words) + " "

"""Quantities and loose spellings: tiers written loosely, cluster ids, verbs one edit off, relative
counts ("double", "+3", "another node", "one fewer") and autoscaling bounds in words ("never below
3", "floor of 2", "start at 3"). Each turns the words into the plain form the reader expects."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from maya_tools.chat.interpreter.names import World
from maya_tools.chat.interpreter.units import amounts
from maya_tools.chat.interpreter.words import UNITS, VOCABULARY

# "m5 large", "c5 2xl", "r5.xlarge", "dks c5 xl": the catalog's families and sizes
_TIER = re.compile(
    r"\b(?:dks[\s.\-]?)?([cmr]\d)[\s.\-]?(\d{1,2}\s?xlarge|\d{1,2}\s?xl|xlarge|xl|large|lg)\b", re.IGNORECASE
)
_SIZE_WORD = {
    "2xlarge": "2xlarge",
    "2xl": "2xlarge",
    "xlarge": "xlarge",
    "xl": "xlarge",
    "large": "large",
    "lg": "large",
}
# Words a typo (one edit) is read as; names are matched against the world in ``names``.
KNOWN_VERBS = (
    "scale",
    "double",
    "triple",
    "halve",
    "recycle",
    "replace",
    "remove",
    "delete",
    "relabel",
    "label",
    "nodes",
    "node",
    "pool",
    "pools",
    "nodepool",
    "autoscale",
    "autoscaling",
    "list",
    "show",
    "workers",
    "cluster",
    "clusters",
    "machines",
    "increase",
    "decrease",
    "reduce",
    "create",
    "change",
    "switch",
    "status",
)
# English words one edit from a known one that mean something else ("stale" is not "scale")
_REAL_WORDS = frozenset({"notes", "modes", "codes", "stale", "state", "lists", "posts", "nodal", "sale", "shown"})
_FACTORS = {"double": 2.0, "twice": 2.0, "triple": 3.0, "treble": 3.0, "quadruple": 4.0, "halve": 0.5, "half": 0.5}


def one_edit(a: str, b: str) -> bool:
    """``a`` is ``b`` with one letter added, dropped, changed, or two neighbours swapped."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        return len(diff) == 1 or (
            len(diff) == 2 and diff[1] == diff[0] + 1 and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]]
        )
    short, long_ = (a, b) if len(a) < len(b) else (b, a)
    return any(long_[:i] + long_[i + 1 :] == short for i in range(len(long_)))


def fix_typos(text: str, names: Iterable[str] = ()) -> str:
    """Each word one edit from a known verb or object becomes it ("recyle" → "recycle", "nodse" → "nodes")."""
    keep = set(VOCABULARY) | set(names)

    def fix(m: re.Match[str]) -> str:
        word = m[0]
        if len(word) < 5 or word in keep or word in KNOWN_VERBS or word in _REAL_WORDS:
            return word
        for known in KNOWN_VERBS:
            if one_edit(word, known):
                return known
        return word

    return re.sub(r"(?<![\w.=-])[a-z]+(?![\w.=-])", fix, text)


def canonical_tiers(text: str, world: World) -> str:
    """Loose tier spellings as the catalog's ids (``dks.c5.2xlarge``); a family the catalog lacks stays."""

    def tier(m: re.Match[str]) -> str:
        size = m[2].replace(" ", "").lower()
        size = _SIZE_WORD.get(size) or re.sub(r"xl$", "xlarge", size)  # "c5 4xl": a size the catalog may lack
        name = f"dks.{m[1].lower()}.{size}"
        listed = not world.tiers or name in world.tiers
        # a size the catalog lacks is still read as a tier ("c5 4xlarge"), so Door's catalog is named back
        return name if listed or re.fullmatch(r"\d+xlarge", size) else m[0]

    return _TIER.sub(tier, text)


def cluster_ids(text: str, world: World) -> str:
    """A cluster's id, or a prefix of it of four hex digits or more ("3f9c…"), as the cluster's name."""

    def name(m: re.Match[str]) -> str:
        found = [n for i, n in world.ids.items() if i.startswith(m[1])]
        # a name that is not one plain word (Door lists what it likes) stays its id: the id works too
        plain = len(found) == 1 and re.fullmatch(r"[a-z0-9][a-z0-9_.\-]*", found[0])
        return found[0] if plain else m[0]

    return re.sub(r"\b([0-9a-f]{4}[0-9a-f\-]*)(?:…|\.\.\.)?", name, text)


@dataclass
class Relative:
    """A count said relatively: ``delta`` nodes more (negative: fewer), or ``factor`` times the count."""

    delta: int | None = None
    factor: float | None = None


def relative(text: str) -> Relative:
    if m := re.search(r"(?:\bby\s+|\+\s?|-\s?)_(\d+)pct\b", text):  # "by 50%", marked "_50pct" (``units``)
        down = re.search(r"\b(?:down|decrease|shrink|reduce|lower|cut|drop|fewer|less)\b|-\s?\d", text)
        return Relative(factor=1 - int(m[1]) / 100 if down else 1 + int(m[1]) / 100)  # "by 50%"
    if m := re.search(r"\b(double|twice|triple|treble|quadruple|halve|half)\b(?!-)", text):  # never "double-check"
        return Relative(factor=_FACTORS[m[1]])
    if re.search(r"\bin\s+(?:half|two)\b", text):
        return Relative(factor=0.5)
    if m := re.search(
        r"(?:^|\s)\+\s?(\d+)\b|\bplus\s+(\d+)\b|\banother\s+(\d+)\b|\b(\d+)\s+(?:more|extra|additional)\b", text
    ):
        return Relative(delta=int(next(g for g in m.groups() if g)))
    if m := re.search(
        r"(?:^|(?<=[a-z])\s)-\s?(\d+)\b(?!\s*(?:-|to)\s*\d)|\bminus\s+(\d+)\b|\b(\d+)\s+(?:fewer|less)\b", text
    ):
        return Relative(delta=-int(next(g for g in m.groups() if g)))
    if m := re.search(r"\b(\d+)\s+(bigger|larger|smaller)\b", text):  # "make workers one bigger": a count
        return Relative(delta=int(m[1]) if m[2] != "smaller" else -int(m[1]))
    if re.search(rf"\b(?:another|one\s+more|an\s+extra|1\s+more)\b(?:\s+{UNITS})?", text):
        return Relative(delta=1)
    return Relative()


def tier_by_spec(text: str, world: World) -> str | None:
    """The one catalog tier the words single out: "8 vcpu", "32 gb", "the most memory", "the cheapest",
    or both ("the cheapest with 16 gb")."""
    tiers = dict(world.tiers)
    if not tiers:
        return None
    narrowed = False
    if vcpu := amounts(text, "vcpu"):  # the reader marks "8 cores" as "_8vcpu" (``units``)
        tiers, narrowed = {t: i for t, i in tiers.items() if i.vcpu == vcpu[0]}, True
    if memory := amounts(text, "gib"):
        tiers, narrowed = {t: i for t, i in tiers.items() if i.memory_gib == memory[0]}, True
    if not tiers:
        return None
    if re.search(r"\b(?:most|largest|biggest|max(?:imum)?)\s+(?:memory|ram)\b", text):
        return max(tiers, key=lambda t: tiers[t].memory_gib or 0)
    if re.search(r"\b(?:most|max(?:imum)?)\s+(?:vcpus?|cpus?|cores?)\b", text):
        return max(tiers, key=lambda t: tiers[t].vcpu or 0)
    if re.search(r"\bcheapest\b", text):
        return min(tiers, key=lambda t: tiers[t].price_per_hour or 0)
    return next(iter(tiers)) if narrowed and len(tiers) == 1 else None


@dataclass
class Bounds:
    low: int | None = None
    high: int | None = None
    start: int | None = None
    shift: tuple[str, int] | None = None  # "raise the max by 2": which bound, and by how much
    scale: tuple[str, float] | None = None  # "double the ceiling": which bound, and the factor


def bounds(text: str) -> Bounds:
    """Autoscaling bounds said in words; ``start`` is a starting count ("start at 3")."""
    b = Bounds()
    shift = r"\b(floor|ceiling|cap|min(?:imum)?|max(?:imum)?)(?:\s+(?:of|on|for)\s+(?:the\s+)?[\w-]+(?:\s+pool)?)?"
    if m := re.search(shift + r"\s+(?:up\s+|down\s+)?by\s+(\d+)", text):
        down = re.search(r"\b(?:lower|reduce|decrease|drop|cut|down)\b", text)
        b.shift = ("low" if m[1] in ("floor", "min", "minimum") else "high", -int(m[2]) if down else int(m[2]))
        return b
    if m := re.search(shift + r"\s*(\+|-|plus\s+|minus\s+)\s*(\d+)\b", text):  # "batch max +2"
        sign = -1 if m[2].strip() in ("-", "minus") else 1
        b.shift = ("low" if m[1] in ("floor", "min", "minimum") else "high", sign * int(m[3]))
        return b
    factor = r"\b(double|twice|triple|halve)\s+(?:the\s+|its\s+)?(?:[a-z0-9-]+\s+)?(?:pool\s+)?"
    if m := re.search(factor + r"(floor|ceiling|cap|min(?:imum)?|max(?:imum)?)\b", text):  # "double the batch ceiling"
        b.scale = ("low" if m[2] in ("floor", "min", "minimum") else "high", _FACTORS[m[1]])
        return b
    low = re.search(
        r"\b(?:never\s+(?:go\s+|drop\s+|fall\s+|dip\s+|get\s+|shrink\s+|scale\s+)?(?:below|under|less\s+than|fewer\s+than|lower\s+than)|"
        r"not?\s+(?:go\s+|drop\s+|fall\s+|dip\s+)?(?:below|under|fewer\s+than|less\s+than)|"
        r"floor(?:\s+(?:of|at|to))?|min(?:imum)?(?:\s+(?:of|to|at|nodes|is))*|at\s+least|lower\s+bound(?:\s+of)?)\s*:?\s*(\d+)",
        text,
    )
    high = re.search(
        r"\b(?:never\s+(?:go\s+|grow\s+|get\s+|scale\s+)?(?:above|over|more\s+than|exceed|past|beyond)|not?\s+(?:go\s+|grow\s+)?(?:above|over|more\s+than|past|beyond)|"
        r"(?:able\s+to|can|could|allowed\s+to|may)\s+(?:go|grow|scale|burst)\s+(?:up\s+)?to|"
        r"ceiling(?:\s+(?:of|at|to))?|cap(?:ped)?(?:\s+(?:of|at|to))?|max(?:imum)?(?:\s+(?:of|to|at|nodes|is))*|"
        r"at\s+most|up\s+to|no\s+more\s+than|upper\s+bound(?:\s+of)?)\s*:?\s*(\d+)",
        text,
    )
    moved = re.search(
        r"\b(?:raise|lower|set|bump|move|drop|change|put|make)\s+(?:the|its|their)\s+(floor|ceiling|cap|min(?:imum)?|max(?:imum)?)\b.*?\b(?:to|at)\s+(\d+)",
        text,
    )
    moved = moved or re.search(
        r"\b(floor|ceiling|cap|limit|min(?:imum)?|max(?:imum)?)\s+(?:(?:nodes?|count|size)\s+)?(?:(?:on|for|of)\s+)?(?:the\s+)?"
        r"[a-z0-9][a-z0-9-]*\s+(?:(?:node\s*)?pool\s+)?(?:at|to)\s+(\d+)",
        text,
    )  # "cap batch at 6", "set the max for batch to 6"
    if moved:  # "raise the floor on batch to 2": one bound, the other stays as it is
        if moved[1] in ("floor", "min", "minimum"):
            b.low = int(moved[2])
        else:
            b.high = int(moved[2])
        return b
    if m := re.search(r"(?<![\w.])(\d+)\s+min(?:imum)?[,\s]+(\d+)\s+max(?:imum)?\b", text):  # "1 min 4 max"
        b.low, b.high = int(m[1]), int(m[2])
        return b
    low = low or re.search(r"\b(?:go|drop|fall|dip|shrink|get)\s+(?:below|under|lower\s+than)\s+(\d+)", text)
    low = low or re.search(
        r"\b(?:down\s+)?to\s+(\d+)\s+(?:when|if|while)\s+(?:it'?s\s+|they'?re\s+)?(?:idle|quiet|unused|not\s+(?:in\s+)?use[d]?)",
        text,
    )  # "scale all the way down to zero when idle": a floor
    low = low or re.search(r"(?<![\w.])(\d+)\s+min(?:imum)?\b(?!\s*(?:of|at|to|nodes?)\b)", text)  # "1 min 4 max"
    high = high or re.search(r"\b(?:go|grow|get|scale|burst)\s+(?:above|over|past|beyond|more\s+than)\s+(\d+)", text)
    high = high or re.search(r"(?<![\w.])(\d+)\s+max(?:imum)?\b(?!\s*(?:of|at|to|nodes?)\b)", text)
    if low:
        b.low = int(low[1])
    if high:
        b.high = int(high[1])
        down = re.search(r"\b(?:down|back)\s+to\s+(\d+)\b", text)  # "go up to 12, and down to 2 is fine"
        said_bounds = "up" in high[0] or re.search(r"\bauto[\s-]?scal|\bcap\b|\bceiling\b|\bmax", text)
        if b.low is None and down and said_bounds and int(down[1]) < b.high:
            b.low = int(down[1])
    if m := re.search(
        r"\b(?:start(?:ing)?\s+(?:it\s+|them\s+|off\s+|the\s+pool\s+)?(?:at|with|from|on)|initial(?:ly)?(?:\s+(?:at|count))?|"
        r"begin\s+(?:at|with))\s+(\d+)",
        text,
    ):
        b.start = int(m[1])
    return b

"""What a message says around its request: greetings, thanks, reasons and context ("we have a sale
tomorrow", "because QA is testing", "is that possible?"). The reader reads the request without them,
so a number or a word in a reason ("so it can go down to zero on weekends", "the CFO approved the
budget") never becomes a part of the request.

A sentence goes when it names nothing the server lists and holds no number, tier, label, node-pool
word or verb of a request; a comma clause goes only when it is a greeting, thanks, "is that possible?"
or "it's approved" with no name or number in it. A message keeps at least one sentence.
The safety properties are checked on the whole message as typed (``safety``), never on this trimmed
reading, so trimming can make a reading more exact but never lets a question become a change.
"""

from __future__ import annotations

import re

from maya_tools.chat.interpreter.names import World
from maya_tools.chat.interpreter.safety import CHANGE_VERB, asks, imperative
from maya_tools.chat.interpreter.words import NUMBER_WORDS, UNITS

_SENTENCE = re.compile(r"((?<=[.!?])\s+|\s+[—–]\s+|\s+-{1,2}\s+|\n+)")
_COMMA = re.compile(r",\s+")
# A reason or an aside after the request, to the end of its sentence.
_REASON = re.compile(
    r"(?:,\s*|\s+)(?:because|cause|cuz|since|as\s+(?:we|our|the|it)|so\s+(?:that\s+)?(?:it|we|they|he|she|you)\s+"
    r"(?:can|could|will|would|won't|doesn't|don't|is|are|isn't|aren't|has|have|may|might)|we(?:'ll|\s+will)\s+"
    r"(?:bring|put|scale|move|change|switch|turn)\s+it\s+back)\b[^.!?,;]*"
)
_SOCIAL = re.compile(
    r"^(?:hi|hello|hey|hiya|yo|good\s+(?:morning|afternoon|evening|day)|dear\s+\w+|greetings|thanks?|thank\s+you|thx|ty|"
    r"cheers|much\s+appreciated|appreciate\s+it|hope\s+you|have\s+a\s+|sorry\s+for|apologies|many\s+thanks|"
    r"is\s+that\s+(?:possible|ok|okay|alright|fine|doable)|right|ok|okay|would\s+that\s+work|does\s+that\s+work|"
    r"(?:i\s+)?hope\s+(?:that|this)\s+(?:is|makes))\b"
)
_CONTENT = re.compile(
    rf"\d|=|\b(?:{'|'.join(w for w in NUMBER_WORDS if ' ' not in w and len(w) > 2)})\b|\b{UNITS}\b|\b(?:node\s*)?pools?\b|"
    rf"\bnodepools?\b|\bclusters?\b|\btiers?\b|\bsizes?\b|\blabels?\b|\btags?\b|\bauto[\s-]?scal\w*|\bmin\w*|\bmax\w*|\bfloor\b|"
    rf"\bceiling\b|\bcap\b|\bbounds?\b|\bfixed\b|\b(?:show|list|what|which|how|is|are|does|do|status)\b|"
    rf"\b(?:[cmr]\d)\b|\b(?:name[sd]?|call(?:ed)?|keep|same)\b|\b{CHANGE_VERB}\b|\b(?:approve|confirm|sign\s+off)\b(?!d)|\bnot\b|\bnever\b|\binstead\b|\bmeant?\b"
)
# A comma clause that tells how things are, not what to do: "we have a lot of PRs this week"
_STATEMENT = re.compile(
    r"^(?:we|we've|we're|we\s+are|i'm|i\s+am|i've|it's|it\s+is|there's|there\s+(?:is|are)|that's|they|everything|"
    r"qa|marketing|the\s+(?:team|cfo|boss|load|traffic))\b"
)
_APPROVED = re.compile(
    r"\b(?:it'?s|it\s+is|was|been|finally|already|budget)\s+(?:\w+\s+)?approved\b|\bapproved\s+the\b"
)


def _names(world: World) -> re.Pattern[str] | None:
    names = [*world.clusters, *world.pools(), *world.all_nodes(), *(n.rsplit("-", 1)[-1] for n in world.all_nodes())]
    parts = {p for c in world.clusters for p in c.split("-") if len(p) >= 4}
    words = sorted({*names, *parts}, key=len, reverse=True)
    # a whole word: never part of a dashed name ("batch-jobs") nor a label's value ("team=payments")
    return re.compile(r"(?<![\w=-])(?:" + "|".join(re.escape(w) for w in words) + r")(?![\w-])") if words else None


def _context(clause: str, names: re.Pattern[str] | None) -> bool:
    """A greeting, thanks, "is that possible?" or "it's approved": nothing listed, no number."""
    text = clause.lower().strip(" ,.!?")
    if (names and names.search(text)) or re.search(r"\d|=", text):
        return False
    if _STATEMENT.match(text) and not _CONTENT.search(re.sub(r"^\S+\s*", "", text)):
        return True
    return bool(_APPROVED.search(text) or _SOCIAL.match(text))


def _has_content(sentence: str, names: re.Pattern[str] | None) -> bool:
    text = sentence.lower()
    return bool(_CONTENT.search(text) or (names and names.search(text)))


_TIME = re.compile(
    r"\b(?:in|for|within|after|by|at|until|till|over\s+the\s+next)\s+(?:about\s+|~)?\d+\s*"
    r"(?:min(?:ute)?s|mins?(?=\s*(?:[,.;!?]|$))|minutes?|hours?|hrs?|h|secs?|seconds?|days?|weeks?|months?|pm|am)\b"
    r"|\b\d{1,2}(?::\d{2})?\s*(?:am|pm)\b|\b\d+\s*(?:minutes?|hours?|days?|weeks?)\s+(?:ago|from\s+now)\b",
    re.IGNORECASE,
)


def _asides_dropped(sentences: list[str], names: re.Pattern[str] | None) -> list[str]:
    """Where one sentence asks for a change and names what it changes, the sentences that neither ask
    nor request anything are asides ("we might retire batch next quarter. for now just bump workers to
    3", "batch is a mess but that's another story. scale workers to 3")."""
    if len(sentences) < 2 or names is None:
        return sentences
    requests = [s for s in sentences if imperative(s) and names.search(s.lower())]
    if not requests:
        return sentences
    targets = {m[0] for s in requests for m in names.finditer(s.lower())}

    def aside(s: str) -> bool:  # names only other things, and holds no number, tier or label to use
        named = {m[0] for m in names.finditer(s.lower())}
        overlap = any(n in t or t in n for n in named for t in targets)  # "prod" is part of payments-prod
        return bool(named) and not overlap and not re.search(r"\d|=|[{:]|\bdks\.", s) and not asks(s)

    return [s for s in sentences if s in requests or not aside(s)]


def trim(request: str, world: World) -> str:
    """``request`` without the sentences and clauses that hold no part of a request."""
    names = _names(world)
    text = _TIME.sub(" ", _REASON.sub("", request))  # "launch in 20 min": no count, no bound
    kept: list[str] = []
    pieces = _SENTENCE.split(text)  # sentences, each followed by the separator that ended it
    for sentence, end in zip(pieces[::2], [*pieces[1::2], ""], strict=True):
        clauses = [c for c in _COMMA.split(sentence) if c.strip() and not _context(c, names)]
        if clauses and _has_content(sentence, names):
            kept.append(", ".join(clauses) + end)
    kept = _asides_dropped(kept, names)
    trimmed = "".join(kept).strip()
    return trimmed if trimmed and re.search(r"[a-z0-9]", trimmed, re.IGNORECASE) else request


_JOINED = re.compile(
    r"\s*[,;]\s*(?:and\s+)?(?:also|then|plus)\s+|\s+and\s+(?:also\s+|then\s+)?(?=\S)|\s+(?:also|then|plus)\s+|\s*;\s*"
)
_ASKS_CHANGE = re.compile(rf"\d|\b{CHANGE_VERB}\b|\b(?:more|fewer|extra|another|one|two|three|four|five)\b")


def two_requests(trimmed: str, world: World) -> tuple[str, str] | None:
    """Two changes joined in one message ("scale workers to 4 and also the staging general pool to 2"),
    each naming its own listed target: the parts, so the caller asks for one at a time instead of
    making a card that mixes them. Parts of one change ("between 2 and 6", "team=a and env=b",
    "never below 3 and never above 12") name no second target and are not split. ``trimmed`` is the
    message as the reader read it (``trim``'d, in ``Reading.said``), so the chatter is not trimmed twice."""
    names = _names(world)
    if names is None:
        return None
    text = trimmed
    for m in _JOINED.finditer(text):
        first, second = text[: m.start()].strip(" ,;."), text[m.end() :].strip(" ,;.!?")
        one = {n[0] for n in names.finditer(first.lower())}
        two = {n[0] for n in names.finditer(second.lower())}
        if not one or not two or any(a in b or b in a for a in one for b in two):
            continue
        if _ASKS_CHANGE.search(first.lower()) and _ASKS_CHANGE.search(second.lower()):
            return first, second
    return None

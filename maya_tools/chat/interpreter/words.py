"""Words: a request made plain (quotes, politeness, case, numbers as digits) and the vocabulary of each part."""

from __future__ import annotations

import re

NUMBER_WORDS = {
    "zero": 0,
    "a": 1,
    "an": 1,
    "a single": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "thirteen": 13,
    "fourteen": 14,
    "fifteen": 15,
    "sixteen": 16,
    "seventeen": 17,
    "eighteen": 18,
    "nineteen": 19,
    "twenty": 20,
}
TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90}
_ONES = {w: n for w, n in NUMBER_WORDS.items() if 1 <= n <= 9 and " " not in w and len(w) > 2}
UNITS = r"(?:nodes?|workers?|machines?|instances?|replicas?|vms?|servers?)"
SIZE = r"[a-z][a-z0-9]*(?:\.[a-z0-9]+)+"
NAME = r"[a-z0-9][a-z0-9_\-]*[a-z0-9]|[a-z0-9]"

_POLITE = re.compile(
    r"^(?:(?:hey|hi|hello|ok|okay|so|um|uh|right|alright|actually|also|and|then|now|maya)[,!:]?\s+)*"
    r"(?:(?:please|pls|plz|kindly|can\s+you|could\s+you|would\s+you|will\s+you|would\s+you\s+mind|"
    r"i\s+want\s+you\s+to|i\s+want\s+to|i'd\s+like\s+to|i\s+would\s+like\s+to|i'd\s+like\s+you\s+to|"
    r"let's|lets|go\s+ahead\s+and|help\s+me|quickly|just)\s+)*",
)


def normalize(text: str) -> str:
    """The sentence without curly or straight quotes around words, politeness, a final stop or extra spaces."""
    text = re.sub(r"^\s*\[\d{1,2}:\d{2}(?::\d{2})?\]\s*(?:[A-Za-z][\w.-]*:\s+)?", "", text)  # a pasted chat line
    text = re.sub(r"(?<=[A-Za-z0-9])['’]s\b", "", text)  # "staging's pool", "batch's max"
    text = re.sub(r"[“”\"`‘’]", "", text)
    text = re.sub(r"(?<![A-Za-z])'|'(?![A-Za-z])", " ", text)
    text = " ".join(text.split())
    text = re.sub(r"[.!?\s]+$", "", text).strip()
    text = re.sub(r"[,\s]+(?:please|pls|thanks|thank\s+you|thx|cheers)$", "", text, flags=re.IGNORECASE)
    text = re.sub(r"[.!?\s]+$", "", text).strip()
    return _POLITE.sub("", text, count=1).strip()


def number(word: str) -> int:
    """A count given as digits or as an English word ("one" to "twenty")."""
    word = " ".join(word.lower().split())
    return int(word) if word.isdigit() else NUMBER_WORDS[word]


def digits(text: str) -> str:
    """``text`` (lowercase) with counts written as words turned into digits ("twenty five" → 25).

    "a"/"an" is a count only where nothing else can follow it ("scale it to a", "with a dks.m5.xlarge")."""
    text = re.sub(r"\b(the|that|this|which)\s+([a-z][-a-z0-9]*)\s+one\b", r"\1 \2", text)  # "the prod one"
    text = re.sub(r"\ba\s+(?:couple|pair)(?:\s+of)?\b", "2", text)
    text = re.sub(r"\ba\s+dozen\b", "12", text)
    text = re.sub(r"\b(?:a|one)\s+hundred\b", "100", text)
    text = re.sub(r"\btwo\s+hundred\b", "200", text)
    text = re.sub(r"\ba\s+single\b", "1", text)
    tens = "|".join(TENS)
    ones = "|".join(_ONES)
    text = re.sub(rf"\b({tens})[\s-]({ones})\b", lambda m: str(TENS[m[1]] + _ONES[m[2]]), text)
    words = "|".join(sorted((w for w in [*NUMBER_WORDS, *TENS] if len(w) > 2 and " " not in w), key=len, reverse=True))
    text = re.sub(rf"\b({words})\b", lambda m: str(NUMBER_WORDS.get(m[1], TENS.get(m[1], 0))), text)
    text = re.sub(rf"\b(?:a|an)(?=\s+(?:more\s+)?{UNITS}\b(?!\s+pool)|\s+{SIZE}|$)", "1", text)
    text = re.sub(r"\bx\s*(\d+)\b", r" \1 ", text)  # "x2"
    text = re.sub(r"\b(\d+)\s*x\b", r"\1 ", text)  # "2x", "1 x"
    return " ".join(text.split())


# Words that never name a cluster, a pool or a node (so a typo of a name is never one of them).
_WORDS = """
    a about above across actually add added adding after again all also am an and another any anything are
    around as ask asking at auto autoscale autoscaling available back bad be been before below between big bigger
    bit both bring broken but by call called can card cards change check cluster clusters come cost costs could
    count create current currently dead decrease delete describe destroy details did disable do does doing done
    down drain drop each else enable everything few fewer find finished for from get give go going grow had has
    have hello help here hey hi how i if in increase info instance instances into is it its just keep kill kind
    know label labels large least less let like list look lower machine machines make many max maximum me min
    minimum mind more most move much my name named need new next no node nodes not now number of off on one only
    or other our out over per pick pin please pool pools price raise reboot recycle reduce relabel remove
    replace resize restart right run running same scale scaled scaling see set should show shrink size sizes
    small so some spin start state status stop switch tag tags tell than thanks that the their them then there
    these they thing this those tier tiers to too turn type types up use using want was we what when where which
    will with without worker would you your
"""
# Filler words people type around a request (issue 22): never a name, even where a name would stand.
_FILLER = """
    asap again already anymore basically double every fixed half instead maybe needs often please pls plz quick
    quickly really soon tbh thx today tomorrow tonight triple twice urgent urgently
    us lot lots week weekend weekends night morning evening afternoon moment monday tuesday wednesday
    thursday friday saturday sunday prs traffic anywhere somewhere elastic operation operations op ops
    floor ceiling cap limit bound bounds fyi memory ram cpu cpus vcpu vcpus 16gb 32gb 8gb 4gb
"""
VOCABULARY = frozenset(_WORDS.split()) | frozenset(_FILLER.split())

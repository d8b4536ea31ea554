"""What a message calls off (issue 26): a change inside the scope of a negation, a cancellation or a
hold-off is not asked for.

``called_off`` splits a message into clauses (at a stop, a comma, a dash or a "but", "instead",
"just", "then") and finds in each the words that call something off. Their scope is the rest of
the clause; what is in it is dropped before the request is read, so a real request outside the
scope is read alone ("don't scale workers, replace node k7m2p instead" asks for the replace):

- a **negation** ("don't", "do not", "never", "not", "no", "won't", "shouldn't", "can't", "let's not",
  "instead of"/"rather than" before a verb) calls off its scope when the scope holds a change word
  (a change verb in any form, or a change noun: "replacement", "removal", "changes"). A negated
  state is a request, not a cancellation: "don't autoscale batch" turns autoscaling off and
  "never go below 3" is a floor, so a scope whose first change word is "autoscale", or that holds
  a bound ("below 3", "more than 10"), is kept;
- a **cancellation or hold-off** ("forget (about)", "never mind", "hold off (on)", "no need to/for",
  "cancel", "scratch", "skip", "don't bother", "no longer need", "call off", "leave X alone")
  calls off its scope, whatever it holds;
- one with **no object of its own** ("cancel that", "scratch that", "never mind", "forget it",
  "actually don't", "don't do that") calls off everything before it in the message;
- one **after what it negates** ("replacing k7m2p is no longer needed", "... but not anymore",
  "resizing workers can wait") calls off its own clause, or the clause before when its own holds
  no change word;
- **two negations cancel**: "don't forget to scale workers", "don't wait, scale workers" ask for
  the scale.

The safety check (``safety.violations``, property 2) reads the message as typed through the same
function: a change made of a message that calls off every change it names is bigger than its words.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Change verbs, as stems: a word in any of its forms ("scaling", "dropped", "relabelling") is one.
_STEMS = frozenset(
    """
    scale rescale upscale downscale resize bump grow shrink set increase decrease raise lower reduce make
    bring add create remove delete drop destroy replace recycle reboot restart cycle relabel label tag untag
    turn enable disable switch move migrate change double triple halve cut expand spin put give take kill
    autoscale pin fix upgrade downgrade downsize upsize trim tear swap update rotate refresh bounce retire
    scrap trash decommission nuke wipe ditch dump deprovision provision reprovision recreate redeploy respawn
    rebuild reimage renew kick touch modify alter adjust tweak patch apply do proceed execute run go let get
    drain evict cordon made done gone went took taken brought gave given got gotten ran grew grown shrank
    shrunk tore torn spun
    """.split()  # noqa: SIM905 (a word list reads better as words)
)
_CHANGE_NOUN = re.compile(
    r"replacements?|removals?|deletions?|migrations?|upgrades?|changes?|resizes?|scale-?ups?|scale-?downs?|"
    r"rescal\w*|relabel\w*|recycl\w*|swaps?"
)


def change_word(word: str) -> bool:
    """``word`` is a change verb in one of its forms: "scale", "scales", "scaled", "scaling", "dropping"."""
    w = word.lower().strip("'")
    forms = {w, w[:-1], w[:-2], w[:-3], w[:-3] + "e", w[:-4]} if len(w) > 4 else {w, w[:-1]}
    return bool(forms & _STEMS)


_CLAUSE_END = re.compile(
    r"[.!?;:]+(?=\s|$)|,|\s[—–]\s|\s-{1,2}\s|\n|\(|\)"
    r"|\s(?=(?:but|instead|rather|however|though|although|then|just|and\s+then|and\s+instead|so\s+(?:just|please))\b)"
)
# A quoted value or key=value is a value, never a word of the request ("note=dont-scale").
_B = r"(?<![\w=./'-])"
_NOT = (
    r"(?:instead\s+of|rather\s+than|don'?t|dont|do\s+not|doesn'?t|does\s+not|didn'?t|won'?t|will\s+not|wouldn'?t|"
    r"shouldn'?t|should\s+not|mustn'?t|must\s+not|can'?t|cannot|can\s+not|couldn'?t|isn'?t|aren'?t|needn'?t|"
    r"never|not|no)"
)
_CANCEL = (
    r"(?:forget(?:\s+about)?|never\s*mind|nvm|hold\s+off(?:\s+on)?|hold\s+on\s+with|no\s+need\s+(?:to|for)|"
    r"(?:there'?s\s+|there\s+is\s+)?no\s+need|(?:we\s+|i\s+)?no\s+longer\s+(?:need|want)(?:\s+to)?|"
    r"don'?t\s+(?:bother|need\s+to|have\s+to|want\s+to)|do\s+not\s+(?:bother|need\s+to|have\s+to|want\s+to)|"
    r"cancel(?:l?ed)?|scratch|skip|call\s+off|called\s+off|abort|belay|let'?s\s+not|let\s+us\s+not|"
    r"put\s+(?:it\s+|that\s+)?on\s+hold|postpone|ignore(?=\s+(?:that|this|it|my\s+last|the\s+last|what\s+i)\b)|"
    r"disregard)"
)
# A negation of a negation, or of waiting, asks for what follows: "don't forget to", "don't wait".
_DOUBLE = re.compile(
    rf"{_B}(?:don'?t|do\s+not|never|not)\s+(?:forget|hesitate|wait|delay|skip|cancel|neglect|fail)\b"
    r"(?:\s+(?:to|about|on|with))?|\bnot\s+only\b|\bwhy\s+(?:don'?t|not)\b|\bif\s+not\b|\bor\s+not\b"
    r"|\bwhy\s+(?:can'?t|cannot|won'?t|isn'?t|doesn'?t|didn'?t|aren'?t|wouldn'?t|shouldn'?t)\b"
)
_NEGATOR = re.compile(rf"{_B}(?:{_CANCEL}|{_NOT})(?![\w'])")
# A negation after what it negates: "... is no longer needed", "... not anymore", "... can wait".
_AFTER = re.compile(
    rf"{_B}(?:(?:is|are|'s|'re)\s+)?(?:no\s+longer|not|n'?t)\s+(?:needed|necessary|required|wanted|happening|"
    r"going\s+to\s+happen|a\s+good\s+idea)\b|(?:isn'?t|aren'?t)\s+(?:needed|necessary|required|wanted|happening)\b"
    r"|\bno\s+longer\s+(?:needed|necessary|required|wanted)?\b|\bnot\s+any\s*more\b|\bnot\s+(?:now|yet|today)\b"
    r"|\bunnecessary\b|\b(?:is|are|'s|'re)\s+(?:off|cancell?ed|called\s+off|on\s+hold)\b|\bcan\s+wait\b"
)
# Hands off: "leave workers alone", "keep batch as it is" says what must not change; its clause goes.
_HANDS_OFF = re.compile(
    r"\b(?:leave|keep)\s+(?:\S+\s+){0,3}?(?:alone|as\s+(?:it\s+|they\s+)?(?:is|are)|the\s+way\s+(?:it|they)\s+(?:is|are)|be)\b"
)
# The object of a cancellation that points back: "cancel that", "forget it", "scratch the last one".
_FILLER = r"(?:please|pls|plz|actually|then|now|again|too|entirely|completely|for\s+now|after\s+all|thanks|thx|ok|okay)"
_ANAPHOR = re.compile(
    rf"^(?:{_FILLER}\s*)*"
    r"(?:(?:do|make|go\s+(?:ahead\s+)?(?:with|through\s+with)|proceed\s+with|bother(?:\s+with)?)\s+)?"
    r"(?:(?:that|this|it|all|everything)(?:\s+(?:of\s+)?(?:that|this|it))?(?:\s+i\s+(?:just\s+)?(?:said|asked|wrote))?|"
    r"the\s+(?:last|previous)\s+(?:one|request|message|bit|part)|my\s+(?:last|previous)\s+(?:one|request|message)|"
    r"what\s+i\s+(?:just\s+)?(?:said|asked|wrote)|the\s+(?:change|request|above|card))?"
    rf"(?:\s*{_FILLER})*\W*$"
)
# A negated state or bound is a request: "never go below 3", "no more than 10", "not under 2 nodes".
_BOUND = re.compile(
    r"\b(?:below|under|above|over|past|beyond|exceed(?:s|ing)?|more\s+than|less\s+than|fewer\s+than|lower\s+than|"
    r"higher\s+than|greater\s+than|bigger\s+than|smaller\s+than)\s+(?:\d|the\s+current|its|their|what)"
)
_STATE = re.compile(r"\bauto[\s-]?scal\w*|\bfixed\b")


@dataclass(frozen=True)
class CalledOff:
    """``kept`` is the message without what it calls off; ``dropped`` the parts called off, in order;
    ``everything_before`` says a cancellation pointed back at all that came before it."""

    kept: str
    dropped: tuple[str, ...] = ()
    everything_before: bool = False

    @property
    def any(self) -> bool:
        return bool(self.dropped) or self.everything_before


def _clauses(text: str) -> list[tuple[int, int]]:
    spans, start = [], 0
    for m in _CLAUSE_END.finditer(text):
        spans.append((start, m.start()))
        start = m.end()
    spans.append((start, len(text)))
    return [(a, b) for a, b in spans if text[a:b].strip()]


def _first_change(scope: str) -> re.Match[str] | None:
    for m in re.finditer(r"[a-z][a-z']*", scope):
        if change_word(m[0]) or _CHANGE_NOUN.fullmatch(m[0]):
            return m
    return None


def _a_state(scope: str) -> bool:
    """A negated scope that states how a pool should be, not a change to call off."""
    if _BOUND.search(scope):
        return True
    state, change = _STATE.search(scope), _first_change(scope)
    if state is None:
        return False
    return change is None or change.start() >= state.start()


def _points_back(negator: str, scope: str, cancel: bool) -> bool:
    """A negator whose object is "that", "it" or nothing calls off what came before it: a cancellation
    does ("cancel that", "never mind", "hold off on it"), and so does "don't" with no verb or with "do"
    ("actually, don't", "don't do that"); "no need" does only with a verb ("no need to do that":
    "no need for it" gives a reason)."""
    verb = re.match(r"\s*(?:do|make|go|proceed|bother)\b", scope) is not None
    if cancel:
        return verb or re.search(r"\bno\s+(?:need|longer)\b", negator) is None
    bare = not re.sub(_FILLER, " ", scope).strip(" ,.!?")  # "actually, don't", "no wait, don't please"
    return re.fullmatch(r"don'?t|dont|do\s+not", negator) is not None and (verb or bare)


def called_off(message: str) -> CalledOff:
    """``message`` with every part it calls off taken out (see the module's docstring)."""
    text = message.lower().replace("’", "'")
    if len(text) != len(message):  # a lowercase form of another length: work on it, spans must agree
        message = text
    doubled = [m.span() for m in _DOUBLE.finditer(text)]
    drop: list[tuple[int, int]] = []
    before = -1  # everything before this offset is called off
    clauses = _clauses(text)
    for i, (start, end) in enumerate(clauses):
        clause = text[start:end]
        if _HANDS_OFF.search(clause):
            drop.append((start, end))
            continue
        for m in _NEGATOR.finditer(clause):
            at = start + m.start()
            if any(a <= at < b for a, b in doubled):
                continue
            scope = clause[m.end() :]
            cancel = re.fullmatch(_CANCEL, m[0]) is not None
            if m[0] == "no":  # "no" negates the noun it stands before: "no scaling" is one, "no rush" is not
                words = scope.split()
                scope = " ".join(words[:2] if words[:1] in (["more"], ["further"], ["other"]) else words[:1])
            if _ANAPHOR.fullmatch(scope.strip()) and _points_back(m[0], scope, cancel):
                before = max(before, at)  # "cancel that", "actually don't": all that came before
                drop.append((at, end))
                break
            if cancel or (_first_change(scope) and not _a_state(scope)):
                drop.append((at, end))
                break
        else:
            after = _AFTER.search(clause)
            if after is None or any(a <= start + after.start() < b for a, b in doubled):
                continue
            if _first_change(clause[: after.start()]):
                drop.append((start, end))  # "replacing k7m2p is no longer needed"
            elif i and _first_change(text[clauses[i - 1][0] : clauses[i - 1][1]]):
                drop.append((clauses[i - 1][0], end))  # "replace k7m2p? not anymore"
    if not drop and before < 0:
        return CalledOff(message)
    keep = [True] * len(text)
    for a, b in drop:
        keep[a:b] = [False] * (b - a)
    if before >= 0:
        keep[:before] = [False] * before
    kept = "".join(c if k else " " for c, k in zip(message, keep, strict=True))
    kept = re.sub(r"^[\s,.;:!?—–-]+", "", " ".join(kept.split()))
    kept = re.sub(r"\s+([,.;:!?])", r"\1", kept)
    kept = re.sub(r"([,;])(?:\s*[,;])+", r"\1", kept)  # "no wait, [dropped], just set ...": one comma
    dropped = tuple(" ".join(message[a:b].split()) for a, b in drop)
    return CalledOff(kept, dropped, before >= 0)


def asks_for_nothing(message: str) -> bool:
    """The message calls off every change it names: what it keeps holds no change word, no number,
    no ``key=value`` and no arrow (a change made of it is bigger than its words, property 2)."""
    result = called_off(message)
    if not result.any:
        return False
    kept = result.kept.lower()
    return not (_first_change(kept) or re.search(r"\d|=|->|=>|→|\+\s?\d", kept))

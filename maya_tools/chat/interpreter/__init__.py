"""The offline interpreter: a small, deterministic reading of how people ask for node-pool changes.

``maya-tools chat --offline`` (and the chat without an ``ANTHROPIC_API_KEY``) uses it instead of a
model. It maps a request to one maya-tools tool call, or to one specific question whose answer
completes the request, or to a refusal, or to what it understood and sentences that would work.
It never approves anything: a change it maps still makes a confirmation card that only the person
answers (DESIGN.md "Approval: what must hold", 1).

- ``words``: the request made plain (politeness, quotes, case; counts as digits or words).
- ``quantities``: loose tiers, cluster ids, typos of verbs, relative counts, bounds in words.
- ``names``: what the server lists (``World``: clusters, ids, pools, nodes, tiers) and what a word
  may name (exact, a dash part such as "prod", or a typo; two candidates are asked about).
- ``chatter``: what a message says around its request (greetings, thanks, reasons, "is that
  possible?"), left out of the reading; the safety checks still read the message as typed.
- ``negation``: what a message calls off (a change in the scope of "don't", "forget about", "hold
  off on", "cancel that", ...), left out of the reading and checked again by ``safety``.
- ``units``: a number's unit ("16 GiB", "$5", "50%"): an amount, never a count; memory and vCPU name tiers.
- ``parts`` / ``reading`` / ``sentence``: the parts of one request wherever they appear, and its
  refusals; ``intent`` the change or read its words ask for; ``new_pool`` a new pool's parts in any order, ``tier_words`` a tier said by
  what it changes ("more memory for batch, same cpu").
- ``dialogue``: the conversation: context for "it" / "that pool" / follow-ups that correct the last
  request, the question for a missing part, and its answer completing the request; ``frame`` the
  request being completed, ``build`` the call a complete one makes.
- ``safety`` / ``guard``: issue 22's four properties, checked on every call last (``guard``) and by
  the eval on any system's choices (``safety``).
"""

from maya_tools.chat.interpreter.calls import Reply, ReplyKind, ToolCall
from maya_tools.chat.interpreter.dialogue import Interpreter, interpret
from maya_tools.chat.interpreter.frame import MAX_COUNT
from maya_tools.chat.interpreter.names import PoolInfo, TierInfo, World
from maya_tools.chat.interpreter.texts import EXAMPLES, HELP
from maya_tools.chat.interpreter.words import NUMBER_WORDS, normalize, number

__all__ = [
    "EXAMPLES",
    "HELP",
    "MAX_COUNT",
    "NUMBER_WORDS",
    "Interpreter",
    "PoolInfo",
    "Reply",
    "ReplyKind",
    "TierInfo",
    "ToolCall",
    "World",
    "interpret",
    "normalize",
    "number",
]

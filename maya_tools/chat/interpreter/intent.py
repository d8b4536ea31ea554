"""A request's intent from its parts and its words: which change or read it asks for (``intent``),
and the read a question gets (``question_read``), never a change (safety property 1). The word
patterns here are shared with the reader (``reading``)."""

from __future__ import annotations

import re

from maya_tools.chat.interpreter.parts import CREATE as _CREATE
from maya_tools.chat.interpreter.parts import NEW_POOL as _NEW_POOL
from maya_tools.chat.interpreter.sentence import Intent, Reading
from maya_tools.chat.interpreter.tier_words import FAMILY, RELATIVE_SPEC
from maya_tools.chat.interpreter.units import has_amount
from maya_tools.chat.interpreter.words import UNITS


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


APPROVE = _rx(
    # "confirm" asks for an approval when its object is the card or the change, never "confirm X exists"
    r"\b(?:approve[sd]?|approving|approval|confirm(?:s|ing)?\s+(?:it|that|this|(?:the\s+)?(?:\w+\s+)?(?:card|change|request)s?|for\s+me)|"
    r"^confirm$|confirmed|sign(?:ed)?\s+off|rubber[\s-]?stamp|"
    r"auto[\s-]?approv\w*|(?:say|said|answer)\s+yes\s+for\s+me)\b"
)
BYPASS = _rx(
    r"\bwithout\s+(?:asking|a\s+card|the\s+card|any\s+card|confirmation|approval|checking|a\s+prompt|me)\b"
    r"|\bskip(?:s|ping)?\s+(?:the\s+|a\s+)?(?:card|confirmation|approval|prompt|check|question)s?\b"
    r"|\b(?:confirm(?:ation|ed)?|approved?|skip_card|auto_approve)\s*="
    r"|\bdon'?t\s+(?:ask|bother\s+asking|show\s+(?:me\s+)?(?:a|the)\s+card)\b|\bno\s+need\s+to\s+(?:ask|confirm)\b|\bbypass\b"
)
STRAY = _rx(r"(?:y|yes|yep|yeah|yup|n|no|nope|nah|ok|okay|sure|go|do\s+it|go\s+ahead)")
DESTROY = _rx(r"\b(?:remove|delete|destroy|drop|wipe|tear\s+(?:it\s+)?down|nuke|kill|decommission|get\s+rid\s+of)\b")
CLUSTER_KILL = _rx(r"\b(?:nuke|wipe|tear\s+(?:it\s+)?down|destroy|decommission)\b")
ELSEWHERE = _rx(
    r"\b(?:kubectl|helm|deployments?|dockerfile|docker|pods?|namespaces?|ingress|kubernetes\s+version|"
    r"upgrade\s+(?:the\s+)?(?:cluster|kubernetes|k8s|version)|weather|joke|poem|time\s+is\s+it|bill|invoices?|billing\s+(?:history|statement|report)|"
    r"deploy|rollout|roll\s+out|kubernetes\s+v?\d[\d.]*|k8s\s+v?\d[\d.]*|kube\s*config|kubeconfig|credentials?|ssh|"
    r"secrets?|configmaps?|cron\s*jobs?|statefulsets?|daemonsets?|logs?|metrics|grafana|prometheus|dashboards?|alerts?|"
    r"certificates?|certs?|dns|terraform|iam|rbac|passwords?|api\s+keys?|vpc|subnets?|firewall|load\s+balancers?)\b"
    r"|\b(?:cost|costs|spend|spent|bill|billed|charged|pay|paid)\b[^.?!]*\b(?:last|previous|past|in)\s+"
    r"(?:month|week|quarter|year|january|february|march|april|may|june|july|august|september|october|november|december)\b"
)
TIER_VERB = _rx(r"\b(?:change|switch|swap|move|convert|migrate|upgrade|resize|set|turn|put|make|give|use)\b|->|=>|→")
AUTOSCALE = _rx(r"\bauto(?:matic(?:ally)?)?[\s-]?scal\w*")
_OFF = _rx(
    r"\b(?:off|disable[ds]?|stop|deactivate|no\s+more|without|fixed\s+size|pin)\b"
    r"|\b(?:no|not|non|don'?t|do\s+not|never)[\s-]+(?:\w+\s+){0,2}auto"  # "no autoscaling", "don't want batch autoscaling"
    r"|\bauto[\s-]?scal\w*\s+(?:any\s*more|no\s+more)\b"
    r"|\b(?:kill|remove|drop|ditch|scrap|lose|get\s+rid\s+of)\s+(?:the\s+)?auto[\s-]?scal"
)
LABEL = _rx(r"\b(?:re)?label(?:s|ed|led)?\b")
TAG = _rx(r"\b(?:re)?tag(?:s|ged)?\b")
_REPLACE = _rx(
    r"\b(?:replac(?:e|es|ed|ing)|recycl(?:e|es|ed|ing)|reboot|restart|drain|reprovision|recreate|re-create|cycle|swap|kill|"
    r"broken)\b"
)
_ADD_MORE = _rx(
    rf"\badd\s+(?:\d+\s+)?(?:more|extra|another|additional|\d+)\s*(?:more\s+)?(?:[cmr]\d\s+)?{UNITS}\b(?!\s+pool)"
)
_SCALE = _rx(
    r"\b(?:scale[sd]?|scaling|resize|bump|grow|shrink|set|increase|decrease|raise|lower|reduce|change|make|bring|"
    r"go|expand|up|down|need|want|should|be|count)\b|->|=>"
)
_OPS = _rx(
    r"\b(?:operations?|ops?|activity|activities|progress|running|happening|going\s+on|"
    r"in\s+flight|underway|history|happened|(?:last|latest|recent)\s+changes?|go(?:ne)?\s+(?:thru|through)|"
    r"went\s+(?:thru|through)|keep\s+an\s+eye|watch|monitor|track)\b"
)
_TIERS = _rx(r"\b(?:tiers?|sizes?|machine\s+types?|instance\s+types?|flavou?rs?|per\s+hour|hourly)\b")
_PRICE = _rx(r"\b(?:how\s+much|price|cost|costs)\b")
_NODES = _rx(
    rf"\bnodes?\b(?!\s+pools?)|\b(?:machines?|vms?|instances?)\b|\bhow\s+many\s+{UNITS}\b|\b(?:list|show)\s+(?:me\s+)?(?:the\s+|all\s+)?workers\b(?!\s*(?:node\s*)?pool)"
)
POOLS = _rx(r"\bpools?\b")
_INFO = _rx(
    r"\b(?:status|state|capacity|cost|costs|price|spend|how\s+big|describe|details?|info|information|overview|"
    r"about|health|healthy|summary|look\s+like|show|get)\b"
)
_PER_NODE = _rx(
    rf"\b(?:per|each|every|a)\s+(?:node|machine|worker|instance|vm|box|server)\b|\beach\b"
    rf"|_\d+(?:gib|vcpu)(?:\s+(?:of\s+)?(?:ram|memory|mem|cpu|compute))?\s+{UNITS}\b"
)
_CLUSTERS = _rx(r"\bclusters\b|\bany\s+cluster\b")
_QUESTION = _rx(r"^(?:is|are|was|were|did|does|do|has|have|any|what|what's|whats|which|how|when|where|why)\b")


def intent(r: Reading, text: str, pairs: dict[str, str]) -> Intent | None:
    has_pool = bool(r.pools or r.pool_typed or r.refers_pool)
    if r.card:
        return "card"
    if r.follow is not None or re.search(r"\b(?:show|list|get)\s+operations\b", text):
        return "operations"  # "get_cluster_operations payments-prod follow=<node>" follows, never replaces
    if re.search(r"\b(?:kubectl|helm|deployments?|dockerfile|pods?|deploy|bill|invoices?)\b", text):
        return None
    if r.question:
        return None if r.elsewhere else question_read(r, text)
    unlisted = (
        bool(r.name)
        and r.name not in r.pools
        and bool(re.search(r"\b(?:node\s*)?pools?\b|\bnodepool\b", text) or r.size)
    )
    new_pool = (
        _NEW_POOL.search(text)
        or (unlisted and bool(r.size or r.count is not None or r.high is not None))
        or (
            _CREATE.search(text)
            and (
                re.search(r"\b(?:new|another|second|extra)\s+(?:node\s*)?pool|\bnodepool\b|\bpool\b", text)
                or re.search(r"\b(?:call\s+it|named|called)\b", text)
                or r.name
            )
        )
    )
    every = re.search(r"\b(?:every|each|all(?:\s+the)?)\s+(?:node\s*)?pools?\b", text)  # "make every pool 2 nodes"
    labels_only = bool(every) or (
        bool(pairs) and bool(LABEL.search(text) or TAG.search(text)) and not (r.name or r.size)
    )
    if (
        (new_pool or re.search(r"\bcall\s+it\b", text))
        and not labels_only
        and not _ADD_MORE.search(text)
        and not (r.pools and not r.name and not re.search(r"\bnew\b", text))
    ):
        r.auto = True if AUTOSCALE.search(text) and not _OFF.search(text) else None
        if r.auto is None and (r.low is not None and r.high is not None) and r.name:
            r.auto = True
        return "add"
    on_pool = has_pool or r.pools or (r.clusters and POOLS.search(text))  # "staging's pool"
    on_pool = on_pool or (
        r.clusters and re.search(r"\b(?:upgrade|migrate|move|switch)\b", text)
    )  # "upgrade staging to ..."
    if r.size and on_pool and (TIER_VERB.search(text) or re.search(r"\b(?:on|onto|to)\s+dks\.", text)):
        return "tier"
    if has_pool and TIER_VERB.search(text) and re.search(r"\b(?:onto|to)\s+(?:the\s+|a\s+)?[\w-]+\s+tier\b", text):
        return "tier"  # "move batch onto the memory-optimised tier": a tier, which one is asked
    if r.size and has_pool and RELATIVE_SPEC.search(text):
        return "tier"  # "more memory for batch, same cpu"
    if has_pool and TIER_VERB.search(text) and re.search(rf"\b(?:to|onto)\s+(?:the\s+)?{FAMILY}\b", text):
        return "tier"  # "move workers to m5": which m5 is asked
    if (
        re.search(
            r"\b(?:bigger|smaller|larger|beefier|more\s+powerful)\s+(?:machines?|nodes?|instances?|tiers?|vms?|box(?:es)?|types?)\b",
            text,
        )
        and has_pool
    ):
        return "tier"
    if has_pool and r.spec is not None and r.count is None and r.delta is None and r.factor is None:
        # "give the workers 16 GiB per node": memory or vCPU per node comes with a tier, never a count (issue 26);
        # the one tier that has it is proposed only when the words ask for it per node or with a verb
        if not (TIER_VERB.search(text) or _PER_NODE.search(text)):
            r.size = None
        return "tier"
    if AUTOSCALE.search(text) or re.search(r"\bfixed\b", text):
        off = _OFF.search(text) or re.search(r"\b(?:don'?t|do\s+not|never|no)\s+(?:\w+\s+)?auto", text)
        if re.search(r"\bfixed\b", text) and not AUTOSCALE.search(text):
            r.soft_off = True  # "fixed at 3": autoscaling off if the pool autoscales, else just the count
            return "autoscale_off" if r.count is not None else None
        return "autoscale_off" if off else "autoscale_on"
    if (
        (r.low is not None or r.high is not None)
        and has_pool
        and re.search(
            r"\b(?:below|above|floor|ceiling|cap|min|max|minimum|maximum|between|at\s+least|at\s+most|up\s+to|never)\b",
            text,
        )
        and (
            (r.low is not None and r.high is not None)
            or re.search(r"\b(?:floor|ceiling|cap|min|max|minimum|maximum|never|at\s+least|at\s+most)\b", text)
        )
    ):  # one bound alone ("batch should never drop below 2") keeps the other, or asks for it
        return "autoscale_on"
    if r.factor is not None and (has_pool or r.clusters):
        return "scale"
    if pairs and (LABEL.search(text) or TAG.search(text) or has_pool):
        return "relabel"
    if (LABEL.search(text) or TAG.search(text)) and has_pool and not _CREATE.search(text):
        return "relabel"  # "drop the team label from workers" changes labels, never the pool
    if r.node and (_REPLACE.search(text) or DESTROY.search(text) or not _CREATE.search(text)):
        return "replace"
    if _ADD_MORE.search(text):
        return "scale"
    if (
        _CREATE.search(text)
        and not every
        and (POOLS.search(text) or r.size or r.name)
        and not r.elsewhere
        and not (r.pools and not r.name)  # "make the general pool 3 nodes" is that pool
    ):
        return "add"
    if r.delta is not None and re.search(rf"\b\d+\s+(?:more\s+)?{UNITS}\b(?!\s*-?pools?)", text):
        return "scale"  # "drop one node from the workers pool": a count, never the pool (property 2)
    if DESTROY.search(text) and has_pool and r.count is not None and re.search(r"\bto\s+\d+\b", text):
        return "scale"  # "drop workers to 1": a count, never the pool (property 2)
    if DESTROY.search(text) and (has_pool or POOLS.search(text)):
        return "remove"
    if re.search(r"\bnodes?\b", text) and (_REPLACE.search(text) or DESTROY.search(text)):
        return "replace"
    if re.search(r"\b(?:replace|recycle)\b", text):
        return "replace"  # "replace it", "replace the second one": which node is asked or known
    if r.elsewhere:
        return None
    question = bool(_QUESTION.search(text)) or text.endswith("?") or r.question
    if (_OPS.search(text) or (question and re.search(r"\b(?:finished|done|complete[d]?)\b", text))) and (
        question or not r.numbers
    ):
        return "operations"  # "is it done?" asks about operations; "we're done with batch" does not
    if r.size and (_PRICE.search(text) or _TIERS.search(text)):
        return "tiers"
    scale_word = re.search(r"\b(?:scale|resize|bump|grow|shrink|bigger|smaller)\b", text)
    if _SCALE.search(text) and not (question and not r.numbers) and (r.numbers or r.delta is not None or scale_word):
        return "scale"
    if (r.count is not None or r.delta is not None) and (has_pool or r.clusters or r.cluster_typed):
        r.weak = True
        return "scale"
    if re.search(r"\b(?:bigger|smaller|larger)\b", text):
        return "scale"
    if _TIERS.search(text) and not has_pool:
        return "tiers"
    if _NODES.search(text):
        return "list_nodes"
    if POOLS.search(text):
        return "list_pools"
    if _CLUSTERS.search(text) and not (r.clusters or r.cluster_typed):
        return "list_clusters"
    if _INFO.search(text) and (r.clusters or r.cluster_typed or r.refers_cluster or re.search(r"\bit\b", text)):
        return "get_cluster"
    if re.search(r"\b(?:overview|everything|summary|all\s+clusters)\b", text) and not (
        r.numbers or r.pools or r.clusters
    ):
        return "list_clusters"  # "give me an overview of everything"
    return None


def question_read(r: Reading, text: str) -> Intent | None:
    """A sentence that asks and holds no imperative change gets a read, never a change (property 1).
    A name the server does not list is not read as one here: "the meaning of life" names nothing."""
    if r.follow_up and not re.search(r"\b(?:nodes?|pools?|tiers?)\b", text):
        return None  # "and on staging?": the earlier request, somewhere else
    tiers = re.search(
        r"\b(?:gb|gib|ram|memory|vcpus?|cpus?|cores?|cheapest|cheaper|priciest|expensive|tiers?|sizes|"
        r"machine\s+types?|instance\s+types?|flavou?rs?|biggest|largest|smallest|beefiest|fastest)\b|_\d+(?:gib|vcpu)\b",
        text,
    )
    per_hour = _PRICE.search(text) and re.search(r"\b(?:per\s+hour|hourly|an\s+hour|/h(?:r|our)?)\b", text)
    if (tiers and not r.pools) or (r.size and _PRICE.search(text)) or per_hour:  # "what would workers cost on c5 2xl"
        return "tiers"
    if re.search(
        r"\b(?:finish(?:ed)?|done|complete[d]?|progress|operations?|ops?|(?:last|latest|recent)\s+changes?|still\s+running|"
        r"happening|happened|history|go(?:ne)?\s+(?:thru|through)|went\s+(?:thru|through)|in\s+flight|underway|pending)\b"
        r"|\bhow\b.*\bgoing\b",
        text,
    ):
        return "operations"
    if re.search(r"\b(?:overview|everything|summary|all\s+clusters)\b", text) and not (r.pools or r.clusters):
        return "list_clusters"  # "show me everything we've got"
    if re.search(r"\bclusters?\s+(?:called|named)\b", text):
        return "list_clusters"  # "do we have a cluster called payments-dev?": the list answers it
    clusters = r.clusters or (r.cluster_typed if r.blind else None)
    if has_amount(text, "gib", "vcpu"):
        return "tiers"  # "can the workers machines have 16 gigs of memory each?": the catalog answers
    if r.pools and re.search(
        r"\b(?:max(?:imum)?|min(?:imum)?|most|least|allowed|bounds?|limits?|auto[\s-]?scal\w*)\b", text
    ):
        return "list_pools"  # "what's the most machines batch is allowed to grow to?"
    if (r.pools or clusters) and re.search(r"\b(?:size|tier|type|kind|flavou?r)\b", text):
        return "list_pools"  # "what size machines is workers on", "what size machines does staging use"
    if re.search(r"\bwhich\s+cluster\b|\b(?:a|an|the)\s+[a-z0-9-]+\s+cluster\b", text) and not r.clusters:
        return "list_clusters"  # "which cluster has the general pool", "do we have a payments-dev cluster"
    if (r.pools and re.search(r"^why\b", text)) or re.search(r"\bper\s+(?:node\s*)?pool\b", text):
        return "list_pools"  # "why is batch sitting at 2 nodes?": its bounds answer it
    if re.search(r"\bhow\s+many\s+(?:node\s*)?pools\b|\bis\s+there\s+a\s+(?:node\s*)?pool\b", text):
        return "list_pools"
    if r.node or _NODES.search(text) or re.search(r"\bhow\s+many\b", text):
        return "list_nodes"
    if r.pools or AUTOSCALE.search(text) or POOLS.search(text):
        return "list_pools"
    if _CLUSTERS.search(text) and not clusters:
        return "list_clusters"
    if clusters or (re.search(r"\bcluster\b", text) and r.cluster_typed):
        return "get_cluster"
    if _INFO.search(text) and (r.refers_cluster or re.search(r"\bit\b", text)):
        return "get_cluster"
    return None

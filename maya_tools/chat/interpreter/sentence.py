"""A request read into its parts (``Reading``) and the intents and refusals it can have."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Intent = Literal[
    "scale",
    "autoscale_on",
    "autoscale_off",
    "add",
    "remove",
    "replace",
    "relabel",
    "list_clusters",
    "get_cluster",
    "list_pools",
    "list_nodes",
    "operations",
    "tiers",
    "card",
    "tier",
]
Refusal = Literal["approve", "everything", "cluster_delete", "new_cluster", "tier_change", "stray_answer"]


@dataclass
class Reading:
    """The parts of one request. Names are lowercase; ``*_typed`` hold a name the server does not list."""

    text: str
    said: str = ""  # the request as typed, lowercase (the politeness "also" or "actually" still in it)
    intent: Intent | None = None
    refusal: Refusal | None = None
    elsewhere: bool = False
    clusters: tuple[str, ...] = ()
    cluster_typed: str | None = None
    pools: tuple[str, ...] = ()
    pool_typed: str | None = None
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
    weak: bool = False  # the intent comes from the parts alone (no verb): an answer may complete another request
    numbers: list[int] = field(default_factory=list)
    factor: float | None = None  # "double": the count times this
    start: int | None = None  # a starting count said with bounds ("start at 3")
    auto: bool | None = None  # a new pool's autoscaling, when the words say
    keep_name: bool = False
    label_mode: Literal["set", "add", "drop", "clear"] = "set"
    drop_keys: tuple[str, ...] = ()
    question: bool = False  # the sentence asks and holds no imperative change (safety property 1)
    follow_up: bool = False  # "and on staging?", "what about general"
    soft_off: bool = False
    label_key: str = "labels"
    bad_name: bool = False  # a new pool's name as typed is not a DNS label (R-ADD-01)
    correction: bool = False  # "sorry, I meant general", "instead"
    blind: bool = False  # the server listed nothing: names pass as typed
    family: str | None = None  # a tier family said alone ("2 r5 nodes")
    follow: str | None = None  # what get_cluster_operations follows: an operation id, pool or node
    one_word_clusters: bool = False  # one word named two clusters ("payments"): asked, never both read
    pairs: dict[str, str] = field(default_factory=dict)  # every key=value said, whatever the intent
    called_off: tuple[str, ...] = ()  # the parts of the message a negation or cancellation called off
    called_off_before: bool = False  # "cancel that": everything before it in the message is called off
    spec: tuple[str, ...] | None = None  # the catalog tiers with the memory or vCPU said per node ("16 GiB")
    spec_said: str = ""  # that amount as said: "16 GiB"

    @property
    def has_parts(self) -> bool:
        return bool(
            self.clusters
            or self.cluster_typed
            or self.pools
            or self.pool_typed
            or self.node
            or self.size
            or self.numbers
            or self.labels
            or self.tags
            or self.name
        )

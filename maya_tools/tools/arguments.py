"""The argument types the tools share: as strict as Door, and bounded in size.

Strict: Door refuses ``"count": true`` and ``"count": "4"`` (R-ADD-07, R-PATCH-01: wrong types are
422), so a tool refuses them too instead of coercing them into a card for 1 or 4. Strictness does
not change the input schema, which already says ``integer``, ``boolean`` and ``string``.

Bounded: a value far beyond anything Door can hold is refused here, naming the argument, before it
reaches a planner, a log line or Door. The bounds are generous on purpose, so that Door's own rule
still speaks below them: a pool name of 64 to 1,000 characters is refused by R-ADD-01 (add) or
R-PATCH-07 (no such pool), a node name by R-RNODE-03. Door states no limit for label and tag maps,
so theirs follow Kubernetes' longest label key (253) for keys and values alike and allow 64 entries.
"""

from typing import Annotated

from pydantic import Field, StrictBool, StrictFloat, StrictInt, StrictStr, StringConstraints

CLUSTER_MAX = 253  # a cluster name (a DNS name at most) or id (a UUID)
NAME_MAX = 1_000  # pool, node and tier names: far above the rules' 63 and 254, so the rule names the fault
CARD_ID_MAX = 128  # card ids are `card_` and 16 characters
MAP_ENTRIES_MAX = 64
MAP_STRING_MAX = 253

ClusterArg = Annotated[
    StrictStr,
    Field(min_length=1, max_length=CLUSTER_MAX, description="Cluster name (e.g. `payments-prod`) or id."),
]
PoolArg = Annotated[
    StrictStr, Field(min_length=1, max_length=NAME_MAX, description="The node pool's name, for example `workers`.")
]
Name = Annotated[StrictStr, Field(max_length=NAME_MAX)]
CountArg = Annotated[
    StrictInt | None, Field(ge=0, le=200, description="Number of workers, 0–200 (0 only with autoscaling).")
]
AutoArg = Annotated[StrictBool | None, Field(description="Turn autoscaling on (true) or off (false).")]
MinArg = Annotated[
    StrictInt | None, Field(ge=0, le=200, description="Autoscaling lower bound (Door fills 1 if omitted).")
]
MaxArg = Annotated[
    StrictInt | None, Field(ge=0, le=200, description="Autoscaling upper bound; required with autoscaling.")
]
MapString = Annotated[StrictStr, StringConstraints(max_length=MAP_STRING_MAX)]
MapArg = Annotated[
    dict[MapString, MapString] | None,
    Field(
        max_length=MAP_ENTRIES_MAX,
        description="Replaces the stored map. Not applied as Kubernetes node labels.",
    ),
]
Flag = StrictBool
Number = StrictFloat
Whole = StrictInt

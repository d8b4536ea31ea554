"""The admin plane's setters: worlds built directly, never through the public API's checks.

Clusters and pools born Running (seeds, tests, benchmarks), phases, credit, tokens and the
inventory switch. Each commits what it changed; ``seed.populate`` builds its worlds with these.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from typing import Final

from backend_client import rules
from backend_client.models import FieldError, MachineTier, Phase, PublicNodePoolCreateRequest, TierSpec
from reference_backend.errors import Refusal
from reference_backend.simulation import Simulation
from reference_backend.world import Cluster, Organisation, Pool, Principal, Role, Worker, token_digest

_CLUSTER_ID: Final = re.compile(r"(?!\.\.?\Z)[A-Za-z0-9._~-]{1,128}")  # one URL path segment, not . or ..


class WorldSetters(Simulation):
    """The simulated world plus the setters the admin plane and the seeds use."""

    def install_cluster(
        self,
        *,
        name: str,
        organisation: str,
        phase: Phase = "Provisioned",
        cluster_id: str | None = None,
        kubernetes_version: str = "v1.32.4",
        pools: Sequence[PublicNodePoolCreateRequest] = (),
        tags: Sequence[str] = (),
        created_at: datetime | None = None,
    ) -> Cluster:
        """A cluster whose workers are born Running (seeds, tests, benchmarks).

        Raises ``Refusal`` 422 for an id that is not one URL path segment, 409 when the id is taken or
        the organisation already has a cluster of that name (``GET /clusters?name=`` resolves a name
        to one id), and 422 for a pool the rules refuse or two pools of one name (R-ADD-02); an unknown
        tier is installed as a retired one (``_tier``).
        """
        if cluster_id is not None and not _CLUSTER_ID.fullmatch(cluster_id):
            raise Refusal(
                422,
                f"cluster id {cluster_id!r} is not usable in a URL path. Use letters, digits, '.', '_', '~' or '-'.",
                errors=[FieldError(field="id", message="letters, digits, '.', '_', '~' or '-', 1 to 128 characters")],
            )
        cluster_id = cluster_id or self._new_uuid()
        if cluster_id in self._clusters:
            raise Refusal(409, f"a cluster with id {cluster_id} already exists. Choose another id.")
        for other in self._clusters.values():
            if other.organisation == organisation and other.name == name and not other.torn_down:
                raise Refusal(
                    409,
                    f"organisation {organisation} already has a cluster named {name!r} ({other.id}). Choose another name.",
                )
        for request in pools:
            refuse(rules.create_shape_violations(request))
        seen: list[str] = []
        for request in pools:
            clash = rules.name_clash_violation(request.name, name, seen)
            if clash is not None:
                # The admin plane answers a malformed world with 422, naming the same rule.
                raise Refusal(
                    422,
                    clash.explain(),
                    rule=clash.rule,
                    errors=[FieldError(field="node_pools", message=f"pool names given twice: {request.name}")],
                )
            seen.append(request.name)
        cluster = Cluster(
            id=cluster_id,
            name=name,
            organisation=organisation,
            phase=phase,
            kubernetes_version=kubernetes_version,
            tags=list(tags),
            created_at=created_at or self._now,
            # Not from the name counter, so that installing a cluster names nothing else differently.
            seq=max((c.seq for c in self._clusters.values()), default=0) + 1,
        )
        for request in pools:
            planned = rules.pool_from_create(request, self._tier(request.size), pool_id="pending")
            refuse(rules.pool_violations(planned, add=True))
        self._clusters[cluster.id] = cluster
        self._touch("clusters", cluster.id)
        self._touch("inventory", cluster.id)
        for request in pools:
            self.install_pool(cluster, request)
        self.commit()
        return cluster

    def install_pool(
        self,
        cluster: Cluster,
        request: PublicNodePoolCreateRequest,
        *,
        pool_id: str | None = None,
        node_names: Sequence[str] = (),
        created_at: datetime | None = None,
    ) -> Pool:
        """A pool with ``count`` Running workers, no operation (the seed and the admin plane)."""
        planned = rules.pool_from_create(request, self._tier(request.size), pool_id=pool_id or self._new_uuid())
        born = created_at or self._now
        pool = Pool(cluster_id=cluster.id, created_at=born, seq=self._next_counter(), **planned.model_dump())
        for index in range(pool.count):
            worker = Worker(
                id="worker-" + self._digest("worker").hex()[:8],
                seq=self._next_counter(),
                status="Running",
                created_at=born,
                next_at=None,
                kubernetes_version=cluster.kubernetes_version,
            )
            pool.add_worker(worker)
            if index < len(node_names):
                worker.name = node_names[index]
                cluster.node_names.add(worker.name)
            else:
                worker.name = self._node_name(cluster, pool)
        cluster.pools[pool.id] = pool
        self._pools[pool.id] = pool
        self._touch("pools", pool.id)
        return pool

    def _tier(self, size: str) -> MachineTier:
        """The catalog tier, or (admin plane only) a retired one: unknown to the catalog, 0 GiB disk.

        Decision: the admin plane may install pools of a size the catalog no longer lists, so that
        the R-CAP-02 null totals can be reached; the public API refuses such a size (R-ADD-03).
        """
        known = self.catalog.get(size)
        if known is not None:
            return known
        return MachineTier(id=size, vcpu=0, memory_gib=0, spec=TierSpec(disk_gib=0), price_per_hour=0)

    def cluster(self, cluster_id: str) -> Cluster | None:
        return self._clusters.get(cluster_id)

    def set_phase(self, cluster: Cluster, phase: Phase) -> None:
        cluster.phase = phase
        self._touch("clusters", cluster.id)
        self.commit()

    def set_credit(self, name: str, credit: float) -> Organisation:
        organisation = Organisation(name, credit)
        self._organisations[name] = organisation
        self._touch("organisations", name)
        self.commit()
        return organisation

    def credit(self, name: str) -> float | None:
        organisation = self._organisations.get(name)
        return None if organisation is None else organisation.credit

    def put_token(self, token: str, user: str, organisation: str, role: Role) -> Principal:
        """Issue (or re-issue) a token; only its SHA-256 is kept, in memory and in the state file."""
        principal = Principal(user, organisation, role)
        digest = token_digest(token)
        self._tokens[digest] = principal
        if organisation not in self._organisations:
            self._organisations[organisation] = Organisation(organisation, 0.0)
            self._touch("organisations", organisation)
        self._touch("tokens", digest)
        self.commit()
        return principal

    def delete_token(self, token: str) -> None:
        digest = token_digest(token)
        self._tokens.pop(digest, None)
        self._touch("tokens", digest)
        self.commit()

    def set_inventory(self, available: bool) -> None:
        self.inventory_available = available
        self._touch("meta", "world")
        self.commit()


def refuse(violations: Sequence[rules.Violation | None]) -> None:
    """Raise the refusal of these violations, if any (``None``: a rule that holds)."""
    broken = [v for v in violations if v is not None]
    if broken:
        raise Refusal.of(broken)

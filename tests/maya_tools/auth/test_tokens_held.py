"""Checks that need the issuer's own signing key or an account whose email is not verified, against a
real provider (``tests.oidc``) started with a key this module holds and such an account (issue 26).

- The issuer check refuses a token signed with the issuer's very key that names another ``iss``,
  because of the issuer check itself: before any key is fetched, with reason ``issuer``.
- An unverified ``email`` is never the name the audit (a verified token, an approved card's audit
  trail) and ``/connect`` show: ``preferred_username`` (else ``sub``) is.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from fastapi import FastAPI

from maya_tools.auth import JwtTokenVerifier, TokenRefused
from maya_tools.auth.credentials import DoorCredentials, open_credentials
from reference_backend.backend import ReferenceBackend
from reference_backend.clock import ManualClock
from reference_backend.seed import DEMO_ADMIN_TOKEN
from tests.maya_tools.auth.conftest import RESOURCE, Clock, Fetches
from tests.maya_tools.auth.served import served
from tests.maya_tools.auth.site import ORIGIN, Browser, make_site
from tests.maya_tools.conftest import Person
from tests.oidc import ADMIN, OpenIDProvider, User, claims_of

pytestmark = pytest.mark.anyio

KID = "held-rsa-key"
_PRIVATE = rsa.generate_private_key(public_exponent=65537, key_size=2048)
_EXPORTED = {k: v for k, v in json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(_PRIVATE)).items() if k != "key_ops"}
HELD_JWK: dict[str, Any] = {**_EXPORTED, "kid": KID, "use": "sig"}
# an account at an issuer that lets anyone type any address: the address is not theirs
MALLORY = User("mallory", "ceo@door.test", "mallory-password", "mallory", email_verified=False)


@pytest.fixture(scope="module")
def held() -> Iterator[OpenIDProvider]:
    with OpenIDProvider(
        [RESOURCE], users=[ADMIN, MALLORY], keys=[HELD_JWK], redirect_uris=[ORIGIN + "/auth/callback"]
    ).running() as running:
        yield running


def sign(claims: dict[str, Any]) -> str:
    """``claims`` signed with the issuer's own key, as the issuer types an access token."""
    return jwt.encode(claims, _PRIVATE, algorithm="RS256", headers={"kid": KID, "typ": "at+jwt"})


def verifier_of(provider: OpenIDProvider, http: httpx2.AsyncClient, clock: Clock) -> JwtTokenVerifier:
    return JwtTokenVerifier(issuer=provider.issuer, resource=RESOURCE, http=http, clock=clock)


async def test_the_issuers_own_key_on_another_iss_is_refused_by_the_issuer_check_before_any_fetch(
    held: OpenIDProvider, http: httpx2.AsyncClient, client_http: httpx2.AsyncClient, clock: Clock, fetches: Fetches
) -> None:
    token = await held.access_token(client_http, ADMIN)
    header, claims = jwt.get_unverified_header(token), claims_of(token)
    assert header["kid"] == KID  # the provider signs with the key this module holds
    # control: re-signed unchanged, it verifies (so the key is the issuer's and only `iss` differs below)
    assert (await verifier_of(held, http, clock).check(sign(claims))).principal.subject == "admin"
    fetches.urls.clear()

    fresh = verifier_of(held, http, clock)  # no key cached: a refusal after a fetch would show
    for other in (held.issuer + "/", "https://idp.door.test", held.issuer.replace("127.0.0.1", "localhost")):
        with pytest.raises(TokenRefused) as refused:
            await fresh.check(sign({**claims, "iss": other}))
        assert refused.value.reason == "issuer", refused.value
        assert other[:40] in refused.value.detail and held.issuer in refused.value.detail

    assert fetches.urls == []  # refused by the issuer check itself, before discovery or JWKS


async def test_an_unverified_email_is_not_the_audit_name_but_preferred_username_is(
    held: OpenIDProvider, http: httpx2.AsyncClient, client_http: httpx2.AsyncClient, clock: Clock
) -> None:
    verifier = verifier_of(held, http, clock)
    mallory = await held.access_token(client_http, MALLORY)
    admin = await held.access_token(client_http, ADMIN)
    assert (claims_of(mallory)["email"], claims_of(mallory)["email_verified"]) == ("ceo@door.test", False)
    assert claims_of(admin)["email_verified"] is True

    assert (await verifier.check(mallory)).principal.name == "mallory"
    assert (await verifier.check(admin)).principal.name == "admin@door.test"
    # without another name claim there is no name: the audit shows `sub` (Runtime.approver)
    email_only = JwtTokenVerifier(issuer=held.issuer, resource=RESOURCE, http=http, clock=clock, name_claims=("email",))
    assert (await email_only.check(mallory)).principal.name is None
    # a verified email the token states as a string is still not "true"
    claims = claims_of(admin)
    assert (await verifier.check(sign({**claims, "email_verified": "true"}))).principal.name == "admin"


@pytest.fixture
async def credentials(tmp_path: Any) -> AsyncIterator[DoorCredentials]:
    import secrets

    store = await open_credentials(str(tmp_path / "cards.sqlite3"), [secrets.token_bytes(32)])
    yield store
    await store.close()


@pytest.mark.parametrize(("user", "shown"), [(MALLORY, "mallory"), (ADMIN, "admin@door.test")])
async def test_connect_names_the_signed_in_person_by_a_verified_email_only(
    held: OpenIDProvider,
    http: httpx2.AsyncClient,
    credentials: DoorCredentials,
    door_app: FastAPI,
    clock: Clock,
    user: User,
    shown: str,
) -> None:
    door_app.state.backend = ReferenceBackend(clock=ManualClock(), seed="demo")
    client = await held.register_client(
        http, redirect_uri=ORIGIN + "/auth/callback", token_endpoint_auth_method="client_secret_basic"
    )
    site = make_site(held, client, credentials=credentials, http=http, door=door_app, clock=clock)
    browser = Browser(site, user)
    try:
        page = await browser.visit("/connect")
    finally:
        await browser.aclose()

    assert page.status_code == 200, page.text[:300]
    assert f"Signed in as <strong>{shown}</strong>" in page.text
    if user is MALLORY:
        assert "ceo@door.test" not in page.text


async def test_the_audit_of_an_approval_names_an_unverified_person_by_username_never_by_the_email(
    held: OpenIDProvider, client_http: httpx2.AsyncClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``serve``'s own app (``build_app``, OAuth, this provider as the issuer) in process: mallory
    approves a scale card; the card and its audit name her ``mallory (sub mallory, …)``, never
    ceo@door.test. The name comes from the verified token alike in both protocol generations; in
    process (ASGI, no streaming) the form round runs on 2026-07-28's ``input_required`` retry."""
    backend = ReferenceBackend(clock=ManualClock(), seed="demo")
    async with served(held, backend, tmp_path / "cards.sqlite3", monkeypatch) as site:
        person = await site.connect_door(MALLORY, DEMO_ADMIN_TOKEN)
        token = await held.access_token(client_http, MALLORY)
        async with site.mcp(token, "modern", elicitation_callback=Person()) as client:
            done = await client.call_tool(
                "scale_node_pool", {"cluster": "payments-prod", "pool": "workers", "count": 3}
            )
        (card,) = await site.cards()
        audit = await site.runtime.store.audit(card.id)

    assert done.structured_content is not None and done.structured_content["changed"] is True, done.content
    assert card.approved_by is not None and card.approved_by.startswith(f"mallory (sub mallory, {person.key}) via ")
    (approved,) = [event for event in audit if event.event == "approved"]
    assert approved.by == card.approved_by
    assert "ceo@door.test" not in card.model_dump_json() + "".join(event.model_dump_json() for event in audit)

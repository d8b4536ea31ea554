"""The claims a team's policy judges approvers by (issue 28), as the real test provider issues them.

The browser session keeps the values of the claims the policy names from the sign-in's ID token
(and no other claim of it); the MCP access token's verified claims carry them too. A claim may be a
list of strings or one string; either qualifies the person the same way.
"""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx2
import pytest
from fastapi import FastAPI
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from confirmation_cards import Approver
from maya_tools.auth import JwtTokenVerifier
from maya_tools.auth.credentials import DoorCredentials, open_credentials
from maya_tools.auth.tokens import kept_claims
from reference_backend.backend import ReferenceBackend
from reference_backend.clock import ManualClock
from tests.maya_tools.auth.conftest import RESOURCE, Clock
from tests.maya_tools.auth.site import ORIGIN, Browser, Site, make_site
from tests.oidc import OpenIDProvider, User

pytestmark = pytest.mark.anyio

BOB = User("bob", "bob@door.test", "bob-password", "bob", groups=("platform", "sre"))
ANN = User("ann", "ann@door.test", "ann-password", "ann", groups=("payments",))


@pytest.fixture(scope="module")
def provider() -> Iterator[OpenIDProvider]:
    with OpenIDProvider([RESOURCE], users=[BOB, ANN]).running() as running:
        yield running


@pytest.fixture
async def credentials(tmp_path: Path) -> AsyncIterator[DoorCredentials]:
    store = await open_credentials(str(tmp_path / "cards.sqlite3"), [secrets.token_bytes(32)])
    yield store
    await store.close()


@pytest.fixture
async def site(
    provider: OpenIDProvider, http: httpx2.AsyncClient, credentials: DoorCredentials, door_app: FastAPI, clock: Clock
) -> Site:
    door_app.state.backend = ReferenceBackend(clock=ManualClock(), seed="demo")
    client = await provider.register_client(
        http,
        redirect_uri=ORIGIN + "/auth/callback",
        token_endpoint_auth_method="client_secret_basic",
        application_type="web",
    )
    made = make_site(
        provider, client, credentials=credentials, http=http, door=door_app, clock=clock, keep_claims=("groups",)
    )

    async def whoami(request: Request) -> Response:
        person = await made.sign_in.signed_in(request)
        if person is None:
            return made.sign_in.login_redirect(request)
        return JSONResponse(person.model_dump(mode="json"))

    return dataclasses.replace(made, app=Starlette(routes=[*made.sign_in.routes(), Route("/whoami", whoami)]))


async def test_the_browser_session_keeps_the_policys_claims_of_the_id_token_and_nothing_else(site: Site) -> None:
    browser = Browser(site, BOB)
    try:
        page = await browser.visit("/whoami")
    finally:
        await browser.aclose()

    person = page.json()
    assert person["subject"] == "bob" and person["claims"] == {"groups": ["platform", "sre"]}
    assert "email" not in person["claims"]


async def test_the_access_tokens_verified_claims_carry_the_groups(
    provider: OpenIDProvider, client_http: httpx2.AsyncClient, verifier: JwtTokenVerifier
) -> None:
    token = await provider.access_token(client_http, ANN)

    verified = await verifier.check(token)

    assert verified.claims is not None and verified.claims["groups"] == ["payments"]
    approver = Approver(principal=verified.principal.key, claims=verified.claims)
    assert approver.values("groups") == ("payments",)


def test_a_claim_may_be_one_string_or_a_list_of_strings_and_nothing_else_counts() -> None:
    claims = {"groups": "platform", "roles": ["a", 3, "b"], "level": 7}

    assert kept_claims(claims, ("groups", "roles", "level", "absent")) == {"groups": ("platform",), "roles": ("a", "b")}
    assert Approver(principal="p", claims=claims).values("level") == ()

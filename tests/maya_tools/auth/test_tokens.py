"""JWT access tokens of a real OpenID provider, verified by ``JwtTokenVerifier``: what it accepts and
each thing it refuses, in its own test, by the check that refuses it."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
from typing import Any

import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives import serialization

from maya_tools.auth import IssuerKeys, JwtTokenVerifier, TokenRefused
from maya_tools.auth.tokens import LEEWAY
from maya_tools.settings import Settings
from tests.maya_tools.auth.conftest import OTHER_RESOURCE, RESOURCE, Clock, Fetches
from tests.oidc import ADMIN, MEMBER, SERVER_CLIENT_ID, OpenIDProvider, claims_of

pytestmark = pytest.mark.anyio

ALL_SCOPES = ("openid", "email", "maya.read", "maya.change")


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def segment(value: dict[str, Any]) -> str:
    return b64(json.dumps(value).encode())


def parts(token: str) -> tuple[dict[str, Any], dict[str, Any], str]:
    return jwt.get_unverified_header(token), claims_of(token), token.split(".")[2]


async def refusal(verifier: JwtTokenVerifier, token: str) -> str:
    with pytest.raises(TokenRefused) as refused:
        await verifier.check(token)
    assert await verifier.verify_token(token) is None
    return refused.value.reason


async def test_a_token_from_the_flow_verifies(
    provider: OpenIDProvider, verifier: JwtTokenVerifier, client_http: httpx2.AsyncClient
) -> None:
    tokens = await provider.sign_in(client_http, MEMBER, scopes=ALL_SCOPES, resource=RESOURCE)

    verified = await verifier.check(tokens.access_token)

    assert verified.principal.issuer == provider.issuer
    assert verified.principal.subject == "member"
    assert verified.principal.name == "member@door.test"
    assert verified.subject == "member"
    assert verified.client_id == "maya-tools"
    assert verified.scopes == ["maya.read", "maya.change"]
    assert verified.resource == RESOURCE
    assert verified.expires_at == claims_of(tokens.access_token)["exp"]
    assert verified.claims is not None and verified.claims["iss"] == provider.issuer


async def test_a_dynamically_registered_public_client_gets_a_token_that_verifies(
    provider: OpenIDProvider, verifier: JwtTokenVerifier, client_http: httpx2.AsyncClient
) -> None:
    client = await provider.register_client(client_http, client_name="Claude")
    assert client.client_secret is None

    tokens = await provider.sign_in(client_http, ADMIN, scopes=["maya.read"], resource=RESOURCE, client=client)

    verified = await verifier.check(tokens.access_token)
    assert (verified.client_id, verified.principal.subject, verified.scopes) == (
        client.client_id,
        "admin",
        ["maya.read"],
    )


async def test_the_name_falls_back_to_the_next_claim(
    provider: OpenIDProvider, http: httpx2.AsyncClient, client_http: httpx2.AsyncClient, clock: Clock
) -> None:
    verifier = JwtTokenVerifier(
        issuer=provider.issuer, resource=RESOURCE, http=http, clock=clock, name_claims=("upn", "preferred_username")
    )
    verified = await verifier.check(await provider.access_token(client_http, ADMIN))
    assert verified.principal.name == "admin"


async def test_an_expired_token_is_refused(
    provider: OpenIDProvider, verifier: JwtTokenVerifier, client_http: httpx2.AsyncClient, clock: Clock
) -> None:
    token = await provider.access_token(client_http)
    expires = claims_of(token)["exp"]
    clock.now = expires + LEEWAY - 1
    assert (await verifier.check(token)).expires_at == expires  # within the leeway

    clock.now = expires + LEEWAY

    assert await refusal(verifier, token) == "expired"


async def test_a_token_from_the_future_is_refused(
    provider: OpenIDProvider, verifier: JwtTokenVerifier, client_http: httpx2.AsyncClient, clock: Clock
) -> None:
    token = await provider.access_token(client_http)
    clock.now = claims_of(token)["iat"] - LEEWAY - 1

    assert await refusal(verifier, token) == "not_yet_valid"


async def test_a_token_for_another_resource_is_refused(
    provider: OpenIDProvider, verifier: JwtTokenVerifier, client_http: httpx2.AsyncClient
) -> None:
    token = await provider.access_token(client_http, resource=OTHER_RESOURCE)
    assert claims_of(token)["aud"] == OTHER_RESOURCE  # a real token, of this issuer, for another API

    assert await refusal(verifier, token) == "audience"


async def test_another_issuers_token_is_refused(
    verifier: JwtTokenVerifier, client_http: httpx2.AsyncClient, fetches: Any
) -> None:
    with OpenIDProvider([RESOURCE]).running() as other:
        token = await other.access_token(client_http)

    assert await refusal(verifier, token) == "issuer"
    assert fetches.urls == []  # a foreign token costs the issuer nothing


async def test_a_provider_that_claims_our_issuer_cannot_sign_our_tokens(
    provider: OpenIDProvider, verifier: JwtTokenVerifier, client_http: httpx2.AsyncClient
) -> None:
    with OpenIDProvider([RESOURCE], issuer=provider.issuer).running() as impostor:
        token = await impostor.access_token(client_http)
    assert claims_of(token)["iss"] == provider.issuer

    assert await refusal(verifier, token) == "unknown_key"


async def test_alg_none_is_refused(
    provider: OpenIDProvider, verifier: JwtTokenVerifier, client_http: httpx2.AsyncClient, fetches: Fetches
) -> None:
    header, claims, _ = parts(await provider.access_token(client_http, scopes=["maya.read"]))
    claims["scope"] = "maya.read maya.change"

    unsigned = f"{segment({**header, 'alg': 'none'})}.{segment(claims)}."

    assert await refusal(verifier, unsigned) == "algorithm"
    assert fetches.urls == []  # refused by the allow-list, before any key is looked up


async def test_an_hmac_token_signed_with_the_public_key_is_refused(
    provider: OpenIDProvider, verifier: JwtTokenVerifier, client_http: httpx2.AsyncClient, fetches: Fetches
) -> None:
    header, claims, _ = parts(await provider.access_token(client_http, scopes=["maya.read"]))
    jwk = next(key for key in (await provider.jwks(client_http))["keys"] if key["kid"] == header["kid"])
    public_pem = jwt.PyJWK(jwk).key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    claims["scope"] = "maya.read maya.change"
    signing_input = f"{segment({**header, 'alg': 'HS256'})}.{segment(claims)}"
    forged = f"{signing_input}.{b64(hmac.new(public_pem, signing_input.encode(), hashlib.sha256).digest())}"

    assert await refusal(verifier, forged) == "algorithm"
    assert fetches.urls == []  # refused by the allow-list, before any key is looked up


@pytest.mark.parametrize("alg", ["none", "HS256", "HS512", "ES256K"])
def test_the_allow_list_takes_no_hmac_and_no_none(alg: str) -> None:
    with pytest.raises(ValueError, match="asymmetric only"):
        JwtTokenVerifier(
            issuer="https://idp.door.test", resource=RESOURCE, http=httpx2.AsyncClient(), algorithms=["RS256", alg]
        )


async def test_a_tampered_token_is_refused(
    provider: OpenIDProvider, verifier: JwtTokenVerifier, client_http: httpx2.AsyncClient
) -> None:
    token = await provider.access_token(client_http, MEMBER, scopes=["maya.read"])
    _, claims, signature = parts(token)
    claims["scope"] = "maya.read maya.change"

    tampered = f"{token.split('.')[0]}.{segment(claims)}.{signature}"

    assert await refusal(verifier, tampered) == "signature"


async def test_a_key_of_another_type_than_alg_needs_is_refused(
    provider: OpenIDProvider, verifier: JwtTokenVerifier, client_http: httpx2.AsyncClient
) -> None:
    token = await provider.access_token(client_http)
    header, claims, signature = parts(token)
    assert header["alg"] == "RS256"

    # The issuer's RSA key, named by an ES256 header: the key must not be read as another type.
    confused = f"{segment({**header, 'alg': 'ES256'})}.{segment(claims)}.{signature}"

    assert await refusal(verifier, confused) == "key_mismatch"


async def test_without_a_kid_the_one_key_for_its_alg_is_used(
    provider: OpenIDProvider, verifier: JwtTokenVerifier, client_http: httpx2.AsyncClient
) -> None:
    header, claims, signature = parts(await provider.access_token(client_http))
    del header["kid"]

    # The issuer's one RSA key is found (its JWKS also has an EC and an OKP key) and checks the
    # signature, which no longer matches the changed header.
    assert await refusal(verifier, f"{segment(header)}.{segment(claims)}.{signature}") == "signature"


async def test_an_id_token_is_not_an_access_token(
    provider: OpenIDProvider, verifier: JwtTokenVerifier, client_http: httpx2.AsyncClient
) -> None:
    tokens = await provider.sign_in(client_http, ADMIN, scopes=ALL_SCOPES, resource=RESOURCE)
    assert tokens.id_token is not None

    assert await refusal(verifier, tokens.id_token) == "type"


async def test_garbage_is_refused_as_malformed(verifier: JwtTokenVerifier) -> None:
    assert await refusal(verifier, "not-a-jwt") == "malformed"


async def test_a_refusal_is_logged_without_the_token(
    provider: OpenIDProvider,
    verifier: JwtTokenVerifier,
    client_http: httpx2.AsyncClient,
    clock: Clock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    token = await provider.access_token(client_http)
    clock.advance(3600)

    with caplog.at_level(logging.INFO, logger="maya_tools.auth"):
        assert await verifier.verify_token(token) is None

    assert "expired" in caplog.text
    assert token not in caplog.text and token.split(".")[2] not in caplog.text


def test_the_keys_given_must_be_the_issuers() -> None:
    http = httpx2.AsyncClient()
    keys = IssuerKeys("https://other-idp.door.test", http)
    with pytest.raises(ValueError, match="not the issuer"):
        JwtTokenVerifier(issuer="https://idp.door.test", resource=RESOURCE, http=http, keys=keys)


def test_a_principal_key_is_issuer_and_subject_together_never_either_alone() -> None:
    from maya_tools.auth.tokens import Principal

    one = Principal(issuer="https://a.example", subject="42", name="a@x")
    assert one.key == Principal(issuer="https://a.example", subject="42", name=None).key
    assert one.key != Principal(issuer="https://b.example", subject="42", name="a@x").key
    assert one.key != Principal(issuer="https://a.example", subject="43", name="a@x").key
    assert one.key != Principal(issuer="https://a.example\n4", subject="2", name=None).key
    assert one.key.startswith("sub_") and "42" not in one.key


async def test_maya_oauth_token_types_admits_a_jwt_typed_token_as_keycloak_types_its_access_tokens(
    provider: OpenIDProvider, http: httpx2.AsyncClient, client_http: httpx2.AsyncClient
) -> None:
    """oidc-provider types every access token ``at+jwt``; its ID token is the provider's own JWT typed
    ``JWT``, as Keycloak types its access tokens. Refused by default with a line naming the setting;
    with ``MAYA_OAUTH_TOKEN_TYPES=at+jwt,JWT`` its type passes and the signature (the provider's
    JWKS), issuer, audience and client checks decide."""
    tokens = await provider.sign_in(client_http, ADMIN, scopes=ALL_SCOPES, resource=RESOURCE)
    assert tokens.id_token is not None and claims_of(tokens.id_token)["aud"] == SERVER_CLIENT_ID
    types = Settings.from_env({"MAYA_OAUTH_TOKEN_TYPES": "at+jwt, JWT"}).oauth_token_types
    assert Settings.from_env({}).oauth_token_types == ("at+jwt",)

    strict = JwtTokenVerifier(issuer=provider.issuer, resource=SERVER_CLIENT_ID, http=http)
    with pytest.raises(TokenRefused) as refused:
        await strict.check(tokens.id_token)
    assert refused.value.reason == "type" and "MAYA_OAUTH_TOKEN_TYPES" in str(refused.value)

    # past the type check every other check still runs: this ID token names no client (azp), which a
    # Keycloak access token does, so it stops there, and for another resource at the audience
    keycloak = JwtTokenVerifier(issuer=provider.issuer, resource=SERVER_CLIENT_ID, http=http, token_types=types)
    assert await refusal(keycloak, tokens.id_token) == "claims"
    with pytest.raises(TokenRefused) as other_audience:
        await JwtTokenVerifier(issuer=provider.issuer, resource=RESOURCE, http=http, token_types=types).check(
            tokens.id_token
        )
    assert other_audience.value.reason == "audience"

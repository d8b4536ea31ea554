"""The issuer's keys as ``IssuerKeys`` finds and caches them: discovery, one rate-limited refetch for an
unknown key id, a real key rotation, and failing closed when the issuer cannot be reached."""

from __future__ import annotations

import httpx2
import pytest

from maya_tools.auth import IssuerUnavailable, JwtTokenVerifier, TokenRefused
from maya_tools.auth.issuer import REFETCH_COOLDOWN, IssuerKeys, discovery_urls
from tests.maya_tools.auth.conftest import FAMILIES, RESOURCE, Clock, Fetches
from tests.maya_tools.auth.test_tokens import parts, refusal, segment
from tests.maya_tools.live import free_port
from tests.oidc import OpenIDProvider

pytestmark = pytest.mark.anyio

MAX_AGE = 60.0  # shorter than the tokens' life (300 s), so a token outlives the keys' cache


async def test_keys_are_fetched_once_for_many_tokens(
    provider: OpenIDProvider, verifier: JwtTokenVerifier, client_http: httpx2.AsyncClient, fetches: Fetches
) -> None:
    for _ in range(3):
        await verifier.check(await provider.access_token(client_http))

    assert fetches.count(provider.metadata["jwks_uri"]) == 1
    assert fetches.count(f"{provider.issuer}/.well-known/openid-configuration") == 1


async def test_an_unknown_kid_refetches_the_keys_once_then_is_refused(
    provider: OpenIDProvider,
    verifier: JwtTokenVerifier,
    client_http: httpx2.AsyncClient,
    fetches: Fetches,
    clock: Clock,
) -> None:
    token = await provider.access_token(client_http)
    await verifier.check(token)
    header, claims, signature = parts(token)
    clock.advance(REFETCH_COOLDOWN)

    def with_kid(kid: str) -> str:
        return f"{segment({**header, 'kid': kid})}.{segment(claims)}.{signature}"

    assert await refusal(verifier, with_kid("rotated-away")) == "unknown_key"
    assert fetches.count(provider.metadata["jwks_uri"]) == 2

    for n in range(50):  # a flood of made-up key ids within the cooldown costs the issuer nothing
        assert await refusal(verifier, with_kid(f"made-up-{n}")) == "unknown_key"
    assert fetches.count(provider.metadata["jwks_uri"]) == 2

    clock.advance(REFETCH_COOLDOWN)
    assert await refusal(verifier, with_kid("later")) == "unknown_key"
    assert fetches.count(provider.metadata["jwks_uri"]) == 3


@pytest.mark.parametrize("alg", sorted(FAMILIES))
async def test_tokens_of_each_allowed_family_verify(
    alg: str, provider: OpenIDProvider, http: httpx2.AsyncClient, client_http: httpx2.AsyncClient, clock: Clock
) -> None:
    token = await provider.access_token(client_http, resource=FAMILIES[alg])
    verifier = JwtTokenVerifier(issuer=provider.issuer, resource=FAMILIES[alg], http=http, clock=clock)

    assert parts(token)[0]["alg"] == alg
    assert (await verifier.check(token)).principal.subject == "admin"


async def test_a_key_rotation_is_followed(
    http: httpx2.AsyncClient, client_http: httpx2.AsyncClient, clock: Clock, fetches: Fetches
) -> None:
    with OpenIDProvider([RESOURCE]).running() as provider:
        verifier = JwtTokenVerifier(issuer=provider.issuer, resource=RESOURCE, http=http, clock=clock)
        before = await provider.access_token(client_http)
        await verifier.check(before)

        provider.restart()  # new signing keys, the old ones gone from its JWKS
        after = await provider.access_token(client_http)
        assert parts(after)[0]["kid"] != parts(before)[0]["kid"]
        clock.advance(REFETCH_COOLDOWN)

        assert (await verifier.check(after)).principal.subject == "admin"
        assert fetches.count(provider.metadata["jwks_uri"]) == 2
        assert await refusal(verifier, before) == "unknown_key"


async def test_keys_older_than_max_age_are_fetched_again(
    provider: OpenIDProvider, http: httpx2.AsyncClient, client_http: httpx2.AsyncClient, fetches: Fetches, clock: Clock
) -> None:
    keys = IssuerKeys(provider.issuer, http, clock=clock, max_age=MAX_AGE)
    verifier = JwtTokenVerifier(issuer=provider.issuer, resource=RESOURCE, http=http, clock=clock, keys=keys)
    token = await provider.access_token(client_http)
    await verifier.check(token)
    clock.advance(MAX_AGE - 1)
    await verifier.check(token)
    assert fetches.count(provider.metadata["jwks_uri"]) == 1

    clock.advance(1)
    await verifier.check(token)

    assert fetches.count(provider.metadata["jwks_uri"]) == 2


async def test_the_keys_held_are_kept_while_the_issuer_is_down(
    http: httpx2.AsyncClient, client_http: httpx2.AsyncClient, clock: Clock, fetches: Fetches
) -> None:
    with OpenIDProvider([RESOURCE]).running() as provider:
        keys = IssuerKeys(provider.issuer, http, clock=clock, max_age=MAX_AGE)
        verifier = JwtTokenVerifier(issuer=provider.issuer, resource=RESOURCE, http=http, clock=clock, keys=keys)
        token = await provider.access_token(client_http)
        await verifier.check(token)
    clock.advance(MAX_AGE)

    assert (await verifier.check(token)).principal.subject == "admin"
    assert fetches.count(provider.metadata["jwks_uri"]) == 2  # the refresh was tried, and failed


async def test_metadata_naming_another_issuer_is_not_used(
    provider: OpenIDProvider, http: httpx2.AsyncClient, client_http: httpx2.AsyncClient, clock: Clock
) -> None:
    # The same provider, named by another spelling of its URL: RFC 8414 §3.3 wants the exact issuer.
    spelled = provider.issuer.replace("127.0.0.1", "localhost")
    verifier = JwtTokenVerifier(issuer=spelled, resource=RESOURCE, http=http, clock=clock)
    token = await provider.access_token(client_http)
    header, claims, signature = parts(token)
    claims["iss"] = spelled

    with pytest.raises(IssuerUnavailable, match="names issuer"):
        await verifier.check(f"{segment(header)}.{segment(claims)}.{signature}")


async def test_an_unreachable_issuer_fails_closed_and_is_not_hammered(
    http: httpx2.AsyncClient, fetches: Fetches, clock: Clock
) -> None:
    issuer = f"http://127.0.0.1:{free_port()}"
    keys = IssuerKeys(issuer, http, clock=clock)

    for _ in range(5):
        with pytest.raises(IssuerUnavailable, match="cannot reach"):
            await keys.key("any", lambda jwk: True)

    assert len(fetches.urls) == 1
    clock.advance(REFETCH_COOLDOWN)
    with pytest.raises(IssuerUnavailable):
        await keys.key("any", lambda jwk: True)
    assert len(fetches.urls) == 2


async def test_a_verifier_of_an_unreachable_issuer_accepts_nothing(http: httpx2.AsyncClient, clock: Clock) -> None:
    issuer = f"http://127.0.0.1:{free_port()}"
    verifier = JwtTokenVerifier(issuer=issuer, resource=RESOURCE, http=http, clock=clock)
    token = f"{segment({'alg': 'RS256', 'typ': 'at+jwt', 'kid': 'k'})}.{segment({'iss': issuer})}.c2ln"

    assert await verifier.verify_token(token) is None
    with pytest.raises(IssuerUnavailable):
        await verifier.check(token)


@pytest.mark.parametrize("issuer", ["http://idp.door.test", "ftp://127.0.0.1", "https://"])
def test_an_issuer_must_be_https_or_loopback(issuer: str) -> None:
    with pytest.raises(ValueError, match="must be an https URL"):
        IssuerKeys(issuer, httpx2.AsyncClient())


def test_discovery_tries_openid_then_rfc8414() -> None:
    assert discovery_urls("https://idp.door.test") == [
        "https://idp.door.test/.well-known/openid-configuration",
        "https://idp.door.test/.well-known/oauth-authorization-server",
    ]
    assert discovery_urls("https://idp.door.test/tenant/") == [
        "https://idp.door.test/tenant/.well-known/openid-configuration",
        "https://idp.door.test/.well-known/oauth-authorization-server/tenant",
        "https://idp.door.test/.well-known/openid-configuration/tenant",
    ]


async def test_a_made_up_kid_is_shown_cut_short(
    provider: OpenIDProvider, verifier: JwtTokenVerifier, client_http: httpx2.AsyncClient
) -> None:
    header, claims, signature = parts(await provider.access_token(client_http))
    kid = "k" * 5000

    with pytest.raises(TokenRefused) as refused:
        await verifier.check(f"{segment({**header, 'kid': kid})}.{segment(claims)}.{signature}")

    assert refused.value.reason == "unknown_key"
    assert "k" * 40 in refused.value.detail and "k" * 41 not in refused.value.detail

"""What the sign-in and ``/connect`` pages share: their templates, the approval page's hardening
headers, a small form reader, the same-origin check of a POST, and the form tokens (``FormTokens``).

Every response is ``no-store`` (a session or a connected account is never cached), cannot be framed,
loads nothing (CSP ``default-src 'none'``: the pages have no JavaScript), sends no ``Referer`` off
the site, and posts forms only to this server.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import secrets
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from starlette.requests import Request
from starlette.responses import HTMLResponse

if TYPE_CHECKING:
    import jinja2

HEADERS = {
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'",
    "Referrer-Policy": "same-origin",
    "X-Content-Type-Options": "nosniff",
}
FORM_BODY_LIMIT = 8_192
FORM_KEY_LABEL = b"maya-tools form tokens v1"
"""What a form key is derived from a ``MAYA_CREDENTIAL_KEY`` key under (that key itself is never used)."""


class FormTokens:
    """The token a server page's form carries back: HMAC-SHA256 under a server key, over the browser's
    own id (its session cookie, or the approval page's cookie) and what the form is for.

    Holding a link is not enough to post its form: the token names the browser that was shown the page,
    and only the server can compute it. ``keys`` are newest first: tokens are made with the newest and
    any of them is accepted, so replicas part-way through a ``MAYA_CREDENTIAL_KEY`` rotation agree.
    """

    def __init__(self, keys: Sequence[bytes]) -> None:
        if not keys or any(len(key) < 32 for key in keys):
            raise ValueError("form token keys are at least 32 bytes each")
        self._keys = list(keys)

    @classmethod
    def random(cls) -> FormTokens:
        """A key for this process only (a page decided by the process that served it)."""
        return cls([secrets.token_bytes(32)])

    @classmethod
    def derived(cls, keys: Sequence[bytes]) -> FormTokens:
        """Keys every replica derives alike from the shared ``MAYA_CREDENTIAL_KEY`` keys."""
        return cls([hmac.new(key, FORM_KEY_LABEL, hashlib.sha256).digest() for key in keys])

    @staticmethod
    def _message(browser: str, purpose: str) -> bytes:
        return f"{len(purpose)}:{purpose}\n{browser}".encode()

    def token(self, browser: str, purpose: str) -> str:
        return hmac.new(self._keys[0], self._message(browser, purpose), hashlib.sha256).hexdigest()

    def check(self, browser: str | None, purpose: str, given: str | None) -> bool:
        """Whether ``given`` is the token of ``browser`` for ``purpose`` under any of the keys."""
        if not browser or not given:
            return False
        message = self._message(browser, purpose)
        return any(
            hmac.compare_digest(given.encode(), hmac.new(key, message, hashlib.sha256).hexdigest().encode())
            for key in self._keys
        )


@functools.cache
def environment() -> jinja2.Environment:
    """The pages' templates, loaded when the first page is served: a server that shows none (stdio)
    never imports jinja2 for them."""
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def page(
    template: str, *, status_code: int = 200, headers: dict[str, str] | None = None, **context: Any
) -> HTMLResponse:
    html = environment().get_template(template).render(**context)
    return HTMLResponse(html, status_code=status_code, headers={**HEADERS, **(headers or {})})


def origin_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def same_origin(request: Request, origin: str) -> bool:
    """Whether a POST comes from this server's own pages, as far as the browser says: an ``Origin``
    other than ours, or a ``Sec-Fetch-Site`` other than same-origin, is a cross-site post."""
    sent = request.headers.get("origin")
    if sent is not None and sent != origin:
        return False
    return request.headers.get("sec-fetch-site", "same-origin") in ("same-origin", "none")


async def read_form(request: Request, limit: int = FORM_BODY_LIMIT) -> dict[str, str] | None:
    """The posted form, first value per field; None when it is not a small urlencoded form."""
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/x-www-form-urlencoded":
        return None
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            return None
    fields = parse_qs(body.decode("utf-8", errors="replace"), keep_blank_values=True)
    return {name: values[0] for name, values in fields.items()}

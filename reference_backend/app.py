"""The FastAPI application: the Door DKS public API under ``/v1/public`` and the admin plane.

Where things live: ``edge`` (request ids, fault rules, the request log, problem+json answers),
``bodies`` (step 5: body bytes, JSON, request models), ``routes`` (the public API), ``admin`` (the
admin plane), ``openapi`` (the published schema). Every error is ``application/problem+json``
naming the rule; no input yields a 500.

The routes are built and prepared once per process and read the world from ``app.state.backend``,
so ``create_app`` is cheap, an app's first request is too, and one app can be pointed at another
backend (``app.state.backend = …``).
"""

from __future__ import annotations

from fastapi import FastAPI

from reference_backend import admin, routes
from reference_backend.backend import ReferenceBackend
from reference_backend.clock import ManualClock
from reference_backend.edge import RequestMiddleware, install_error_handlers, problem_response
from reference_backend.errors import PROBLEM_BASE
from reference_backend.openapi import CROSS_FIELD_RULES, install_openapi


def create_app(backend: ReferenceBackend | None = None, *, admin_token: str | None = None) -> FastAPI:
    """The reference backend app; ``app.state.backend`` is the world, the admin plane needs ``admin_token``."""
    world = backend if backend is not None else ReferenceBackend(ManualClock())
    app = FastAPI(
        title="Door DKS node pools (reference backend)",
        version="1.0.0",
        description="A faithful stand-in for the Door Kubernetes Service node-pool public API.",
        # A trailing slash is a 404 problem naming the fix, not a bodiless 307 built from the Host header.
        redirect_slashes=False,
    )
    app.state.backend = world
    app.state.admin_token = admin_token
    app.add_middleware(RequestMiddleware)
    install_error_handlers(app)
    # The prepared route objects themselves, not ``include_router``: FastAPI prepares an included
    # router's routes again for each app on its first request (~20 ms), and an embedded server makes
    # an app per backend. The routes hold no per-app state.
    app.router.routes.extend(routes.router.routes)
    if admin_token:
        app.router.routes.extend(admin.router.routes)
    install_openapi(app)
    return app


__all__ = ["CROSS_FIELD_RULES", "PROBLEM_BASE", "create_app", "problem_response"]

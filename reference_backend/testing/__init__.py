"""The reference backend as something to test against: a live backend on loopback (``live``), its admin
plane as a client (``admin_client``), a guard that keeps a test on loopback (``guard``) and the pytest
plugin that offers them as fixtures (``plugin``, loaded by the ``pytest11`` entry point).

Nothing is imported here, so that pytest loading the plugin costs no FastAPI or uvicorn import in a
project that never asks for a ``door``.
"""

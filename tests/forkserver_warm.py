"""Imported once, by the fork server only (``tests.launch.PRELOAD``): what every forked `maya-tools`
process would otherwise do first, done before the fork so that each start inherits it.

Building one server fills the per-process caches (the tools' JSON schemas, the card view's HTML,
the templates), the process's verifying TLS context is built (a server pointed at Door uses it), and
loading a uvicorn config imports the protocol and lifespan modules uvicorn imports lazily. Nothing here starts a thread, an event loop or a socket, so forking after it is safe.
"""

from __future__ import annotations

import uvicorn
from starlette.applications import Starlette

from backend_client.tls import verifying_tls
from maya_tools.server import build_server
from maya_tools.settings import Settings

build_server(Settings(card_store=":memory:"))
verifying_tls()
uvicorn.Config(Starlette(), log_level="critical").load()

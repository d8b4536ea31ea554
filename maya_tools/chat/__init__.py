"""The Maya chat: an MCP client of the maya-tools server (DESIGN.md "Packages").

It imports ``prompts`` and the MCP SDK's client, never the server's modules: what the server
offers it learns from ``tools/list`` like any other client.

- ``app``: ``maya-tools chat``, the session and its connection to the server (stdio or HTTP).
- ``terminal``: input, output, Ctrl-C and the y/N approval of a card.
- ``model``: the Anthropic loop; ``offline`` and ``interpreter``: Maya without a model.
- ``settings``: the chat's environment, read once.
"""

"""How a person approves a card: the approval channels, in one room.

The model never approves (DESIGN.md property 1), so every channel here carries the decision on a
path the model cannot drive. Each client gets the best channel it declares (DESIGN.md "Channels,
chosen per client"), chosen once per call in ``form.ask``:

1. ``app_card`` + ``app_secret``: the MCP Apps card view, for a client that declares the
   ``io.modelcontextprotocol/ui`` extension (Claude, ChatGPT, VS Code, Goose). The change tool returns
   the pending card with its ``ui://`` view; the view's Approve calls an app-only tool with a
   one-time secret that travels only in the result's ``_meta``. Such a client gets no elicitation,
   because a host that renders the card would otherwise show the same question twice.
2. ``form``: a form elicitation (VS Code, Claude Code, Cursor, the Maya terminal chat), the shortest
   path for a client that can ask the person inline.
3. ``page`` + ``page_link``: a URL elicitation of a one-time link to the server's approval page, for
   a client with URL mode only. ``page_link`` carries the link on 2026-07-28 as an
   ``input_required`` round (never ``-32042``); ``page`` serves the HTML form. Over HTTP with OAuth
   the page also requires the browser sign-in of the card's own person (the spec's "verify the
   identity of the user who opens the URL"); over stdio it is one person on loopback.
4. None of these: the pending card and which clients can approve it (fail closed, property 9).

``request_state`` seals the 2026-07-28 rounds every channel rides on, bound to the caller, so a
round replayed by another person or replica-hopped without the shared key changes nothing.
"""

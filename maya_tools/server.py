"""The maya-tools MCP server: read tools always, change tools unless read-only."""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from importlib import metadata
from typing import TYPE_CHECKING, Any, get_type_hints

from mcp.server.apps import client_supports_apps
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError, UnexpectedToolError
from mcp.server.mcpserver.tools import Tool
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    CallToolResult,
    GetPromptResult,
    Icon,
    InputRequiredResult,
    ListToolsResult,
    PaginatedRequestParams,
    ToolAnnotations,
)
from mcp_types import Tool as ListedTool
from pydantic import AnyUrl, ValidationError

import prompts
from maya_tools import prompts as mcp_prompts
from maya_tools.channels.app_card import build_apps
from maya_tools.channels.app_secret import APP_URI, META_KEY
from maya_tools.channels.connect import ask_to_connect, connected_after_link, not_connected, refused_token
from maya_tools.channels.form import ASKED, decline_as
from maya_tools.channels.page import ApprovalPages
from maya_tools.channels.page_link import LinkAsked, rides_input_required
from maya_tools.channels.request_state import request_state_security
from maya_tools.errors import bounded
from maya_tools.runtime import Runtime, Transport, open_runtime, runtime_of
from maya_tools.settings import Settings, check_replicas
from maya_tools.tools import cards, changes, plans, read
from maya_tools.tools.card_texts import change_answer
from maya_tools.tools.changes import CHANGE_TOOLS
from maya_tools.tools.schemas import compact_tool, publish_compact

if TYPE_CHECKING:
    from maya_tools.embedded import ReferenceBackend

INSTRUCTIONS = prompts.render("instructions.md.j2")
VERSION = metadata.version("maya-tools")
SHOWN_INPUT = 64  # with its quotes and ")" still one run under errors.SHOWN_RUN
SHOWN_PROBLEMS = 5


def shown_input(value: Any) -> str:
    """A given value as the caller wrote it (JSON), cut to ``SHOWN_INPUT`` characters."""
    if isinstance(value, str) and len(value) > SHOWN_INPUT:
        value = value[:SHOWN_INPUT]  # no need to encode megabytes to show 80 characters
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= SHOWN_INPUT else text[: SHOWN_INPUT - 1] + "…"


def argument_problems(error: ValidationError) -> str:
    """Pydantic's report in a person's words: each argument at fault, what is wrong, what was given.

    No model class names, no links to pydantic's site, and a given value (or a map key in an
    argument's path) is cut short so a huge map or name does not flood the answer.
    """
    problems: list[str] = []
    errors = error.errors(include_url=False)
    for item in errors[:SHOWN_PROBLEMS]:
        where = ".".join(str(part) for part in item["loc"]) or "arguments"
        if len(where) > SHOWN_INPUT:
            where = where[: SHOWN_INPUT - 1] + "…"
        if item["type"] == "missing":
            problems.append(f"`{where}` is required")
            continue
        given = shown_input(item.get("input"))
        problems.append(f"`{where}`: {item['msg'][:1].lower()}{item['msg'][1:]} (given: {given})")
    if len(errors) > SHOWN_PROBLEMS:
        problems.append(f"and {len(errors) - SHOWN_PROBLEMS} more")
    return "; ".join(problems)


_TOOLS: dict[tuple[Any, ...], Tool] = {}
"""Each tool as the SDK first built it from its function, by the function's code and registration."""

_OUTPUTS: dict[Any, tuple[Any, bool, dict[str, Any]]] = {}
"""The output model, wrapping and derived (not yet compacted) output schema of each return annotation."""


def _tool_from(
    fn: Callable[..., Any],
    name: str | None,
    title: str | None,
    description: str | None,
    annotations: ToolAnnotations | None,
    meta: dict[str, Any] | None,
    structured_output: bool | None,
) -> Tool:
    """``Tool.from_function``, except that an output schema is derived once per return annotation.

    Seven change tools return ``Annotated[CallToolResult, ChangeResult]``, whose schema (the whole card)
    is most of what deriving one costs; a cold start (an IDE starting the server) paid it seven times.
    A later tool with the same annotation is built without structured output and given the model and
    a copy of the schema: ``FuncMetadata``'s fields are read live, as the SDK documents, and the
    ``tools/list`` snapshot (tests/maya_tools/test_tools_list.py) shows the schemas unchanged."""
    try:
        returns = get_type_hints(fn, include_extras=True).get("return") if structured_output is not False else None
    except (NameError, TypeError):  # the SDK reports an annotation it cannot read in its own words
        returns = None
    known = _OUTPUTS.get(returns) if returns is not None else None
    tool = Tool.from_function(
        fn,
        name=name,
        title=title,
        description=description,
        annotations=annotations,
        meta=meta,
        structured_output=False if known is not None else structured_output,
    )
    metadata = tool.fn_metadata
    if known is not None:
        metadata.output_model, metadata.wrap_output, schema = known
        metadata.output_schema = copy.deepcopy(schema)
    elif returns is not None and metadata.output_schema is not None:
        _OUTPUTS[returns] = (metadata.output_model, metadata.wrap_output, copy.deepcopy(metadata.output_schema))
    return tool


class MayaServer(MCPServer[Runtime]):
    """``MCPServer`` whose refusals of a call, not only of a tool body, say what to do."""

    def __init__(
        self, *args: Any, read_only: bool = False, pages: ApprovalPages, unknown_tool_note: str = "", **kwargs: Any
    ) -> None:
        self.published: set[str] = set()
        """The tools whose schemas ``add_tool`` copied in their published (compact) form (the SDK's
        ``__init__`` adds the extensions' tools)."""
        super().__init__(*args, **kwargs)
        self.read_only = read_only
        self.unknown_tool_note = unknown_tool_note
        """Said after an unknown tool's refusal: where this endpoint's missing tools are."""
        self.pages = pages
        """The approval page (URL elicitation); over streamable HTTP, mount ``pages.app`` next to /mcp."""

    def add_tool(
        self,
        fn: Callable[..., Any],
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        annotations: ToolAnnotations | None = None,
        icons: list[Icon] | None = None,
        meta: dict[str, Any] | None = None,
        structured_output: bool | None = None,
    ) -> None:
        """The SDK's, except that a tool's schemas are derived and compacted once per process, not once
        per server.

        Deriving them (pydantic models and JSON schemas) is nearly all of ``build_server``'s ~30 ms, which
        every in-memory test pays, and compacting them (``compact_tool``) most of the rest. A tool function
        that closes over nothing makes the same tool from the same code, so a copy of the first one, whose
        schemas are published already, serves, with its own schema dicts; its name goes in ``published``
        so that ``publish_compact`` leaves it alone.
        """
        if fn.__closure__ is not None or icons is not None or self._tool_manager.get_tool(name or fn.__name__):
            super().add_tool(fn, name, title, description, annotations, icons, meta, structured_output)
            return
        key = (
            fn.__code__,
            repr(fn.__defaults__),
            repr(fn.__kwdefaults__),
            name,
            title,
            description,
            annotations.model_dump_json() if annotations is not None else None,
            structured_output,
            json.dumps(meta, sort_keys=True),
        )
        first = _TOOLS.get(key)
        if first is None:
            first = _TOOLS[key] = _tool_from(fn, name, title, description, annotations, meta, structured_output)
            compact_tool(first)
        metadata = first.fn_metadata.model_copy(
            update={"output_schema": copy.deepcopy(first.fn_metadata.output_schema)}
        )
        tool = first.model_copy(
            update={
                "fn": fn,
                "parameters": copy.deepcopy(first.parameters),
                "fn_metadata": metadata,
                "meta": copy.deepcopy(first.meta),
            }
        )
        self._tool_manager._tools[tool.name] = tool
        self.published.add(tool.name)

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Runtime, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        if self.read_only and name in CHANGE_TOOLS:
            raise ToolError(
                f"{name} is not available: this server runs read-only (`maya-tools serve --read-only` or "
                "MAYA_READ_ONLY=1), so it offers no change tools and nothing was changed. The read tools work; "
                "to change a pool, use a server started without read-only mode."
            )
        if self._tool_manager.get_tool(name) is None:
            # Both versions' tools pages name an unknown tool a protocol error, -32602; the SDK's
            # own answer, an isError result, reads as if the tool ran and failed.
            known = ", ".join(t.name for t in self._tool_manager.list_tools() if not app_only(t)) or "none"
            said = UNKNOWN_TOOL.format(name=shown_input(name), known=known) + self.unknown_tool_note
            raise MCPError(code=INVALID_PARAMS, message=said)
        asked: dict[str, str] = {}
        if context is not None:
            await connected_after_link(runtime_of(context), context)
        token = ASKED.set(asked)
        try:
            try:
                result = await super().call_tool(name, arguments, context)
            except LinkAsked as asking:
                return asking.result
            except (ToolError, UnexpectedToolError) as exc:
                # One mechanism for every tool: whichever reached for Door without the person's own
                # Door token is answered by "Connect your Door account" (channels.connect).
                missing = not_connected(exc)
                if missing is None and context is not None:
                    missing = await refused_token(runtime_of(context), context, exc)
                if missing is None or context is None:
                    raise
                bound = self._tool_manager.get_tool(name)
                view = ((bound.meta or {}).get("ui") or {}).get("resourceUri") if bound is not None else None
                return await ask_to_connect(runtime_of(context), context, missing, name, viewed=view == APP_URI)
            secret = asked.get("app_secret")
            if secret is not None and isinstance(result, CallToolResult) and not result.is_error:
                # The view's one-time secret travels in `_meta` only: never in content or
                # structuredContent, which the model reads (DESIGN.md channel 1).
                meta = {**(result.meta or {}), META_KEY: {"cardId": asked["card"], "secret": secret}}
                result = result.model_copy(update={"meta": meta})
            waiting = asked.get("waiting")
            if waiting is not None and isinstance(result, CallToolResult) and not result.is_error:
                # The view disables Approve with this reason: the policy waits for other people (issue 28).
                meta = {**(result.meta or {}), META_KEY: {"cardId": asked["card"], "waiting": waiting}}
                result = result.model_copy(update={"meta": meta})
            return result
        except UnexpectedToolError:
            raise
        except ToolError as exc:
            if asked.get("card") and context is not None and _unreadable_answer(exc):
                # The person's client accepted the card's form without a readable `approve: true`
                # (no content, or content off the schema): a decline like any other (property 1).
                runtime = runtime_of(context)
                declined = await decline_as(runtime, context, asked["card"], UNREADABLE)
                tool = self._tool_manager.get_tool(name)
                assert tool is not None
                converted = tool.fn_metadata.convert_result(change_answer(declined))
                assert isinstance(converted, CallToolResult)
                return converted
            cause = exc.__cause__
            if not isinstance(cause, ValidationError):
                # The SDK logs this text and the model reads it: neither gets a megabyte echo.
                raise ToolError(bounded(str(exc))) from exc
            # Not chained to the ValidationError: the SDK would log its field paths, and a map key
            # in one can be any size. The sentence below names the fields, cut short.
            raise ToolError(
                bounded(
                    f"Error executing tool {name}: invalid arguments, so nothing was done: {argument_problems(cause)}. "
                    "Fix them (the tool's input schema describes each one) and call it again."
                )
            ) from None
        finally:
            ASKED.reset(token)

    async def _handle_list_tools(
        self, ctx: ServerRequestContext[Runtime], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        """The SDK's listing, less the app-only tools for a client that declared no MCP Apps extension.

        ``decide_card`` is the card view's: only an Apps host renders the view that calls it, so any
        other client would only list a tool it can never use. It stays callable (an Apps host's view
        calls it), guarded by the view's one-time secret. On 2026-07-28 the capabilities arrive with
        each request, and ``ctx`` carries that request's.
        """
        listed = await super()._handle_list_tools(ctx, params)
        if client_supports_apps(ctx):
            return listed
        return listed.model_copy(update={"tools": [tool for tool in listed.tools if not app_only(tool)]})

    async def get_prompt(
        self, name: str, arguments: dict[str, Any] | None = None, context: Context[Runtime, Any] | None = None
    ) -> GetPromptResult | InputRequiredResult:
        """The SDK's, except that an unknown prompt or a missing argument is ``-32602`` (Invalid params,
        as both protocol versions name it), saying what exists, instead of a generic error."""
        prompt = self._prompt_manager.get_prompt(name)
        if prompt is None:
            known = ", ".join(p.name for p in self._prompt_manager.list_prompts()) or "none"
            raise MCPError(code=INVALID_PARAMS, message=UNKNOWN_PROMPT.format(name=shown_input(name), known=known))
        given = arguments or {}
        missing = [a.name for a in prompt.arguments or [] if a.required and a.name not in given]
        if missing:
            raise MCPError(
                code=INVALID_PARAMS,
                message=MISSING_ARGUMENTS.format(name=name, missing=", ".join(f"`{m}`" for m in missing)),
            )
        return await super().get_prompt(name, arguments, context)

    async def read_resource(
        self, uri: AnyUrl | str, context: Context[Runtime, Any] | None = None
    ) -> Iterable[ReadResourceContents] | InputRequiredResult:
        """The SDK's, except that an unknown resource answers the code of the negotiated version:
        ``-32002`` on 2025-11-25, ``-32602`` on 2026-07-28 (which retired ``-32002``)."""
        try:
            return await super().read_resource(uri, context)
        except ResourceNotFoundError as exc:
            modern = context is None or context.protocol_version is None or rides_input_required(context)
            known = ", ".join(str(r.uri) for r in self._resource_manager.list_resources()) or "none"
            raise MCPError(
                code=INVALID_PARAMS if modern else RESOURCE_NOT_FOUND_2025_11_25,
                message=UNKNOWN_RESOURCE.format(uri=shown_input(str(uri)), known=known),
                data={"uri": str(uri)[:SHOWN_URI]},
            ) from exc


RESOURCE_NOT_FOUND_2025_11_25 = -32002
"""Resource not found, as 2025-11-25 names it; 2026-07-28 retired it for ``-32602`` (``mcp_types`` keeps
no constant for a retired code)."""
SHOWN_URI = 256
UNKNOWN_TOOL = "Unknown tool {name}. This server's tools: {known}; tools/list gives each one's input schema."
UNKNOWN_PROMPT = "Unknown prompt {name}. This server's prompts: {known}; prompts/list gives each one's arguments."
MISSING_ARGUMENTS = (
    "Prompt `{name}` needs {missing}, so nothing was rendered; prompts/list describes its arguments. "
    "Call prompts/get again with them."
)
UNKNOWN_RESOURCE = (
    "Unknown resource {uri}. This server's resources: {known} (resources/list); a confirmation card "
    "is read with the get_card tool, not as a resource."
)


def app_only(tool: ListedTool | Tool) -> bool:
    """Whether an MCP Apps host's view alone uses ``tool`` (``_meta.ui.visibility`` without ``"model"``)."""
    ui = (tool.meta or {}).get("ui")
    visibility = ui.get("visibility") if isinstance(ui, dict) else None
    return isinstance(visibility, list) and "model" not in visibility


UNREADABLE = "the form was accepted without a readable approve: true, which counts as a decline"


def _unreadable_answer(error: ToolError) -> bool:
    """The SDK's refusal of an accepted elicitation it could not read as the card's form."""
    said = str(error)
    return any(words in said.lower() for words in ("accepted elicitation", "invalid elicitation response"))


def build_server(
    settings: Settings,
    *,
    transport: Transport = "memory",
    backend: ReferenceBackend | None = None,
    page_url: str | None = None,
) -> MayaServer:
    """The server. ``backend`` injects a reference backend (tests drive its clock); with no
    ``DOOR_API_URL`` and no ``backend`` an embedded one with the demo seed is started.

    ``page_url`` is where the approval page is reached when the caller serves ``pages.app`` itself
    (streamable HTTP); without it the page gets its own loopback server on first use."""
    check_replicas(settings, transport)
    if settings.policy is not None or settings.policy_file is not None:
        from maya_tools.policy import with_policy  # a server without MAYA_POLICY never reads TOML

        settings = with_policy(settings, transport)
    pages = ApprovalPages(page_url, via=settings.replica)

    @asynccontextmanager
    async def lifespan(_: MCPServer[Any]) -> AsyncIterator[Runtime]:
        async with open_runtime(settings, transport, backend=backend) as runtime:
            runtime.pages = pages
            pages.runtime = runtime
            try:
                yield runtime
            finally:
                pages.runtime = None
                await pages.close()

    mcp = MayaServer(
        "maya-tools",
        extensions=[] if settings.read_only else [build_apps()],
        version=VERSION,
        instructions=INSTRUCTIONS,
        lifespan=lifespan,
        request_state_security=request_state_security(settings),
        read_only=settings.read_only,
        pages=pages,
    )
    read.register(mcp)
    cards.register(mcp)
    mcp_prompts.register(mcp)
    if not settings.read_only:
        changes.register(mcp)
        plans.register(mcp)
    publish_compact(mcp, published=mcp.published)
    return mcp


READ_ONLY_PATH = "/mcp/read-only"
READ_ONLY_NOTE = (
    f" This endpoint, {READ_ONLY_PATH}, serves only the read tools and changes nothing; change tools are on /mcp."
)


def build_read_only_server(main: MayaServer, settings: Settings) -> MayaServer:
    """The read tools of ``main``, for ``/mcp/read-only``: only tools annotated read-only are registered
    (as ``MAYA_READ_ONLY`` does), so a change tool there is an unknown tool. It shares ``main``'s runtime
    (card store, Door client, sign-in), which ``main``'s lifespan opens: enter that one first."""

    @asynccontextmanager
    async def lifespan(_: MCPServer[Any]) -> AsyncIterator[Runtime]:
        runtime = main.pages.runtime
        if runtime is None:
            raise RuntimeError("the read-only endpoint starts after /mcp, whose lifespan opens the runtime")
        yield runtime

    mcp = MayaServer(
        "maya-tools",
        extensions=[],
        version=VERSION,
        instructions=INSTRUCTIONS,
        lifespan=lifespan,
        request_state_security=request_state_security(settings),
        pages=main.pages,
        unknown_tool_note=READ_ONLY_NOTE,
    )
    read.register(mcp)
    cards.register(mcp)
    mcp_prompts.register(mcp)
    publish_compact(mcp, published=mcp.published)
    return mcp

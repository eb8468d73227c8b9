"""`toolgate mcp`: the door served over stdio (one agent, named when started) or Streamable HTTP
(a bearer token per agent, checked before anything is published: no token, no call).

Over HTTP every request's token is looked up (its SHA-256) in `toolgate.agent_tokens`; the agent
it names must be active, and this server must hold that agent's signing key in its keyring
(`$TOOLGATE_HOME/agents`), since it signs each proposal as the agent. A request without a valid
token is answered 401 by the transport, before the MCP layer sees it.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Any

import mcp_types as types
import uvicorn
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from toolgate import __version__
from toolgate.door import calls, tasks
from toolgate.door.session import Caller, Door
from toolgate.door.task_door import TaskDoor

log = logging.getLogger("toolgate.door")
NAME = "toolgate"
INSTRUCTIONS = (
    "Each tool is a contracted tool call that passes toolgate's gates (validation, policy, human approval, "
    "exactly-once execution). structuredContent is the call's observation. A refused call says its field "
    "errors and next_action. To retry a call without a second effect, send the same _meta "
    '"toolgate/operation_id". A call held for approval reports progress; ask toolgate_call_status later '
    "with its call_id if the result says it is still awaiting approval. A client that declares the Tasks "
    "extension (io.modelcontextprotocol/tasks) gets a held call as a task instead: its id is the call_id, "
    "tasks/get says who must approve and by when, and tasks/cancel withdraws the proposal."
)

CallerOf = Callable[[ServerRequestContext[Any, Any], types.RequestParamsMeta | None], Caller | None]


def build_server(door: Door, caller_of: CallerOf) -> Server[Any]:
    """The MCP server: tools/list from the door, tools/call under the caller `caller_of` names."""

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=door.listed)

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | dict[str, Any]:
        caller = caller_of(ctx, params.meta)
        if caller is None:
            return types.CallToolResult(
                content=[types.TextContent(text="no agent for this session: not authenticated")], is_error=True
            )
        sent = 0

        async def progress(message: str) -> None:
            nonlocal sent
            sent += 1
            await ctx.session.report_progress(float(sent), None, message)

        meta = dict(params.meta) if params.meta else None
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        as_task = held_tasks.created if modern and tasks.declared(ctx.meta) else None
        return await door.call(caller, params.name, params.arguments, meta, progress, as_task)

    held_tasks = TaskDoor(door)
    server: Server[Any] = Server(
        NAME,
        version=__version__,
        title="toolgate",
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
    )
    # Registered as a method, not `on_call_tool`: a held call may answer with a task, not a result.
    server.add_request_handler("tools/call", types.CallToolRequestParams, call_tool)
    serve_tasks(server, held_tasks, caller_of)
    return server


def serve_tasks(server: Server[Any], held_tasks: TaskDoor, caller_of: CallerOf) -> None:
    """tasks/get, tasks/cancel and tasks/result (door/task_door.py), and the Tasks extension
    advertised."""

    def who(ctx: ServerRequestContext[Any, Any]) -> Caller:
        caller = caller_of(ctx, ctx.meta)
        if caller is None:
            raise MCPError(INVALID_PARAMS, "no agent for this session: not authenticated")
        return caller

    def modern(ctx: ServerRequestContext[Any, Any]) -> bool:
        return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS

    async def get(ctx: ServerRequestContext[Any, Any], params: types.GetTaskRequestParams) -> dict[str, Any]:
        return await held_tasks.get(who(ctx), params.task_id, modern(ctx))

    async def cancel(ctx: ServerRequestContext[Any, Any], params: types.CancelTaskRequestParams) -> dict[str, Any]:
        return await held_tasks.cancel(who(ctx), params.task_id)

    async def result(
        ctx: ServerRequestContext[Any, Any], params: types.GetTaskPayloadRequestParams
    ) -> types.CallToolResult:
        return await held_tasks.result(who(ctx), params.task_id, modern(ctx))

    server.add_request_handler("tasks/get", types.GetTaskRequestParams, get)
    server.add_request_handler("tasks/cancel", types.CancelTaskRequestParams, cancel)
    server.add_request_handler("tasks/result", types.GetTaskPayloadRequestParams, result)
    server.extensions[tasks.EXTENSION] = {}


def _meta_dict(meta: types.RequestParamsMeta | None) -> dict[str, Any]:
    return dict(meta) if meta else {}


async def serve_stdio(door: Door, agent_id: str) -> None:
    """One session on stdin/stdout, signed as `agent_id` (its key in the local keyring)."""
    tenant = str(door.client.signer(agent_id).tenant_id)
    process_run = f"mcp-{uuid.uuid4().hex[:16]}"

    def caller_of(ctx: ServerRequestContext[Any, Any], meta: types.RequestParamsMeta | None) -> Caller:
        return Caller(agent_id, tenant, calls.run_key(None, _meta_dict(meta), process_run))

    server = build_server(door, caller_of)
    await door.open()
    try:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
    finally:
        await door.close()


class TokenVerifier:
    """Bearer tokens of registered agents (`toolgate agents token`), for agents whose key this
    server holds. Never logs a token."""

    def __init__(self, door: Door) -> None:
        self.door = door

    async def verify_token(self, token: str) -> AccessToken | None:
        found = await self.door.agent_of_token(token)
        if found is None:
            return None
        agent_id, tenant = found
        if not self.door.can_sign_as(agent_id):
            log.warning("agent has a token but no signing key here", extra={"action": "token_refused"})
            return None
        return AccessToken(token=token, client_id=agent_id, scopes=[], subject=tenant)


def _http_caller(ctx: ServerRequestContext[Any, Any], meta: types.RequestParamsMeta | None) -> Caller | None:
    """The agent of the request's bearer token, and the run of its MCP session."""
    request = ctx.request
    user = getattr(request, "scope", {}).get("user") if request is not None else None
    token = user.access_token if isinstance(user, AuthenticatedUser) else get_access_token()
    if token is None or token.subject is None:
        return None
    headers = getattr(request, "headers", None)
    session_id = headers.get("mcp-session-id") if headers is not None else None
    return Caller(token.client_id, token.subject, calls.run_key(session_id, _meta_dict(meta), ""))


async def serve_http(door: Door, host: str, port: int) -> None:
    """Streamable HTTP at http://HOST:PORT/mcp, every request with an agent's bearer token."""
    server = build_server(door, _http_caller)
    app = server.streamable_http_app(
        host=host,
        auth=AuthSettings(issuer_url=f"http://{host}:{port}", resource_server_url=None),
        token_verifier=TokenVerifier(door),
    )
    await door.open()
    try:
        config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False)
        await uvicorn.Server(config).serve()
    finally:
        await door.close()

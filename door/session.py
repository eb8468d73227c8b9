"""The door's I/O: a `tools/call` proposed through `ToolgateClient`, waited for, answered.

One `Door` per server process: one Kafka client (its observation feed serves every session), one
small Postgres pool (tokens, a held call's approval), the contract tools. A call is proposed under
the session's agent, then waited for in short steps, so a cancelled request stops only the waiting:
the proposal is out, and its observation still lands on the tenant's topic (`toolgate_call_status`
finds it). While a call is held for approval, each step reads its approval from Postgres and says
it in a progress notification; past the wait limit the result says it is awaiting approval. A
client that takes tasks gets a held call as a task at once instead (`as_task`, door/task_door.py).
"""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
from mcp_types import CallToolResult, Tool
from psycopg_pool import AsyncConnectionPool

from toolgate.client import Observed, Proposed, ToolgateClient
from toolgate.contracts.registry import load_registry
from toolgate.door import calls, results, tools
from toolgate.kafka_security import DOOR
from toolgate.ops import agent_tokens
from toolgate.schemas.reference import observation_schema
from toolgate.settings import Settings
from toolgate.store import approvals
from toolgate.store import calls as registered_calls

log = logging.getLogger("toolgate.door")
STEP_S = 1.0  # how long one step of a wait blocks a worker thread
MAX_KNOWN = 10_000  # calls remembered for toolgate_call_status (the topic answers for older ones)
# toolgate_call_status of a call this door does not remember reads the tenant's topic: at most
# STATUS_SCANS such reads at once (threads of their own, never the ones calls wait in), one per
# agent at a time, each for at most STATUS_SCAN_S, and only for a call Postgres has registered.
STATUS_SCANS = 4
STATUS_SCAN_S = 3.0
Progress = Callable[[str], Awaitable[None]]
# What a held call answers instead of waiting, for a client that takes tasks (door/task_door.py).
AsTask = Callable[["Caller", str], Awaitable[dict[str, Any]]]


@dataclasses.dataclass(frozen=True)
class Caller:
    """Who a session is: the agent it signs as and its tenant, and the run its calls belong to."""

    agent_id: str
    tenant_id: str
    run_id: str | None


class Door:
    def __init__(self, settings: Settings, *, user_id: str = "mcp", wait_limit_s: float = 50.0) -> None:
        self.settings = settings
        self.user_id = user_id
        self.wait_limit_s = wait_limit_s
        self.registry = load_registry(settings.contracts_dir)
        schema = observation_schema()
        self.contract_tools = tools.contract_tools(self.registry, schema)
        self.listed: list[Tool] = [t for t, _ in self.contract_tools.values()]
        self.listed += tools.door_tools(sorted(self.contract_tools), schema)
        self.client = ToolgateClient.from_settings(settings, client_id="toolgate-mcp", role=DOOR)
        self.pool = AsyncConnectionPool(
            settings.database_url, min_size=1, max_size=4, kwargs={"autocommit": True}, open=False
        )
        self._known: dict[str, Proposed] = {}  # call_id -> what was proposed
        self._finals: dict[str, tuple[str, dict[str, Any]]] = {}  # call_id -> (tenant, final observation)
        self._scans = anyio.CapacityLimiter(STATUS_SCANS)
        self._scanning: set[str] = set()  # agents with a status scan in flight

    async def open(self) -> None:
        await self.pool.open(wait=True, timeout=30.0)

    async def close(self) -> None:
        await self.pool.close()
        await anyio.to_thread.run_sync(self.client.close)

    # --- who ---------------------------------------------------------------------------------

    async def agent_of_token(self, token: str) -> tuple[str, str] | None:
        async with self.pool.connection() as conn:
            return await agent_tokens.agent_of(conn, token)

    def can_sign_as(self, agent_id: str) -> bool:
        return self.client.keyring is not None and self.client.keyring.has(agent_id)

    # --- calls -------------------------------------------------------------------------------

    async def call(
        self,
        caller: Caller,
        name: str,
        arguments: Mapping[str, Any] | None,
        meta: Mapping[str, Any] | None,
        progress: Progress,
        as_task: AsTask | None = None,
    ) -> CallToolResult | dict[str, Any]:
        """A tools/call of any listed tool; a held one answered by `as_task`, when given."""
        try:
            if name == tools.PREVIEW:
                return await self._preview(caller, arguments or {}, progress)
            if name == tools.CALL_STATUS:
                return await self.status(caller, str((arguments or {}).get("call_id", "")))
            entry = self.contract_tools.get(name)
            if entry is None:
                return results.refused(f"unknown tool {name!r}: tools/list names the tools of this server")
            plan = calls.plan(entry[1].name, entry[1].version, arguments, meta, caller.agent_id)
            return await self._run(caller, plan, calls.wait_limit(meta, self.wait_limit_s), progress, as_task)
        except calls.BadMeta as exc:
            return results.refused(str(exc))

    async def _preview(
        self, caller: Caller, arguments: Mapping[str, Any], progress: Progress
    ) -> CallToolResult | dict[str, Any]:
        entry = self.contract_tools.get(str(arguments.get("tool", "")))
        if entry is None:
            return results.refused(f"unknown tool {arguments.get('tool')!r}: preview one tools/list names")
        inner = arguments.get("arguments")
        plan = calls.plan(entry[1].name, entry[1].version, inner if isinstance(inner, dict) else {}, None, "")
        return await self._run(caller, dataclasses.replace(plan, dry_run=True), self.wait_limit_s, progress)

    async def _run(
        self, caller: Caller, plan: calls.Plan, wait_limit_s: float, progress: Progress, as_task: AsTask | None = None
    ) -> CallToolResult | dict[str, Any]:
        sent = await anyio.to_thread.run_sync(self._propose, caller, plan)
        log.info("proposed", extra={"call_id": sent.call_id, "stage": "door", "action": "proposed"})
        stop_at = time.monotonic() + wait_limit_s
        interim = await self._first_answer(sent, stop_at)
        if interim is None:
            return results.unanswered(sent.call_id, wait_limit_s)
        if not results.is_interim(interim):
            return self._final(caller.tenant_id, sent.call_id, interim)
        if as_task is not None:
            return await as_task(caller, sent.call_id)
        return await self._held(caller, sent, interim, stop_at, progress)

    def _propose(self, caller: Caller, plan: calls.Plan) -> Proposed:
        sent = self.client.propose(
            plan.tool,
            plan.arguments,
            agent_id=caller.agent_id,
            user_id=self.user_id,
            run_id=caller.run_id or f"mcp-{uuid.uuid4().hex[:16]}",
            logical_operation_id=plan.operation_id,
            idempotency_key=plan.idempotency_key,
            version=plan.version,
            dry_run=plan.dry_run,
            watch=True,
        )
        self._known[sent.call_id] = sent
        while len(self._known) > MAX_KNOWN:
            del self._known[next(iter(self._known))]
        return sent

    async def _next(self, sent: Proposed, final: bool, stop_at: float) -> dict[str, Any] | None:
        """The call's next answer within one step (its final one with `final`), or None."""
        step = min(STEP_S, max(0.0, stop_at - time.monotonic()))

        def wait() -> Observed | None:
            try:
                return self.client.wait(sent, timeout=step, final=final)
            except TimeoutError:
                return None

        seen = await anyio.to_thread.run_sync(wait)
        return seen.as_json() if seen is not None else None

    async def _first_answer(self, sent: Proposed, stop_at: float) -> dict[str, Any] | None:
        while time.monotonic() < stop_at:
            if (answer := await self._next(sent, False, stop_at)) is not None:
                return answer
        return None

    async def _held(
        self, caller: Caller, sent: Proposed, interim: dict[str, Any], stop_at: float, progress: Progress
    ) -> CallToolResult:
        said = ""
        state: results.ApprovalState | None = None
        while time.monotonic() < stop_at:
            state = await self.approval(caller.tenant_id, sent.call_id)
            text = results.awaiting_text(sent.call_id, state) if state is not None else ""
            if text and text != said:
                await progress(text)
                said = text
            if (final := await self._next(sent, True, stop_at)) is not None:
                return self._final(caller.tenant_id, sent.call_id, final)
        return results.awaiting(interim, state)

    def _final(self, tenant_id: str, call_id: str, observation: dict[str, Any]) -> CallToolResult:
        self._finals[call_id] = (tenant_id, observation)
        while len(self._finals) > MAX_KNOWN:
            del self._finals[next(iter(self._finals))]
        return results.observed(observation)

    async def final_of(self, caller: Caller, call_id: str, wait_s: float) -> CallToolResult | None:
        """The call's final observation as this door heard it (waiting up to `wait_s` for a call it
        proposed), or None."""
        cached = self._finals.get(call_id)
        if cached is not None and cached[0] == caller.tenant_id:
            return results.observed(cached[1])
        known = self._known.get(call_id)
        if known is None or known.tenant_id != caller.tenant_id:
            return None
        final = await self._next(known, True, time.monotonic() + wait_s)
        return self._final(caller.tenant_id, call_id, final) if final is not None else None

    async def approval(self, tenant_id: str, call_id: str) -> results.ApprovalState | None:
        # Shielded: a request cancelled mid-query would cost the pool its connection.
        with anyio.CancelScope(shield=True):
            async with self.pool.connection() as conn:
                row = await approvals.progress(conn, tenant_id, call_id)
        if row is None:
            return None
        return results.ApprovalState(
            str(row.approval_id),
            str(row.status),
            int(row.required_approvals),
            int(row.approved),
            tuple(row.approver_groups),
            int(row.expires_at_ms),
        )

    # --- toolgate_call_status ----------------------------------------------------------------

    async def status(self, caller: Caller, call_id: str) -> CallToolResult:
        """The latest answer to a call of this agent's tenant: its final observation, else its
        approval awaited. Read from what this door heard, else, for a call Postgres registered
        for the tenant, from the tenant's topic in a bounded scan (STATUS_SCANS, STATUS_SCAN_S)."""
        cached = self._finals.get(call_id)
        if cached is not None and cached[0] == caller.tenant_id:
            return results.observed(cached[1])
        known = self._known.get(call_id)
        if known is not None and known.tenant_id == caller.tenant_id:
            final = await self._next(known, True, time.monotonic() + STEP_S)
            if final is not None:
                return self._final(caller.tenant_id, call_id, final)
        registered_at = await self._registered(caller.tenant_id, call_id)
        if registered_at is None:
            return results.refused(f"no call {call_id!r} of tenant {caller.tenant_id} is known (yet)")
        if caller.agent_id in self._scanning:
            return results.refused("a toolgate_call_status of this agent is still reading; ask again when it answered")
        self._scanning.add(caller.agent_id)
        try:
            latest = await anyio.to_thread.run_sync(
                self._latest_on_topic, caller.tenant_id, call_id, registered_at, limiter=self._scans
            )
        finally:
            self._scanning.discard(caller.agent_id)
        if latest is None:
            return results.refused(f"no answer to a call {call_id!r} of tenant {caller.tenant_id} (yet)")
        if not results.is_interim(latest):
            return self._final(caller.tenant_id, call_id, latest)
        return results.awaiting(latest, await self.approval(caller.tenant_id, call_id))

    async def _registered(self, tenant_id: str, call_id: str) -> int | None:
        """When validation registered the call for the tenant (ms), or None: no such call."""
        with anyio.CancelScope(shield=True):
            async with self.pool.connection() as conn:
                at = await registered_calls.registered_at(conn, tenant_id, call_id)
        return at

    def _latest_on_topic(self, tenant_id: str, call_id: str, since_ms: int) -> dict[str, Any] | None:
        """The call's final observation on the tenant's topic, else its latest interim one."""
        seen = self.client.latest_of(tenant_id, call_id, since_ms - 60_000, STATUS_SCAN_S)
        return seen.as_json() if seen is not None else None

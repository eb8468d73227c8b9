"""Executors behind one interface, chosen by the contract's binding.

postgres  one pre-authorized, parameterized statement per call, run inside the transaction
          that also records COMPLETED and the outbox row, each call in its own savepoint.
http      JSON over HTTP with the idempotency key in a header, auth resolved from a secret
          reference at call time, an egress allowlist, and the provider's status query when
          the outcome is unknown.
python    an importable callable, `fn(arguments, context) -> dict`, sync or async.

Each call ends as Done (the effect happened: COMPLETED), Failed (nothing happened:
FAILED_RETRYABLE or FAILED_FINAL) or Unknown (it may have happened: the key stays PENDING
until a status query or reconciliation settles it; never retried blindly).
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import importlib
import inspect
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any
from urllib.parse import quote, urlsplit

import aiohttp
import psycopg
from psycopg import AsyncConnection
from psycopg.types.json import Jsonb

from toolgate.contracts.registry import Contract
from toolgate.hashing import provider_key
from toolgate.schemas.models import FieldError, StageRecord
from toolgate.secrets import SecretMissing, SecretProvider
from toolgate.settings import Settings
from toolgate.taxonomy import Taxonomy
from toolgate.telemetry import SCRUBBER


@dataclass(frozen=True)
class Job:
    record: StageRecord
    contract: Contract
    idempotency_key: str
    deadline_ms: int  # absolute, epoch ms: min(contract timeout, proposal deadline)

    @property
    def provider_key(self) -> str:
        """The key the provider sees: the call's key bound to its tenant, tool and version."""
        r = self.record
        return provider_key(r.tenant_id, r.tool_name, r.tool_version, self.idempotency_key)

    @property
    def context(self) -> dict[str, Any]:
        r = self.record
        return {
            "tenant_id": r.tenant_id,
            "user_id": r.principal.user_id,
            "agent_id": r.principal.agent_id,
            "call_id": r.call_id,
            "run_id": r.run_id,
            "idempotency_key": self.idempotency_key,
        }


@dataclass(frozen=True)
class Done:
    data: dict[str, Any]


@dataclass(frozen=True)
class Failed:
    taxonomy: Taxonomy
    errors: tuple[FieldError, ...]
    final: bool  # False: nothing happened and a retry is safe
    retry_after_ms: int | None = None


@dataclass(frozen=True)
class Unknown:
    reason: str


Effect = Done | Failed | Unknown


def failed(taxonomy: Taxonomy, code: str, message: str, *, final: bool, retry_after_ms: int | None = None) -> Failed:
    return Failed(
        taxonomy, (FieldError(field=None, code=code, message=SCRUBBER.text(message)[:500]),), final, retry_after_ms
    )


def to_json_value(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, bytes | memoryview):
        return base64.b64encode(bytes(value)).decode()
    return value


# --- postgres ------------------------------------------------------------------------------


def statement_params(job: Job) -> dict[str, Any]:
    params: dict[str, Any] = {f"ctx.{k}": v for k, v in job.context.items()}
    names = set(job.contract.input_schema.get("properties", {})) | set(job.record.arguments)
    for name in names:
        value = job.record.arguments.get(name)
        params[f"args.{name}"] = Jsonb(value) if isinstance(value, dict | list) else value
    return params


def map_sqlstate(contract: Contract, exc: psycopg.Error) -> Taxonomy:
    mapping: Mapping[str, str] = contract.document["observability"]["error_taxonomy_mapping"]
    state = exc.sqlstate or ""
    if state in mapping and mapping[state] in Taxonomy.__members__:
        return Taxonomy(mapping[state])
    if state == "23503":  # foreign key: the target does not exist (any more)
        return Taxonomy.STALE_STATE
    if state.startswith("22") or state.startswith("23"):  # data exception, integrity
        return Taxonomy.SEMANTIC_INVALIDITY
    return Taxonomy.UNKNOWN_ERROR


async def run_postgres_batch(conn: AsyncConnection[Any], jobs: list[Job]) -> list[Effect]:
    """Every call's statement inside the caller's transaction.

    Fast path: all statements in one pipeline (one network round trip for the batch), under
    one savepoint. If any statement fails, that savepoint is rolled back and the calls run
    one by one, each in a savepoint of its own, so one refused call never spoils the others.
    """
    if not jobs:
        return []
    try:
        async with conn.transaction():
            async with conn.pipeline():
                cursors = [
                    await conn.execute(job.contract.executor["statement"], statement_params(job)) for job in jobs
                ]
            return [
                _effect(
                    job,
                    [c.name for c in cur.description or []],
                    await cur.fetchall() if cur.description else [],
                    cur.rowcount,
                )
                for job, cur in zip(jobs, cursors, strict=True)
            ]
    except psycopg.OperationalError:
        raise  # the connection itself: transient, the whole transaction retries
    except psycopg.Error:
        return [await run_postgres(conn, job) for job in jobs]


async def run_postgres(conn: AsyncConnection[Any], job: Job) -> Effect:
    """One call's statement inside the caller's transaction, in a savepoint of its own."""
    try:
        async with conn.transaction():
            cur = await conn.execute(job.contract.executor["statement"], statement_params(job))
            rows = await cur.fetchall() if cur.description else []
            return _effect(job, [c.name for c in cur.description or []], rows, cur.rowcount)
    except psycopg.OperationalError:
        raise
    except psycopg.Error as exc:
        return failed(
            map_sqlstate(job.contract, exc),
            f"sqlstate_{exc.sqlstate}",
            f"the statement was refused: {exc.diag.message_primary or type(exc).__name__}",
            final=True,
        )


async def run_after_effects(conn: AsyncConnection[Any], done: list[tuple[Job, dict[str, Any]]]) -> list[str | None]:
    """Each completed external effect's `after_effect` statement (binding), inside the caller's
    transaction that records it COMPLETED, each in a savepoint: None, or why it failed (the
    effect happened all the same; the failure is reported, never a reason to undo it)."""
    outcome: list[str | None] = []
    for job, data in done:
        params = {
            **statement_params(job),
            **{f"result.{k}": v for k, v in data.items() if not isinstance(v, dict | list)},
        }
        try:
            async with conn.transaction():
                await conn.execute(job.contract.binding["after_effect"]["statement"], params)
            outcome.append(None)
        except psycopg.OperationalError:
            raise
        except psycopg.Error as exc:
            outcome.append(SCRUBBER.text(exc.diag.message_primary or type(exc).__name__)[:300])
    return outcome


def _effect(job: Job, columns: list[str], raw_rows: list[Any], affected: int) -> Effect:
    spec = job.contract.executor
    rows = [dict(zip(columns, map(to_json_value, r), strict=True)) for r in raw_rows]
    if spec["result"] == "rows":
        return Done({"rows": rows})
    if spec["result"] == "none":
        return Done({"affected": affected})
    if not rows:
        if spec.get("not_found", "STALE_STATE") == "SUCCESS":
            return Done({})
        return failed(Taxonomy.STALE_STATE, "not_found", "the target resource does not exist", final=True)
    return Done(rows[0])


# --- http ----------------------------------------------------------------------------------


class EgressDenied(Exception):
    pass


# Provider calls in flight per execution worker. A round can hold thousands of calls (a
# re-drive releases everything a crash left); sent all at once they would wait for the
# connection pool inside their own timeouts and fail for no fault of the provider. A call
# waits for a slot first, and its timeout starts when it is sent.
PROVIDER_SLOTS = 64


@dataclass
class HttpExecutor:
    settings: Settings
    secrets: SecretProvider
    session: aiohttp.ClientSession | None = None
    _auth_cache: dict[str, str] = field(default_factory=dict)
    _slots: asyncio.Semaphore | None = None

    async def open(self) -> None:
        if self.session is None:
            self.session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=PROVIDER_SLOTS))
            self._slots = asyncio.Semaphore(PROVIDER_SLOTS)

    async def close(self) -> None:
        if self.session is not None:
            await self.session.close()
            self.session = None

    def url(self, job: Job, path: str) -> str:
        spec = job.contract.executor
        base = self.settings.endpoints.get(spec["base_url_ref"])
        if not base:
            raise EgressDenied(f"endpoint {spec['base_url_ref']!r} is not configured (TOOLGATE_ENDPOINTS)")
        url = base.rstrip("/") + path.replace("{idempotency_key}", quote(job.provider_key, safe=""))
        host = urlsplit(url).hostname or ""
        allowed = set(self.settings.egress_allowlist)
        if "egress_allowlist" in spec:
            allowed &= set(spec["egress_allowlist"])
        if host not in allowed:
            raise EgressDenied(f"egress to {host} is not allowed for {job.contract.name}")
        return url

    def headers(self, job: Job) -> dict[str, str]:
        spec = job.contract.executor
        headers = {"Content-Type": "application/json", "X-Toolgate-Call-Id": job.record.call_id}
        key_header = job.contract.document["idempotency"].get("key_header")
        if key_header:
            headers[key_header] = job.provider_key
        auth = spec.get("auth")
        if auth:
            secret = self.secrets.resolve(auth["secret_ref"])
            if auth["profile"] == "bearer":
                headers["Authorization"] = f"Bearer {secret}"
            elif auth["profile"] == "api_key_header":
                headers[auth.get("header_name", "X-Api-Key")] = secret
            else:
                token = base64.b64encode(secret.encode()).decode()
                SCRUBBER.register(token)
                headers["Authorization"] = f"Basic {token}"
        return headers

    def timeout(self, job: Job, now_ms: int) -> aiohttp.ClientTimeout:
        left = max(0.05, (job.deadline_ms - now_ms) / 1000.0)
        return aiohttp.ClientTimeout(total=left, connect=min(left, 2.0))

    async def run(self, job: Job, now_ms: int) -> Effect:
        assert self._slots is not None
        async with self._slots:
            now_ms = max(now_ms, int(time.time() * 1000))
            if now_ms >= job.deadline_ms:
                return failed(
                    Taxonomy.TIMEOUT, "not_sent", "the call's deadline passed before the provider was free", final=False
                )
            return await self._run(job, now_ms)

    async def _run(self, job: Job, now_ms: int) -> Effect:
        assert self.session is not None
        spec = job.contract.executor
        try:
            url = self.url(job, spec["path"])
            headers = self.headers(job)
        except EgressDenied as exc:
            return failed(Taxonomy.POLICY_VIOLATION, "egress_denied", str(exc), final=True)
        except SecretMissing as exc:
            return failed(Taxonomy.DEPENDENCY_UNAVAILABLE, "secret_unresolved", str(exc), final=True)
        try:
            async with self.session.request(
                spec["method"],
                url,
                json=job.record.arguments,
                headers=headers,
                timeout=self.timeout(job, now_ms),
                allow_redirects=False,
            ) as resp:
                return await self._classify(resp)
        except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError) as exc:
            # Never connected: the request was not sent, a retry is safe.
            return failed(
                Taxonomy.DEPENDENCY_UNAVAILABLE, "connect_failed", f"cannot reach the provider: {exc}", final=False
            )
        except (TimeoutError, aiohttp.ClientError) as exc:
            # Sent, but no answer: the effect may or may not have happened.
            return Unknown(f"{type(exc).__name__} after the request was sent")

    async def _classify(self, resp: aiohttp.ClientResponse) -> Effect:
        status = resp.status
        text = await resp.text()
        if 200 <= status < 300:
            try:
                body = json.loads(text)
            except json.JSONDecodeError:
                return failed(
                    Taxonomy.OBSERVATION_NORMALIZATION_FAIL,
                    "bad_provider_response",
                    "the provider answered with something that is not JSON",
                    final=True,
                )
            return Done(body if isinstance(body, dict) else {"value": body})
        retry_after = _retry_after_ms(resp)
        if status == 429:
            return failed(
                Taxonomy.RATE_LIMITED,
                "provider_429",
                "the provider rate-limited the call",
                final=False,
                retry_after_ms=retry_after,
            )
        if status == 503:
            return failed(
                Taxonomy.DEPENDENCY_UNAVAILABLE,
                "provider_503",
                "the provider is unavailable",
                final=False,
                retry_after_ms=retry_after,
            )
        if status == 409:
            return failed(
                Taxonomy.IDEMPOTENCY_CONFLICT,
                "provider_409",
                "the provider is still processing this key",
                final=False,
                retry_after_ms=retry_after or 1000,
            )
        if status in (401, 403):
            return failed(
                Taxonomy.DEPENDENCY_UNAVAILABLE,
                f"provider_{status}",
                "the provider refused toolgate's credentials",
                final=True,
            )
        if status == 404:
            return failed(Taxonomy.STALE_STATE, "provider_404", "the provider does not know the target", final=True)
        if status == 422 and "idempotency" in text.lower():
            return failed(
                Taxonomy.SIGNATURE_MISMATCH,
                "provider_key_reuse",
                "the provider saw this key with another payload",
                final=True,
            )
        if 400 <= status < 500:
            return failed(
                Taxonomy.SEMANTIC_INVALIDITY,
                f"provider_{status}",
                f"the provider refused the call ({status})",
                final=True,
            )
        return Unknown(f"provider answered {status}")

    async def status(self, job: Job, now_ms: int) -> Effect:
        """Ask the provider what became of the call's key: Done, Failed (never happened) or Unknown."""
        assert self._slots is not None
        async with self._slots:
            return await self._status(job)

    async def _status(self, job: Job) -> Effect:
        assert self.session is not None
        query = job.contract.executor.get("status_query")
        if not query:
            return Unknown("the contract offers no status query")
        try:
            url = self.url(job, query["path"])
            headers = self.headers(job)
            async with self.session.request(
                query["method"],
                url,
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=5.0),
                allow_redirects=False,  # a redirect would leave the egress allowlist, credentials attached
            ) as resp:
                if resp.status == 404:
                    return failed(
                        Taxonomy.DEPENDENCY_UNAVAILABLE,
                        "not_received",
                        "the provider never received the call",
                        final=False,
                    )
                if resp.status != 200:
                    return Unknown(f"status query answered {resp.status}")
                body = await resp.json()
        except (EgressDenied, SecretMissing, TimeoutError, aiohttp.ClientError, ValueError) as exc:
            return Unknown(f"status query failed: {type(exc).__name__}")
        if not isinstance(body, dict):
            return Unknown("the status query answered something that is not a JSON object")
        state = body.get("status")
        if state == "completed" and isinstance(body.get("response"), dict):
            return Done(body["response"])
        if state == "failed":
            return failed(
                Taxonomy.DEPENDENCY_UNAVAILABLE, "provider_failed", "the provider reports the call failed", final=True
            )
        return Unknown(f"provider reports {state!r}")


def _retry_after_ms(resp: aiohttp.ClientResponse) -> int | None:
    value = resp.headers.get("Retry-After")
    try:
        return int(float(value) * 1000) if value else None
    except ValueError:
        return None


# --- python --------------------------------------------------------------------------------


async def run_python(job: Job, now_ms: int) -> Effect:
    module_name, _, attr = job.contract.executor["callable"].partition(":")
    try:
        fn = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        return failed(Taxonomy.DEPENDENCY_UNAVAILABLE, "callable_missing", f"cannot import the tool: {exc}", final=True)
    left = max(0.05, (job.deadline_ms - now_ms) / 1000.0)
    try:
        if inspect.iscoroutinefunction(fn):
            value = await asyncio.wait_for(fn(dict(job.record.arguments), job.context), left)
        else:
            value = await asyncio.wait_for(asyncio.to_thread(fn, dict(job.record.arguments), job.context), left)
    except TimeoutError:
        return Unknown("the callable did not return within its deadline")
    except Exception as exc:
        return failed(Taxonomy.UNKNOWN_ERROR, "tool_raised", f"{type(exc).__name__}: {exc}", final=True)
    return Done(value if isinstance(value, dict) else {"value": value})

"""The HTTP executor: JSON over HTTP to a provider named by an endpoint reference.

The idempotency key goes in the contract's header as a hash of (tenant, tool, version, key), so
providers never see a caller's raw key nor share one between tenants; auth is resolved from a
secret reference at call time; egress is limited to an allowlist; a redirect is never followed.
When the outcome is unknown, the provider's status query says whether the call was received.
Each call ends as Done, Failed or Unknown (executors.py).
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from dataclasses import dataclass, field
from urllib.parse import quote, urlsplit

import aiohttp

from toolgate.schemas.errors import PermanentError
from toolgate.schemas.models import TaxonomyClass
from toolgate.scrubber import SCRUBBER
from toolgate.secrets import SecretMissing, SecretProvider
from toolgate.settings import Settings
from toolgate.workers.execution.effects import Done, Effect, Job, Unknown
from toolgate.workers.execution.executors import failed
from toolgate.workers.execution.retry import RetryPolicy


class EgressDenied(PermanentError):
    """The call's endpoint is not configured or its host is not on the egress allowlist."""

    taxonomy_class = TaxonomyClass.POLICY_VIOLATION


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
        headers = {"Content-Type": "application/json", "X-Toolgate-Call-Id": job.record.call.call_id}
        if job.contract.document["security"]["tenant_scoped"]:  # the provider scopes the effect by it
            headers["X-Toolgate-Tenant-Id"] = job.record.call.tenant_id
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
                    TaxonomyClass.TIMEOUT,
                    "not_sent",
                    "the call's deadline passed before the provider was free",
                    final=False,
                )
            return await self._run(job, now_ms)

    async def _run(self, job: Job, now_ms: int) -> Effect:
        assert self.session is not None
        spec = job.contract.executor
        try:
            url = self.url(job, spec["path"])
            headers = self.headers(job)
        except EgressDenied as exc:
            return failed(TaxonomyClass.POLICY_VIOLATION, "egress_denied", str(exc), final=True)
        except SecretMissing as exc:
            return failed(TaxonomyClass.DEPENDENCY_UNAVAILABLE, "secret_unresolved", str(exc), final=True)
        try:
            async with self.session.request(
                spec["method"],
                url,
                json=job.record.call.arguments,
                headers=headers,
                timeout=self.timeout(job, now_ms),
                allow_redirects=False,
            ) as resp:
                return await self._classify(resp)
        except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError) as exc:
            # Never connected: the request was not sent, a retry is safe.
            # No Retry-After from a provider that never answered: the longest backoff execution
            # itself waits between attempts is the soonest a retry is worth it.
            return failed(
                TaxonomyClass.DEPENDENCY_UNAVAILABLE,
                "connect_failed",
                f"cannot reach the provider: {exc}",
                final=False,
                retry_after_ms=RetryPolicy.cap_ms,
            )
        except (TimeoutError, aiohttp.ClientError) as exc:
            # Sent, but no answer: the effect may or may not have happened.
            return Unknown(f"{type(exc).__name__} after the request was sent")

    async def _classify(self, resp: aiohttp.ClientResponse) -> Effect:
        status = resp.status
        text = await resp.text()
        if 200 <= status < 300:
            return _done(text)
        return _refused(status, text, _retry_after_ms(resp))

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
                        TaxonomyClass.DEPENDENCY_UNAVAILABLE,
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
                TaxonomyClass.DEPENDENCY_UNAVAILABLE,
                "provider_failed",
                "the provider reports the call failed",
                final=True,
            )
        return Unknown(f"provider reports {state!r}")


def _done(text: str) -> Effect:
    """A 2xx answer: its JSON body is the effect's data."""
    try:
        body = json.loads(text)
    except json.JSONDecodeError:
        return failed(
            TaxonomyClass.OBSERVATION_NORMALIZATION_FAIL,
            "bad_provider_response",
            "the provider answered with something that is not JSON",
            final=True,
        )
    return Done(body if isinstance(body, dict) else {"value": body})


def _refused(status: int, text: str, retry_after: int | None) -> Effect:
    """A non-2xx answer: what it says about the call (retryable, final, or unknown)."""
    if status == 429:
        return failed(
            TaxonomyClass.RATE_LIMITED,
            "provider_429",
            "the provider rate-limited the call",
            final=False,
            retry_after_ms=retry_after,
        )
    if status == 503:
        return failed(
            TaxonomyClass.DEPENDENCY_UNAVAILABLE,
            "provider_503",
            "the provider is unavailable",
            final=False,
            retry_after_ms=retry_after,
        )
    if status == 409:
        return failed(
            TaxonomyClass.IDEMPOTENCY_CONFLICT,
            "provider_409",
            "the provider is still processing this key",
            final=False,
            retry_after_ms=retry_after or 1000,
        )
    if status in (401, 403):
        return failed(
            TaxonomyClass.DEPENDENCY_UNAVAILABLE,
            f"provider_{status}",
            "the provider refused toolgate's credentials",
            final=True,
        )
    if status == 404:
        return failed(TaxonomyClass.STALE_STATE, "provider_404", "the provider does not know the target", final=True)
    if status == 422 and "idempotency" in text.lower():
        return failed(
            TaxonomyClass.SIGNATURE_MISMATCH,
            "provider_key_reuse",
            "the provider saw this key with another payload",
            final=True,
        )
    if 400 <= status < 500:
        return failed(
            TaxonomyClass.SEMANTIC_INVALIDITY,
            f"provider_{status}",
            f"the provider refused the call ({status})",
            final=True,
        )
    return Unknown(f"provider answered {status}")


def _retry_after_ms(resp: aiohttp.ClientResponse) -> int | None:
    value = resp.headers.get("Retry-After")
    try:
        return int(float(value) * 1000) if value else None
    except ValueError:
        return None

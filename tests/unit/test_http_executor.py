"""The HTTP executor's request shaping: auth profiles from secret references, the egress
allowlist, the idempotency key header. (The calls themselves are tested end to end against
the demo provider; a provider that is down, against a port nothing listens on.)"""

from __future__ import annotations

import asyncio
import base64
import copy
from pathlib import Path
from typing import Any

import pytest

from tests.unit.factories import changed, job_record
from toolgate.contracts.contract import Contract
from toolgate.contracts.registry import load_registry
from toolgate.schemas.hashing import provider_key
from toolgate.schemas.models import TaxonomyClass
from toolgate.scrubber import SCRUBBER
from toolgate.secrets import SecretMissing, SecretProvider
from toolgate.settings import Settings
from toolgate.workers.execution.executors import Effect, Failed, Job
from toolgate.workers.execution.http import EgressDenied, HttpExecutor
from toolgate.workers.execution.retry import RetryPolicy


def job(auth: dict[str, Any] | None, allow: list[str] | None = None) -> Job:
    email = load_registry().resolve("notify.send_email", "latest")
    binding = copy.deepcopy(dict(email.binding))
    if auth is None:
        binding["executor"].pop("auth")
    else:
        binding["executor"]["auth"] = auth
    if allow is not None:
        binding["executor"]["egress_allowlist"] = allow
    contract = Contract(email.document, binding, "test")
    return Job(job_record(contract, {}), contract, "key-123", 0)


def executor(tmp_path: Path, endpoints: dict[str, str] | None = None) -> HttpExecutor:
    default = {"demo_provider": "http://127.0.0.1:9"}
    settings = Settings(home=tmp_path, endpoints=default if endpoints is None else endpoints)
    return HttpExecutor(settings, SecretProvider(tmp_path / "secrets"))


@pytest.mark.parametrize(
    ("auth", "secret", "header", "value"),
    [
        ({"profile": "bearer", "secret_ref": "tok-a"}, "s3cret-bearer", "Authorization", "Bearer s3cret-bearer"),
        (
            {"profile": "api_key_header", "secret_ref": "tok-b", "header_name": "X-Api-Key"},
            "s3cret-key",
            "X-Api-Key",
            "s3cret-key",
        ),
        (
            {"profile": "basic", "secret_ref": "tok-c"},
            "user:s3cret-pass",
            "Authorization",
            "Basic " + base64.b64encode(b"user:s3cret-pass").decode(),
        ),
    ],
)
def test_auth_profiles_resolve_their_secret_at_call_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, auth: dict[str, Any], secret: str, header: str, value: str
) -> None:
    monkeypatch.setenv("TOOLGATE_SECRET_" + auth["secret_ref"].upper().replace("-", "_"), secret)
    headers = executor(tmp_path).headers(job(auth))
    assert headers[header] == value
    # The provider sees the key bound to tenant, tool and version, never the caller's key itself.
    assert headers["Idempotency-Key"] == provider_key("acme", "notify.send_email", "1.0.0", "key-123")
    assert headers["X-Toolgate-Tenant-Id"] == "acme"  # a tenant_scoped tool's provider is told whose call it is
    # Resolved values (and the basic-auth token built from one) are scrubbed wherever they go.
    assert secret not in SCRUBBER.text(f"leaked {value}") and value.split()[-1] not in SCRUBBER.text(value)


def test_a_secret_file_is_a_reference_too(tmp_path: Path) -> None:
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "file-token").write_text("from-a-file-123\n")
    assert executor(tmp_path).headers(job({"profile": "bearer", "secret_ref": "file-token"}))["Authorization"] == (
        "Bearer from-a-file-123"
    )


def test_an_unresolvable_secret_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SecretMissing):
        executor(tmp_path).headers(job({"profile": "bearer", "secret_ref": "nowhere"}))


def test_egress_is_the_intersection_of_settings_and_contract(tmp_path: Path) -> None:
    assert executor(tmp_path).url(job(None), "/v1/emails") == "http://127.0.0.1:9/v1/emails"
    with pytest.raises(EgressDenied):
        executor(tmp_path, {"demo_provider": "http://evil.example/"}).url(job(None), "/v1/emails")
    with pytest.raises(EgressDenied):  # allowed by settings, not by the contract
        executor(tmp_path).url(job(None, allow=["localhost"]), "/v1/emails")
    with pytest.raises(EgressDenied):  # an endpoint the deployment never configured
        executor(tmp_path, {}).url(job(None), "/v1/emails")


def test_a_key_reaches_the_status_query_path_only_as_its_provider_key(tmp_path: Path) -> None:
    hostile = job(None)
    hostile = Job(hostile.record, hostile.contract, "../../admin?x=1\r\nX-Evil: 1", 0)
    url = executor(tmp_path).url(hostile, "/v1/operations/{idempotency_key}")
    assert url == "http://127.0.0.1:9/v1/operations/" + hostile.provider_key
    assert hostile.provider_key.startswith("tgk_") and hostile.provider_key.isalnum() is False
    other_tenant = Job(changed(hostile.record, tenant_id="globex"), hostile.contract, hostile.idempotency_key, 0)
    assert other_tenant.provider_key != hostile.provider_key


def test_a_provider_that_is_down_is_dependency_unavailable_with_a_retry_after(tmp_path: Path) -> None:
    """Nothing listens on 127.0.0.1:9: the request was never sent, a retry is safe, and the answer
    says when: no sooner than execution's own longest backoff (the provider gave no Retry-After)."""
    down = job(None)
    down = Job(down.record, down.contract, down.idempotency_key, 2**53)

    async def run() -> Effect:
        http = executor(tmp_path)
        await http.open()
        try:
            return await http.run(down, 0)
        finally:
            await http.close()

    effect = asyncio.run(run())
    assert isinstance(effect, Failed)
    assert (effect.taxonomy, effect.final, effect.errors[0].code) == (
        TaxonomyClass.DEPENDENCY_UNAVAILABLE,
        False,
        "connect_failed",
    )
    assert effect.retry_after_ms == RetryPolicy.cap_ms == 2000

"""The deployment's gauges, sampled by the reconciliation worker (one process; ops/stage.py
attaches them) every `metrics_sample_seconds`, never on a stage's hot path.

A sample reads what `toolgate status` reads (ops/status.py: consumer lag per stage, keys
PENDING, the outbox's unsent rows, open dead letters), with clients kept from one sample to the
next (ops/gauge_readers.py), plus the approvals waiting per tool and
approver group, today's budget use, and the audit chain's signed head; the whole audit chain is
verified every `audit_verify_seconds`. The readings are kept, and OpenTelemetry's observable
gauges report the last of them when `/metrics` is scraped. Approvals decided since the last
sample go into the `tool.approval.resolution_time` histogram.

| instrument | Prometheus |
|---|---|
| toolgate.consumer.lag {stage} | toolgate_consumer_lag |
| toolgate.keys.pending | toolgate_keys_pending |
| toolgate.keys.pending.oldest_age (s) | toolgate_keys_pending_oldest_age_seconds |
| toolgate.keys.pending.lease_expired | toolgate_keys_pending_lease_expired |
| toolgate.outbox.backlog, toolgate.outbox.oldest_age (s) | toolgate_outbox_backlog, ..._oldest_age_seconds |
| toolgate.deadletters.open | toolgate_deadletters_open |
| toolgate.audit.chain_head, toolgate.audit.chain_ok | toolgate_audit_chain_head, toolgate_audit_chain_ok |
| toolgate.budget.spent {tenant, dimension} | toolgate_budget_spent |
| tool.approval.pending_count {tool, approver_group} | tool_approval_pending_count |
| tool.approval.resolution_time (ms) {tool, resolution} | tool_approval_resolution_time_milliseconds |
| tool.contract.sunset_remaining (s) {tool, version} | tool_contract_sunset_remaining_seconds |
| toolgate.sample.errors {part} | toolgate_sample_errors_total |

`tool.contract.sunset_remaining` is, for each contract version with a `lifecycle.sunset_date`, the
time left until that date begins (00:00 UTC), negative once it passed: what the
DeprecationRemovalBlocked alert weighs a deprecated version's use against.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import Callable, Iterable

from opentelemetry.metrics import CallbackOptions, Observation

from toolgate.contracts.contract import Contract
from toolgate.contracts.registry import Registry
from toolgate.ops import status
from toolgate.ops.audit import verify_log
from toolgate.ops.gauge_readers import Readers
from toolgate.settings import Settings
from toolgate.store import gauges
from toolgate.telemetry.setup import meter

log = logging.getLogger("toolgate.gauges")
Reading = dict[tuple[tuple[str, str], ...], float]


class Gauges:
    def __init__(self, registry: Registry, settings: Settings) -> None:
        self.registry = registry
        # Operators' reads, as `toolgate status` does them; Postgres as this worker's role.
        self.settings = settings
        self.readers = Readers(settings)
        self.readings: dict[str, Reading] = {}
        self._decided_since: dt.datetime | None = None
        self._verified_at = 0.0
        m = meter()
        self._resolution = m.create_histogram("tool.approval.resolution_time", unit="ms")
        self._errors = m.create_counter("toolgate.sample.errors", description="gauge samples that failed, by part")
        for name, unit in (
            ("toolgate.consumer.lag", "{record}"),
            ("toolgate.keys.pending", "{key}"),
            ("toolgate.keys.pending.oldest_age", "s"),
            ("toolgate.keys.pending.lease_expired", "{key}"),
            ("toolgate.outbox.backlog", "{row}"),
            ("toolgate.outbox.oldest_age", "s"),
            ("toolgate.deadletters.open", "{letter}"),
            ("toolgate.audit.chain_head", "{row}"),
            ("toolgate.audit.chain_ok", ""),
            ("toolgate.budget.spent", ""),
            ("tool.approval.pending_count", "{approval}"),
            ("tool.contract.sunset_remaining", "s"),
        ):
            m.create_observable_gauge(name, [self._observer(name)], unit=unit)

    def _observer(self, name: str) -> Callable[[CallbackOptions], Iterable[Observation]]:
        def observe(_: CallbackOptions) -> Iterable[Observation]:
            return [Observation(value, dict(labels)) for labels, value in self.readings.get(name, {}).items()]

        return observe

    async def sample(self) -> None:
        """One sample, in a thread: its reads are blocking clients' and must not hold the loop."""
        await asyncio.to_thread(self.sample_now)

    def sample_now(self) -> None:
        for part, read in (
            ("lag", self._lag),
            ("postgres", self._postgres),
            ("dead_letters", self._dead_letters),
            ("audit", self._audit),
            ("lifecycle", self._lifecycle),
        ):
            try:
                read()
            except Exception as exc:  # a part that cannot be read keeps its last reading
                self.readers.drop(part)
                self._errors.add(1, {"part": part})
                log.warning("gauge sample failed: %s", exc, extra={"stage": "reconciliation", "action": part})

    def _lag(self) -> None:
        lags = self.readers.lags()
        self.readings["toolgate.consumer.lag"] = {
            (("stage", lag.stage),): float(lag.records) for lag in lags if lag.records is not None
        }

    def _postgres(self) -> None:
        conn = self.readers.postgres()
        keys, _, outbox = status.backlogs(self.settings, conn)
        self.readings["toolgate.keys.pending"] = {(): float(keys.pending)}
        self.readings["toolgate.keys.pending.oldest_age"] = {(): float(keys.oldest_age_s or 0.0)}
        self.readings["toolgate.keys.pending.lease_expired"] = {(): float(keys.lease_expired)}
        self.readings["toolgate.outbox.backlog"] = {(): float(outbox.unsent)}
        self.readings["toolgate.outbox.oldest_age"] = {(): float(outbox.oldest_age_s or 0.0)}
        self.readings["tool.approval.pending_count"] = self._waiting_approvals(gauges.waiting(conn))
        self.readings["toolgate.budget.spent"] = {
            (("tenant", s.tenant_id), ("dimension", s.dimension)): float(s.used) for s in gauges.spent_today(conn)
        }
        since = self._decided_since or gauges.now(conn)
        for decided in gauges.decided_since(conn, since):
            self._resolution.record(
                max(0.0, decided.took_ms), {"tool": decided.tool_name, "resolution": decided.status}
            )
            since = decided.decided_at
        self._decided_since = since

    def _waiting_approvals(self, rows: list[gauges.Waiting]) -> Reading:
        """Every tool that needs approvals and each of its groups, at zero unless some wait."""
        reading: Reading = {}
        for contract in self.registry:
            if contract.required_approvals:
                for group in contract.approval.get("approver_groups") or [""]:
                    reading[(("tool", contract.name), ("approver_group", str(group)))] = 0.0
        for row in rows:
            reading[(("tool", row.tool_name), ("approver_group", row.group))] = float(row.count)
        return reading

    def _lifecycle(self) -> None:
        self.readings["tool.contract.sunset_remaining"] = sunset_remaining(self.registry, time.time())

    def _dead_letters(self) -> None:
        self.readings["toolgate.deadletters.open"] = {(): float(self.readers.open_letters())}

    def _audit(self) -> None:
        self.readings["toolgate.audit.chain_head"] = {(): float(gauges.audit_head(self.readers.postgres()))}
        if time.monotonic() - self._verified_at >= self.settings.audit_verify_seconds or not self._verified_at:
            report = verify_log(self.settings)
            self._verified_at = time.monotonic()
            self.readings["toolgate.audit.chain_ok"] = {(): 1.0 if report.ok else 0.0}


def sunset_remaining(contracts: Iterable[Contract], now_s: float) -> Reading:
    """Seconds from `now_s` until each contract version's sunset date begins (UTC), for those
    that have one; negative once it passed."""
    reading: Reading = {}
    for contract in contracts:
        sunset = contract.document["identity"]["lifecycle"].get("sunset_date")
        if sunset:
            begins = dt.datetime.combine(dt.date.fromisoformat(str(sunset)), dt.time(), dt.UTC).timestamp()
            reading[(("tool", contract.name), ("version", contract.version))] = begins - now_s
    return reading

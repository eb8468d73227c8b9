"""Where toolgate finds its broker, its database and its tuning knobs.

Resolution order for every setting: the `TOOLGATE_*` environment variable, then the
runtime file that `toolgate up` writes into `TOOLGATE_HOME` (so `toolgate propose` finds the
embedded broker without flags), then the default.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

RUNTIME_FILE = "runtime.json"


def toolgate_home() -> Path:
    return Path(os.environ.get("TOOLGATE_HOME", Path.home() / ".toolgate")).expanduser()


@dataclass(frozen=True)
class Settings:
    kafka_bootstrap: str = ""
    # What this process connects to Postgres with. Workers: a role that may only append to the
    # audit log (`toolgate_worker`, ops/roles.py); the runtime file of `toolgate up` holds the
    # owner's, for operators' commands on that host.
    database_url: str = ""
    # The tables' owner, for migrations and `toolgate setup`; empty means database_url.
    admin_database_url: str = ""
    home: Path = field(default_factory=toolgate_home)
    topic_prefix: str = ""
    partitions: int = 4
    # The broker `toolgate up` starts when TOOLGATE_KAFKA_BOOTSTRAP names none: "tansu", the
    # embedded Tansu (one node, in memory, nothing needed but Python), or "kafka", Apache Kafka
    # (`brokers` KRaft nodes, data under the home; Java 17+, and Maven to fetch it once unless
    # KAFKA_HOME names an installed distribution; ops/stack/kafka_broker.py).
    broker: str = "tansu"
    brokers: int = 1
    # Where Kafka's jars are cached once fetched (ops/stack/kafka_dist.py; None: ~/.cache/toolgate/kafka/
    # <version>), an installed distribution to use instead, and each Kafka node's JVM heap.
    kafka_cache: Path | None = None
    kafka_home: Path | None = None
    kafka_heap_mb: int = 512
    # `toolgate up --broker kafka --secure`: SASL_SSL (SCRAM-SHA-512) on every listener with
    # certificates made under the home, the standard authorizer allowing nothing without an ACL,
    # `setup --acls` applied, and each stage worker connected as its own principal
    # (ops/kafka_credentials.py). Fixed when the home's cluster is made. Tansu stays PLAINTEXT.
    kafka_secure: bool = False
    # The CPUs the embedded broker of `toolgate up` runs on: empty for the first CPU, "all" for
    # every one, or a list such as "1" or "0,2-3" (ops/stack/embedded.py, `broker_cpus`).
    broker_cpus: str = ""
    # How much lower the priority (nice) of the stages that take calls in (validation, policy)
    # is than the others' under `toolgate up`, so a backlog waits before the pipeline rather
    # than inside it (ops/stack/priority.py); 0 runs every stage alike.
    upstream_nice: int = 5
    # A stage's round: up to batch_max records. A record that arrives with nothing queued behind
    # it starts a round at once; while more are queued (load), a round lingers up to batch_ms
    # milliseconds to fill, for as long as records keep arriving (filling.py). Batching comes
    # from load, not from waiting.
    batch_max: int = 500
    batch_ms: int = 20
    # How long the broker may hold a stage consumer's fetch that finds no records. Apache Kafka
    # answers a waiting fetch as soon as records arrive, so a long wait costs no latency and an
    # idle stage makes two fetches a second, not two hundred (the default). The embedded Tansu
    # does not always answer early: one record at a time, a longer wait made produce -> consume
    # slower (docs/performance.md, "Figures behind the code"), so `toolgate up` gives its workers
    # TANSU_FETCH_WAIT_MS there (ops/stack/embedded.py), unless this is set.
    fetch_wait_ms: int = 500
    # How long an idle stage consumer stops fetching between looks (0: it never does). Only for a
    # broker that holds a waiting fetch without answering it when records arrive: there a short
    # fetch wait is a stage's latency, and an idle stage fetching every few milliseconds was most
    # of an idle stack's CPU. `toolgate up` gives its workers TANSU_IDLE_NAP_MS on Tansu
    # (ops/stack/embedded.py), unless this is set; workers/runtime/consumer.py says what it costs.
    idle_nap_ms: int = 0
    # How long an idle stage naps that is woken through Postgres when a record comes for it
    # (workers/runtime/wakeup.py, `woken`): on any broker, those whose every input only stages
    # write (policy, execution, normalization), which then wait on an event of their own instead
    # of in librdkafka's poll (which wakes five times a second whatever its timeout); on Tansu,
    # approval-wait too. It looks at a nap's end only in case a notice was lost. 0: stages nap
    # only where every stage does, for `idle_nap_ms`.
    woken_nap_ms: int = 5000
    # How long a stage's producer (and the outbox relay's) holds a record to batch it: rounds batch
    # without a linger; 2 ms cost each hop as much for nothing (docs/performance.md, "Figures...").
    linger_ms: int = 0
    # The codec toolgate's producers compress the records of topics only toolgate reads with
    # (proposals, decisions, the StageBatches between stages: topics/catalog.py); observations,
    # approval requests and dead letters stay plain for clients built without it. The embedded
    # broker keeps every batch in memory, and compressed ones take far less of it
    # (docs/performance.md, "Compressed batches, plain observations"; "Figures behind the code").
    compression: str = "lz4"
    # A StageBatch record is split when it would exceed this many bytes.
    batch_bytes: int = 512 * 1024
    # Records a consumer holds fetched, not yet in a round; beyond it the fetch waits, never drops.
    stream_buffer: int = 4096
    # How long an execution worker owns a PENDING idempotency key before reconciliation may resolve it.
    lease_seconds: float = 30.0
    reconcile_interval_seconds: float = 5.0
    # How long an unknown outcome may stay unverified before reconciliation fails it closed.
    verification_window_seconds: float = 600.0
    approval_sweep_seconds: float = 1.0
    # How long the history of finished calls is kept (calls, approvals, usage, repair attempts,
    # expired idempotency keys, dead-letter actions), and how long the expired keys of contracts
    # that refuse an expired key are; workers/reconciliation/retention.py has the floors.
    retention_days: float = 30.0
    retention_tombstone_days: float = 365.0
    retention_interval_seconds: float = 600.0
    # Named HTTP endpoints that contracts refer to (`base_url_ref`), JSON object.
    endpoints: dict[str, str] = field(default_factory=dict)
    # Hosts HTTP executors may reach; contracts may narrow it, never widen it.
    egress_allowlist: tuple[str, ...] = ("127.0.0.1", "localhost")
    secrets_dir: Path | None = None
    contracts_dir: Path | None = None
    # A directory of Cedar policies (`*.cedar`), admitted whole against the contracts when the
    # policy worker starts (contracts/cedar_policy.py); none: the shipped `contracts/cedar/`.
    policy_dir: Path | None = None
    # The deployment's environment, as policy rules see it (dev, staging, prod, ...).
    environment: str = "dev"
    trace_sample_ratio: float = 1.0
    telemetry_exporter: str = "file"  # file | otlp | none
    log_level: str = "INFO"
    # Every worker's Prometheus `/metrics` (toolgate/telemetry/metrics_export.py): the port (0 any free
    # one, -1 none; `toolgate up` gives each worker its own) and the address it listens on.
    metrics_port: int = 0
    metrics_addr: str = "127.0.0.1"
    # The approval console (console/app.py): where it listens (port 0: `toolgate up` picks one) and its
    # address as approvers reach it (enrol links; webhook deliveries link to cards under it).
    console_host: str = "127.0.0.1"
    console_port: int = 0
    console_url: str = ""
    # What the console `toolgate up` starts on a Postgres of yours connects as: a login role granted
    # toolgate_console (ops/roles.py). Empty: the owner's URL, as before there was a console role.
    # The embedded Postgres gives the console a login of that role itself.
    console_database_url: str = ""
    # How often reconciliation samples the gauges read from Postgres and Kafka (keys PENDING, outbox,
    # approvals waiting, consumer lag, dead letters, audit head) and verifies the whole audit chain.
    metrics_sample_seconds: float = 15.0
    audit_verify_seconds: float = 300.0
    # The audit log's tree heads and their witnesses (workers/reconciliation/tree_heads.py).
    audit_tree_seconds: float = 10.0
    audit_origin: str = "toolgate/audit"
    audit_witnesses: str = ""
    # Records refused that prove nobody (no signature, no stage MAC, unreadable) are audited one
    # row each only for the first few of a kind in a window of this many seconds, and the rest
    # counted into one row when it closes (workers/runtime/refusals.py).
    refusal_audit_seconds: float = 60.0
    # The secret reference of the deployment secret: the root of stage MACs and of the
    # deployment's Ed25519 key (toolgate.trust.integrity). Every stage and operator command needs it.
    deployment_secret_ref: str = "deployment-secret"
    # The deployment's Ed25519 public key (hex): clients verify observations with it. While a
    # rotation is under way, several, separated by commas (toolgate.trust.keyset).
    deployment_public_key: str = ""
    # How often a process reads the deployment's keyset again (a rotation needs no restart), and
    # how long `toolgate secret rotate` keeps the key that sealed before accepted by default.
    keyset_refresh_seconds: float = 5.0
    keyset_grace_seconds: float = 900.0
    # A proposal is refused when its created_at is older than this, or this far in the future.
    proposal_max_age_seconds: float = 900.0
    proposal_future_skew_seconds: float = 60.0
    # A record on an internal topic (a StageBatch a stage wrote) is refused when it was produced
    # longer ago than this, or further ahead than the proposal skew: a genuine record replayed
    # later is stale (workers/runtime/freshness.py). Past it, only an operator's explicit
    # `toolgate dlq replay --allow-stale` sends a record on.
    record_max_age_seconds: float = 900.0
    # Validation work each agent may spend (workers/validation/admission_rate.py): units (each a
    # small slice of validation's CPU; an ordinary call costs 2-3, a 240 KiB refusal ~1,900) refilled
    # per second, up to a burst. Past it an agent's calls are refused RATE_LIMITED until it is out of
    # debt. Held in each validation worker's memory.
    admission_work_per_second: float = 20_000.0
    admission_work_burst: float = 100_000.0
    # Short group timeouts: Tansu's JoinGroup waits for them (NOTES.md).
    session_timeout_s: float = 6.0
    heartbeat_interval_s: float = 1.0
    max_poll_interval_s: float = 30.0

    @property
    def admin_url(self) -> str:
        return self.admin_database_url or self.database_url

    @property
    def runtime_file(self) -> Path:
        return self.home / RUNTIME_FILE

    @property
    def secrets_path(self) -> Path:
        return self.secrets_dir or self.home / "secrets"

    @property
    def telemetry_dir(self) -> Path:
        return self.home / "telemetry"

    @property
    def agents_dir(self) -> Path:
        return self.home / "agents"

    def require_infrastructure(self) -> Settings:
        if not self.kafka_bootstrap or not self.database_url:
            raise SystemExit(
                "toolgate: no broker or database configured. Run `toolgate up` (embedded default) "
                "or set TOOLGATE_KAFKA_BOOTSTRAP and TOOLGATE_DATABASE_URL."
            )
        return self


# Each setting's environment variable is TOOLGATE_ and its name in capitals, but for these; every
# one is documented in docs/configuration.md (tests/unit/test_settings.py holds it to that).
_ENV_NAMED = {"kafka_home": "KAFKA_HOME", "max_poll_interval_s": "TOOLGATE_MAX_POLL_INTERVAL_SECONDS"}
# Settings no variable of their own sets: the home is TOOLGATE_HOME's, read before the others.
_NOT_FROM_ENV = frozenset({"home", "session_timeout_s", "heartbeat_interval_s"})
_ENV = {
    f.name: _ENV_NAMED.get(f.name, f"TOOLGATE_{f.name.upper()}")
    for f in fields(Settings)
    if f.name not in _NOT_FROM_ENV
}

ENV_VARS: tuple[str, ...] = ("TOOLGATE_HOME", *_ENV.values())


def _coerce(name: str, raw: Any) -> Any:
    kind = {f.name: f.type for f in fields(Settings)}[name]
    if raw is None:
        return None
    if (convert := {"int": int, "float": float, "Path | None": Path}.get(str(kind))) is not None:
        return convert(raw)
    if kind == "bool":
        return raw if isinstance(raw, bool) else str(raw).strip().lower() in ("1", "true", "yes", "on")
    if kind == "dict[str, str]":
        return dict(json.loads(raw) if isinstance(raw, str) else raw)
    if kind == "tuple[str, ...]":
        return tuple(item for i in (raw.split(",") if isinstance(raw, str) else raw) if (item := str(i).strip()))
    return str(raw)


# Settings that went, and what replaced them: set, they stop the process rather than be ignored.
_GONE = {"TOOLGATE_POLICY_FILE": "the policy is TOOLGATE_POLICY_DIR's; `toolgate policy convert FILE DIR` writes it"}


def load_settings(use_runtime: bool = True, **overrides: Any) -> Settings:
    """Settings from the environment, the runtime file of `toolgate up`, then defaults."""
    for env, why in _GONE.items():
        if os.environ.get(env):  # an operator's setting that would be ignored: say so, never ignore it
            raise ValueError(f"{env} is no longer read: {why}")
    base = Settings()
    runtime: dict[str, Any] = {}
    if use_runtime and base.runtime_file.exists():
        runtime = json.loads(base.runtime_file.read_text())
    values: dict[str, Any] = {}
    for name, env in _ENV.items():
        if env in os.environ and os.environ[env] != "":
            values[name] = _coerce(name, os.environ[env])
        elif name in runtime:
            values[name] = _coerce(name, runtime[name])
    values.update(overrides)
    return replace(base, **values)

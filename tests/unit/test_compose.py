"""docker-compose.yml checked against the code (there is no compose engine here).

The compose file is the shape of a real deployment; these tests keep it honest: every
stage has a service that runs the real command, every environment variable is one the
code reads, and the addresses it wires together point at the services it defines.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import typer.main
import yaml

from toolgate.cli.main import app
from toolgate.contracts.registry import load_registry
from toolgate.ops.stack.kafka_dist import KAFKA_VERSION
from toolgate.ops.stack.kafka_storage import node_properties
from toolgate.settings import ENV_VARS
from toolgate.workers.stages import STAGES

REPO = Path(__file__).resolve().parents[2]
COMPOSE: dict[str, Any] = yaml.safe_load((REPO / "docker-compose.yml").read_text())
SERVICES: dict[str, Any] = COMPOSE["services"]
CLI = typer.main.get_command(app)


def env_of(service: str) -> dict[str, str]:
    return {k: str(v) for k, v in (SERVICES[service].get("environment") or {}).items()}


def parse_cli(args: list[str]) -> None:
    """Parse a container command exactly as the `toolgate` entrypoint would, without running it."""
    group = CLI
    command = group.commands[args[0]]  # type: ignore[attr-defined]
    command.make_context(args[0], list(args[1:]))


def test_infrastructure_is_apache_kafka_in_kraft_mode_and_postgres() -> None:
    assert SERVICES["kafka"]["image"].startswith("apache/kafka:")
    kafka_env = env_of("kafka")
    assert "controller" in kafka_env["KAFKA_PROCESS_ROLES"] and "broker" in kafka_env["KAFKA_PROCESS_ROLES"]
    assert kafka_env["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false"  # the catalog provisions topics
    assert SERVICES["postgres"]["image"].startswith("postgres:")


# What a node's properties say of where it is and who it is: each deployment says its own.
PLACE = {
    "node.id",
    "process.roles",
    "listeners",
    "advertised.listeners",
    "listener.security.protocol.map",
    "controller.listener.names",
    "inter.broker.listener.name",
    "controller.quorum.voters",
    "log.dirs",
}


def test_kafka_is_the_version_and_has_the_settings_the_suite_ran() -> None:
    """The compose file's Kafka is the one `toolgate up --broker kafka` runs and the Kafka tier
    tested (ops/stack/kafka_dist.py), configured as ops/stack/kafka_broker.py configures a one-node cluster:
    every setting beyond the node's place, the same, as KAFKA_<NAME> variables."""
    assert SERVICES["kafka"]["image"] == f"apache/kafka:{KAFKA_VERSION}"
    lines = node_properties(1, {1: (9092, 9093)}, Path("/var/lib/kafka/data")).splitlines()
    ours = dict(line.split("=", 1) for line in lines if line)
    wanted = {f"KAFKA_{k.upper().replace('.', '_')}": v for k, v in ours.items() if k not in PLACE}
    kafka_env = env_of("kafka")
    assert {k: kafka_env.get(k) for k in wanted} == wanted


@pytest.mark.parametrize("stage", STAGES)
def test_every_stage_runs_as_its_own_service(stage: str) -> None:
    service = SERVICES[stage]
    assert service["command"] == ["worker", stage]
    parse_cli(service["command"])
    assert service["depends_on"]["setup"]["condition"] == "service_completed_successfully"


def test_every_command_is_a_real_cli_invocation() -> None:
    for service in SERVICES.values():
        if service.get("image") == "toolgate:local" and "command" in service:
            parse_cli(service["command"])
    assert SERVICES["setup"]["command"] == ["setup", "--demo"]


def test_only_settings_the_code_reads() -> None:
    for name, service in SERVICES.items():
        if service.get("image") != "toolgate:local":
            continue
        for key in env_of(name):
            assert key in ENV_VARS or key.startswith("OTEL_"), f"{name} sets {key}, which toolgate never reads"


def test_workers_point_at_the_compose_kafka_and_postgres() -> None:
    env = env_of("validation")
    host, port = env["TOOLGATE_KAFKA_BOOTSTRAP"].split(":")
    assert host == "kafka" and f"PLAINTEXT://kafka:{port}" in env_of("kafka")["KAFKA_ADVERTISED_LISTENERS"]
    pg = env_of("postgres")
    owner = urlsplit(env_of("setup")["TOOLGATE_ADMIN_DATABASE_URL"])
    assert (owner.hostname, owner.username, owner.password, owner.path.lstrip("/")) == (
        "postgres",
        pg["POSTGRES_USER"],
        pg["POSTGRES_PASSWORD"],
        pg["POSTGRES_DB"],
    )
    assert env["TOOLGATE_TELEMETRY_EXPORTER"] == "otlp" and "otel-collector" in env["OTEL_EXPORTER_OTLP_ENDPOINT"]
    assert (REPO / "ops/compose/otel-collector.yaml").exists()


def test_workers_log_in_as_the_worker_role_and_only_operators_hold_the_owners_url() -> None:
    roles = (REPO / "ops/compose/postgres-roles.sql").read_text()
    mounted = [v for v in SERVICES["postgres"]["volumes"] if "postgres-roles.sql" in v]
    assert mounted and mounted[0].split(":")[1].startswith("/docker-entrypoint-initdb.d/")
    for stage in STAGES:
        db = urlsplit(env_of(stage)["TOOLGATE_DATABASE_URL"])
        assert (db.hostname, db.path.lstrip("/")) == ("postgres", env_of("postgres")["POSTGRES_DB"])
        assert f"CREATE ROLE {db.username} LOGIN PASSWORD '{db.password}' IN ROLE toolgate_worker" in roles
        assert "TOOLGATE_ADMIN_DATABASE_URL" not in env_of(stage)
    assert env_of("cli")["TOOLGATE_ADMIN_DATABASE_URL"] == env_of("setup")["TOOLGATE_ADMIN_DATABASE_URL"]


def test_contract_endpoints_and_egress_resolve_to_the_demo_provider() -> None:
    env = env_of("execution")
    endpoints = json.loads(env["TOOLGATE_ENDPOINTS"])
    command = SERVICES["demo-provider"]["command"]
    port = command[command.index("--port") + 1]
    url = urlsplit(endpoints["demo_provider"])
    assert (url.hostname, str(url.port)) == ("demo-provider", port)
    allowed = env["TOOLGATE_EGRESS_ALLOWLIST"].split(",")
    for contract in load_registry():
        executor = contract.executor
        if executor["kind"] == "http":
            assert executor["base_url_ref"] in endpoints
            assert url.hostname in allowed and url.hostname in executor["egress_allowlist"]
    token = command[command.index("--token-file") + 1]
    assert Path(token).parent == Path(env["TOOLGATE_SECRETS_DIR"])


def test_dependencies_and_volumes_exist() -> None:
    declared = set(COMPOSE.get("volumes", {}))
    for name, service in SERVICES.items():
        for dependency in service.get("depends_on", {}):
            assert dependency in SERVICES, f"{name} depends on unknown service {dependency}"
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            assert source in declared or (REPO / source).exists(), f"{name} mounts missing {source}"


def test_the_image_carries_every_package_folder() -> None:
    dockerfile = (REPO / "Dockerfile").read_text()
    mapping = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    for folder in set(mapping.values()):
        assert f"COPY {folder} {folder}" in dockerfile
    assert 'ENTRYPOINT ["toolgate"]' in dockerfile


def test_prometheus_scrapes_every_worker_and_loads_the_rules() -> None:
    mounts = dict(v.split(":")[:2] for v in SERVICES["prometheus"]["volumes"] if v.startswith("./"))
    config = yaml.safe_load((REPO / "ops/prometheus/prometheus.yml").read_text())
    assert mounts["./ops/prometheus/prometheus.yml"] == "/etc/prometheus/prometheus.yml"
    for rules in config["rule_files"]:  # relative to the config file, mounted beside it
        assert mounts[f"./ops/prometheus/{rules}"] == f"/etc/prometheus/{rules}"
    [job] = config["scrape_configs"]
    [discovery] = job["dns_sd_configs"]
    assert set(discovery["names"]) == set(STAGES) and all(stage in SERVICES for stage in STAGES)
    for stage in STAGES:  # every worker listens where Prometheus looks, on every interface
        env = env_of(stage)
        assert env["TOOLGATE_METRICS_PORT"] == str(discovery["port"]) and env["TOOLGATE_METRICS_ADDR"] == "0.0.0.0"


def test_grafana_provisions_the_dashboard_against_the_compose_prometheus() -> None:
    mounts = dict(v.split(":")[:2] for v in SERVICES["grafana"]["volumes"])
    provisioning = REPO / "ops/grafana/provisioning"
    assert mounts["./ops/grafana/provisioning"] == "/etc/grafana/provisioning"
    [source] = yaml.safe_load((provisioning / "datasources/prometheus.yml").read_text())["datasources"]
    url = urlsplit(source["url"])
    assert url.hostname == "prometheus" and url.port == 9090 and "9090:9090" in SERVICES["prometheus"]["ports"]
    [provider] = yaml.safe_load((provisioning / "dashboards/toolgate.yml").read_text())["providers"]
    assert mounts["./ops/grafana/dashboards"] == provider["options"]["path"]
    dashboard = json.loads((REPO / "ops/grafana/dashboards/toolgate.json").read_text())
    targets = [t for p in dashboard["panels"] for t in p.get("targets", [])]
    assert targets and all(t["datasource"]["uid"] == source["uid"] for t in targets)

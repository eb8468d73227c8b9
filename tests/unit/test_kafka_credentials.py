"""Who connects to a secured `toolgate up --broker kafka` and how (ops/kafka_credentials.py): the
nodes' configuration, a SASL user for every principal of the ACL plan, each role's client settings
on the home (toolgate.kafka_security `home_security`), and no password anywhere but the secrets
directory and the nodes' own configuration."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolgate.kafka_security import (
    ADMIN,
    APPROVALS,
    DOOR,
    OPERATOR,
    KafkaSecurity,
    agent_role,
    client_config,
    scram_ref,
    stage_role,
)
from toolgate.ops.acls import AclPlan, ApprovalService
from toolgate.ops.kafka_credentials import (
    APPROVALS_PRINCIPAL,
    BrokerSecurity,
    broker_security,
    client_environment,
    describe_home,
    roles,
    stage_user,
    user_of,
    users,
)
from toolgate.ops.stack.kafka_storage import kept_cluster_id, node_properties
from toolgate.ops.stack.kafka_tls import Certificates
from toolgate.settings import Settings


def parsed(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))


def security(tmp_path: Path) -> BrokerSecurity:
    return BrokerSecurity(Certificates(tmp_path / "tls"), "broker-pw", "admin-pw")


def test_a_secured_node_runs_sasl_ssl_on_every_listener_and_the_standard_authorizer(tmp_path: Path) -> None:
    props = parsed(node_properties(1, {1: (9101, 9201)}, tmp_path / "data", security(tmp_path), 9301))
    assert props["listeners"] == "CLIENT://127.0.0.1:9101,BROKER://127.0.0.1:9301,CONTROLLER://127.0.0.1:9201"
    assert props["advertised.listeners"] == "CLIENT://127.0.0.1:9101,BROKER://127.0.0.1:9301"
    assert props["listener.security.protocol.map"] == "CLIENT:SASL_SSL,BROKER:SASL_SSL,CONTROLLER:SASL_SSL"
    assert props["inter.broker.listener.name"] == "BROKER"
    # Clients: SCRAM only. The nodes among themselves and to the controllers: PLAIN (SCRAM cannot
    # authenticate on a KRaft controller listener), over TLS.
    assert props["listener.name.client.sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    assert props["listener.name.broker.sasl.enabled.mechanisms"] == "PLAIN"
    assert props["listener.name.controller.sasl.enabled.mechanisms"] == "PLAIN"
    assert props["sasl.mechanism.controller.protocol"] == props["sasl.mechanism.inter.broker.protocol"] == "PLAIN"
    assert 'user_toolgate-broker="broker-pw"' in props["listener.name.controller.plain.sasl.jaas.config"]
    assert (props["ssl.keystore.type"], props["ssl.truststore.type"]) == ("PEM", "PEM")
    assert props["ssl.keystore.location"] == str(tmp_path / "tls" / "node.pem")
    assert props["ssl.truststore.location"] == str(tmp_path / "tls" / "ca.pem")
    assert props["authorizer.class.name"] == "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
    assert props["allow.everyone.if.no.acl.found"] == "false"
    assert props["super.users"] == "User:toolgate-broker;User:toolgate-admin"


def test_an_unsecured_node_stays_plaintext(tmp_path: Path) -> None:
    props = parsed(node_properties(1, {1: (9101, 9201)}, tmp_path / "data"))
    assert props["listener.security.protocol.map"] == "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
    assert not [key for key in props if "sasl" in key or "ssl" in key or "authorizer" in key]


def test_the_admin_s_credential_is_written_at_format_and_no_password_shows_in_a_repr(tmp_path: Path) -> None:
    made = security(tmp_path)
    assert made.format_arguments() == ["--add-scram", "SCRAM-SHA-512=[name=toolgate-admin,password=admin-pw]"]
    assert "-pw" not in repr(made)  # the passwords (the temporary path, random, may hold "pw")


def test_every_principal_of_the_plan_gets_a_user_and_the_admin_one_too() -> None:
    plan = AclPlan(
        tenants=("acme", "globex"),
        agents={"acme": ("User:cli",), "globex": ("User:globex-cli",)},
        approval_services=(ApprovalService(APPROVALS_PRINCIPAL),),
        operators=("User:toolgate-operator",),
        doors=(),
    )
    every = users(plan)
    assert {"cli", "globex-cli", "toolgate-admin", "toolgate-approvals", "toolgate-operator"} <= set(every)
    assert {f"toolgate-{stage}" for stage in ("validation", "policy", "execution", "reconciliation")} <= set(every)
    assert "toolgate-broker" not in every  # the nodes' own user is PLAIN, in their configuration only
    named = roles(plan)
    assert (named[ADMIN], named[OPERATOR], named[DOOR], named[APPROVALS]) == (
        "toolgate-admin",
        "toolgate-operator",
        "toolgate-mcp",
        "toolgate-approvals",
    )
    assert named[stage_role("validation")] == stage_user("validation") == "toolgate-validation"


def test_only_user_principals_can_be_sasl_users() -> None:
    assert user_of("User:cli") == "cli"
    with pytest.raises(ValueError, match="not a User"):
        user_of("Group:admins")


def test_a_worker_connects_as_its_user_with_its_password_by_reference(tmp_path: Path) -> None:
    env = client_environment("toolgate-policy", Certificates(tmp_path / "tls"))
    assert not any("PASSWORD" in name and not name.endswith("_REF") for name in env)  # by reference only
    read = KafkaSecurity.from_env(env)
    assert (read.protocol, read.sasl_mechanism, read.sasl_username) == ("SASL_SSL", "SCRAM-SHA-512", "toolgate-policy")
    assert read.sasl_password_ref == scram_ref("toolgate-policy")
    assert read.ssl_cafile == str(tmp_path / "tls" / "ca.pem")


def test_a_command_on_the_home_connects_as_its_role(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TOOLGATE_KAFKA_SECURITY_PROTOCOL", "TOOLGATE_SECRET_KAFKA_SCRAM_TOOLGATE_OPERATOR"):
        monkeypatch.delenv(name, raising=False)
    settings = Settings(home=tmp_path)
    certificates = Certificates(tmp_path / "kafka" / "tls")
    assert client_config(settings, OPERATOR) == {}  # not a secured home: PLAINTEXT
    (tmp_path / "kafka").mkdir()
    made = broker_security(certificates, settings.secrets_path)
    assert (settings.secrets_path / scram_ref("toolgate-admin")).read_text() == made.admin_password
    described = describe_home(tmp_path, certificates, roles(AclPlan(tenants=())), [APPROVALS_PRINCIPAL])
    assert made.admin_password not in described.read_text() and made.broker_password not in described.read_text()
    (settings.secrets_path / scram_ref("toolgate-operator")).write_text("operator-pw")
    (settings.secrets_path / scram_ref("cli")).write_text("cli-pw")
    assert client_config(settings, OPERATOR) == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "toolgate-operator",
        "sasl.password": "operator-pw",
        "ssl.ca.location": str(certificates.ca),
    }
    assert client_config(settings, agent_role("cli"))["sasl.username"] == "cli"
    assert client_config(settings) == {}  # no role: only the environment counts
    with pytest.raises(ValueError, match="no Kafka user for the role"):
        client_config(settings, "somebody")
    monkeypatch.setenv("TOOLGATE_KAFKA_SECURITY_PROTOCOL", "PLAINTEXT")  # the environment wins
    assert client_config(settings, OPERATOR) == {}


def test_a_home_made_secured_is_refused_unsecured_and_the_other_way(tmp_path: Path) -> None:
    kept_cluster_id(tmp_path / "kafka", 3, "4.4.0", secure=True)
    with pytest.raises(SystemExit, match="was made secured"):
        kept_cluster_id(tmp_path / "kafka", 3, "4.4.0")
    kept_cluster_id(tmp_path / "plain", 1, "4.4.0")
    with pytest.raises(SystemExit, match="was made not secured"):
        kept_cluster_id(tmp_path / "plain", 1, "4.4.0", secure=True)

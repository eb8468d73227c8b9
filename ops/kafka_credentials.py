"""Who connects to a secured `toolgate up --broker kafka`, and how each proves it.

With `--secure` (TOOLGATE_KAFKA_SECURE) every listener of every node runs SASL over TLS
(certificates: ops/stack/kafka_tls.py) and the standard authorizer allows nothing without an ACL:

| listener     | who                                   | mechanism                                     |
|--------------|---------------------------------------|-----------------------------------------------|
| `CLIENT`     | every client: toolgate's and agents'   | SCRAM-SHA-512 (credentials in the metadata log)|
| `BROKER`     | node to node (inter-broker)            | PLAIN, its one user in the listener's JAAS     |
| `CONTROLLER` | node to the quorum's controllers       | PLAIN, the same user                           |

SCRAM cannot authenticate on a KRaft controller listener (its credentials live in the metadata
the controllers serve), so the nodes speak PLAIN to each other, over TLS, as `toolgate-broker`,
a user that exists only in the nodes' own configuration (server.properties, 0600). Its password
and every other user's are random, made once, each a file of the home's secrets directory (0600)
named by the secret reference `kafka-scram-<user>` (toolgate.kafka_security `scram_ref`): never
in an environment value, runtime.json or a log.

The super users are the nodes' own principal and `toolgate-admin`, whose SCRAM credential is
written into the metadata log when the nodes' storage is formatted (`--add-scram`: the only way
in before any credential exists). `toolgate up` connects as the admin to make the topics, to
create a SCRAM credential for every principal of the ACL plan (each stage's `toolgate-<stage>`,
the registered agents, the operator, the MCP door, the demo approval service), and to apply that
plan's bindings (ops/acls.py, what `setup --acls` applies). Each stage worker then runs as its
own user, so what a stage may do is exactly what its bindings allow.

`<home>/kafka/security.json` says, for the commands run on the home, the protocol, the CA file
and which user each role is (toolgate.kafka_security `home_security`); it holds no password.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialAlteration,
    UserScramCredentialUpsertion,
)

from toolgate.kafka_security import (
    ADMIN,
    APPROVALS,
    DOOR,
    ENV_CAFILE,
    ENV_MECHANISM,
    ENV_PASSWORD_REF,
    ENV_PROTOCOL,
    ENV_USERNAME,
    HOME_SECURITY,
    OPERATOR,
    KafkaSecurity,
    SaslMechanism,
    SecurityProtocol,
    scram_ref,
    stage_role,
)
from toolgate.ops.acl_cluster import admin_for, apply, plan_from_registry
from toolgate.ops.acls import DOOR_PRINCIPAL, OPERATOR_PRINCIPAL, STAGE_RIGHTS, AclPlan, bindings
from toolgate.ops.stack.kafka_tls import Certificates
from toolgate.secrets import SecretProvider, generate
from toolgate.settings import Settings

BROKER_USER = "toolgate-broker"
ADMIN_USER = "toolgate-admin"
APPROVALS_PRINCIPAL = "User:toolgate-approvals"  # the demo approval service, every tenant's
PROTOCOL = SecurityProtocol.SASL_SSL
MECHANISM = SaslMechanism.SCRAM_SHA_512
ITERATIONS = 8192
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
PLAIN_LOGIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule"


def user_of(principal: str) -> str:
    """The SASL user of a `User:<name>` principal."""
    kind, _, name = principal.partition(":")
    if kind != "User" or not name:
        raise ValueError(f"{principal!r} is not a User:<name> principal: a SASL user cannot have it")
    return name


def roles(plan: AclPlan) -> dict[str, str]:
    """The user of each role a command on the home may take (security.json's `users`)."""
    users = {ADMIN: ADMIN_USER, OPERATOR: user_of(OPERATOR_PRINCIPAL), DOOR: user_of(DOOR_PRINCIPAL)}
    users[APPROVALS] = user_of(APPROVALS_PRINCIPAL)
    users |= {stage_role(stage): user_of(plan.stage_principal(stage)) for stage in STAGE_RIGHTS}
    return users


def users(plan: AclPlan) -> list[str]:
    """Every user that needs a SCRAM credential: each principal of the plan, and the admin."""
    return sorted({ADMIN_USER, *(user_of(principal) for principal in plan.roles())})


@dataclass(frozen=True)
class BrokerSecurity:
    """What a secured node needs: the certificates, and the passwords of the nodes' own user and
    of the admin (held here only to be written into the nodes' configuration and storage)."""

    certificates: Certificates
    broker_password: str
    admin_password: str

    def __repr__(self) -> str:
        return f"BrokerSecurity({self.certificates.directory})"

    def properties(self) -> dict[str, object]:
        """server.properties of a secured node, beyond its listeners."""
        plain = (
            f'{PLAIN_LOGIN} required username="{BROKER_USER}" password="{self.broker_password}" '
            f'user_{BROKER_USER}="{self.broker_password}";'
        )
        return {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": self.certificates.node,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": self.certificates.ca,
            "ssl.endpoint.identification.algorithm": "https",
            "listener.name.client.sasl.enabled.mechanisms": MECHANISM.value,
            f"listener.name.client.{MECHANISM.value.lower()}.sasl.jaas.config": f"{SCRAM_LOGIN} required;",
            "listener.name.broker.sasl.enabled.mechanisms": "PLAIN",
            "listener.name.broker.plain.sasl.jaas.config": plain,
            "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
            "listener.name.controller.plain.sasl.jaas.config": plain,
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "sasl.mechanism.controller.protocol": "PLAIN",
            "authorizer.class.name": AUTHORIZER,
            "allow.everyone.if.no.acl.found": "false",
            "super.users": f"User:{BROKER_USER};User:{ADMIN_USER}",
        }

    def format_arguments(self) -> list[str]:
        """`kafka.tools.StorageTool format`'s arguments that write the admin's credential."""
        return ["--add-scram", f"{MECHANISM.value}=[name={ADMIN_USER},password={self.admin_password}]"]


def broker_security(certificates: Certificates, secrets_dir: Path) -> BrokerSecurity:
    """The nodes' security, their passwords made the first time (kept in `secrets_dir`)."""
    provider = SecretProvider(secrets_dir)
    for user in (BROKER_USER, ADMIN_USER):
        generate(secrets_dir, scram_ref(user))
    return BrokerSecurity(
        certificates, provider.resolve(scram_ref(BROKER_USER)), provider.resolve(scram_ref(ADMIN_USER))
    )


def describe_home(
    home: Path, certificates: Certificates, users: Mapping[str, str], approval_services: Iterable[str]
) -> Path:
    """Write `<home>/kafka/security.json`: the protocol, the CA, each role's user and the
    approval services the home runs (what `setup --acls` plans by default). No password."""
    path = home / HOME_SECURITY
    document = {
        "protocol": PROTOCOL.value,
        "sasl_mechanism": MECHANISM.value,
        "ssl_cafile": str(certificates.ca),
        "users": dict(sorted(users.items())),
        "approval_services": list(approval_services),
    }
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(document, indent=2))
    tmp.replace(path)
    return path


def client_environment(user: str, certificates: Certificates) -> dict[str, str]:
    """The environment that makes a toolgate process's clients connect as `user`
    (toolgate.kafka_security): its password by reference, never by value."""
    return {
        ENV_PROTOCOL: PROTOCOL.value,
        ENV_MECHANISM: MECHANISM.value,
        ENV_USERNAME: user,
        ENV_PASSWORD_REF: scram_ref(user),
        ENV_CAFILE: str(certificates.ca),
    }


def upserts(passwords: Mapping[str, str]) -> list[UserScramCredentialAlteration]:
    """The SCRAM-SHA-512 credential of each user, for `alter_user_scram_credentials`."""
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, ITERATIONS)
    return [UserScramCredentialUpsertion(user, info, password.encode()) for user, password in sorted(passwords.items())]


def provision_credentials(
    admin: AdminClient, every: Iterable[str], secrets_dir: Path, timeout: float = 30.0
) -> list[str]:
    """Give each user its SCRAM credential on the cluster (its password made the first time,
    kept in `secrets_dir`; setting it again is harmless); the users done."""
    provider = SecretProvider(secrets_dir)
    passwords = {}
    for user in every:
        generate(secrets_dir, scram_ref(user))
        passwords[user] = provider.resolve(scram_ref(user))
    if not passwords:
        return []
    futures = admin.alter_user_scram_credentials(upserts(passwords), request_timeout=timeout)
    problems = []
    for user, future in futures.items():
        try:
            future.result(timeout)
        except Exception as exc:  # a KafkaException wrapping the broker's KafkaError
            problems.append(f"{user}: {exc}")
    if problems:
        raise RuntimeError("SCRAM credentials not set: " + "; ".join(problems))
    return sorted(passwords)


def client_settings(user: str, certificates: Certificates, secrets_dir: Path) -> dict[str, str]:
    """librdkafka settings that connect as `user` (its password read from `secrets_dir`)."""
    security = KafkaSecurity(PROTOCOL, MECHANISM, user, scram_ref(user), str(certificates.ca))
    return security.confluent_config(SecretProvider(secrets_dir))


def stage_user(stage: str) -> str:
    """The SASL user a stage worker runs as (`User:toolgate-<stage>`, as ops/acls.py plans it)."""
    return user_of(AclPlan(tenants=()).stage_principal(stage))


def grant(settings: Settings, say: Callable[[str], None]) -> list[str]:
    """As the admin: a SCRAM credential for every principal of the deployment's ACL plan (the
    registered agents, each stage, the operator, the MCP door, the demo approval service), then the
    plan's bindings, through the code `setup --acls` runs; the users. `settings` name the
    database as the tables' owner."""
    plan = plan_from_registry(settings, [APPROVALS_PRINCIPAL], [OPERATOR_PRINCIPAL], [DOOR_PRINCIPAL])
    admin = admin_for(settings)
    every = provision_credentials(admin, users(plan), settings.secrets_path)
    created = apply(admin, bindings(plan))
    say(f"security   SASL_SSL {MECHANISM.value}: {len(every)} principals, {len(created)} ACL bindings applied")
    return every


def home_approval_services(home: Path) -> list[str]:
    """The approval services a secured home runs (what `setup --acls` plans when told none)."""
    path = home / HOME_SECURITY
    return list(json.loads(path.read_text())["approval_services"]) if path.is_file() else []

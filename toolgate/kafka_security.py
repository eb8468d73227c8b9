"""How every toolgate Kafka client authenticates and encrypts: SASL and TLS from the environment.

Every toolgate Kafka client is confluent-kafka's (librdkafka: the stages, the outbox relay,
`ToolgateClient`, the admin client that provisions topics and ACLs), and each presents the
identity the environment gives this process, so the settings live here once, as frozen data:

| environment variable                | field               | librdkafka key             |
|-------------------------------------|---------------------|----------------------------|
| `TOOLGATE_KAFKA_SECURITY_PROTOCOL`  | `protocol`          | `security.protocol`        |
| `TOOLGATE_KAFKA_SASL_MECHANISM`     | `sasl_mechanism`    | `sasl.mechanism`           |
| `TOOLGATE_KAFKA_SASL_USERNAME`      | `sasl_username`     | `sasl.username`            |
| `TOOLGATE_KAFKA_SASL_PASSWORD_REF`  | `sasl_password_ref` | `sasl.password` (resolved) |
| `TOOLGATE_KAFKA_SSL_CAFILE`         | `ssl_cafile`        | `ssl.ca.location`          |
| `TOOLGATE_KAFKA_SSL_CERTFILE`       | `ssl_certfile`      | `ssl.certificate.location` |
| `TOOLGATE_KAFKA_SSL_KEYFILE`        | `ssl_keyfile`       | `ssl.key.location`         |

Nothing set means PLAINTEXT, and every builder returns nothing to add. The password is never
held here: `sasl_password_ref` is a secret reference (toolgate.secrets), resolved by the
`SecretProvider` passed in at the moment a client is built, so the value is registered with
the log scrubber and never sits in settings, reprs or runtime files.

A home whose `toolgate up --broker kafka --secure` runs the cluster (ops/kafka_credentials.py)
describes it in `<home>/kafka/security.json`: its protocol, mechanism and CA file, and the SASL
user of each role (never a password; each user's password is the secret reference
`kafka-scram-<user>`, a file in the home's secrets directory). A command run on that host asks for
its role (`client_config(settings, OPERATOR)`, `agent_role("cli")`) and gets that user's settings;
the environment, when it sets a protocol, wins (the stage workers get theirs from `toolgate up`
that way, and a deployment elsewhere sets them so). Without a role, only the environment counts.

Combinations that cannot work are refused when the settings are read, with a `ValueError`
naming the variable, rather than as an authentication failure at the first connect: a SASL
protocol without a mechanism, username or password reference; SASL or TLS settings under a
protocol that would ignore them (a typo in the protocol must not silently drop the
credentials); a client certificate without its key, or a key without its certificate.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TypeVar

from toolgate.secrets import SecretProvider
from toolgate.settings import Settings


class SecurityProtocol(StrEnum):
    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def uses_sasl(self) -> bool:
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)

    @property
    def uses_tls(self) -> bool:
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)


class SaslMechanism(StrEnum):
    PLAIN = "PLAIN"
    SCRAM_SHA_256 = "SCRAM-SHA-256"
    SCRAM_SHA_512 = "SCRAM-SHA-512"


ENV_PROTOCOL = "TOOLGATE_KAFKA_SECURITY_PROTOCOL"
ENV_MECHANISM = "TOOLGATE_KAFKA_SASL_MECHANISM"
ENV_USERNAME = "TOOLGATE_KAFKA_SASL_USERNAME"
ENV_PASSWORD_REF = "TOOLGATE_KAFKA_SASL_PASSWORD_REF"
ENV_CAFILE = "TOOLGATE_KAFKA_SSL_CAFILE"
ENV_CERTFILE = "TOOLGATE_KAFKA_SSL_CERTFILE"
ENV_KEYFILE = "TOOLGATE_KAFKA_SSL_KEYFILE"

ENV_VARS: tuple[str, ...] = (
    ENV_PROTOCOL,
    ENV_MECHANISM,
    ENV_USERNAME,
    ENV_PASSWORD_REF,
    ENV_CAFILE,
    ENV_CERTFILE,
    ENV_KEYFILE,
)


E = TypeVar("E", bound=StrEnum)


def _choice(kind: type[E], raw: str, variable: str) -> E:
    try:
        return kind(raw.strip().upper())
    except ValueError:
        allowed = ", ".join(member.value for member in kind)
        raise ValueError(f"{variable}={raw!r} is not one of {allowed}") from None


@dataclass(frozen=True)
class KafkaSecurity:
    """One deployment's Kafka security settings; validated on construction."""

    protocol: SecurityProtocol = SecurityProtocol.PLAINTEXT
    sasl_mechanism: SaslMechanism | None = None
    sasl_username: str | None = None
    sasl_password_ref: str | None = None
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None

    def __post_init__(self) -> None:
        # Accept plain strings from callers that build it by hand, as from_env does.
        object.__setattr__(self, "protocol", _choice(SecurityProtocol, str(self.protocol), ENV_PROTOCOL))
        if self.sasl_mechanism is not None:
            mechanism = _choice(SaslMechanism, str(self.sasl_mechanism), ENV_MECHANISM)
            object.__setattr__(self, "sasl_mechanism", mechanism)
        problems = self._problems()
        if problems:
            raise ValueError("Kafka security settings: " + "; ".join(problems))

    def _problems(self) -> list[str]:
        p = self.protocol
        sasl = {
            ENV_MECHANISM: self.sasl_mechanism,
            ENV_USERNAME: self.sasl_username,
            ENV_PASSWORD_REF: self.sasl_password_ref,
        }
        tls = {ENV_CAFILE: self.ssl_cafile, ENV_CERTFILE: self.ssl_certfile, ENV_KEYFILE: self.ssl_keyfile}
        problems: list[str] = []
        if p.uses_sasl:
            problems += [f"{ENV_PROTOCOL}={p} needs {name}" for name, value in sasl.items() if not value]
        else:
            problems += [f"{name} is set but {ENV_PROTOCOL}={p} does not use SASL" for name, v in sasl.items() if v]
        if not p.uses_tls:
            problems += [f"{name} is set but {ENV_PROTOCOL}={p} does not use TLS" for name, v in tls.items() if v]
        if bool(self.ssl_certfile) != bool(self.ssl_keyfile):
            problems.append(f"a client certificate needs both {ENV_CERTFILE} and {ENV_KEYFILE}")
        return problems

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> KafkaSecurity:
        """The settings in `environ` (pass `os.environ`); an empty variable counts as unset."""

        def get(name: str) -> str | None:
            value = environ.get(name, "").strip()
            return value or None

        mechanism = get(ENV_MECHANISM)
        return cls(
            protocol=_choice(SecurityProtocol, get(ENV_PROTOCOL) or "PLAINTEXT", ENV_PROTOCOL),
            sasl_mechanism=_choice(SaslMechanism, mechanism, ENV_MECHANISM) if mechanism else None,
            sasl_username=get(ENV_USERNAME),
            sasl_password_ref=get(ENV_PASSWORD_REF),
            ssl_cafile=get(ENV_CAFILE),
            ssl_certfile=get(ENV_CERTFILE),
            ssl_keyfile=get(ENV_KEYFILE),
        )

    def _password(self, secrets: SecretProvider) -> str:
        assert self.sasl_password_ref is not None  # guaranteed by validation for SASL protocols
        return secrets.resolve(self.sasl_password_ref)

    def confluent_config(self, secrets: SecretProvider) -> dict[str, str]:
        """librdkafka settings to merge into a Producer, Consumer or AdminClient config;
        empty for PLAINTEXT."""
        if self.protocol is SecurityProtocol.PLAINTEXT:
            return {}
        config = {"security.protocol": self.protocol.value}
        if self.protocol.uses_sasl:
            assert self.sasl_mechanism is not None and self.sasl_username is not None
            config |= {
                "sasl.mechanism": self.sasl_mechanism.value,
                "sasl.username": self.sasl_username,
                "sasl.password": self._password(secrets),
            }
        files = {
            "ssl.ca.location": self.ssl_cafile,
            "ssl.certificate.location": self.ssl_certfile,
            "ssl.key.location": self.ssl_keyfile,
        }
        config |= {key: path for key, path in files.items() if path}
        return config


# The roles a command on a secured home may take (the keys of security.json's `users`); an
# agent's is `agent_role(agent_id)`, a stage's `stage_role(stage)`.
ADMIN = "admin"
OPERATOR = "operator"
DOOR = "door"
APPROVALS = "approvals"
HOME_SECURITY = Path("kafka") / "security.json"


def agent_role(agent_id: str) -> str:
    return f"agent:{agent_id}"


def stage_role(stage: str) -> str:
    return f"stage:{stage}"


def scram_ref(user: str) -> str:
    """The secret reference of a SASL user's password on a secured home."""
    return f"kafka-scram-{user}"


def home_security(settings: Settings, role: str) -> KafkaSecurity:
    """The settings of `role`'s user on this home's secured cluster; PLAINTEXT when the home
    runs none. An agent's user is its agent id. A role the home does not know is refused."""
    path = settings.home / HOME_SECURITY
    if not path.is_file():
        return KafkaSecurity()
    described = json.loads(path.read_text())
    users: dict[str, str] = described["users"]
    if role.startswith("agent:"):
        user = role.removeprefix("agent:")
    elif role in users:
        user = users[role]
    else:
        raise ValueError(f"{path} names no Kafka user for the role {role!r} (roles: {', '.join(sorted(users))})")
    return KafkaSecurity(
        protocol=SecurityProtocol(described["protocol"]),
        sasl_mechanism=SaslMechanism(described["sasl_mechanism"]),
        sasl_username=user,
        sasl_password_ref=scram_ref(user),
        ssl_cafile=described["ssl_cafile"],
    )


def client_config(settings: Settings, role: str | None = None) -> dict[str, str]:
    """librdkafka settings for this process's confluent-kafka clients: the environment's when it
    sets a protocol (or no role is given), else those of `role` on this home's secured cluster."""
    secrets = SecretProvider(settings.secrets_path)
    if role is None or os.environ.get(ENV_PROTOCOL, "").strip():
        return KafkaSecurity.from_env(os.environ).confluent_config(secrets)
    return home_security(settings, role).confluent_config(secrets)


__all__ = [
    "ADMIN",
    "APPROVALS",
    "DOOR",
    "ENV_VARS",
    "HOME_SECURITY",
    "OPERATOR",
    "KafkaSecurity",
    "SaslMechanism",
    "SecurityProtocol",
    "agent_role",
    "client_config",
    "home_security",
    "scram_ref",
    "stage_role",
]

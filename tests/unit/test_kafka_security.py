"""KafkaSecurity: the environment's SASL/TLS settings, their validation, and each client's dialect."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from toolgate.kafka_security import ENV_VARS, KafkaSecurity, SaslMechanism, SecurityProtocol
from toolgate.secrets import SecretMissing, SecretProvider, env_name

PASSWORD = "s3cr3t-kafka-password"
REF = "kafka-password"

P = "TOOLGATE_KAFKA_SECURITY_PROTOCOL"
M = "TOOLGATE_KAFKA_SASL_MECHANISM"
U = "TOOLGATE_KAFKA_SASL_USERNAME"
R = "TOOLGATE_KAFKA_SASL_PASSWORD_REF"
CA = "TOOLGATE_KAFKA_SSL_CAFILE"
CERT = "TOOLGATE_KAFKA_SSL_CERTFILE"
KEY = "TOOLGATE_KAFKA_SSL_KEYFILE"

SASL = {M: "SCRAM-SHA-512", U: "toolgate-policy", R: REF}


@pytest.fixture
def secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SecretProvider:
    monkeypatch.delenv(env_name(REF), raising=False)
    directory = tmp_path / "secrets"
    directory.mkdir()
    (directory / REF).write_text(PASSWORD + "\n")
    return SecretProvider(directory)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A self-signed CA and a client certificate with its key, as PEM files."""
    directory = tmp_path_factory.mktemp("pki")
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "toolgate-test")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    files = {"ca": directory / "ca.pem", "cert": directory / "client.pem", "key": directory / "client.key"}
    files["ca"].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    files["cert"].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    files["key"].write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return {name: str(path) for name, path in files.items()}


# --- reading the environment -------------------------------------------------------------

VALID: list[tuple[str, dict[str, str], KafkaSecurity]] = [
    ("nothing set", {}, KafkaSecurity()),
    ("empty values count as unset", dict.fromkeys(ENV_VARS, ""), KafkaSecurity()),
    ("explicit plaintext", {P: "PLAINTEXT"}, KafkaSecurity()),
    (
        "sasl plaintext, scram-512",
        {P: "SASL_PLAINTEXT", **SASL},
        KafkaSecurity(SecurityProtocol.SASL_PLAINTEXT, SaslMechanism.SCRAM_SHA_512, "toolgate-policy", REF),
    ),
    (
        "case and spaces forgiven",
        {P: " sasl_plaintext ", M: "scram-sha-256", U: "u", R: "r"},
        KafkaSecurity(SecurityProtocol.SASL_PLAINTEXT, SaslMechanism.SCRAM_SHA_256, "u", "r"),
    ),
    (
        "sasl plain",
        {P: "SASL_PLAINTEXT", M: "PLAIN", U: "u", R: "r"},
        KafkaSecurity(SecurityProtocol.SASL_PLAINTEXT, SaslMechanism.PLAIN, "u", "r"),
    ),
    ("ssl, system CAs", {P: "SSL"}, KafkaSecurity(SecurityProtocol.SSL)),
    ("ssl with a CA", {P: "SSL", CA: "/ca.pem"}, KafkaSecurity(SecurityProtocol.SSL, ssl_cafile="/ca.pem")),
    (
        "mutual tls",
        {P: "SSL", CA: "/ca.pem", CERT: "/c.pem", KEY: "/c.key"},
        KafkaSecurity(SecurityProtocol.SSL, ssl_cafile="/ca.pem", ssl_certfile="/c.pem", ssl_keyfile="/c.key"),
    ),
    (
        "sasl over tls",
        {P: "SASL_SSL", **SASL, CA: "/ca.pem"},
        KafkaSecurity(
            SecurityProtocol.SASL_SSL, SaslMechanism.SCRAM_SHA_512, "toolgate-policy", REF, ssl_cafile="/ca.pem"
        ),
    ),
]


@pytest.mark.parametrize(("case", "environ", "expected"), VALID, ids=[c[0] for c in VALID])
def test_from_env_reads_valid_settings(case: str, environ: dict[str, str], expected: KafkaSecurity) -> None:
    assert KafkaSecurity.from_env(environ) == expected


INVALID: list[tuple[str, dict[str, str], str]] = [
    ("unknown protocol", {P: "SASL"}, "TOOLGATE_KAFKA_SECURITY_PROTOCOL='SASL' is not one of"),
    ("unknown mechanism", {P: "SASL_SSL", M: "GSSAPI", U: "u", R: "r"}, "TOOLGATE_KAFKA_SASL_MECHANISM='GSSAPI'"),
    ("sasl without username", {P: "SASL_PLAINTEXT", M: "PLAIN", R: "r"}, "needs TOOLGATE_KAFKA_SASL_USERNAME"),
    ("sasl without password ref", {P: "SASL_SSL", M: "PLAIN", U: "u"}, "needs TOOLGATE_KAFKA_SASL_PASSWORD_REF"),
    ("sasl without mechanism", {P: "SASL_PLAINTEXT", U: "u", R: "r"}, "needs TOOLGATE_KAFKA_SASL_MECHANISM"),
    ("credentials under plaintext", {**SASL}, "TOOLGATE_KAFKA_SASL_USERNAME is set but"),
    ("credentials under ssl", {P: "SSL", U: "u"}, "does not use SASL"),
    ("ca file under plaintext", {CA: "/ca.pem"}, "TOOLGATE_KAFKA_SSL_CAFILE is set but"),
    ("ca file under sasl plaintext", {P: "SASL_PLAINTEXT", **SASL, CA: "/ca.pem"}, "does not use TLS"),
    ("cert without key", {P: "SSL", CERT: "/c.pem"}, "needs both TOOLGATE_KAFKA_SSL_CERTFILE and"),
    ("key without cert", {P: "SASL_SSL", **SASL, KEY: "/c.key"}, "needs both TOOLGATE_KAFKA_SSL_CERTFILE and"),
]


@pytest.mark.parametrize(("case", "environ", "message"), INVALID, ids=[c[0] for c in INVALID])
def test_from_env_refuses_combinations_that_cannot_work(case: str, environ: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        KafkaSecurity.from_env(environ)


def test_every_problem_is_named_at_once() -> None:
    with pytest.raises(ValueError) as info:
        KafkaSecurity.from_env({P: "SASL_PLAINTEXT"})
    assert all(name in str(info.value) for name in (M, U, R))


def test_direct_construction_is_validated_and_accepts_strings() -> None:
    built = KafkaSecurity("sasl_ssl", "SCRAM-SHA-256", "u", "r")  # type: ignore[arg-type]
    assert built.protocol is SecurityProtocol.SASL_SSL
    assert built.sasl_mechanism is SaslMechanism.SCRAM_SHA_256
    with pytest.raises(ValueError, match="needs"):
        KafkaSecurity(SecurityProtocol.SASL_SSL)


def test_repr_never_holds_the_password(secrets: SecretProvider) -> None:
    security = KafkaSecurity.from_env({P: "SASL_PLAINTEXT", **SASL})
    assert PASSWORD not in repr(security)
    assert REF in repr(security)


# --- librdkafka --------------------------------------------------------------------------

CONFLUENT: list[tuple[str, dict[str, str], dict[str, str]]] = [
    ("plaintext adds nothing", {}, {}),
    (
        "sasl plaintext",
        {P: "SASL_PLAINTEXT", **SASL},
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "toolgate-policy",
            "sasl.password": PASSWORD,
        },
    ),
    ("ssl, system CAs", {P: "SSL"}, {"security.protocol": "SSL"}),
    (
        "mutual tls",
        {P: "SSL", CA: "/ca.pem", CERT: "/c.pem", KEY: "/c.key"},
        {
            "security.protocol": "SSL",
            "ssl.ca.location": "/ca.pem",
            "ssl.certificate.location": "/c.pem",
            "ssl.key.location": "/c.key",
        },
    ),
    (
        "sasl over tls",
        {P: "SASL_SSL", **SASL, CA: "/ca.pem"},
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "toolgate-policy",
            "sasl.password": PASSWORD,
            "ssl.ca.location": "/ca.pem",
        },
    ),
]


@pytest.mark.parametrize(("case", "environ", "expected"), CONFLUENT, ids=[c[0] for c in CONFLUENT])
def test_confluent_config(
    case: str, environ: dict[str, str], expected: dict[str, str], secrets: SecretProvider
) -> None:
    config = KafkaSecurity.from_env(environ).confluent_config(secrets)
    assert config == expected
    assert all(isinstance(value, str) for value in config.values())


def test_confluent_config_is_accepted_by_librdkafka(secrets: SecretProvider) -> None:
    from confluent_kafka import Producer

    config = KafkaSecurity.from_env({P: "SASL_PLAINTEXT", **SASL}).confluent_config(secrets)
    # Building a client validates every key and value; nothing connects until it is used.
    Producer({**config, "bootstrap.servers": "127.0.0.1:9"}).flush(0)


def test_an_unresolvable_password_reference_fails_when_the_client_is_built(secrets: SecretProvider) -> None:
    security = KafkaSecurity.from_env({P: "SASL_PLAINTEXT", **SASL, R: "no-such-secret"})
    with pytest.raises(SecretMissing, match="no-such-secret"):
        security.confluent_config(secrets)

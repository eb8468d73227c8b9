"""The certificates of a secured `toolgate up --broker kafka`: a CA and one node certificate.

`toolgate up --broker kafka --secure` runs TLS on every listener of every node (clients',
inter-broker and controller traffic alike). The certificates are made once, under the home, with
`cryptography`, and kept: a restart on the same home finds them, `--fresh` drops them with the
cluster.

| path (under `<home>/kafka/tls/`) | what                                              | mode |
|----------------------------------|---------------------------------------------------|------|
| `ca.pem`                         | the CA's certificate: every client trusts it       | 0644 |
| `node.pem`                       | the node's private key (PKCS#8) and its chain      | 0600 |

Kafka 4 reads PEM directly (`ssl.keystore.type=PEM`: one file holding the unencrypted PKCS#8 key
and the certificate chain; `ssl.truststore.type=PEM`: the CA's certificate), librdkafka reads
`ca.pem` as `ssl.ca.location`. Every node presents the same certificate, made for where the nodes
listen (`127.0.0.1`, `localhost`), and it serves as a client certificate too (a node connecting
to another node or to the quorum's controllers verifies the other's with hostname verification on,
as every Java client does by default).

The CA's private key signs the node certificate and is never written: nothing else is ever signed
by it, and a key that is not kept cannot leak. A new certificate means a new CA (`--fresh`).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALID_DAYS = 3650
HOSTS = ("localhost",)
ADDRESSES = ("127.0.0.1",)


@dataclass(frozen=True)
class Certificates:
    """Where a home's certificates are."""

    directory: Path

    @property
    def ca(self) -> Path:
        return self.directory / "ca.pem"

    @property
    def node(self) -> Path:
        return self.directory / "node.pem"

    @property
    def made(self) -> bool:
        return self.ca.is_file() and self.node.is_file()


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "toolgate"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def authority(key: ec.EllipticCurvePrivateKey, now: dt.datetime) -> x509.Certificate:
    """A self-signed CA certificate for `key`, valid from `now` (a minute back, for clock skew)."""
    subject = _name("toolgate local CA")
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=1))
        .not_valid_after(now + dt.timedelta(days=VALID_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )  # keyCertSign, cRLSign
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )


def node_certificate(
    ca: x509.Certificate, ca_key: ec.EllipticCurvePrivateKey, key: ec.EllipticCurvePrivateKey, now: dt.datetime
) -> x509.Certificate:
    """The nodes' certificate: `key`'s, signed by the CA, for 127.0.0.1 and localhost, for a
    server and a client alike."""
    names: list[x509.GeneralName] = [x509.DNSName(h) for h in HOSTS]
    names += [x509.IPAddress(ipaddress.ip_address(a)) for a in ADDRESSES]
    return (
        x509.CertificateBuilder()
        .subject_name(_name("toolgate-broker"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=1))
        .not_valid_after(now + dt.timedelta(days=VALID_DAYS))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False
        )
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )


def keystore(key: ec.EllipticCurvePrivateKey, chain: list[x509.Certificate]) -> bytes:
    """A PEM keystore as Kafka reads it: the unencrypted PKCS#8 key, then the certificate chain."""
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    return pem + b"".join(c.public_bytes(serialization.Encoding.PEM) for c in chain)


def _write(path: Path, data: bytes, mode: int) -> None:
    """Write a file whole (a scratch file renamed into place) with `mode` from its creation."""
    tmp = path.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    tmp.replace(path)


def ensure_certificates(directory: Path, now: dt.datetime | None = None) -> Certificates:
    """The home's certificates in `directory`: made the first time, kept after."""
    made = Certificates(directory)
    if made.made:
        return made
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    when = now or dt.datetime.now(dt.UTC)
    ca_key, node_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = authority(ca_key, when)
    node = node_certificate(ca, ca_key, node_key, when)
    _write(made.node, keystore(node_key, [node, ca]), 0o600)
    _write(made.ca, ca.public_bytes(serialization.Encoding.PEM), 0o644)  # last: it marks them made
    return made

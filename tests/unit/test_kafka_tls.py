"""The certificates of a secured `toolgate up --broker kafka` (ops/stack/kafka_tls.py): a CA, and one
node certificate it signed, for where the nodes listen, made once, the key readable by its owner
only and in the PEM form Kafka 4 reads."""

from __future__ import annotations

import datetime as dt
import ipaddress
import stat
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID

from toolgate.ops.stack.kafka_tls import ensure_certificates


def test_the_node_certificate_is_signed_by_the_ca_for_127_0_0_1_and_localhost(tmp_path: Path) -> None:
    made = ensure_certificates(tmp_path / "tls", dt.datetime(2026, 11, 28, tzinfo=dt.UTC))
    ca = x509.load_pem_x509_certificate(made.ca.read_bytes())
    chain = x509.load_pem_x509_certificates(made.node.read_bytes())
    node = chain[0]
    assert chain[1] == ca  # the keystore holds the chain, up to the CA
    node.verify_directly_issued_by(ca)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    names = node.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["localhost"]
    assert names.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    usages = node.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert set(usages) == {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH}
    assert node.not_valid_before_utc <= dt.datetime(2026, 11, 28, tzinfo=dt.UTC) < node.not_valid_after_utc


def test_the_key_is_unencrypted_pkcs8_and_its_file_the_owner_s_only(tmp_path: Path) -> None:
    made = ensure_certificates(tmp_path / "tls")
    pem = made.node.read_bytes()
    assert pem.startswith(b"-----BEGIN PRIVATE KEY-----")  # PKCS#8, as Kafka's PEM keystore wants it
    key = serialization.load_pem_private_key(pem, password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    node = x509.load_pem_x509_certificates(pem)[0]
    assert node.public_key() == key.public_key()
    assert stat.S_IMODE(made.node.stat().st_mode) == 0o600
    assert stat.S_IMODE(made.directory.stat().st_mode) == 0o700
    assert b"PRIVATE KEY" not in made.ca.read_bytes()  # the CA's key is never written
    assert not [p for p in made.directory.iterdir() if p.name not in ("ca.pem", "node.pem")]


def test_they_are_made_once_and_kept(tmp_path: Path) -> None:
    first = ensure_certificates(tmp_path / "tls")
    before = first.ca.read_bytes(), first.node.read_bytes()
    again = ensure_certificates(tmp_path / "tls")
    assert (again.ca.read_bytes(), again.node.read_bytes()) == before

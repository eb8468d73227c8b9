"""Keys that carry an id, and a keyset read again as a process runs: what a stage seals with,
what it accepts while a rotation is under way, what clients and auditors check with."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.test_audit_checkpoints import log
from toolgate.scrubber import SCRUBBER
from toolgate.secrets import SecretProvider
from toolgate.store.audit import Checkpoint, Verdict, checkpoint_bytes, verify
from toolgate.topics.catalog import Topics
from toolgate.topics.headers import CALL_ID, PROPOSAL_DIGEST
from toolgate.trust import edge_signing
from toolgate.trust.checkpoint_keys import TrustedKeys
from toolgate.trust.deployment_keys import DeploymentKeys, LiveKeyset, key_id_of
from toolgate.trust.integrity import KEY_HEADER, MAC_HEADER, SIGNATURE_HEADER, EdgeVerifier, Sealer, raw_header
from toolgate.trust.keyset import parse, promote, render, retire, stage

OLD, NEW = "old-deployment-secret-0123456789", "new-deployment-secret-0123456789"
TOPICS = Topics("p.")
VALIDATED = "p.tool.validated"
OBSERVATIONS = "p.tool.observations.acme"
BATCH = b"a stage batch"
T0 = 1_800_000_000.0  # s
GRACE_MS = 60_000


class Clock:
    def __init__(self) -> None:
        self.wall = T0
        self.mono = 100.0

    def advance(self, seconds: float) -> None:
        self.wall += seconds
        self.mono += seconds


def live(directory: Path, text: str, clock: Clock) -> LiveKeyset:
    (directory / "deployment-secret").write_text(text)
    return LiveKeyset(SecretProvider(directory), "deployment-secret", 5.0, lambda: clock.wall, lambda: clock.mono)


def put(directory: Path, text: str) -> None:
    (directory / "deployment-secret").write_text(text)


def edge(sealer: Sealer, call: str = "call_1") -> tuple[str, bytes, list[tuple[str, bytes | None]], bytes]:
    headers: list[tuple[str, bytes | None]] = [(CALL_ID, call.encode()), (PROPOSAL_DIGEST, b"d" * 64)]
    return OBSERVATIONS, b"run", list(sealer.seal(OBSERVATIONS, b"run", b"obs", list(headers))), b"obs"


def test_a_key_id_names_the_public_key_of_its_secret() -> None:
    keys = DeploymentKeys(OLD.encode())
    assert keys.key_id == key_id_of(keys.public_key) == DeploymentKeys(OLD.encode()).key_id
    assert keys.key_id.startswith("dk_") and len(keys.key_id) == 19
    assert keys.key_id != DeploymentKeys(NEW.encode()).key_id


def test_every_mac_and_signature_names_its_key(tmp_path: Path) -> None:
    sealer = Sealer(live(tmp_path, OLD, Clock()), TOPICS)
    old_id = DeploymentKeys(OLD.encode()).key_id.encode()
    assert raw_header(sealer.seal(VALIDATED, None, BATCH, []), KEY_HEADER) == old_id
    assert raw_header(edge(sealer)[2], KEY_HEADER) == old_id
    # A record sealed again (a replay) names the key that sealed it last, once.
    again = sealer.seal(VALIDATED, None, BATCH, [(KEY_HEADER, b"dk_forged"), (MAC_HEADER, b"x")])
    assert [k for k, _ in again].count(KEY_HEADER) == 1 and raw_header(again, KEY_HEADER) == old_id


def test_a_rotation_refuses_no_record_sealed_by_either_host(tmp_path: Path) -> None:
    """Host A and host B each read their keyset; A moves a step before B does, every step."""
    clock = Clock()
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    a_dir.mkdir(), b_dir.mkdir()
    a, b = Sealer(live(a_dir, OLD, clock), TOPICS), Sealer(live(b_dir, OLD, clock), TOPICS)
    staged = render(stage(parse(OLD), NEW))
    put(a_dir, staged)
    put(b_dir, staged)
    clock.advance(5)
    promoted = render(promote(stage(parse(OLD), NEW), int(clock.wall * 1000), GRACE_MS))
    put(a_dir, promoted)  # A promotes; B has not read it yet
    clock.advance(5)
    sealed_by_a = a.seal(VALIDATED, None, BATCH, [])
    assert raw_header(sealed_by_a, KEY_HEADER) == DeploymentKeys(NEW.encode()).key_id.encode()
    assert b.mac_ok(VALIDATED, BATCH, sealed_by_a)  # B accepts the key it has staged
    put(b_dir, promoted)
    sealed_by_b_before = b.seal(VALIDATED, None, BATCH, [])  # B's last record with the old key...
    clock.advance(5)
    assert a.mac_ok(VALIDATED, BATCH, sealed_by_b_before)  # ...is accepted during the grace
    clock.advance(GRACE_MS / 1000)
    assert not a.mac_ok(VALIDATED, BATCH, sealed_by_b_before)  # and refused after it
    assert b.mac_ok(VALIDATED, BATCH, a.seal(VALIDATED, None, BATCH, []))


def test_a_key_is_checked_as_named_and_only_if_accepted(tmp_path: Path) -> None:
    clock = Clock()
    sealer = Sealer(live(tmp_path, render(stage(parse(OLD), NEW)), clock), TOPICS)
    new = DeploymentKeys(NEW.encode())
    by_new = [(MAC_HEADER, new.mac(VALIDATED, BATCH)), (KEY_HEADER, new.key_id.encode())]
    assert sealer.mac_ok(VALIDATED, BATCH, by_new)
    named_old = [(MAC_HEADER, new.mac(VALIDATED, BATCH)), (KEY_HEADER, DeploymentKeys(OLD.encode()).key_id.encode())]
    assert not sealer.mac_ok(VALIDATED, BATCH, named_old)  # the MAC is checked with the key it names
    assert not sealer.mac_ok(VALIDATED, BATCH, [(MAC_HEADER, new.mac(VALIDATED, BATCH)), (KEY_HEADER, b"dk_x" * 20)])
    # Written before keys had ids: checked with each key accepted now.
    assert sealer.mac_ok(VALIDATED, BATCH, [(MAC_HEADER, new.mac(VALIDATED, BATCH))])
    other = DeploymentKeys(b"another deployment's secret!!")
    assert not sealer.mac_ok(VALIDATED, BATCH, [(MAC_HEADER, other.mac(VALIDATED, BATCH))])
    assert not sealer.mac_ok(
        VALIDATED, BATCH, [(MAC_HEADER, other.mac(VALIDATED, BATCH)), (KEY_HEADER, other.key_id.encode())]
    )


def test_a_keyset_is_read_again_on_its_interval_and_at_once_for_an_unknown_key(tmp_path: Path) -> None:
    clock = Clock()
    keys = live(tmp_path, OLD, clock)
    new_id = DeploymentKeys(NEW.encode()).key_id
    put(tmp_path, render(stage(parse(OLD), NEW)))
    assert new_id not in keys.view().accepted  # read again only when due...
    clock.advance(1.0)
    assert new_id in keys.learn(new_id).accepted  # ...or when a record names a key it lacks
    put(tmp_path, OLD)
    clock.advance(1.0)
    keys.learn("dk_unknown")  # a forged id reads again at most once a second
    assert keys.learn("dk_unknown2").accepted.keys() == {DeploymentKeys(OLD.encode()).key_id}
    put(tmp_path, render(stage(parse(OLD), NEW)))
    keys.learn("dk_unknown3")  # within the second: not read
    assert new_id not in keys.view().accepted
    clock.advance(5.0)
    assert new_id in keys.view().accepted


def test_an_unreadable_keyset_leaves_the_last_one_in_force(tmp_path: Path) -> None:
    clock = Clock()
    keys = live(tmp_path, render(stage(parse(OLD), NEW)), clock)
    put(tmp_path, "toolgate-keyset v1\ncurrent")  # a copy half written
    clock.advance(6)
    assert keys.view().sealing.key_id == DeploymentKeys(OLD.encode()).key_id
    assert len(keys.view().accepted) == 2
    (tmp_path / "deployment-secret").unlink()
    clock.advance(6)
    assert len(keys.view().accepted) == 2


def test_every_secret_of_the_keyset_is_scrubbed(tmp_path: Path) -> None:
    clock = Clock()
    live(tmp_path, render(promote(stage(parse(OLD), NEW), int(T0 * 1000), GRACE_MS)), clock)
    assert SCRUBBER.text(f"x {OLD} y {NEW}") == "x [REDACTED] y [REDACTED]"


def test_a_client_learns_a_published_key_and_checks_each_record_with_the_key_it_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    keyset = live(tmp_path, OLD, clock)
    sealer = Sealer(keyset, TOPICS)
    published = [DeploymentKeys(OLD.encode()).public_key]
    verifier = EdgeVerifier(published[0], lambda: list(published))
    assert verifier.ok(*edge(sealer))
    put(tmp_path, render(promote(stage(parse(OLD), NEW), int(clock.wall * 1000), GRACE_MS)))
    clock.advance(6)
    by_new = edge(sealer, "call_2")
    assert not verifier.ok(*by_new)  # not published yet: not trusted
    published.append(DeploymentKeys(NEW.encode()).public_key)
    assert not verifier.ok(*by_new)  # read again at most once a second
    monkeypatch.setattr(edge_signing, "RELOAD_EVERY_S", 0.0)
    assert verifier.ok(*by_new)  # learned without a restart
    topic, key, headers, value = by_new
    # A signature checked with the key it names: naming the other trusted key fails it.
    renamed = [(k, DeploymentKeys(OLD.encode()).key_id.encode() if k == KEY_HEADER else v) for k, v in headers]
    assert not verifier.ok(topic, key, renamed, value)
    # Signed before key ids: checked with each key held.
    assert verifier.ok(topic, key, [(k, v) for k, v in headers if k != KEY_HEADER], value)
    forged = [(SIGNATURE_HEADER, bytes(64)) if k == SIGNATURE_HEADER else (k, v) for k, v in headers]
    assert not verifier.ok(topic, key, forged, value)


def test_audit_checkpoints_are_checked_with_the_key_they_name() -> None:
    old, new = DeploymentKeys(OLD.encode()), DeploymentKeys(NEW.encode())
    rows = log(3)

    def signed(n: int, keys: DeploymentKeys, named: str | None) -> Checkpoint:
        head = rows[n - 1][9]
        return Checkpoint(n, "t", n, head, keys.signing_key.sign(checkpoint_bytes(n, head)), named)

    trusted = TrustedKeys([old.signing_key.public, new.signing_key.public])
    assert trusted.ok(new.key_id, signed(1, new, new.key_id).signature, checkpoint_bytes(1, rows[0][9]))
    assert not trusted.ok(old.key_id, signed(1, new, new.key_id).signature, checkpoint_bytes(1, rows[0][9]))
    assert trusted.ok(None, signed(1, old, None).signature, checkpoint_bytes(1, rows[0][9]))  # before 0022
    # The anchor (newest agreeing) signed by the new key, one before it by the old: intact. Each
    # checkpoint comes with the position of its head row, as CHECKPOINTS reads it.
    checkpoints = [(signed(3, new, new.key_id), 3), (signed(2, old, old.key_id), 2)]
    report = verify(rows, checkpoints, trusted)
    assert report.verdict is Verdict.INTACT and report.anchor is not None and report.anchor.key_id == new.key_id
    # Trusting the old key only, the new key's checkpoint proves nothing.
    report = verify(rows, checkpoints, TrustedKeys([old.signing_key.public]))
    assert report.unsigned == 1 and report.anchor is not None and report.anchor.key_id == old.key_id


@pytest.mark.parametrize("early", [False, True])
def test_a_retired_key_is_no_longer_accepted(tmp_path: Path, early: bool) -> None:
    clock = Clock()
    promoted = promote(stage(parse(OLD), NEW), int(clock.wall * 1000), GRACE_MS)
    keys = live(tmp_path, render(promoted), clock)
    old = DeploymentKeys(OLD.encode())
    by_old = [(MAC_HEADER, old.mac(VALIDATED, BATCH)), (KEY_HEADER, old.key_id.encode())]
    sealer = Sealer(keys, TOPICS)
    assert sealer.mac_ok(VALIDATED, BATCH, by_old)
    at_ms = int(clock.wall * 1000) + (0 if early else GRACE_MS)
    put(tmp_path, render(retire(promoted, at_ms, old.public_key.hex(), early=early)))
    clock.advance(6 if early else GRACE_MS / 1000)
    assert not sealer.mac_ok(VALIDATED, BATCH, by_old)
    assert keys.public_keys(retired=True)[-1] == old.public_key  # its public half stays known
    assert old.public_key not in keys.public_keys()


def test_the_keys_a_mac_was_made_with_stay_known_after_a_rotation_retires_one(tmp_path: Path) -> None:
    # What the gauges keep of a dead letter instead of its bytes (ops/gauge_readers.py): the ids
    # of the keys whose MAC it carries; genuine while one of them is accepted.
    clock = Clock()
    promoted = promote(stage(parse(OLD), NEW), int(clock.wall * 1000), GRACE_MS)
    keys = live(tmp_path, render(promoted), clock)
    sealer = Sealer(keys, TOPICS)
    old, new = DeploymentKeys(OLD.encode()), DeploymentKeys(NEW.encode())
    by_old = [(MAC_HEADER, old.mac(VALIDATED, BATCH)), (KEY_HEADER, old.key_id.encode())]
    unnamed = [(MAC_HEADER, new.mac(VALIDATED, BATCH))]
    assert sealer.mac_keys(VALIDATED, BATCH, by_old) == {old.key_id}
    assert sealer.mac_keys(VALIDATED, BATCH, unnamed) == {new.key_id}  # tried with each key accepted
    assert sealer.mac_keys(VALIDATED, BATCH + b"!", by_old) == frozenset()  # another value
    assert sealer.mac_keys(VALIDATED, BATCH, [(KEY_HEADER, old.key_id.encode())]) == frozenset()  # no MAC
    put(tmp_path, render(retire(promoted, int(clock.wall * 1000) + GRACE_MS, old.public_key.hex())))
    clock.advance(GRACE_MS / 1000)
    assert old.key_id not in keys.view().accepted and new.key_id in keys.view().accepted

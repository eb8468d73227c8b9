"""The one guarded reader of consumed records (topics/consumed.py), and what each reader does with a
record whose headers cannot be read: a stand-in for confluent-kafka's Message raises from
`headers()` exactly as the real one does for a header key that is not UTF-8 (a SystemError whose
cause is the UnicodeDecodeError; tests/e2e/test_header_keys.py produces the real record)."""

from __future__ import annotations

from tests.unit.test_observer import _Consumer, _Msg
from tests.unit.test_rounds import VALIDATED, Forward, Setup, calls, forwarded
from toolgate.client.feed import ObservationFeed
from toolgate.schemas.models import TaxonomyClass
from toolgate.topics.consumed import MAX_REASON, Consumed, Unreadable, read


class _Poisoned(_Msg):
    """A record one of whose header keys is not UTF-8, as confluent-kafka hands it over."""

    def key(self) -> bytes:
        return b"run-k"

    def value(self) -> bytes:
        return b"the value"

    def headers(self) -> list[tuple[str, bytes]]:
        try:
            b"\xff\xfe-poison".decode()
        except UnicodeDecodeError as exc:
            raise SystemError("<method 'headers'> returned a result with an exception set") from exc
        raise AssertionError("unreachable")


def test_a_readable_record_comes_whole() -> None:
    record = read(_Msg("c1", 2, 9))  # type: ignore[arg-type]
    assert record == Consumed("tool.observations.acme", 2, 9, b"run", b"", [("call_id", b"c1")], 0)


def test_a_record_whose_headers_cannot_be_read_keeps_its_key_value_and_place_and_says_why() -> None:
    record = read(_Poisoned("c1", 1, 4))  # type: ignore[arg-type]
    assert isinstance(record, Unreadable)
    assert (record.topic, record.partition, record.offset, record.key, record.value) == (
        "tool.observations.acme",
        1,
        4,
        b"run-k",
        b"the value",
    )
    assert record.reason == "its headers cannot be read: a header key is not UTF-8 (invalid start byte at byte 0)"
    assert len(record.reason) <= MAX_REASON


def test_the_observation_feed_skips_such_a_record_and_reads_on() -> None:
    consumer = _Consumer()
    kept: list[str] = []

    def _read(record: Consumed) -> str:
        kept.append(f"{record.partition}:{record.offset}")
        return kept[-1]

    feed: ObservationFeed[str] = ObservationFeed(consumer, "tool.observations.acme", {0: 5}, _read)  # type: ignore[arg-type]
    feed.watch("c1")
    consumer.queued += [_Poisoned("c1", 0, 5), _Msg("c1", 0, 6)]
    assert feed.take("c1", lambda item: True, timeout=2.0) == "0:6"
    assert kept == ["0:6"] and feed.positions == {0: 7}  # read past it
    feed.close()


def test_a_stage_dead_letters_it_with_its_key_and_value_audits_it_and_goes_on() -> None:
    setup = Setup(Forward())
    poisoned = Unreadable(VALIDATED, 0, 3, b"raw-key", b"raw value", "its headers cannot be read: a header key ...")
    setup.run([poisoned, calls("c2", offset=4)])
    assert forwarded(setup) == ["c2"]  # the round went on
    (letter,) = setup.broker.dead_letters()
    assert (letter.key, letter.value, letter.headers, letter.source_offset) == (b"raw-key", b"raw value", [], 3)
    assert letter.taxonomy_class is TaxonomyClass.SYNTACTIC_PARSE_FAIL and letter.call_id is None
    assert "headers cannot be read" in letter.reason
    (audited,) = [e for e in setup.audit.entries if e.action == "unreadable_record"]
    assert (audited.call_id, audited.detail["code"], audited.detail["offset"]) == (None, "unreadable_headers", 3)
    assert audited.detail["bytes"] == len(b"raw value")


def test_a_stage_audits_a_flood_of_them_collapsed() -> None:
    setup = Setup(Forward())
    flood = [Unreadable(VALIDATED, 0, n, None, b"x", "its headers cannot be read") for n in range(50)]
    setup.run(flood)
    audited = [e for e in setup.audit.entries if e.action == "unreadable_record"]
    assert len(audited) == 10  # the rest are counted until the window closes
    assert len(setup.broker.dead_letters()) == 50  # every one is still dead-lettered

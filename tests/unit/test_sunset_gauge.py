"""The time left until each contract version's sunset date (ops/gauges.py, `sunset_remaining`):
what the DeprecationRemovalBlocked alert weighs a deprecated version's use against."""

from __future__ import annotations

import datetime as dt

from toolgate.ops.gauges import sunset_remaining

from .factories import registry


def at(day: str, hour: int = 0) -> float:
    return dt.datetime.combine(dt.date.fromisoformat(day), dt.time(hour), dt.UTC).timestamp()


def test_a_version_with_a_sunset_date_reads_the_seconds_until_it_begins() -> None:
    reading = sunset_remaining(registry(), at("2027-06-27"))
    assert reading[(("tool", "invoice.fetch"), ("version", "0.9.0"))] == 3 * 86400
    assert (("tool", "invoice.fetch"), ("version", "1.0.0")) not in reading  # no sunset date, no series


def test_past_the_date_the_reading_is_negative() -> None:
    reading = sunset_remaining(registry(), at("2027-06-30", 12))
    assert reading[(("tool", "invoice.fetch"), ("version", "0.9.0"))] == -12 * 3600

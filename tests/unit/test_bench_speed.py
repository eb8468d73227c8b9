"""The machine's speed within a benchmark run (ops/bench/speed.py)."""

from __future__ import annotations

import time

from toolgate.ops.bench.machine import probe_ms
from toolgate.ops.bench.speed import SpeedMeter, parse, sample_ms


def test_the_report_counts_the_seconds_slower_than_the_probe_before() -> None:
    speed = parse("9.1\n9.3\nnot a number\n\n14.2\n9.0\n30.5\n")
    got = speed.report(before_ms=9.0)
    assert got["samples"] == 5
    assert got["median"] == 9.3 and got["max"] == 30.5
    assert got["p90"] == 30.5
    assert got["slow_seconds"] == 2  # 14.2 and 30.5 are half again 9.0 or more; 9.3 is not


def test_samples_say_when_they_were_taken() -> None:
    speed = parse("100.5 9.1\n101.5 14.2\n9.3\n")
    assert speed.samples == [9.1, 14.2, 9.3]
    assert speed.timeline == [(100.5, 9.1), (101.5, 14.2)]  # the line without a time has none


def test_no_samples_say_so() -> None:
    assert parse("").report(before_ms=9.0) == {"samples": 0}


def test_a_sample_reads_like_the_probe() -> None:
    # A ninth of the probe's work, scaled: the same milliseconds within the machine's noise.
    probe = probe_ms(tries=5)
    samples = sorted(sample_ms() for _ in range(9))
    assert probe / 3 < samples[len(samples) // 2] < probe * 3


def test_the_meter_samples_in_a_process_of_its_own_until_read() -> None:
    meter = SpeedMeter(every_s=0.2)
    meter.start()
    time.sleep(2.0)
    speed = meter.read()
    got = speed.report(before_ms=probe_ms(tries=3))
    assert got["samples"] >= 3
    assert float(got["median"]) > 0
    # Each on the monotonic clock this process shares, about 0.2 s apart.
    taken = [at for at, _ in speed.timeline]
    assert len(taken) == got["samples"] and taken == sorted(taken)
    assert time.monotonic() - 3.0 < taken[0] < taken[-1] <= time.monotonic()


def test_a_meter_read_at_once_still_has_its_first_sample() -> None:
    meter = SpeedMeter()
    meter.start()
    assert meter.read().report(before_ms=9.0)["samples"] == 1


def test_a_meter_never_started_reads_nothing() -> None:
    assert SpeedMeter().read().report(before_ms=9.0) == {"samples": 0}

"""Which stages nap woken through Postgres (workers/runtime/wakeup.py, `woken`): on a broker where
every stage naps (`idle_nap_ms`, Tansu), each whose inputs are all announced; elsewhere (Apache
Kafka, where the others long-poll) each whose inputs only stages write, unless `woken_nap_ms` is 0."""

from __future__ import annotations

from dataclasses import replace

from toolgate.settings import Settings
from toolgate.workers.runtime.wakeup import naps, woken

KAFKA = replace(Settings(), idle_nap_ms=0, woken_nap_ms=5000)
TANSU = replace(Settings(), idle_nap_ms=500, woken_nap_ms=5000)
NEVER = replace(Settings(), idle_nap_ms=0, woken_nap_ms=0)


def test_on_kafka_the_stages_fed_by_stages_nap_and_the_others_long_poll() -> None:
    assert woken(KAFKA, ["validated"]) and woken(KAFKA, ["executable"]) and woken(KAFKA, ["results"])
    assert not woken(KAFKA, ["proposals"])  # validation: agents write its input
    assert not woken(KAFKA, ["authorized", "approvals_decisions"])  # approval services may not announce


def test_on_tansu_every_stage_whose_inputs_are_announced_is_woken() -> None:
    assert woken(TANSU, ["authorized", "approvals_decisions"])
    assert not woken(TANSU, ["proposals"])


def test_with_no_naps_nothing_is_woken_and_nobody_announces() -> None:
    assert not woken(NEVER, ["results"])
    assert not naps(NEVER) and naps(KAFKA) and naps(TANSU)

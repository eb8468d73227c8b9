"""`toolgate dlq list` prints what a letter says literally, never as Rich markup.

No topic write is needed to reach it: an unsigned proposal whose agent id is `[/]` gets a genuine
dead letter whose reason quotes that id, and on main `dlq list` then died with a MarkupError (for
as long as the letter stayed on the topic). A forged letter could hide text with `[conceal]` or
add lines of its own. Now every field is printed as text, controls and line breaks escaped.
"""

from __future__ import annotations

import json
import time
import uuid

import pytest

from toolgate.schemas.codec import codec
from toolgate.schemas.models import DeadLetter, PayloadKind, Principal, TaxonomyClass
from toolgate.topics.catalog import Topics

from ..conftest import Pipeline, eventually
from .test_trust_boundary import ALL_SCOPES, publish_proposal, raw_proposal

pytestmark = pytest.mark.timeout(180)

TOPICS = Topics()


def test_dlq_list_prints_a_genuine_letter_quoting_markup_and_a_forged_one_hiding_text_literally(
    pipeline: Pipeline,
) -> None:
    unsigned = raw_proposal(principal=Principal(user_id="u", agent_id="[/]", scopes=ALL_SCOPES))
    publish_proposal(pipeline, unsigned)

    def letter_of_the_unsigned() -> list[dict[str, object]]:
        listed = json.loads(pipeline.cli("dlq", "list", "--json").stdout)
        return [r for r in listed if r["call_id"] == unsigned.call_id]

    [genuine] = eventually(letter_of_the_unsigned)
    assert genuine["genuine"] is True and "'[/]'" in str(genuine["reason"])
    forged = DeadLetter(
        dead_letter_id=f"dl_{uuid.uuid4().hex[:24]}",
        call_id=f"call_{uuid.uuid4().hex}",
        stage="execution",
        source_topic="executable",
        source_partition=0,
        source_offset=-1,
        payload_kind=PayloadKind.RECORD,
        value=b"x",
        taxonomy_class=TaxonomyClass.UNKNOWN_ERROR,
        reason="[conceal]hidden from the operator[/conceal]\nfake-letter  open  execution  SUCCESS",
        dead_lettered_at_ms=int(time.time() * 1000),
    )
    pipeline.insider.publish_raw(TOPICS.deadletter, None, codec().encode(forged), [])
    pipeline.insider.flush()
    eventually(lambda: forged.dead_letter_id in pipeline.cli("dlq", "list", "--json").stdout)

    listed = pipeline.cli("dlq", "list")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    (quoting,) = [ln for ln in lines if str(genuine["dead_letter_id"]) in ln]
    assert "agent '[/]'" in quoting
    (hiding,) = [ln for ln in lines if forged.dead_letter_id in ln]
    assert "[conceal]hidden from the operator[/conceal]\\u000afake-letter" in hiding
    assert not [ln for ln in lines if ln.startswith("fake-letter")]  # it added no line of its own

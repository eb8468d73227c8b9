"""Generated models are fresh; released schemas stay readable by today's schemas."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from fastavro import schemaless_reader, schemaless_writer
from fastavro.schema import load_schema

from tests.unit.factories import as_released_0_1, sample_models
from toolgate.schemas import codegen, documents, models
from toolgate.schemas.codec import MARKER, DecodeError, codec, schema_fingerprint
from toolgate.schemas.model_build import model_classes
from toolgate.schemas.models import (
    Call,
    FieldError,
    Outcome,
    Principal,
    StageDecision,
    StageHead,
    StageHeadCall,
    StageRecord,
    TaxonomyClass,
    ToolProposal,
    Verification,
)
from toolgate.schemas.upgrades import upgrade_of
from toolgate.schemas.wire import WireModel

AVRO_DIR = documents.AVRO_DIR
RELEASED = sorted((AVRO_DIR / "released").glob("*/*.avsc"))

SAMPLES: dict[type, WireModel] = {
    **sample_models(),
    Call: sample_models()[StageRecord].call,
    FieldError: FieldError(field="f", message="m", code="c", expected="e", actual="a"),
    Outcome: Outcome(
        taxonomy_class=TaxonomyClass.TIMEOUT,
        code=504,
        is_error=True,
        retryable=True,
        repairable=False,
        requires_approval=False,
        fail_closed=False,
        next_action="retry_with_same_key",
        retry_after_ms=9,
    ),
    Principal: Principal(user_id="u", agent_id="a", scopes=["s1", "s2"]),
    StageDecision: StageDecision(stage="policy", outcome="allow", detail="d", at_ms=3),
    Verification: Verification(
        post_action_verification_required=True,
        target_state_reference="x:1",
        expected_state={"k": [1, None]},
        delay_seconds=2,
    ),
}


def test_models_are_fresh() -> None:
    assert codegen.main(["--check"]) == 0


def test_models_source_is_what_codegen_generates() -> None:
    for name, source in codegen.generate().items():
        assert (codegen.MODELS / name).read_text() == source, name


def test_every_model_has_its_records_fields_in_their_order() -> None:
    """A model's fields are its record's, in the wire order, also where the record extends the
    part a projection reads of it (its leading fields: a Call is a StageHeadCall and more)."""
    named = documents.all_named_types()
    for name, cls in model_classes().items():
        assert list(cls.model_fields) == [f["name"] for f in named[name]["fields"]], name
    assert issubclass(Call, StageHeadCall)


def test_every_avsc_is_named_after_its_full_name() -> None:
    for path in sorted(AVRO_DIR.glob("*.avsc")) + RELEASED:
        doc = json.loads(path.read_text())
        assert path.name == f"{doc['namespace']}.{doc['name']}.avsc"


def test_released_versions_exist() -> None:
    assert RELEASED, "no released schema versions found"


def _class_of(path: Path) -> Any:
    return getattr(models, path.name.removesuffix(".avsc").split(".")[-1])


def _wire_record(model: WireModel) -> dict[str, Any]:
    """A model as the Avro writer expects it: JSON fields as compact JSON text."""
    from toolgate.schemas.codec import _to_wire  # the codec's own wire mapping

    return _to_wire(model.model_dump(), codec()._json_paths[type(model)])


@pytest.mark.parametrize("path", RELEASED, ids=[f"{p.parent.name}/{p.name}" for p in RELEASED])
def test_released_schema_is_readable_by_current(path: Path) -> None:
    cls = _class_of(path)
    old = load_schema(str(path))
    current = load_schema(str(AVRO_DIR / path.name))
    if not (isinstance(cls, type) and issubclass(cls, WireModel)):
        # an enum: every released symbol is still known (or the enum has a default)
        old_doc, new_doc = json.loads(path.read_text()), json.loads((AVRO_DIR / path.name).read_text())
        assert set(old_doc["symbols"]) <= set(new_doc["symbols"]) or "default" in new_doc
        return
    if upgrade_of(old) is not None:  # not resolvable: read with its own schema, then upgraded
        _assert_upgraded(cls, old)
        return
    buf = io.BytesIO()
    schemaless_writer(buf, old, _wire_record(SAMPLES[cls]))
    body = buf.getvalue()
    record = schemaless_reader(io.BytesIO(body), old, current)
    assert isinstance(record, dict)
    assert cls.model_validate(record) is not None
    # and the codec reads a record written with the released schema into today's model
    model = codec().decode(MARKER + schema_fingerprint(old) + body, cls)
    assert isinstance(model, cls)
    if schema_fingerprint(old) == codec().fingerprint_of(cls):
        assert model == SAMPLES[cls]


def _assert_upgraded(cls: type[WireModel], old: Any) -> None:
    """A StageRecord of 0.1.0, its call's fields its own, is read as today's: the sample's call
    carries a caller's key, so what 0.1.0 would have derived is what the sample holds."""
    assert schema_fingerprint(old) == as_released_0_1(SAMPLES[cls])[2:10]
    assert codec().decode(as_released_0_1(SAMPLES[cls]), cls) == SAMPLES[cls]


def test_the_approver_groups_the_policy_named_travel_and_older_records_have_none() -> None:
    """StageRecord.approver_groups (the policy's, for the approval stage) survives the codec,
    the forwarding projection reads past it, and a StageRecord 0.2.0 wrote reads with none."""
    record = SAMPLES[StageRecord].model_copy(update={"approver_groups": ["finance-directors", "risk"]})
    wire = codec().encode(record)
    assert codec().decode(wire, StageRecord).approver_groups == ["finance-directors", "risk"]
    head = codec().project(wire, StageHead)
    assert head is not None
    assert (head.required_approvals, head.approval_id, head.call.call_id) == (2, "appr_1", record.call.call_id)
    old = load_schema(str(AVRO_DIR / "released" / "0.2.0" / "toolgate.StageRecord.avsc"))
    buf = io.BytesIO()
    schemaless_writer(buf, old, _wire_record(SAMPLES[StageRecord]))
    written = codec().decode(MARKER + schema_fingerprint(old) + buf.getvalue(), StageRecord)
    assert written.approver_groups == [] and written == SAMPLES[StageRecord]


def test_released_tool_proposal_missing_a_field_is_filled_by_its_default(tmp_path: Path) -> None:
    """Avro schema resolution fills a field the writer did not know from the reader's default."""
    current = json.loads((AVRO_DIR / "toolgate.ToolProposal.avsc").read_text())
    older = {**current, "fields": [f for f in current["fields"] if f["name"] not in ("dry_run", "repair_attempt")]}
    (tmp_path / "toolgate.ToolProposal.avsc").write_text(json.dumps(older))
    (tmp_path / "toolgate.Principal.avsc").write_text((AVRO_DIR / "toolgate.Principal.avsc").read_text())
    old = load_schema(str(tmp_path / "toolgate.ToolProposal.avsc"))
    buf = io.BytesIO()
    schemaless_writer(buf, old, _wire_record(SAMPLES[ToolProposal]))
    record = schemaless_reader(io.BytesIO(buf.getvalue()), old, codec().schema_of(ToolProposal))
    assert record["dry_run"] is False and record["repair_attempt"] == 0
    # an unreleased older schema is not known to the codec
    with pytest.raises(DecodeError, match="fingerprint"):
        codec().decode(MARKER + schema_fingerprint(old) + buf.getvalue(), ToolProposal)


def test_tool_proposal_default_version_is_latest() -> None:
    proposal = ToolProposal(
        call_id="c",
        tenant_id="t",
        principal=Principal(user_id="u", agent_id="a"),
        workflow_id="w",
        run_id="r",
        logical_operation_id="l",
        tool_name="invoice.fetch",
        arguments="{}",
        created_at_ms=0,
    )
    avro_default = next(
        f["default"]
        for f in json.loads((AVRO_DIR / "toolgate.ToolProposal.avsc").read_text())["fields"]
        if f["name"] == "tool_version"
    )
    assert proposal.tool_version == avro_default == "latest"

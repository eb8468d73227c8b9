"""The error taxonomy and its response vectors (toolgate/taxonomy.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolgate.schemas.models import TaxonomyClass
from toolgate.taxonomy import GATE_ORDER, VECTORS, vector

REFERENCE = Path(__file__).resolve().parents[2] / "schemas" / "reference" / "observation.schema.json"


def test_vectors_cover_every_member() -> None:
    assert set(VECTORS) == set(TaxonomyClass)


def test_gate_order_classes_exist_and_are_distinct() -> None:
    assert all(isinstance(t, TaxonomyClass) and t in VECTORS for t in GATE_ORDER)
    assert len(set(GATE_ORDER)) == len(GATE_ORDER)
    assert GATE_ORDER[0] is TaxonomyClass.SYNTACTIC_PARSE_FAIL
    assert GATE_ORDER.index(TaxonomyClass.STRUCTURAL_VIOLATION) < GATE_ORDER.index(TaxonomyClass.TYPE_MISMATCH)
    assert GATE_ORDER.index(TaxonomyClass.TYPE_MISMATCH) < GATE_ORDER.index(TaxonomyClass.OUT_OF_BOUNDS)


def test_taxonomy_matches_reference_schema_enum() -> None:
    schema = json.loads(REFERENCE.read_text())
    assert schema["properties"]["status"]["properties"]["taxonomy_class"]["enum"] == [t.value for t in TaxonomyClass]


@pytest.mark.parametrize("taxonomy", list(TaxonomyClass), ids=[t.value for t in TaxonomyClass])
def test_vector_is_sane(taxonomy: TaxonomyClass) -> None:
    v = vector(taxonomy)
    assert 200 <= v.code < 600 and v.next_action
    if taxonomy in (TaxonomyClass.SUCCESS, TaxonomyClass.PARTIAL_SUCCESS):
        assert v.code < 300 and not v.fail_closed
    else:
        assert v.code >= 400
    assert not (v.retryable and v.fail_closed)

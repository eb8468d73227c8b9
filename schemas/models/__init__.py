"""Pydantic in-process types of toolgate's wire messages, a module per family.
Generated from schemas/avro/ by codegen.py: do not edit."""

from __future__ import annotations

from toolgate.schemas.models.approvals import ApprovalDecision, ApprovalRequest, Verdict
from toolgate.schemas.models.common import FieldError, Outcome, Principal, TaxonomyClass, Verification
from toolgate.schemas.models.edge import (
    ExecutionMetadata,
    Observation,
    ObservationError,
    ObservationStatus,
    ResultPayload,
    ToolIdentity,
    ToolProposal,
)
from toolgate.schemas.models.failures import DeadLetter, Header, PayloadKind
from toolgate.schemas.models.stages import (
    Call,
    ExecutionResult,
    StageBatch,
    StageDecision,
    StageHead,
    StageHeadCall,
    StageRecord,
)

__all__ = [
    "ApprovalDecision",
    "ApprovalRequest",
    "Call",
    "DeadLetter",
    "ExecutionMetadata",
    "ExecutionResult",
    "FieldError",
    "Header",
    "Observation",
    "ObservationError",
    "ObservationStatus",
    "Outcome",
    "PayloadKind",
    "Principal",
    "ResultPayload",
    "StageBatch",
    "StageDecision",
    "StageHead",
    "StageHeadCall",
    "StageRecord",
    "TaxonomyClass",
    "ToolIdentity",
    "ToolProposal",
    "Verdict",
    "Verification",
]

"""The parse gate: the model's argument text to a JSON value, or the field error that says why
it is not one (not UTF-8, too large, a key given twice, not JSON). Pure."""

from __future__ import annotations

import json
from typing import Any

from toolgate.schemas.errors import PermanentError
from toolgate.schemas.models import FieldError, TaxonomyClass

MAX_ARGUMENTS_BYTES = 256 * 1024


class _DuplicateKey(PermanentError):
    """An object names one key twice: which value is meant would be ambiguous."""

    taxonomy_class = TaxonomyClass.SYNTACTIC_PARSE_FAIL


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    made = dict(pairs)
    if len(made) == len(pairs):
        return made
    seen: set[str] = set()
    for key, _ in pairs:  # the first key given twice
        if key in seen:
            raise _DuplicateKey(key)
        seen.add(key)
    raise AssertionError("a dict shorter than its pairs repeats a key")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


# One decoder for every proposal: `json.loads` with arguments builds a new one per call, a cost
# on every proposal (docs/performance.md, "Figures behind the code").
_DECODER = json.JSONDecoder(object_pairs_hook=_no_duplicates, parse_constant=_reject_constant)


def parse_arguments(text: str) -> tuple[Any, FieldError | None]:
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:  # bytes that were not UTF-8, kept as lone surrogates
        return None, FieldError(
            field=None,
            code="invalid_utf8",
            message=f"the argument text is not valid UTF-8 (at character {exc.start}); send UTF-8 JSON",
            expected="UTF-8 text",
            actual="invalid byte sequence",
        )
    if size > MAX_ARGUMENTS_BYTES:
        return None, FieldError(
            field=None,
            code="too_large",
            message=f"arguments exceed {MAX_ARGUMENTS_BYTES} bytes",
            expected=f"<= {MAX_ARGUMENTS_BYTES} bytes",
            actual=f"{len(text)} characters",
        )
    try:
        if text.startswith("\ufeff"):  # as json.loads refuses it
            raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
        return _DECODER.decode(text), None
    except _DuplicateKey as exc:
        return None, FieldError(
            field=str(exc), code="duplicate_key", message=f"key {exc} appears twice; the meaning would be ambiguous"
        )
    except json.JSONDecodeError as exc:
        return None, FieldError(
            field=None,
            code="invalid_json",
            message=f"arguments are not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
            expected="a JSON object",
            actual=_snippet(text, exc.pos),
        )
    except (ValueError, RecursionError) as exc:
        return None, FieldError(
            field=None, code="invalid_json", message=f"arguments are not valid JSON: {exc}", expected="a JSON object"
        )


def _snippet(text: str, pos: int) -> str:
    start = max(0, pos - 15)
    return text[start : pos + 15]

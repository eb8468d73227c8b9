"""A contract's text templates are filled in one pass."""

from __future__ import annotations

import pytest

from toolgate.contracts.templates import fill


@pytest.mark.parametrize(
    ("template", "values", "filled"),
    [
        ("Void {invoice_id}", {"invoice_id": "inv_1"}, "Void inv_1"),
        ("x/{a}/{b}", {"a": "{b}", "b": "B"}, "x/{b}/B"),  # a value is never expanded again
        ("{missing} stays", {}, "{missing} stays"),
        ("{n} cents", {"n": 250}, "250 cents"),
        ("{a-b}", {"a-b": 1}, "{a-b}"),  # names are [A-Za-z0-9_]
        ("{result.invoice_id}", {"result": {}}, "{result.invoice_id}"),
    ],
)
def test_a_template_is_filled_in_one_pass(template: str, values: dict[str, object], filled: str) -> None:
    assert fill(template, values) == filled

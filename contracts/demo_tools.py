"""Python-executed demo tools: importable callables `fn(arguments, context) -> dict`."""

from __future__ import annotations

from typing import Any

# Illustrative VAT rates of the demo domain, in basis points.
VAT_BASIS_POINTS = {"DE": 1900, "FR": 2000, "GB": 2000, "NL": 2100, "US": 0}


def tax_estimate(arguments: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
    """Estimate the VAT on an amount; a pure calculation (READ_ONLY)."""
    rate = VAT_BASIS_POINTS[arguments["country"]]
    tax = arguments["amount_cents"] * rate // 10_000
    return {
        "country": arguments["country"],
        "rate_basis_points": rate,
        "tax_cents": tax,
        "total_cents": arguments["amount_cents"] + tax,
    }

"""RFC 8785 canonical JSON, for the values bundles carry."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

MAX_SAFE_INTEGER = 2**53 - 1
ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def canonical(value: Any) -> bytes:
    """RFC 8785 (JCS): the one byte string of a JSON value (ValueError: not representable)."""
    return "".join(_canonical_parts(value)).encode("utf-8")


def _canonical_parts(value: Any) -> Iterator[str]:
    if value is None or isinstance(value, bool):
        yield {None: "null", True: "true", False: "false"}[value]
    elif isinstance(value, int):
        if abs(value) > MAX_SAFE_INTEGER:
            raise ValueError(f"the integer {value} is outside the range JSON numbers hold exactly")
        yield str(value)
    elif isinstance(value, float):
        yield es_number(value)
    elif isinstance(value, str):
        yield es_string(value)
    elif isinstance(value, list | tuple):
        yield "["
        for i, item in enumerate(value):
            yield "," if i else ""
            yield from _canonical_parts(item)
        yield "]"
    elif isinstance(value, dict):
        yield "{"
        for i, key in enumerate(sorted(value, key=utf16_order)):
            yield ("," if i else "") + es_string(key) + ":"
            yield from _canonical_parts(value[key])
        yield "}"
    else:
        raise ValueError(f"{type(value).__name__} is not a JSON value")


def utf16_order(key: Any) -> bytes:
    """Object keys sort by their UTF-16 code units (RFC 8785 3.2.3)."""
    if not isinstance(key, str):
        raise ValueError("an object key is a string")
    return key.encode("utf-16-be", "surrogatepass")


def es_string(text: str) -> str:
    """A JSON string as RFC 8785 3.2.2.2 writes it: only '"', '\\' and controls escaped."""
    out = []
    for ch in text:
        if "\ud800" <= ch <= "\udfff":
            raise ValueError("a string holds a lone surrogate, which UTF-8 cannot carry")
        out.append(ESCAPES.get(ch) or (f"\\u{ord(ch):04x}" if ch < " " else ch))
    return '"' + "".join(out) + '"'


def es_number(x: float) -> str:
    """A double as ECMAScript's Number.prototype.toString writes it (RFC 8785 3.2.2.3)."""
    if not math.isfinite(x):
        raise ValueError("NaN and infinities are not JSON numbers")
    if x == 0:
        return "0"
    if x < 0:
        return "-" + es_number(-x)
    mantissa, _, exponent = repr(x).partition("e")  # repr: the shortest digits that read back as x
    whole, _, fraction = mantissa.partition(".")
    run = whole + fraction
    digits = run.lstrip("0")
    n = len(whole) - (len(run) - len(digits)) + int(exponent or 0)  # x = 0.digits * 10**n
    digits = digits.rstrip("0")
    k = len(digits)
    if k <= n <= 21:
        return digits + "0" * (n - k)
    if 0 < n <= 21:
        return digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return "0." + "0" * -n + digits
    e = f"e{'+' if n - 1 > 0 else '-'}{abs(n - 1)}"
    return (digits if k == 1 else digits[0] + "." + digits[1:]) + e

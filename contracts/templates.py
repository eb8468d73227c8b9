"""Filling a contract's text templates (a confirmation's consequence, a verification's target
reference) with a call's values.

`{name}` is replaced by `str(values[name])` in one pass, so a value that itself looks like a
placeholder is never expanded again; a name with no value stays as written.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

PLACEHOLDER = re.compile(r"\{([A-Za-z0-9_]+)\}")


def fill(template: str, values: Mapping[str, object]) -> str:
    return PLACEHOLDER.sub(lambda m: str(values[m.group(1)]) if m.group(1) in values else m.group(0), template)

"""toolgate: the deterministic edge between agents' tool-call proposals and real side effects.

The public API is the client library (toolgate.client), for agents and approval services:

    from toolgate import ToolgateClient, ApprovalClient, Draft, Proposed, Observed

It is imported when first asked for, so a worker, which never uses it, does not load it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolgate.client import ApprovalClient, Draft, Observed, Proposed, ToolgateClient

__version__ = "0.2.0"
__all__ = ["ApprovalClient", "Draft", "Observed", "Proposed", "ToolgateClient"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("toolgate.client"), name)
    raise AttributeError(f"module 'toolgate' has no attribute {name!r}")

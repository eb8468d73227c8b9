"""What a call's invocation metrics take from its contract (call_metrics.py), worked out once per
(tool, version): its labels, side-effect class, timeout class, lifecycle, retry allowance and cost
profile. A call naming a tool or version the registry does not have is labelled "unknown"
throughout, its tool and version too, or any caller could add series to Prometheus without end."""

from __future__ import annotations

from dataclasses import dataclass

from toolgate.contracts.contract import Contract

Labels = tuple[tuple[str, str], ...]
UNKNOWN = "unknown"  # every label a contract would give, for a call naming none the registry has


@dataclass(frozen=True)
class Shape:
    """A contract's part in a call's labels: its side-effect class, timeout class, lifecycle,
    retry allowance and cost profile. A call naming a tool or version the registry does not have
    is labelled "unknown" throughout, its tool and version too."""

    tool: Labels
    timed: Labels
    timed_attributes: dict[str, str]  # the latency's, as the SDK takes them
    replayed: Labels
    side_effect: str
    lifecycle: str
    known: bool
    max_retries: int = 0
    cost: tuple[Labels, float] | None = None

    @classmethod
    def of(cls, name: str, version: str, contract: Contract) -> Shape:
        tool: Labels = (("tool", name), ("version", version))
        timed: Labels = (*tool, ("timeout_class", str(contract.binding.get("timeout_class", ""))))
        side_effect = contract.side_effect_class
        replayed: Labels = (("tool", name), ("side_effect_class", side_effect))
        runtime = contract.document["runtime"]
        profile = runtime.get("cost_profile") if isinstance(runtime, dict) else None
        cost = None
        if profile:
            labels: Labels = (
                *tool,
                ("cost_category", str(profile.get("cost_unit", "call"))),
                ("currency", str(profile.get("currency", ""))),
            )
            cost = (labels, float(profile.get("cost_per_call", 0) or 0))
        return cls(
            tool, timed, dict(timed), replayed, side_effect, contract.lifecycle, True, contract.max_retries, cost
        )


# A caller may name any tool: a call naming one the registry does not have is counted under this
# one shape, so its name is no label (or the series would be unbounded).
_UNKNOWN_TOOL: Labels = (("tool", UNKNOWN), ("version", UNKNOWN))
_UNKNOWN_TIMED: Labels = (*_UNKNOWN_TOOL, ("timeout_class", ""))
UNKNOWN_SHAPE = Shape(
    _UNKNOWN_TOOL,
    _UNKNOWN_TIMED,
    dict(_UNKNOWN_TIMED),
    (("tool", UNKNOWN), ("side_effect_class", UNKNOWN)),
    UNKNOWN,
    UNKNOWN,
    known=False,
)

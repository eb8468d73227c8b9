"""toolgate: the deterministic edge between agents' tool-call proposals and real side effects."""

__version__ = "0.1.0"

"""toolgate's exceptions: one base, and the taxonomy class each kind of failure is answered with.

What leaves toolgate is never an exception; it is an observation with a taxonomy class or a dead
letter. Inside, a failure that a stage turns into an answer is a `ToolgateError` subclass that
names its class, so the stage answers with `error.taxonomy_class` instead of deciding again.
Third-party errors are converted at the adapter that calls the library, with `raise … from exc`.

It lives with the schemas, on the lowest floor (docs/architecture.md, "The layers"): each class
it names is a TaxonomyClass of the schemas, and the codec's DecodeError is a PermanentError.
"""

from __future__ import annotations

from typing import ClassVar

from toolgate.schemas.models import TaxonomyClass


class ToolgateError(Exception):
    """Base of every exception toolgate raises on purpose."""

    taxonomy_class: ClassVar[TaxonomyClass] = TaxonomyClass.UNKNOWN_ERROR
    retryable: ClassVar[bool] = False


class PermanentError(ToolgateError):
    """Retrying cannot help: the same input fails the same way."""


class TransientError(ToolgateError):
    """The same work may succeed later (a dependency restarting, a lost connection)."""

    taxonomy_class = TaxonomyClass.DEPENDENCY_UNAVAILABLE
    retryable = True


class ConfigurationError(PermanentError):
    """The deployment's configuration cannot work (a missing secret, a bad address)."""


class DecodeError(PermanentError, ValueError):
    """Bytes that are not a single-object-encoded toolgate record this codec can read."""

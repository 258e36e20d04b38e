"""tilecost's exception hierarchy.

    TilecostError
    ├── SpecError            a device spec file is missing or malformed
    ├── UnsupportedError     a problem/config combination the kernel family cannot run
    ├── DatasetError         a Parquet dataset is missing, malformed, or of another schema version
    ├── ArtifactError        a model artifact is missing, corrupted, or does not match its sidecar
    └── NotFittedError       an estimator was used before ``fit``

Caller mistakes in arguments (a negative M, an unknown dtype) raise the built-in ``ValueError`` or
``TypeError`` with the field name, the value and what is allowed; these classes are for failures of
the environment and the data.
"""

from __future__ import annotations

__all__ = [
    "ArtifactError",
    "DatasetError",
    "NotFittedError",
    "SpecError",
    "TilecostError",
    "UnsupportedError",
]


class TilecostError(Exception):
    """Base class of every error tilecost raises on purpose."""


class SpecError(TilecostError):
    """A device spec file is missing, malformed or names an unknown device class."""


class UnsupportedError(TilecostError, ValueError):
    """The kernel family cannot run this problem with this configuration."""


class DatasetError(TilecostError):
    """A measurement dataset is missing, malformed or of another schema version."""


class ArtifactError(TilecostError):
    """A model artifact is missing, corrupted, or does not match its metadata sidecar."""


class NotFittedError(TilecostError, RuntimeError):
    """An estimator was used before ``fit`` was called."""

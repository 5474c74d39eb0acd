"""The Schema Registry's domain errors, one class per Confluent Schema Registry error.

They are ``FranzError``s so they travel over the internal API like every other domain
error (by class name). Their HTTP status and Confluent ``error_code`` are chosen in
``api/schema_registry`` only.
"""

from __future__ import annotations

from core.errors import FranzError


class SchemaRegistryError(FranzError):
    """Base of the registry's errors."""


class SubjectNotFoundError(SchemaRegistryError):
    pass


class VersionNotFoundError(SchemaRegistryError):
    pass


class SchemaNotFoundError(SchemaRegistryError):
    pass


class SubjectSoftDeletedError(SchemaRegistryError):
    pass


class SubjectNotSoftDeletedError(SchemaRegistryError):
    pass


class VersionSoftDeletedError(SchemaRegistryError):
    pass


class VersionNotSoftDeletedError(SchemaRegistryError):
    pass


class SubjectCompatibilityNotConfiguredError(SchemaRegistryError):
    pass


class SubjectModeNotConfiguredError(SchemaRegistryError):
    pass


class IncompatibleSchemaError(SchemaRegistryError):
    pass


class InvalidSchemaError(SchemaRegistryError):
    pass


class InvalidVersionError(SchemaRegistryError):
    pass


class InvalidCompatibilityLevelError(SchemaRegistryError):
    pass


class InvalidModeError(SchemaRegistryError):
    pass


class OperationNotPermittedError(SchemaRegistryError):
    pass


class ReferenceExistsError(SchemaRegistryError):
    pass


class IdDoesNotMatchError(SchemaRegistryError):
    pass


class InvalidSubjectError(SchemaRegistryError):
    pass


class SchemaTooLargeError(SchemaRegistryError):
    pass

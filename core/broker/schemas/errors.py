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


# --- producing with schemas (``core.broker.schemas.encoding``) ------------------------------
#
# Not registry errors: a produce request's keys or values could not be written with the
# schema it names. Their HTTP status and Confluent REST Proxy ``error_code`` are chosen in
# ``api/errors.py``.


class ProduceSchemaError(FranzError):
    """Base of the errors of writing keys or values with a schema."""


class KeySchemaMissingError(ProduceSchemaError):
    """A request in a schema format has keys but names no key schema."""


class ValueSchemaMissingError(ProduceSchemaError):
    """A request in a schema format has values but names no value schema."""


class SerializationError(ProduceSchemaError):
    """A key or value does not match the schema it is written with."""


class RawSchemaInvalidError(ProduceSchemaError):
    """A schema text given with the records is not a valid schema."""


class SchemaLookupError(ProduceSchemaError):
    """The registry has no schema for what the request names (an id, a subject's
    version or latest version, an id that is not registered under the subject), or
    refused to register the schema given (incompatible, read-only mode)."""


class SchemaChoiceError(ProduceSchemaError):
    """The request names a schema in a way that cannot work (a version that does not
    exist, a record-name strategy without a schema to name the subject)."""

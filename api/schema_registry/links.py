"""The registry's OpenAPI links (``api.openapi_links``): a registration answers the id
of its schema (``getSchema``, ``getSubjects``, ... of that id) and names its subject
(its versions, its latest version, its level and mode, compatibility checks); a list of
subjects names the first one, a list of versions the first version."""

from __future__ import annotations

from api.openapi_links import Link, fan

_SUBJECT = "/subjects/{subject}"
_VERSION = _SUBJECT + "/versions/{version}"
_COMPATIBILITY = "/compatibility/subjects/{subject}/versions"

_OF_SUBJECT = {
    "ListVersions": f"GET {_SUBJECT}/versions",
    "GetLatestVersion": f"GET {_VERSION}",
    "GetLatestSchemaText": f"GET {_VERSION}/schema",
    "GetReferencedBy": f"GET {_VERSION}/referencedby",
    "CheckCompatibility": f"POST {_COMPATIBILITY}",
    "CheckCompatibilityWithLatest": f"POST {_COMPATIBILITY}/{{version}}",
    "GetSubjectConfig": "GET /config/{subject}",
    "SetSubjectConfig": "PUT /config/{subject}",
    "GetSubjectMode": "GET /mode/{subject}",
    "LookUpSchema": f"POST {_SUBJECT}",
    "DeleteLatestVersion": f"DELETE {_VERSION}",
    "DeleteSubject": f"DELETE {_SUBJECT}",
}

LINKS: list[Link] = fan(
    f"POST {_SUBJECT}/versions",
    200,
    {"id": "$response.body#/id"},
    {
        "GetSchema": "GET /schemas/ids/{id}",
        "GetSchemaText": "GET /schemas/ids/{id}/schema",
        "GetSubjectsOfId": "GET /schemas/ids/{id}/subjects",
        "GetVersionsOfId": "GET /schemas/ids/{id}/versions",
    },
    "The id just registered.",
) + fan(
    f"POST {_SUBJECT}/versions",
    200,
    {"subject": "$request.path.subject", "version": "latest"},
    _OF_SUBJECT,
    "The subject just registered under (its latest version).",
) + fan(
    "GET /subjects",
    200,
    {"subject": "$response.body#/0", "version": "latest"},
    {k: v for k, v in _OF_SUBJECT.items() if k.startswith(("Get", "List", "Check"))},
    "The first subject of the list (its latest version).",
) + fan(
    f"GET {_SUBJECT}/versions",
    200,
    {"subject": "$request.path.subject", "version": "$response.body#/0"},
    {
        "GetVersion": f"GET {_VERSION}",
        "GetSchemaText": f"GET {_VERSION}/schema",
        "GetReferencedBy": f"GET {_VERSION}/referencedby",
        "CheckCompatibility": f"POST {_COMPATIBILITY}/{{version}}",
        "DeleteVersion": f"DELETE {_VERSION}",
    },
    "The first version of the list.",
)

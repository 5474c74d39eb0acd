"""The HTTP API: Confluent REST Proxy v2 and v3 routers, internal broker-to-broker routes,
and the single place where domain errors become HTTP responses (``api.errors``)."""

"""What a handler knows about the request it serves: the broker, the listener and
connection it came on, who sent it, and the helpers every handler uses (ACL checks)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from core.broker.security.acl import Operation, ResourceType
from core.broker.security.principal import ANONYMOUS, Principal

if TYPE_CHECKING:
    from core.broker.broker import Broker


class ConnectionClosed(Exception):
    """The connection ends here (a protocol violation, a limit, an acks=0 produce that
    failed, as Kafka closes it then): nothing is answered."""


@dataclass(slots=True)
class ListenerInfo:
    """The listener a connection came in on, as the server knows it."""

    name: str  # ``PLAINTEXT``, ``SASL_SSL`` or the operator's own name
    security_protocol: str  # PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL
    advertised_host: str
    advertised_port: int

    @property
    def is_sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")


@dataclass(slots=True)
class Session:
    """One client connection: who it is once known, its SASL state."""

    host: str  # the client's address
    principal: Principal = ANONYMOUS
    authenticated: bool = True  # False on a SASL listener until SaslAuthenticate succeeds
    sasl_mechanism: str | None = None
    sasl: Any = None  # the mechanism's exchange in progress
    client_software: str = ""  # from ApiVersions v3+
    close_after_answer: bool = False  # a failed authentication: answer, then close
    zero_copy: bool = False  # plaintext: record regions go out with sendfile(2)
    state: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class RequestContext:
    broker: Broker
    listener: ListenerInfo
    session: Session
    api_key: int
    version: int
    correlation_id: int
    client_id: str | None
    throttle: Any = None  # the failed-login throttle HTTP Basic uses (LoginThrottle)
    fetch_sessions: Any = None  # the broker's FetchSessionCache

    def allowed(self, operation: Operation, resource_type: ResourceType, name: str) -> bool:
        """Whether this request's principal may ``operation`` the resource (audited)."""
        security = self.broker.security
        if not security.enabled:
            return True
        return security.authorize(self.session.principal, self.session.host, operation,
                                  resource_type, name)

    def allowed_quietly(self, operation: Operation, resource_type: ResourceType,
                        name: str) -> bool:
        """As ``allowed``, not audited (lists filtered to what may be seen)."""
        security = self.broker.security
        if not security.enabled:
            return True
        return security.authorize(self.session.principal, self.session.host, operation,
                                  resource_type, name, audit_denial=False)

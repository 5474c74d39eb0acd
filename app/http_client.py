"""The HTTP client of the ``franz`` admin commands: one ``httpx.Client`` on one franz
server, whose failures become two exceptions the commands turn into exit codes.

    CliError              a failure to report; ``exit_code`` says how to exit
      ServerUnreachable   no answer at all: refused, unknown host, timed out (exit 2)
      UsageError          input found unusable after parsing (exit 2)
      RequestFailed       the server answered with an error (exit 1); carries the HTTP
                          status and Confluent's ``error_code`` and ``message``

httpx's own exceptions never leave this module (they are translated here, with
``raise ... from``). Thread-safe as httpx.Client is: ``franz consume`` reads partitions
from several threads through one client.

Security (``app.client_config.ClientSecurity``): its Basic credentials go on every
request, and an https URL is verified with its TLS settings (truststore, client
certificate, host name check). A 401 answer becomes "authentication failed" naming
where the credentials came from (never what they are); a 403 keeps the server's message.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from types import TracebackType
from typing import Any
from urllib.parse import quote, urlsplit

import httpx
import orjson

from app.client_config import ClientSecurity

DEFAULT_URL = "http://127.0.0.1:8082"
V2_MEDIA = "application/vnd.kafka.v2+json"
EXIT_FAILED = 1
EXIT_USAGE = 2


class CliError(Exception):
    """A failure the command reports on stderr before exiting with ``exit_code``."""

    exit_code = EXIT_FAILED

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ServerUnreachable(CliError):
    """Nothing answered at the URL (connection refused, DNS, timeout, broken stream)."""

    exit_code = EXIT_USAGE


class UsageError(CliError):
    """Input the command cannot use, found after parsing (a bad user name, passwords
    that differ, a missing confirmation): exit 2, as argparse's errors."""

    exit_code = EXIT_USAGE


class RequestFailed(CliError):
    """The server answered 4xx/5xx; ``code`` is the body's ``error_code`` when present."""

    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


def normalize_url(text: str) -> str:
    """``host:port`` (Kafka's habit) or a URL -> ``http://host:port`` without a trailing
    slash; ValueError for something that is neither."""
    url = text.strip()
    if "://" not in url:
        url = "http://" + url
    url = url.rstrip("/")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {text!r}")
    try:
        parts.port  # noqa: B018  (raises ValueError for a bad port)
    except ValueError as exc:
        raise ValueError(f"bad port in {text!r}") from exc
    return url


def _reason(exc: httpx.TransportError) -> str:
    text = str(exc) or type(exc).__name__
    if isinstance(exc, httpx.TimeoutException):
        return f"timed out ({text})" if str(exc) else "timed out"
    if "Connection refused" in text or "Errno 111" in text:
        return "connection refused (is the server running?)"
    if "CERTIFICATE_VERIFY_FAILED" in text:
        return (f"TLS: {text} (set ssl.truststore.location to the CA bundle that signed the "
                "server's certificate)")
    if "SSL" in text or "TLS" in text:
        return f"TLS: {text}"
    return text


def authentication_failed(resp: httpx.Response, security: ClientSecurity) -> RequestFailed:
    """A 401: what the server said and where the credentials came from, never them."""
    said = error_of(resp).message.strip().rstrip(".")
    head, sep, tail = said.partition(":")
    if sep and head.strip().lower() == "authentication failed":
        said = tail.strip()  # the server's "Authentication failed: <why>"
    if security.basic_auth is None:
        hint = ("no credentials were given: set basic.auth.user.info=USER:PASSWORD in "
                "--command-config FILE or $FRANZ_CLIENT_BASIC_AUTH_USER_INFO")
    else:
        hint = (f"check the user {security.user!r} and its password "
                f"({security.credentials_source})")
    return RequestFailed(401, 40101, f"authentication failed: {said}; {hint}")


def error_of(resp: httpx.Response) -> RequestFailed:
    """The error an answer carries: Confluent's ``{"error_code", "message"}`` body, or
    the status line and the start of the body when it is something else."""
    try:
        body = orjson.loads(resp.content)
    except orjson.JSONDecodeError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        code = body.get("error_code")
        return RequestFailed(resp.status_code, code if isinstance(code, int) else 0,
                             body["message"])
    text = resp.text.strip()[:200] or resp.reason_phrase
    return RequestFailed(resp.status_code, resp.status_code, f"HTTP {resp.status_code}: {text}")


class FranzClient:
    """Calls to one franz server. Use as a context manager (closes the connections)."""

    def __init__(self, base_url: str, *, security: ClientSecurity | None = None,
                 timeout: float = 30.0, max_connections: int = 20) -> None:
        self.base_url = base_url
        self.security = security or ClientSecurity()
        limits = httpx.Limits(max_connections=max_connections,
                              max_keepalive_connections=max_connections)
        # Plain http needs no certificates: skip loading the CA bundle (a fifth of the
        # start-up time of a command). Redirects are not followed, so no https hop either.
        # https without TLS settings keeps httpx's default verification.
        verify: bool | ssl.SSLContext = not base_url.startswith("http://")
        if verify and self.security.has_tls_settings:
            verify = self.security.ssl_context()  # ClientConfigError when a file is bad
        headers = {}
        if self.security.authorization is not None:
            headers["Authorization"] = self.security.authorization
        self._http = httpx.Client(base_url=base_url, timeout=timeout, limits=limits,
                                  verify=verify, headers=headers)
        self._cluster_id: str | None = None

    def __enter__(self) -> FranzClient:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # --- plumbing ------------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        content: bytes | None = None,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        """The answer when its status is below 400, else RequestFailed;
        ServerUnreachable when there is none."""
        hdrs = dict(headers or {})
        if json is not None:
            content = orjson.dumps(json)
            hdrs.setdefault("Content-Type", "application/json")
        try:
            resp = self._http.request(method, path, content=content, params=params,
                                      headers=hdrs)
        except httpx.TransportError as exc:
            raise ServerUnreachable(
                f"cannot reach franz at {self.base_url}: {_reason(exc)}") from exc
        if resp.status_code == 401:
            raise authentication_failed(resp, self.security)
        if resp.status_code >= 400:
            raise error_of(resp)
        return resp

    def get_json(self, path: str, **params: Any) -> Any:
        return orjson.loads(self.request("GET", path, params=params or None).content)

    # --- the v3 API ----------------------------------------------------------------------

    @property
    def cluster_id(self) -> str:
        """The server's cluster id (``GET /v3/clusters``), asked once."""
        if self._cluster_id is None:
            clusters = self.get_json("/v3/clusters")["data"]
            if not clusters:
                raise RequestFailed(500, 500, "the server reports no cluster")
            self._cluster_id = str(clusters[0]["cluster_id"])
        return self._cluster_id

    def v3(self, *parts: str | int) -> str:
        """The path of ``/v3/clusters/<this cluster>/<parts...>``, each part quoted."""
        tail = "".join("/" + quote(str(p), safe="") for p in parts)
        return f"/v3/clusters/{quote(self.cluster_id, safe='')}{tail}"

    def v3_list(self, *parts: str | int, **params: Any) -> list[dict[str, Any]]:
        """The ``data`` of a v3 collection."""
        data: list[dict[str, Any]] = self.get_json(self.v3(*parts), **params)["data"]
        return data

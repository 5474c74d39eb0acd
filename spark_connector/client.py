"""The only way the connector talks to franz: its HTTP API (v2 paths plus franz's range
read), over the standard library's ``http.client``. Nothing here imports franz's server
code.

Calls used:

- ``GET /topics``, ``GET /topics/{t}/partitions``,
  ``GET /topics/{t}/partitions/{p}/offsets`` (driver: what to read);
- ``GET /topics/{t}/partitions/{p}/records?offset=&max_bytes=&count=&timeout=`` (executors:
  the stateless range read; ``X-Franz-Next-Offset`` / ``-High-Watermark`` /
  ``-Log-Start-Offset`` headers); binary, or with ``keyFormat`` / ``valueFormat`` keys and
  values decoded by franz (Accept ``application/vnd.kafka.<valueFormat>.v2+json`` and
  ``key_format=<keyFormat>``);
- ``POST /topics/{t}`` (writers; binary embedded format, headers per record; with an
  ``Idempotency-Key`` header for exactly-once writes, one attempt per call, the writer
  retrying with the same key and body);
- ``POST /v3/clusters/{c}/topics/{t}/records`` (writers with ``keyFormat`` /
  ``valueFormat``: a JSON array of v3 records, each key and value with its own ``type``
  or schema, so a binary key goes with an Avro value; the same ``Idempotency-Key``
  handling), after ``GET /v3/clusters`` (the cluster id) and the Schema Registry's
  ``GET /subjects/{s}/versions/latest`` / ``GET /schemas/ids/{id}`` on the driver;
- ``/consumers/...`` instances, only for offsets-for-times lookups (seek by timestamp)
  and for the opt-in commit of processed offsets to a consumer group.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import socket
import ssl
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from spark_connector.options import FranzOptionError, HttpConf, TopicPartition

try:  # optional accelerator; the stdlib is enough
    import orjson

    def loads(data: bytes) -> Any:
        return orjson.loads(data)

    def dumps(obj: Any) -> bytes:
        return orjson.dumps(obj)

    _check_json = orjson.loads

except ImportError:  # pragma: no cover - orjson is installed with franz
    import json

    def loads(data: bytes) -> Any:
        return json.loads(data)

    def dumps(obj: Any) -> bytes:
        # the bytes orjson writes (UTF-8, not \u-escaped): a produce body must be the
        # same, byte for byte, whichever of the two an executor has (Idempotency-Key)
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()

    def _no_constant(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    def _check_json(text: str) -> Any:
        return json.loads(text, parse_constant=_no_constant)


def json_text(text: str) -> bytes:
    """``text`` as the UTF-8 bytes of one JSON value, checked with the parser ``loads``
    uses; ``ValueError`` saying what is wrong when it is not JSON (``NaN`` and
    ``Infinity`` are not JSON, in either parser)."""
    try:
        _check_json(text)
        return text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValueError(f"not UTF-8 text ({e.reason} at character {e.start})") from None


V2 = "application/vnd.kafka.v2+json"
V3 = "application/json"
REGISTRY = "application/vnd.schemaregistry.v1+json"
BINARY = "application/vnd.kafka.binary.v2+json"
IDEMPOTENCY_KEY = "Idempotency-Key"
_RETRY_STATUS = frozenset({429, 502, 503, 504})


class FranzHttpError(RuntimeError):
    """franz answered with an error (after any retries)."""

    def __init__(
        self, method: str, url: str, status: int, error_code: int | None, message: str
    ) -> None:
        self.status = status
        self.error_code = error_code
        self.server_message = message
        code = f" / {error_code}" if error_code is not None else ""
        super().__init__(f"franz: {method} {url} answered {status}{code}: {message}")


class FranzConnectionError(RuntimeError):
    """No franz URL answered."""


def _quote(name: str) -> str:
    return quote(name, safe="")


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


@dataclass
class Response:
    method: str
    url: str
    status_code: int
    headers: dict[str, str]  # lower-cased names
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self) -> Any:
        return loads(self.content)


class _StaleConnection(Exception):
    """A kept-alive connection the server had closed: resend on a new one."""


def _ssl_context(conf: HttpConf) -> ssl.SSLContext:
    """The TLS context of https URLs, built where the client runs (executors included,
    so the options' paths name files there): ``ssl.truststore.location`` (or a
    ``tls.verify`` path) verifies the server, ``ssl.keystore.location`` is the client
    certificate. A file that does not load is a ``FranzOptionError`` naming the option."""
    cafile = conf.truststore or (conf.verify if isinstance(conf.verify, str) else None)
    name = "ssl.truststore.location" if conf.truststore else "tls.verify"
    try:
        ctx = ssl.create_default_context(cafile=cafile)
    except (OSError, ValueError) as e:
        raise FranzOptionError(f"Option {name}={cafile!r}: no PEM CA bundle there ({e})") from None
    if conf.verify is False:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if conf.keystore:
        # A callable, never None: OpenSSL would otherwise prompt for an encrypted key's
        # password on the executor's terminal.
        secret = (conf.key_password or "").encode()
        try:
            ctx.load_cert_chain(conf.keystore, conf.keystore, password=lambda: secret)
        except (OSError, ValueError) as e:
            raise FranzOptionError(
                f"Option ssl.keystore.location={conf.keystore!r}: no PEM client certificate "
                f"with its key there, or a wrong ssl.key.password ({e})"
            ) from None
    return ctx


class FranzClient:
    """Keep-alive HTTP/1.1 connections to franz (the standard library's ``http.client``:
    no client library between the connector and the socket), with retries and URL
    failover.

    Not picklable on purpose: readers and writers create one where they run (driver
    process, executor task, helper thread) and close it when done."""

    def __init__(self, conf: HttpConf) -> None:
        self.conf = conf
        self._current = 0
        self._conns: dict[str, http.client.HTTPConnection] = {}
        self._headers = dict(conf.headers)
        if conf.basic_auth is not None:
            token = base64.b64encode(":".join(conf.basic_auth).encode()).decode("ascii")
            self._headers["Authorization"] = f"Basic {token}"
        self._timeout = conf.request_timeout_ms / 1000.0
        self._tls: ssl.SSLContext | None = None  # built at the first https connection

    def close(self) -> None:
        for conn in self._conns.values():
            with contextlib.suppress(Exception):
                conn.close()
        self._conns.clear()

    def __enter__(self) -> FranzClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        raise TypeError("FranzClient is not picklable; create one where it is used")

    # --- transport -------------------------------------------------------------------

    def _connection(self, base: str) -> tuple[http.client.HTTPConnection, bool]:
        """(connection, reused?); connects a new one (connect errors propagate)."""
        conn = self._conns.get(base)
        if conn is not None and conn.sock is not None:
            return conn, True
        parts = urlsplit(base)
        if parts.scheme == "https":
            conn = http.client.HTTPSConnection(
                parts.hostname or "",
                parts.port,
                timeout=self._timeout,
                context=self._tls_context(),
            )
        else:
            conn = http.client.HTTPConnection(
                parts.hostname or "", parts.port, timeout=self._timeout
            )
        conn.connect()
        self._conns[base] = conn
        return conn, False

    def _tls_context(self) -> ssl.SSLContext:
        if self._tls is None:
            self._tls = _ssl_context(self.conf)
        return self._tls

    def _drop(self, base: str) -> None:
        conn = self._conns.pop(base, None)
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def _send(
        self, base: str, method: str, target: str, content: bytes | None, headers: dict[str, str]
    ) -> Response:
        conn, reused = self._connection(base)
        try:
            conn.request(method, target, body=content, headers=headers)
            r = conn.getresponse()
            data = r.read()
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as e:
            self._drop(base)
            if reused:
                raise _StaleConnection() from e
            raise
        except BaseException:
            self._drop(base)
            raise
        if r.will_close:
            self._drop(base)
        return Response(
            method, base + target, r.status, {k.lower(): v for k, v in r.getheaders()}, data
        )

    def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        content: bytes | None = None,
        headers: dict[str, str] | None = None,
        idempotent: bool = True,
        retries: int | None = None,
        backoff_ms: int | None = None,
    ) -> Response:
        """Send, retrying on connection errors (next URL), 429 and 502-504; other 5xx
        and timeouts are retried only for idempotent calls. Answers with any other
        status are returned as they are."""
        conf = self.conf
        attempts = (conf.max_retries if retries is None else retries) + 1
        delay = (conf.retry_backoff_ms if backoff_ms is None else backoff_ms) / 1000.0
        hdrs = {**self._headers, **(headers or {})}
        last = ""
        for attempt in range(attempts):
            base = conf.urls[self._current]
            target = urlsplit(base).path + path + (f"?{urlencode(params)}" if params else "")
            try:
                try:
                    resp = self._send(base, method, target, content, hdrs)
                except _StaleConnection:
                    resp = self._send(base, method, target, content, hdrs)
            except (ConnectionRefusedError, socket.gaierror) as e:
                last = f"{base}: {e!r}"
                self._current = (self._current + 1) % len(conf.urls)
            except OSError as e:  # timeouts, resets, TLS errors
                if not idempotent:
                    raise FranzConnectionError(f"franz: {method} {base}{path} failed: {e!r}") from e
                last = f"{base}: {e!r}"
                self._current = (self._current + 1) % len(conf.urls)
            except http.client.HTTPException as e:
                if not idempotent:
                    raise FranzConnectionError(f"franz: {method} {base}{path} failed: {e!r}") from e
                last = f"{base}: {e!r}"
            else:
                if resp.status_code in _RETRY_STATUS or (idempotent and resp.status_code >= 500):
                    last = f"{base}: HTTP {resp.status_code} {resp.text[:200]}"
                    if attempt + 1 < attempts:
                        time.sleep(delay * (2**attempt))
                        continue
                return resp
            if attempt + 1 < attempts:
                time.sleep(delay * (2**attempt))
        raise FranzConnectionError(
            f"franz: {method} {path} failed after {attempts} attempt(s) on "
            f"{', '.join(conf.urls)}; last error: {last}"
        )

    @staticmethod
    def error(resp: Response) -> FranzHttpError:
        code: int | None = None
        message = resp.text[:500]
        with contextlib.suppress(Exception):
            body = resp.json()
            code = body.get("error_code")
            message = body.get("message") or message
        return FranzHttpError(resp.method, resp.url, resp.status_code, code, message)

    def get_json(self, path: str, **kw: Any) -> Any:
        resp = self.request("GET", path, headers={"Accept": V2}, **kw)
        if resp.status_code != 200:
            raise self.error(resp)
        return loads(resp.content)

    # --- metadata --------------------------------------------------------------------

    def topics(self, **kw: Any) -> list[str]:
        return list(self.get_json("/topics", **kw))

    def partitions(self, topic: str, **kw: Any) -> list[int] | None:
        """Partition ids of ``topic``, or None when it does not exist."""
        resp = self.request(
            "GET", f"/topics/{_quote(topic)}/partitions", headers={"Accept": V2}, **kw
        )
        if resp.status_code == 404:
            return None
        if resp.status_code != 200:
            raise self.error(resp)
        return sorted(int(p["partition"]) for p in loads(resp.content))

    def offsets(self, topic: str, partition: int, **kw: Any) -> tuple[int, int] | None:
        """``(log start offset, high watermark)``, or None when the partition is gone."""
        resp = self.request(
            "GET",
            f"/topics/{_quote(topic)}/partitions/{partition}/offsets",
            headers={"Accept": V2},
            **kw,
        )
        if resp.status_code == 404:
            return None
        if resp.status_code != 200:
            raise self.error(resp)
        body = loads(resp.content)
        return int(body["beginning_offset"]), int(body["end_offset"])

    # --- range read ------------------------------------------------------------------

    def read(
        self,
        topic: str,
        partition: int,
        offset: int,
        *,
        max_bytes: int,
        count: int,
        timeout_ms: int,
        key_format: str = "binary",
        value_format: str = "binary",
    ) -> Response:
        """One range read; the raw response (the caller decides what a 416 means). Keys
        and values in their embedded formats (binary: base64 of the bytes)."""
        params: dict[str, Any] = {
            "offset": offset,
            "max_bytes": max_bytes,
            "count": count,
            "timeout": timeout_ms,
        }
        if key_format != value_format:
            params["key_format"] = key_format
        return self.request(
            "GET",
            f"/topics/{_quote(topic)}/partitions/{partition}/records",
            params=params,
            headers={"Accept": f"application/vnd.kafka.{value_format}.v2+json"},
        )

    # --- produce ---------------------------------------------------------------------

    def produce(self, topic: str, body: bytes, *, acks: str) -> list[dict[str, Any]]:
        """POST ``{"records": [...]}`` (binary format); the per-record ``offsets``."""
        resp = self.request(
            "POST",
            f"/topics/{_quote(topic)}",
            params={"acks": acks},
            content=body,
            headers={"Content-Type": BINARY, "Accept": V2},
            idempotent=False,
        )
        if resp.status_code != 200:
            raise self.error(resp)
        return list(loads(resp.content)["offsets"])

    def produce_once(self, topic: str, body: bytes, *, acks: str, idempotency_key: str) -> Response:
        """One attempt of ``POST /topics/{t}`` with an ``Idempotency-Key``: the answer,
        whatever its status, or ``FranzConnectionError`` when none came (refused,
        timed out, dropped; the next call goes to the next URL). The caller resends the
        same body with the same key: franz answers a key it has seen with the first
        request's answer and writes nothing again."""
        return self.request(
            "POST",
            f"/topics/{_quote(topic)}",
            params={"acks": acks},
            content=body,
            headers={"Content-Type": BINARY, "Accept": V2, IDEMPOTENCY_KEY: idempotency_key},
            idempotent=True,  # safe to resend: the key makes it so
            retries=0,  # the writer's retry policy decides
        )

    def produce_v3(
        self, cluster: str, topic: str, body: bytes, *, idempotency_key: str | None = None
    ) -> Response:
        """``POST /v3/clusters/{c}/topics/{t}/records`` with ``body``, a JSON array of v3
        records (written with acks=all, the only v3 mode); the answer whatever its status
        (``v3_answers`` reads a 200). With ``idempotency_key``: one attempt, as
        ``produce_once`` (a body with a Content-Length, which franz needs for a key on
        this route)."""
        headers = {"Content-Type": V3, "Accept": V3}
        keyed = False
        if idempotency_key is not None:
            headers[IDEMPOTENCY_KEY] = idempotency_key
            keyed = True
        return self.request(
            "POST",
            f"/v3/clusters/{_quote(cluster)}/topics/{_quote(topic)}/records",
            content=body,
            headers=headers,
            idempotent=keyed,
            retries=0 if keyed else None,
        )

    @staticmethod
    def v3_answers(resp: Response) -> list[dict[str, Any]]:
        """The delivery reports of a v3 produce (one JSON object per record, each
        followed by CRLF) in v2's per-record shape: ``error_code`` None when written,
        else franz's code, with its message in ``error``."""
        out: list[dict[str, Any]] = []
        for line in resp.content.split(b"\r\n"):
            if not line.strip():
                continue
            report = loads(line)
            code = report.get("error_code")
            if code == 200:
                out.append(
                    {
                        "partition": report.get("partition_id"),
                        "offset": report.get("offset"),
                        "error_code": None,
                        "error": None,
                    }
                )
            else:
                out.append(
                    {
                        "partition": None,
                        "offset": None,
                        "error_code": code,
                        "error": report.get("message"),
                    }
                )
        return out

    def cluster_id(self) -> str:
        """This franz cluster's id (``GET /v3/clusters``), for v3 paths."""
        resp = self.request("GET", "/v3/clusters", headers={"Accept": V3})
        if resp.status_code != 200:
            raise self.error(resp)
        return str(loads(resp.content)["data"][0]["cluster_id"])

    def registry_get(self, path: str) -> Response:
        """A Schema Registry lookup (``/subjects/...``, ``/schemas/ids/...``), served at
        the root of every franz listener; the answer whatever its status."""
        return self.request("GET", path, headers={"Accept": REGISTRY})

    # --- consumer instances (lookups and commit-back) --------------------------------

    def _instance(self, group: str) -> str:
        name = f"franz-spark-{uuid.uuid4().hex[:16]}"
        resp = self.request(
            "POST",
            f"/consumers/{_quote(group)}",
            content=dumps(
                {
                    "name": name,
                    "format": "binary",
                    "auto.commit.enable": "false",
                    "auto.offset.reset": "latest",
                }
            ),
            headers={"Content-Type": V2, "Accept": V2},
            idempotent=False,
        )
        if resp.status_code != 200:
            raise self.error(resp)
        return f"/consumers/{_quote(group)}/instances/{name}"

    def _post(self, path: str, doc: Any, *, expect: Iterable[int] = (200, 204)) -> Response:
        resp = self.request(
            "POST",
            path,
            content=dumps(doc),
            headers={"Content-Type": V2, "Accept": V2},
            idempotent=False,
        )
        if resp.status_code not in tuple(expect):
            raise self.error(resp)
        return resp

    def _delete_instance(self, base: str) -> None:
        with contextlib.suppress(Exception):
            self.request("DELETE", base, headers={"Accept": V2}, retries=0)

    def offsets_for_times(
        self, stamps: dict[TopicPartition, int]
    ) -> dict[TopicPartition, int | None]:
        """For each partition, the first offset whose timestamp is >= the given epoch ms
        (Kafka's offsets-for-times), or None when no record is that recent.

        franz has no direct call for it: a throw-away consumer instance (its own group,
        nothing committed) seeks each partition by timestamp and reads one record."""
        if not stamps:
            return {}
        base = self._instance(f"franz-spark-lookup-{uuid.uuid4().hex[:12]}")
        out: dict[TopicPartition, int | None] = {}
        try:
            for (topic, partition), ts in sorted(stamps.items()):
                tp = {"topic": topic, "partition": partition}
                self._post(base + "/assignments", {"partitions": [tp]})
                self._post(base + "/positions", {"timestamps": [{**tp, "timestamp": ts}]})
                resp = self.request(
                    "GET",
                    base + "/records",
                    params={"max_bytes": 1, "timeout": 100},
                    headers={"Accept": BINARY},
                )
                if resp.status_code != 200:
                    raise self.error(resp)
                found = [
                    r["offset"]
                    for r in loads(resp.content)
                    if r["topic"] == topic and r["partition"] == partition
                ]
                out[(topic, partition)] = min(found) if found else None
        finally:
            self._delete_instance(base)
        return out

    def commit_group(self, group: str, positions: dict[TopicPartition, int]) -> None:
        """Store ``positions`` (next offset to read, Kafka's committed-offset meaning) as
        the committed offsets of ``group``. franz (like Confluent) stores the committed
        value + 1, so ``position - 1`` is sent; partitions at position 0 are skipped."""
        todo = {tp: pos for tp, pos in positions.items() if pos > 0}
        if not todo:
            return
        base = self._instance(group)
        try:
            parts = [{"topic": t, "partition": p} for t, p in sorted(todo)]
            self._post(base + "/assignments", {"partitions": parts})
            self._post(
                base + "/offsets",
                {
                    "offsets": [
                        {
                            "topic": t,
                            "partition": p,
                            "offset": pos - 1,
                            "metadata": "franz spark connector",
                        }
                        for (t, p), pos in sorted(todo.items())
                    ]
                },
            )
        finally:
            self._delete_instance(base)

"""The subject of an X.509 certificate as Java's ``X500Principal.getName()`` writes it.

Principal mapping rules (``ssl.principal.mapping.rules``) are written against the RFC 2253
string Kafka gets from Java: RDNs most specific first (``CN=alice,OU=eng,O=acme,C=US``,
the reverse of the certificate's order), the keywords CN, C, L, ST, O, OU, STREET, DC and
UID, any other attribute as ``<dotted OID>=#<hex of its DER value>``, a multi-valued RDN
joined with ``+``, and in values a backslash before each of ``,=+<>#;"\\``, before a
leading or trailing space, and ``\\00`` for NUL. So the subject is read from the DER
certificate (``ssl.SSLObject.getpeercert(binary_form=True)``) with a small DER reader,
not from ``getpeercert()``'s decoded dict, which has lost the value types Java's
rendering depends on. Called once per TLS connection.
"""

from __future__ import annotations

_KEYWORDS = {
    "2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.10": "O",
    "2.5.4.11": "OU", "2.5.4.9": "STREET", "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}
# String types Java renders as text (others, e.g. UniversalString, as #hex).
_TEXT_TYPES = {
    0x0C: "utf-8",  # UTF8String
    0x13: "latin-1",  # PrintableString
    0x14: "latin-1",  # TeletexString (T61)
    0x16: "latin-1",  # IA5String
    0x1B: "latin-1",  # GeneralString
    0x1E: "utf-16-be",  # BMPString
}
_ESCAPED = frozenset(',=+<>#;"\\')
_SEQUENCE, _SET, _OID = 0x30, 0x31, 0x06


def subject_dn(der: bytes) -> str:
    """The RFC 2253 subject DN of a DER-encoded certificate; ValueError if malformed."""
    try:
        return _subject_dn(memoryview(der))
    except (IndexError, UnicodeDecodeError) as exc:
        raise ValueError(f"malformed certificate: {exc}") from None


def _subject_dn(der: memoryview) -> str:
    tag, cert, _ = _tlv(der, 0)
    _expect(tag, _SEQUENCE, "Certificate")
    tag, tbs, _ = _tlv(cert, 0)
    _expect(tag, _SEQUENCE, "TBSCertificate")
    pos = 0
    if tbs[0] == 0xA0:  # [0] EXPLICIT version
        pos = _tlv(tbs, 0)[2]
    for _field in ("serialNumber", "signature", "issuer", "validity"):
        pos = _tlv(tbs, pos)[2]
    tag, subject, _ = _tlv(tbs, pos)
    _expect(tag, _SEQUENCE, "subject Name")
    rdns: list[str] = []
    pos = 0
    while pos < len(subject):
        tag, rdn, pos = _tlv(subject, pos)
        _expect(tag, _SET, "RelativeDistinguishedName")
        avas: list[str] = []
        at = 0
        while at < len(rdn):
            tag, ava, at = _tlv(rdn, at)
            _expect(tag, _SEQUENCE, "AttributeTypeAndValue")
            tag, oid, value_at = _tlv(ava, 0)
            _expect(tag, _OID, "attribute type")
            avas.append(_ava(_oid_text(oid), ava[value_at:]))
        rdns.append("+".join(avas))
    return ",".join(reversed(rdns))


def _ava(oid: str, value_der: memoryview) -> str:
    keyword = _KEYWORDS.get(oid)
    tag, value, _ = _tlv(value_der, 0)
    codec = _TEXT_TYPES.get(tag)
    if keyword is None or codec is None:
        return f"{keyword or oid}=#{bytes(value_der).hex()}"
    return f"{keyword}={_escape(bytes(value).decode(codec))}"


def _escape(value: str) -> str:
    out = []
    for c in value:
        if c in _ESCAPED:
            out.append("\\" + c)
        elif c == "\0":
            out.append("\\00")
        else:
            out.append(c)
    text = "".join(out)
    # a leading or trailing space (or CR, as Java) is escaped too
    stripped = text.lstrip(" \r")
    lead = len(text) - len(stripped)
    body = stripped.rstrip(" \r")
    trail = len(stripped) - len(body)
    if not lead and not trail:
        return text
    return ("".join("\\" + c for c in text[:lead]) + body
            + "".join("\\" + c for c in stripped[len(body):len(body) + trail]))


def _tlv(buf: memoryview, pos: int) -> tuple[int, memoryview, int]:
    """(tag, contents, position after) of the DER element at ``pos``."""
    tag = buf[pos]
    if tag & 0x1F == 0x1F:
        raise ValueError("malformed certificate: multi-byte DER tags are not expected here")
    length = buf[pos + 1]
    pos += 2
    if length & 0x80:
        count = length & 0x7F
        if not 0 < count <= 4:
            raise ValueError("malformed certificate: bad DER length")
        length = int.from_bytes(buf[pos:pos + count], "big")
        pos += count
    end = pos + length
    if end > len(buf):
        raise ValueError("malformed certificate: a DER element overruns its container")
    return tag, buf[pos:end], end


def _expect(tag: int, wanted: int, what: str) -> None:
    if tag != wanted:
        raise ValueError(f"malformed certificate: {what} has DER tag 0x{tag:02x}")


def _oid_text(oid: memoryview) -> str:
    arcs: list[int] = []
    value = 0
    for byte in oid:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            arcs.append(value)
            value = 0
    if not arcs:
        raise ValueError("malformed certificate: empty OID")
    first = min(arcs[0] // 40, 2)
    return ".".join(map(str, [first, arcs[0] - 40 * first, *arcs[1:]]))

"""``ssl.principal.mapping.rules`` as Kafka reads them (the examples of Kafka's
documentation and of its SslPrincipalMapper), and the subject DN they are matched
against, rendered from real certificates as Java's X500Principal.getName() does."""

from __future__ import annotations

import datetime

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.x509.oid import NameOID

from core.broker.security.distinguished_name import subject_dn
from core.broker.security.principal_mapping import PrincipalMapper

DOC_RULES = ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,"
             "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
             "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,"
             "DEFAULT")


@pytest.mark.parametrize(("dn", "name"), [
    ("CN=serviceuser,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,C=Unknown", "serviceuser"),
    ("CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,C=Unknown", "adminuser@admin"),
    ("CN=kafka.Apache.org,O=ASF", "kafka.apache.org"),
    ("OU=JavaSoft,O=Sun Microsystems,C=US", "OU=JavaSoft,O=Sun Microsystems,C=US"),
])
def test_the_documentation_example(dn: str, name: str) -> None:
    assert PrincipalMapper.from_rules(DOC_RULES).name_of(dn) == name


@pytest.mark.parametrize(("dn", "name"), [
    ("CN=Duke,OU=ServiceUsers,O=Org,C=US", "duke"),
    ("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US", "duke@sme"),
    ("cn=duke,ou=sme,dc=mycp,dc=com", "DUKE@SME"),
    ("cN=duke,OU=JavaSoft,O=Sun Microsystems", "DUKE"),
    ("OU=JavaSoft,O=Sun Microsystems,C=US", "OU=JavaSoft,O=Sun Microsystems,C=US"),
])
def test_rules_apply_in_order_with_case_flags(dn: str, name: str) -> None:
    rules = ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, "
             "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L, "
             "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U, "
             "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U, "
             "DEFAULT")
    assert PrincipalMapper.from_rules(rules).name_of(dn) == name


def test_rules_separated_by_newlines_and_blank_entries() -> None:
    mapper = PrincipalMapper.from_rules(
        "\n  RULE:^CN=([^,]*),OU=ops$/ops-$1/\n\n,RULE:^CN=([^,]*).*$/$1/U\n")
    assert mapper.name_of("CN=bob,OU=ops") == "ops-bob"
    assert mapper.name_of("CN=bob,OU=dev") == "BOB"
    assert mapper.name_of("OU=dev") is None  # no rule, no DEFAULT: refused


def test_escaped_comma_in_a_name() -> None:
    mapper = PrincipalMapper.from_rules(r"RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT")
    assert mapper.name_of(r"CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz") == r"Tkac\, Adam"
    assert mapper.name_of("OU=ITZ") == "OU=ITZ"


def test_escaped_slash_and_dollar() -> None:
    mapper = PrincipalMapper.from_rules(r"RULE:^CN=a\/b,(.*)$/x\/$1\$/")
    assert mapper.name_of("CN=a/b,O=c") == "x/O=c$"


def test_group_references_beyond_the_pattern_are_text() -> None:
    # two groups: $12 is group 1 then "2"; $3 names no group and stays as written
    mapper = PrincipalMapper.from_rules("RULE:^CN=(.*?),O=(.*)$/$12-$2-$3/")
    assert mapper.name_of("CN=a,O=b") == "a2-b-$3"


def test_named_groups_as_java_writes_them() -> None:
    mapper = PrincipalMapper.from_rules("RULE:^CN=(?<user>[^,]*),.*$/${user}/U")
    assert mapper.name_of("CN=carol,O=x") == "CAROL"


def test_the_pattern_must_match_the_whole_dn() -> None:
    mapper = PrincipalMapper.from_rules("RULE:CN=([^,]*)/$1/")
    assert mapper.name_of("CN=dan") == "dan"
    assert mapper.name_of("CN=dan,O=x") is None


def test_default_alone_and_no_rules() -> None:
    assert PrincipalMapper.from_rules("DEFAULT").name_of("CN=x,O=y") == "CN=x,O=y"
    assert PrincipalMapper.from_rules("").name_of("CN=x") is None  # as Kafka: maps nothing


@pytest.mark.parametrize("rules", [
    "DEFAUL",
    "DEFAULT/L",
    "DEFAULT/U",
    "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
    "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
    "RULE:^CN=(.*?$/$1/",  # not a regex
    "RULE:^CN=(.*)$/$x/",  # '$' not followed by a group
    "RULE:^CN=(.*)$/${nope}/",
    "DEFAULT,nonsense",
])
def test_invalid_rules_are_named(rules: str) -> None:
    with pytest.raises(ValueError, match="invalid rule"):
        PrincipalMapper.from_rules(rules)


# --- the DN the rules see, from real certificates ----------------------------------------

_KEY = ec.generate_private_key(ec.SECP256R1())


def _cert(name: x509.Name) -> bytes:
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(_KEY.public_key()).serial_number(7).not_valid_before(now)
            .not_valid_after(now + datetime.timedelta(days=1)).sign(_KEY, hashes.SHA256()))
    return cert.public_bytes(Encoding.DER)


def _attr(oid: x509.ObjectIdentifier, value: str) -> x509.NameAttribute:
    return x509.NameAttribute(oid, value)


def test_subject_most_specific_first_with_java_escapes() -> None:
    # in the certificate C comes first; Java's RFC 2253 string starts with CN
    name = x509.Name([_attr(NameOID.COUNTRY_NAME, "US"), _attr(NameOID.ORGANIZATION_NAME, "acme, inc"),
                      _attr(NameOID.ORGANIZATIONAL_UNIT_NAME, "eng"),
                      _attr(NameOID.COMMON_NAME, " alice#1+x=\"y\" ")])
    assert subject_dn(_cert(name)) == r'CN=\ alice\#1\+x\=\"y\"\ ,OU=eng,O=acme\, inc,C=US'


def test_subject_keywords_oids_and_multi_valued_rdns() -> None:
    name = x509.Name([
        x509.RelativeDistinguishedName([_attr(NameOID.DOMAIN_COMPONENT, "com")]),
        x509.RelativeDistinguishedName([_attr(NameOID.LOCALITY_NAME, "Paris"),
                                        _attr(NameOID.STATE_OR_PROVINCE_NAME, "IDF")]),
        x509.RelativeDistinguishedName([_attr(NameOID.STREET_ADDRESS, "1 rue")]),
        x509.RelativeDistinguishedName([_attr(NameOID.USER_ID, "u1")]),
        x509.RelativeDistinguishedName([_attr(NameOID.EMAIL_ADDRESS, "a@b.c")]),
    ])
    # emailAddress has no RFC 2253 keyword: OID=#<DER hex> (IA5String "a@b.c"); a
    # multi-valued RDN keeps its DER order (a SET OF, sorted by encoding)
    assert subject_dn(_cert(name)) == (
        "1.2.840.113549.1.9.1=#16056140622e63,UID=u1,STREET=1 rue,ST=IDF+L=Paris,DC=com")


def test_certificate_subject_through_the_rules() -> None:
    name = x509.Name([_attr(NameOID.COUNTRY_NAME, "US"), _attr(NameOID.STATE_OR_PROVINCE_NAME, "Unknown"),
                      _attr(NameOID.LOCALITY_NAME, "Unknown"), _attr(NameOID.ORGANIZATION_NAME, "Unknown"),
                      _attr(NameOID.ORGANIZATIONAL_UNIT_NAME, "Admin"),
                      _attr(NameOID.COMMON_NAME, "adminUser")])
    assert PrincipalMapper.from_rules(DOC_RULES).name_of(subject_dn(_cert(name))) == "adminuser@admin"


@pytest.mark.parametrize("der", [b"", b"\x30\x03\x02\x01", b"\x04\x00", b"\x30\x80"])
def test_malformed_certificates(der: bytes) -> None:
    with pytest.raises(ValueError, match="malformed certificate"):
        subject_dn(der)

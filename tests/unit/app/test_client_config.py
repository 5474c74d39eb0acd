"""Client security settings (``app.client_config``) and the pure parts of ``franz acls``:
properties and JAAS parsing, file-over-environment precedence, TLS contexts from PEM
files, and kafka-acls.sh's options turned into bindings and filters."""

from __future__ import annotations

import argparse
import base64
from pathlib import Path

import pytest
import trustme

from app.cli import build_parser
from app.client_config import (
    ClientConfigError,
    ClientSecurity,
    load_client_security,
    parse_jaas,
    parse_properties,
)
from app.commands.acls import bindings_to_add, check_options, filters_of, format_acls
from app.http_client import UsageError
from core.broker.security.acl import Operation, PatternType, Permission, ResourceType


def test_parse_properties_reads_javas_format() -> None:
    text = "\n".join([
        "# a comment", "! another", "",
        "basic.auth.user.info = alice:pa=ss:word",
        "ssl.truststore.location: /etc/ca.pem",
        "ssl.key.password k3y",
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule \\",
        '    required username="u" \\',
        '    password="p";',
        r"escaped\ key=tab\there\u0041",
    ])
    assert parse_properties(text) == {
        "basic.auth.user.info": "alice:pa=ss:word",
        "ssl.truststore.location": "/etc/ca.pem",
        "ssl.key.password": "k3y",
        "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule "
                            'required username="u" password="p";',
        "escaped key": "tab\thereA",
    }


def test_parse_jaas() -> None:
    plain = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
             'username="alice" password="p \\"q\\" r";')
    assert parse_jaas(plain, "f") == ("alice", 'p "q" r')
    scram = ("org.apache.kafka.common.security.scram.ScramLoginModule required "
             "username=bob password=x;")
    assert parse_jaas(scram, "f") == ("bob", "x")
    with pytest.raises(ClientConfigError, match="PlainLoginModule or ScramLoginModule"):
        parse_jaas("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule "
                   "required;", "f")
    with pytest.raises(ClientConfigError, match='needs username="..." and password'):
        parse_jaas('x.PlainLoginModule required username="u";', "f")


def test_file_wins_over_environment(tmp_path: Path) -> None:
    env = {"FRANZ_CLIENT_BASIC_AUTH_USER_INFO": "env-user:env-pw",
           "FRANZ_CLIENT_SSL_TRUSTSTORE_LOCATION": "env-ca.pem",
           "FRANZ_CLIENT_SSL_KEYSTORE_LOCATION": "env-client.pem",
           "FRANZ_CLIENT_SSL_KEY_PASSWORD": "env-key-pw"}
    only_env = load_client_security(None, env)
    assert only_env.basic_auth == ("env-user", "env-pw")
    assert only_env.credentials_source == "$FRANZ_CLIENT_BASIC_AUTH_USER_INFO"
    assert (only_env.truststore, only_env.keystore, only_env.key_password) == (
        "env-ca.pem", "env-client.pem", "env-key-pw")
    config = tmp_path / "client.properties"
    config.write_text('sasl.jaas.config=a.b.PlainLoginModule required username="f" '
                      'password="fp";\nssl.truststore.location=file-ca.pem\n'
                      "ssl.keystore.location=\n")
    both = load_client_security(config, env)
    assert both.basic_auth == ("f", "fp")  # the file's credentials, in either form
    assert both.credentials_source == f"--command-config {str(config)!r}"
    assert both.truststore == "file-ca.pem"
    assert both.keystore == "env-client.pem"  # an empty value counts as unset
    assert load_client_security(None, {}) == ClientSecurity()


def test_settings_checked_and_secrets_hidden(tmp_path: Path) -> None:
    sec = load_client_security(None, {"FRANZ_CLIENT_BASIC_AUTH_USER_INFO": "jörg:pä:ss",
                                      "FRANZ_CLIENT_SSL_ENDPOINT_IDENTIFICATION_ALGORITHM": ""})
    assert sec.authorization == "Basic " + base64.b64encode("jörg:pä:ss".encode()).decode()
    assert not sec.check_hostname and sec.has_tls_settings
    assert "pä:ss" not in repr(sec)
    for env, message in (
            ({"FRANZ_CLIENT_BASIC_AUTH_USER_INFO": "nocolon"}, "must be USER:PASSWORD"),
            ({"FRANZ_CLIENT_SSL_KEY_PASSWORD": "x"}, "ssl.key.password is set without"),
            ({"FRANZ_CLIENT_SSL_KEYSTORE_TYPE": "JKS"}, "PEM files only"),
            ({"FRANZ_CLIENT_SSL_ENDPOINT_IDENTIFICATION_ALGORITHM": "ldap"}, "use https")):
        with pytest.raises(ClientConfigError, match=message):
            load_client_security(None, env)
    with pytest.raises(ClientConfigError, match="--command-config .* cannot be read"):
        load_client_security(tmp_path / "missing.properties", {})


def test_ssl_context_from_pem_files(tmp_path: Path) -> None:
    ca = trustme.CA()
    ca_pem, client_pem = tmp_path / "ca.pem", tmp_path / "client.pem"
    ca.cert_pem.write_to_path(str(ca_pem))
    ca.issue_cert("client").private_key_and_cert_chain_pem.write_to_path(str(client_pem))
    ctx = ClientSecurity(truststore=str(ca_pem), keystore=str(client_pem)).ssl_context()
    assert ctx.check_hostname and ctx.get_ca_certs()
    with pytest.raises(ClientConfigError, match="ssl.truststore.location=.* cannot be read"):
        ClientSecurity(truststore=str(tmp_path / "none.pem")).ssl_context()
    not_pem = tmp_path / "not.pem"
    not_pem.write_text("not a certificate\n")
    with pytest.raises(ClientConfigError, match="ssl.truststore.location=.* no PEM CA"):
        ClientSecurity(truststore=str(not_pem)).ssl_context()
    with pytest.raises(ClientConfigError, match="ssl.keystore.location=.* not a PEM client"):
        ClientSecurity(keystore=str(ca_pem)).ssl_context()


# --- franz acls: options -> bindings and filters ------------------------------------------------


def _acls(*argv: str) -> argparse.Namespace:
    args = build_parser().parse_args(["acls", *argv, "--data-dir", "d"])
    check_options(args)
    return args


def test_add_multiplies_resources_principals_hosts_and_operations() -> None:
    args = _acls("--add", "--allow-principal", "User:a", "--allow-principal", "User:b",
                 "--deny-principal", "User:c", "--deny-host", "10.0.0.1", "--operation", "read",
                 "--operation", "DescribeConfigs", "--topic", "t", "--topic", "*")
    bindings = bindings_to_add(args)
    assert len(bindings) == 2 * 3 * 2
    denied = [b for b in bindings if b.entry.permission is Permission.DENY]
    assert {(b.entry.principal, b.entry.host) for b in denied} == {("User:c", "10.0.0.1")}
    assert {b.pattern.name for b in bindings} == {"t", "*"}
    assert {b.entry.operation for b in bindings} == {Operation.READ, Operation.DESCRIBE_CONFIGS}
    only_all = bindings_to_add(_acls("--add", "--allow-principal", "User:a", "--group", "g"))
    assert [b.entry.operation for b in only_all] == [Operation.ALL]  # kafka-acls.sh's default


def test_producer_consumer_and_idempotent() -> None:
    args = _acls("--add", "--allow-principal", "User:p", "--producer", "--idempotent",
                 "--transactional-id", "tx", "--topic", "t", "--resource-pattern-type",
                 "prefixed")
    got = {(b.pattern.resource_type, b.pattern.pattern_type, b.entry.operation)
           for b in bindings_to_add(args)}
    assert got == {
        (ResourceType.TOPIC, PatternType.PREFIXED, Operation.WRITE),
        (ResourceType.TOPIC, PatternType.PREFIXED, Operation.DESCRIBE),
        (ResourceType.TOPIC, PatternType.PREFIXED, Operation.CREATE),
        (ResourceType.TRANSACTIONAL_ID, PatternType.PREFIXED, Operation.WRITE),
        (ResourceType.TRANSACTIONAL_ID, PatternType.PREFIXED, Operation.DESCRIBE),
        (ResourceType.CLUSTER, PatternType.LITERAL, Operation.IDEMPOTENT_WRITE),
    }
    for argv, message in (
            (["--add", "--allow-principal", "User:p", "--consumer", "--topic", "t"],
             "--consumer needs --group"),
            (["--add", "--allow-principal", "User:p", "--producer", "--operation", "Read",
              "--topic", "t"], "do not go with --operation"),
            (["--add", "--topic", "t"], "needs --allow-principal or --deny-principal"),
            (["--add", "--allow-principal", "User:p"], "needs a resource"),
            (["--list", "--allow-principal", "User:p"], "does not go with --list"),
            (["--remove", "--principal", "User:p", "--topic", "t"], "--principal filters --list"),
            (["--add", "--allow-host", "h", "--topic", "t", "--deny-principal", "User:x"],
             "--allow-host goes with --allow-principal")):
        with pytest.raises(UsageError, match=message):
            _acls(*argv)
    with pytest.raises(UsageError, match="does not apply to resource type GROUP"):
        bindings_to_add(_acls("--add", "--allow-principal", "User:p", "--operation", "Write",
                              "--group", "g"))


def test_filters_of_list_and_remove_match_anything_left_out() -> None:
    (everything,) = filters_of(_acls("--list"))
    assert (everything.resource_type, everything.pattern_type, everything.principal) == (
        ResourceType.ANY, PatternType.ANY, None)
    per_principal = filters_of(_acls("--list", "--topic", "t", "--principal", "User:a",
                                     "--principal", "User:b", "--resource-pattern-type", "match"))
    assert [(f.name, f.pattern_type, f.principal) for f in per_principal] == [
        ("t", PatternType.MATCH, "User:a"), ("t", PatternType.MATCH, "User:b")]
    (whole,) = filters_of(_acls("--remove", "--group", "g"))
    assert (whole.operation, whole.permission, whole.principal, whole.host) == (
        Operation.ANY, Permission.ANY, None, None)
    (one,) = filters_of(_acls("--remove", "--deny-principal", "User:x", "--operation", "Write",
                              "--topic", "t"))
    assert (one.principal, one.host, one.operation, one.permission) == (
        "User:x", None, Operation.WRITE, Permission.DENY)


def test_format_acls_is_kafkas_layout() -> None:
    acl = {"resource_type": "GROUP", "resource_name": "g", "pattern_type": "LITERAL",
           "principal": "User:a", "host": "*", "operation": "READ", "permission": "ALLOW"}
    assert format_acls([acl, dict(acl)], "Current ACLs for resource") == (
        "Current ACLs for resource `ResourcePattern(resourceType=GROUP, name=g, "
        "patternType=LITERAL)`:\n"
        "\t(principal=User:a, host=*, operation=READ, permissionType=ALLOW)\n")

"""``franz acls``: kafka-acls.sh over franz's stores or its v3 ACL API.

    --add     the bindings: each resource x (each --allow-principal x --allow-host,
              ALLOW; each --deny-principal x --deny-host, DENY) x each operation
              (--operation, default All; or those of --producer / --consumer)
    --list    the ACLs matching a filter per resource (and per --principal), grouped per
              resource as kafka-acls.sh prints them
    --remove  the ACLs matching a filter per (resource, principal, host, operation,
              permission); asks "Are you sure ...?" at a terminal unless --force

On --list and --remove an option left out matches anything (kafka-acls.sh takes the
pattern type LITERAL, and with principals the operation All): ``--remove --topic t``
removes every ACL of topic ``t``.

Online (``--bootstrap-server``): ``POST /v3/clusters/{c}/acls:batch``, ``GET .../acls``
per filter, ``DELETE .../acls`` per filter. Offline (``--data-dir``, ``--zookeeper``):
the store, filtered here with Kafka's ``AclBindingFilter`` as the broker filters.
Both print the same: an ACL travels here as the v3 API's flat dict (``resource_type``,
``resource_name``, ``pattern_type``, ``principal``, ``host``, ``operation``,
``permission``, Kafka's upper-case names), which is also the ``--output json`` form.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections.abc import Iterable
from typing import Any, cast

from app.commands.output import print_json
from app.commands.stores import run_with_store
from app.http_client import CliError, FranzClient, UsageError
from core.broker.security.acl import (
    CLUSTER_NAME,
    WILDCARD,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    Operation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
)
from core.broker.security.principal import Principal
from core.broker.security.store import SecurityStore

Acl = dict[str, str]
FIELDS = ("resource_type", "resource_name", "pattern_type", "principal", "host", "operation",
          "permission")
BATCH = 1000  # the v3 batch route's limit
KAFKA_OPERATIONS = ("Read, Write, Create, Delete, Alter, Describe, ClusterAction, "
                    "DescribeConfigs, AlterConfigs, IdempotentWrite, All")
PRODUCER_OPS = {ResourceType.TOPIC: (Operation.WRITE, Operation.DESCRIBE, Operation.CREATE),
                ResourceType.TRANSACTIONAL_ID: (Operation.WRITE, Operation.DESCRIBE)}
CONSUMER_OPS = {ResourceType.TOPIC: (Operation.READ, Operation.DESCRIBE),
                ResourceType.GROUP: (Operation.READ,)}


def run(args: argparse.Namespace, client: FranzClient) -> int:
    """Online, through the v3 ACL API."""
    check_options(args)
    if args.action == "add":
        bindings = bindings_to_add(args)
        data = [acl_of(b) for b in bindings]
        for start in range(0, len(data), BATCH):
            client.request("POST", client.v3("acls:batch"),
                           json={"data": data[start:start + BATCH]})
        _print_acls(args, data, "Adding ACLs for resource")
    elif args.action == "list":
        found = [_flat(a) for f in filters_of(args) for a in client.v3_list("acls", **_params(f))]
        _print_acls(args, found, "Current ACLs for resource")
    else:
        filters = filters_of(args)
        _confirm(args, filters)
        removed: list[Acl] = []
        for f in filters:
            answer = client.request("DELETE", client.v3("acls"), params=_params(f)).json()
            removed += [_flat(a) for a in answer["data"]]
        _print_removed(args, removed)
    return 0


def run_offline(args: argparse.Namespace) -> int:
    """Offline, on the store of ``--data-dir`` or ``--zookeeper``."""
    check_options(args)
    if args.action == "add":
        bindings = bindings_to_add(args)
        run_with_store(args, lambda store: store.add_acls(bindings), creates=True)
        _print_acls(args, [acl_of(b) for b in bindings], "Adding ACLs for resource")
    elif args.action == "list":
        filters = filters_of(args)
        found = run_with_store(args, lambda store: _matching(store, filters))
        _print_acls(args, [acl_of(b) for b in found], "Current ACLs for resource")
    else:
        filters = filters_of(args)
        _confirm(args, filters)
        removed = run_with_store(args, lambda store: _remove(store, filters))
        _print_removed(args, [acl_of(b) for b in removed])
    return 0


async def _matching(store: SecurityStore, filters: list[AclBindingFilter]) -> list[AclBinding]:
    return [b for b in await store.all_acls() if any(f.matches(b) for f in filters)]


async def _remove(store: SecurityStore, filters: list[AclBindingFilter]) -> list[AclBinding]:
    return await store.remove_acls(await _matching(store, filters))


# --- options -> bindings and filters ---------------------------------------------------------


def check_options(args: argparse.Namespace) -> None:
    """kafka-acls.sh's rules on which options go together (UsageError naming them)."""
    principals = args.allow_principal or args.deny_principal
    if args.allow_host and not args.allow_principal:
        raise UsageError("--allow-host goes with --allow-principal")
    if args.deny_host and not args.deny_principal:
        raise UsageError("--deny-host goes with --deny-principal")
    if args.principal and args.action != "list":
        raise UsageError("--principal filters --list; --add and --remove take "
                         "--allow-principal / --deny-principal")
    if args.force and args.action != "remove":
        raise UsageError("--force goes with --remove")
    if args.action == "list":
        for given, name in ((principals, "--allow-principal/--deny-principal"),
                            (args.operation, "--operation"),
                            (args.producer or args.consumer, "--producer/--consumer")):
            if given:
                raise UsageError(f"{name} does not go with --list (filter with --principal)")
        return
    if args.action == "add" and not principals:
        raise UsageError("--add needs --allow-principal or --deny-principal")
    if not _has_resource(args):
        raise UsageError(f"--{args.action} needs a resource: --topic, --group, --cluster or "
                         "--transactional-id")
    if args.action == "add" and args.resource_pattern_type in ("any", "match"):
        raise UsageError("--add takes --resource-pattern-type literal or prefixed")
    if args.idempotent and not args.producer:
        raise UsageError("--idempotent goes with --producer")
    if args.producer or args.consumer:
        if args.operation or args.deny_principal:
            raise UsageError("--producer and --consumer do not go with --operation or "
                             "--deny-principal")
        if not args.topic:
            raise UsageError("--producer and --consumer need --topic")
        if args.consumer and not args.group:
            raise UsageError("--consumer needs --group")
        if args.cluster or (args.group and not args.consumer) or (
                args.transactional_id and not args.producer):
            raise UsageError("with --producer: --topic and --transactional-id; with "
                             "--consumer: --topic and --group")


def _has_resource(args: argparse.Namespace) -> bool:
    return bool(args.topic or args.group or args.cluster or args.transactional_id)


def _resources(args: argparse.Namespace) -> list[tuple[ResourceType, str]]:
    named = [(ResourceType.TOPIC, args.topic), (ResourceType.GROUP, args.group),
             (ResourceType.TRANSACTIONAL_ID, args.transactional_id),
             # --idempotent: IDEMPOTENT_WRITE is granted on the cluster
             (ResourceType.CLUSTER, [CLUSTER_NAME] if args.cluster or args.idempotent else [])]
    out: list[tuple[ResourceType, str]] = []
    for kind, names in named:
        for name in names:
            if not name:
                raise UsageError(f"--{kind.name.lower().replace('_', '-')}: the name is empty")
            out.append((kind, name))
    return list(dict.fromkeys(out))


def _operation(text: str) -> Operation:
    try:
        op = cast(Operation, Operation.from_name(text))
    except ValueError:
        op = Operation.ANY
    if op is Operation.ANY:
        raise UsageError(f"--operation {text!r} is not one of {KAFKA_OPERATIONS}")
    return op


def _principal(text: str, option: str) -> str:
    try:
        Principal.parse(text)
    except ValueError as exc:
        raise UsageError(f"{option}: {exc}") from None
    return text


def _pattern_type(args: argparse.Namespace) -> PatternType:
    default = "literal" if args.action == "add" else "any"
    return PatternType[(args.resource_pattern_type or default).upper()]


def _operations_for(args: argparse.Namespace, kind: ResourceType) -> list[Operation]:
    """The operations of one resource: those of --producer / --consumer for its type,
    else --operation (default: All on --add, any on --remove)."""
    if args.producer or args.consumer:
        ops: list[Operation] = []
        if args.producer:
            ops += PRODUCER_OPS.get(kind, ())
            if args.idempotent and kind is ResourceType.CLUSTER:
                ops.append(Operation.IDEMPOTENT_WRITE)
        if args.consumer:
            ops += CONSUMER_OPS.get(kind, ())
        return list(dict.fromkeys(ops))
    if args.operation:
        return list(dict.fromkeys(_operation(o) for o in args.operation))
    return [Operation.ALL] if args.action == "add" else [Operation.ANY]


def _entries(args: argparse.Namespace) -> list[tuple[str, str | None, Permission]]:
    """(principal, host or None for any, permission) of the --allow/--deny options."""
    out: list[tuple[str, str | None, Permission]] = []
    any_host: str | None = WILDCARD if args.action == "add" else None
    for principals, hosts, permission, name in (
            (args.allow_principal, args.allow_host, Permission.ALLOW, "--allow-principal"),
            (args.deny_principal, args.deny_host, Permission.DENY, "--deny-principal")):
        given: list[str | None] = list(hosts)
        for principal in principals:
            for host in given or [any_host]:
                out.append((_principal(principal, name), host, permission))
    return list(dict.fromkeys(out))


def bindings_to_add(args: argparse.Namespace) -> list[AclBinding]:
    """Every binding --add describes; UsageError naming the first that cannot be."""
    pattern_type = _pattern_type(args)
    out: list[AclBinding] = []
    for kind, name in _resources(args):
        # the cluster has one (LITERAL) name: --producer --idempotent with prefixed topics
        kind_type = PatternType.LITERAL if kind is ResourceType.CLUSTER else pattern_type
        try:
            pattern = ResourcePattern(kind, name, kind_type)
        except ValueError as exc:
            raise UsageError(f"{kind.name} {name!r}: {exc}") from None
        for (principal, host, permission), op in itertools.product(
                _entries(args), _operations_for(args, kind)):
            try:
                out.append(AclBinding(pattern, AccessControlEntry(principal, host or WILDCARD,
                                                                  op, permission)))
            except ValueError as exc:
                raise UsageError(f"{kind.name} {name!r}: {exc}") from None
    return list(dict.fromkeys(out))


def filters_of(args: argparse.Namespace) -> list[AclBindingFilter]:
    """The filters --list or --remove describe (one matching everything at most)."""
    pattern_type = _pattern_type(args)
    resources: list[tuple[ResourceType, str | None]] = [*_resources(args)] or [
        (ResourceType.ANY, None)]
    if args.action == "list":
        principals: list[str | None] = [_principal(p, "--principal") for p in args.principal]
        principals = principals or [None]
        return list(dict.fromkeys(
            AclBindingFilter(kind, name, pattern_type, principal)
            for (kind, name), principal in itertools.product(resources, principals)))
    out: list[AclBindingFilter] = []
    entries: list[tuple[str | None, str | None, Permission]] = [*_entries(args)] or [
        (None, None, Permission.ANY)]
    for kind, name in resources:
        kind_type = (PatternType.LITERAL if kind is ResourceType.CLUSTER
                     and pattern_type is PatternType.PREFIXED else pattern_type)
        for (principal, host, permission), op in itertools.product(
                entries, _operations_for(args, kind)):
            out.append(AclBindingFilter(kind, name, kind_type, principal, host, op,
                                        permission))
    return list(dict.fromkeys(out))


def _params(f: AclBindingFilter) -> dict[str, str]:
    """A filter as the v3 API's query (ANY spelled out: DELETE requires the enums)."""
    params = {"resource_type": f.resource_type.name, "pattern_type": f.pattern_type.name,
              "operation": f.operation.name, "permission": f.permission.name}
    for key, value in (("resource_name", f.name), ("principal", f.principal),
                       ("host", f.host)):
        if value is not None:
            params[key] = value
    return params


# --- the flat form and the output --------------------------------------------------------------


def acl_of(b: AclBinding) -> Acl:
    p, e = b.pattern, b.entry
    return {"resource_type": p.resource_type.name, "resource_name": p.name,
            "pattern_type": p.pattern_type.name, "principal": e.principal, "host": e.host,
            "operation": e.operation.name, "permission": e.permission.name}


def _flat(data: dict[str, Any]) -> Acl:
    """The fields of a v3 ``KafkaAcl`` (links and cluster id left out)."""
    return {k: str(data[k]) for k in FIELDS}


def _sorted(acls: Iterable[Acl]) -> list[Acl]:
    unique = {tuple(a[k] for k in FIELDS): a for a in acls}
    return [unique[k] for k in sorted(unique)]


def pattern_text(a: Acl) -> str:
    """Kafka's ``ResourcePattern.toString``."""
    return (f"ResourcePattern(resourceType={a['resource_type']}, name={a['resource_name']}, "
            f"patternType={a['pattern_type']})")


def entry_text(a: Acl) -> str:
    """Kafka's ``AccessControlEntry.toString``."""
    return (f"(principal={a['principal']}, host={a['host']}, operation={a['operation']}, "
            f"permissionType={a['permission']})")


def format_acls(acls: Iterable[Acl], heading: str) -> str:
    """kafka-acls.sh's layout: a heading per resource pattern, a tab-indented line per
    entry, a blank line after each resource."""
    lines: list[str] = []
    for _, group in itertools.groupby(_sorted(acls), key=pattern_text):
        entries = list(group)
        lines.append(f"{heading} `{pattern_text(entries[0])}`:")
        lines += [f"\t{entry_text(a)}" for a in entries]
        lines.append("")
    return "\n".join(lines)


def _print_acls(args: argparse.Namespace, acls: list[Acl], heading: str) -> None:
    if args.output == "json":
        print_json(_sorted(acls))
    elif acls:
        print(format_acls(acls, heading))


def _print_removed(args: argparse.Namespace, removed: list[Acl]) -> None:
    if args.output == "json" or removed:
        _print_acls(args, removed, "Removed ACLs for resource")
    else:
        print("No ACL matched: nothing was removed.")


def filter_text(f: AclBindingFilter) -> str:
    """A filter as Kafka prints one; ANY where the option was left out."""
    return (f"ResourcePatternFilter(resourceType={f.resource_type.name}, "
            f"name={f.name if f.name is not None else 'ANY'}, "
            f"patternType={f.pattern_type.name}) "
            f"(principal={f.principal or 'ANY'}, host={f.host or 'ANY'}, "
            f"operation={f.operation.name}, permissionType={f.permission.name})")


def _confirm(args: argparse.Namespace, filters: list[AclBindingFilter]) -> None:
    """kafka-acls.sh's question before --remove; without a terminal, --force is needed."""
    if args.force:
        return
    if sys.stdin is None or not sys.stdin.isatty():
        raise UsageError("--remove asks for confirmation and stdin is not a terminal: "
                         "add --force to remove without asking")
    listed = "\n".join(f"\t{filter_text(f)}" for f in filters)
    print(f"Are you sure you want to remove the ACLs matching:\n{listed}\n(y/n) ",
          end="", file=sys.stderr, flush=True)
    if input().strip().lower() not in ("y", "yes"):
        raise CliError("not confirmed: nothing was removed")

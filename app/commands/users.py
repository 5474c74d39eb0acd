"""``franz users add | delete | list``: the users (and API keys) of
``authentication.method=BASIC``.

    add NAME          a password from stdin (one line, its newline dropped) when stdin is
                      not a terminal, else asked twice with getpass; never an argument
    add --api-key     a generated key (the user name) and secret, printed this once
    delete NAME       exit 1 when there is no such user
    list              the names, never a credential

Online (``--bootstrap-server``): ``PUT/DELETE /v3/clusters/{c}/users/{name}``,
``POST .../api-keys``, ``GET .../users`` with a super user's credentials. Offline
(``--data-dir``, ``--zookeeper``): the store itself (``app.commands.stores``), which is
how the first super user is made, before the broker starts with Basic authentication.
Offline, passwords are hashed here; online, by the broker. Either way one password gives
every credential of the user: scrypt (``StoredCredential``: HTTP Basic, SASL PLAIN) and
SCRAM-SHA-256 and SCRAM-SHA-512 (``ScramCredential``, 4096 iterations: Kafka clients'
SASL SCRAM), stored together (``core.broker.security.service.user_credentials``).
"""

from __future__ import annotations

import argparse
import getpass
import sys

from app.commands.output import print_json
from app.commands.stores import describe_target, run_with_store
from app.http_client import CliError, FranzClient, UsageError
from core.broker.security.credentials import check_secret, check_user_name, new_api_key
from core.broker.security.service import user_credentials
from core.broker.security.store import SecurityStore


def run(args: argparse.Namespace, client: FranzClient) -> int:
    """Online, through the broker's admin routes."""
    if args.action == "list":
        _print_names(args, [str(u["user_name"]) for u in client.v3_list("users")])
    elif args.action == "delete":
        client.request("DELETE", client.v3("users", _name(args)))
        _print_done(args, "Deleted", args.name)
    elif args.api_key:
        _no_name_with_api_key(args)
        body = client.request("POST", client.v3("api-keys")).json()
        _print_api_key(args, str(body["key"]), str(body["secret"]))
    else:
        name = _name(args)
        client.request("PUT", client.v3("users", name), json={"password": read_password(name)})
        _print_done(args, "Stored the password of", name)
    return 0


def run_offline(args: argparse.Namespace) -> int:
    """Offline, on the store of ``--data-dir`` or ``--zookeeper``."""
    if args.action == "list":
        _print_names(args, run_with_store(args, _list))
        return 0
    if args.action == "delete":
        name = _name(args)
        if not run_with_store(args, lambda store: store.delete_user(name)):
            raise CliError(f"user {name!r} does not exist in {describe_target(args)}")
        _print_done(args, "Deleted", name)
        return 0
    if args.api_key:
        _no_name_with_api_key(args)
        key, secret = new_api_key()
        _put(args, key, secret)
        _print_api_key(args, key, secret)
        return 0
    name = _name(args)
    _put(args, name, read_password(name))
    _print_done(args, "Stored the password of", name)
    return 0


async def _list(store: SecurityStore) -> list[str]:
    return await store.list_users()


def _put(args: argparse.Namespace, name: str, secret: str) -> None:
    credential, scram = user_credentials(secret)  # hashes only: the secret is not stored
    run_with_store(args, lambda store: store.put_user(name, credential, scram), creates=True)


def _name(args: argparse.Namespace) -> str:
    if not args.name:
        raise UsageError("give the user NAME (or --api-key to generate one)")
    try:
        return check_user_name(args.name)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _no_name_with_api_key(args: argparse.Namespace) -> None:
    if args.name:
        raise UsageError("--api-key generates the key's name: give no NAME with it")


def read_password(name: str) -> str:
    """One line of stdin (its newline dropped) when stdin is not a terminal, else asked
    twice at the terminal; UsageError when empty, too long or the two differ."""
    if sys.stdin is None or not sys.stdin.isatty():
        line = sys.stdin.readline() if sys.stdin is not None else ""
        password = line.removesuffix("\n").removesuffix("\r")
        if not password:
            raise UsageError(f"no password for {name!r} on stdin (one line expected)")
    else:
        password = getpass.getpass(f"Password for {name}: ")
        if getpass.getpass(f"Password for {name} (again): ") != password:
            raise UsageError("the two passwords differ; nothing was changed")
    try:
        check_secret(password)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return password


# --- output ------------------------------------------------------------------------------------


def _print_names(args: argparse.Namespace, names: list[str]) -> None:
    if args.output == "json":
        print_json(sorted(names))
    else:
        for name in sorted(names):
            print(name)


def _print_done(args: argparse.Namespace, what: str, name: str) -> None:
    if args.output == "json":
        print_json({"user": name})
    else:
        print(f"{what} user {name!r}.")


def _print_api_key(args: argparse.Namespace, key: str, secret: str) -> None:
    """The one time the secret is shown (only its hash is stored)."""
    if args.output == "json":
        print_json({"key": key, "secret": secret})
        return
    print(f"API key:    {key}")
    print(f"API secret: {secret}")
    print("Save the secret now: it cannot be shown again. Use the pair as Basic credentials "
          f"(basic.auth.user.info={key}:<secret>).")

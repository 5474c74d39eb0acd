"""What security costs: produce and consume through a secured broker beside a plain one.

    python benchmarks/security_bench.py                # 3 rounds x 5 s (~3 min)
    python benchmarks/security_bench.py --quick        # 1 round x 2 s

Two standalone brokers from this tree, pinned to ``--server-cpu`` like benchmarks/run.py,
one after the other in each round (interleaved: both see the same machine noise):

plain     http://, authentication.method=NONE, no authorizer
secured   https:// (a certificate from a CA made here with trustme), HTTP Basic
          (authentication.method=BASIC, a user written before the start), AclAuthorizer
          with the bench user's ACLs (WRITE, CREATE, READ, DESCRIBE on the topics,
          READ on the groups), and super.users set: every request is authenticated
          (the verified-credential cache after the first) and authorized

Cases, 8 connections, 1000 x 100-byte records per request (the workload of run.py):
produce (to 3 partitions) and consume (range reads of the records produced). Each is one ``franz bench`` run with ``--json`` and, for the secured
broker, ``--command-config`` (basic.auth.user.info and ssl.truststore.location), so
what is measured is what a user runs. The report prints the medians and the
secured/plain ratio per case (target >= 0.8, issue 13).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import trustme  # noqa: E402

from app.bench.http1 import free_port  # noqa: E402
from app.bench.workloads import spawn, stop  # noqa: E402
from core.broker.security.credentials import StoredCredential  # noqa: E402
from core.broker.security.sql_store import SqlSecurityStore  # noqa: E402

HUGE = 10**12
USER, PASSWORD = "bench", "bench-secret"


def _secure_dir(tmp: Path) -> tuple[Path, Path]:
    """(keystore PEM for 127.0.0.1, CA bundle)."""
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    keystore, truststore = tmp / "broker.pem", tmp / "ca.pem"
    cert.private_key_and_cert_chain_pem.write_to_path(str(keystore))
    ca.cert_pem.write_to_path(str(truststore))
    return keystore, truststore


def _add_user(data_dir: Path) -> None:
    async def run() -> None:
        store = SqlSecurityStore(f"sqlite:///{data_dir / 'metadata.db'}")
        await store.start()
        try:
            await store.put_user(USER, StoredCredential.create(PASSWORD))
            await store.put_user("admin", StoredCredential.create("admin-secret"))
        finally:
            await store.close()
    data_dir.mkdir(parents=True, exist_ok=True)
    asyncio.run(run())


class Broker:
    def __init__(self, name: str, tmp: Path, cpu: int, overrides: list[str],
                 scheme: str) -> None:
        self.name, self.port = name, free_port()
        self.url = f"{scheme}://127.0.0.1:{self.port}"
        self.log = tmp / f"{name}.log"
        cmd = [sys.executable, "-m", "app.cli", "serve", "--data-dir", str(tmp / name),
               "--log-level", "WARNING", "--override", "num.partitions=3"]
        cmd += ["--override", f"listeners={scheme}://127.0.0.1:{self.port}"]
        for o in overrides:
            cmd += ["--override", o]
        self.proc = spawn(cmd, cpu, self.log, cwd=ROOT)


def _wait(broker: Broker, *, verify: str | bool, auth: tuple[str, str] | None) -> None:
    import httpx  # noqa: PLC0415  (only the readiness probe)

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if broker.proc.poll() is not None:
            raise SystemExit(f"{broker.name} exited:\n{broker.log.read_text()[-2000:]}")
        try:
            if httpx.get(broker.url + "/topics", verify=verify, auth=auth,
                         timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise SystemExit(f"{broker.name} did not start:\n{broker.log.read_text()[-2000:]}")


def _grant(url: str, truststore: Path) -> None:
    import httpx  # noqa: PLC0415

    with httpx.Client(base_url=url, verify=str(truststore),
                      auth=("admin", "admin-secret")) as c:
        cid = c.get("/v3/clusters").json()["data"][0]["cluster_id"]
        data = [{"resource_type": rtype, "resource_name": name, "pattern_type": "PREFIXED",
                 "principal": f"User:{USER}", "host": "*", "operation": op,
                 "permission": "ALLOW"}
                for rtype, name, op in (("TOPIC", "bench", "WRITE"), ("TOPIC", "bench", "CREATE"),
                                        ("TOPIC", "bench", "READ"),
                                        ("TOPIC", "bench", "DESCRIBE"),
                                        ("GROUP", "bench", "READ"))]
        r = c.post(f"/v3/clusters/{cid}/acls:batch", json={"data": data})
        r.raise_for_status()


def _bench(tmp: Path, name: str, argv: list[str], client_cpu: int, config: Path | None,
           timeout: float) -> dict[str, Any] | None:
    out = tmp / f"{name}-{time.monotonic_ns()}.json"
    cmd = [sys.executable, "-m", "app.cli", "bench", *argv, "--json", str(out),
           "--label", name, "--cpu", str(client_cpu)]
    if config is not None:
        cmd += ["--command-config", str(config)]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                       check=False)
    if r.returncode != 0 or not out.exists():
        print(f"  {name}: FAILED {r.stderr.strip()[-400:]}", flush=True)
        return None
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def _rate(result: dict[str, Any] | None) -> float | None:
    if not result:
        return None
    value = result.get("rec_per_s")
    return float(value) if value is not None else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--connections", type=int, default=8)
    ap.add_argument("--server-cpu", type=int, default=0)
    ap.add_argument("--client-cpu", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="1 round x 2 s")
    ap.add_argument("--json", type=Path, help="write the raw results here")
    ap.add_argument("--secured-scheme", choices=("https", "http"), default="https",
                    help="http: authentication and ACLs without TLS (to tell the costs apart)")
    args = ap.parse_args(argv)
    if args.quick:
        args.rounds, args.duration = 1, 2.0
    tmp = Path(tempfile.mkdtemp(prefix="franz-security-bench-"))
    keystore, truststore = _secure_dir(tmp)
    _add_user(tmp / "secured")
    config = tmp / "client.properties"
    config.write_text(f"basic.auth.user.info={USER}:{PASSWORD}\n"
                      f"ssl.truststore.location={truststore}\n")
    plain = Broker("plain", tmp, args.server_cpu, [], "http")
    secured = Broker("secured", tmp, args.server_cpu, [
        f"ssl.keystore.location={keystore}", f"ssl.truststore.location={truststore}",
        "authentication.method=BASIC", "authorizer.class.name=AclAuthorizer",
        "super.users=User:admin"], args.secured_scheme)
    results: dict[str, dict[str, list[float]]] = {"produce": {}, "consume": {}}
    raw: list[dict[str, Any]] = []
    try:
        _wait(plain, verify=True, auth=None)
        _wait(secured, verify=str(truststore), auth=("admin", "admin-secret"))
        _grant(secured.url, truststore)
        load = ["--duration", str(args.duration), "--warmup", str(args.warmup),
                "--connections", str(args.connections)]
        timeout = args.warmup + args.duration + 120
        for r in range(args.rounds):
            print(f"round {r + 1}/{args.rounds}", flush=True)
            for broker, cfg in ((plain, None), (secured, config)):
                topic = f"bench-sec-{r}"
                produced = _bench(tmp, f"produce-{broker.name}", [
                    "produce", "--bootstrap-server", broker.url, "--topic", topic,
                    "--partitions", "3", "--records", str(HUGE),
                    "--batch", "1000", *load], args.client_cpu, cfg, timeout)
                consumed = _bench(tmp, f"consume-{broker.name}", [
                    "consume", "--bootstrap-server", broker.url, "--topic", topic,
                    "--records", "2000000", "--batch", "1000", "--duration",
                    str(args.duration), "--connections", str(args.connections)],
                    args.client_cpu, cfg, timeout)
                for case, res in (("produce", produced), ("consume", consumed)):
                    rate = _rate(res)
                    raw.append({"round": r, "broker": broker.name, "case": case,
                                "result": res})
                    if rate is not None:
                        results[case].setdefault(broker.name, []).append(rate)
                        print(f"  {case:8s} {broker.name:8s} {rate / 1e6:6.3f} M rec/s",
                              flush=True)
    finally:
        stop(plain.proc)
        stop(secured.proc)
    print("\ncase      plain M rec/s  secured M rec/s  secured/plain (target >= 0.8)")
    for case, by in results.items():
        p, s = by.get("plain"), by.get("secured")
        if p and s:
            ratio = statistics.median(s) / statistics.median(p)
            print(f"{case:8s}  {statistics.median(p) / 1e6:13.3f}  "
                  f"{statistics.median(s) / 1e6:15.3f}  {ratio:5.2f}"
                  f" {'met' if ratio >= 0.8 else 'MISSED'}")
    if args.json:
        args.json.write_text(json.dumps({"medians": results, "runs": raw}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

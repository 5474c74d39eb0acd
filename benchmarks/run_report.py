"""The summary, targets table, Markdown report and PNG plots of ``benchmarks/run.py``.

``summarize`` turns the rounds into medians (and the median of the per-round ratios of
each case to its comparison, ``RATIOS``); ``targets`` checks them against performance.md's
"Targets for one broker process"; ``write_report`` writes the Markdown (``--out``) and
``plot`` the PNGs (``--img-dir``, with matplotlib when installed).

Imported by ``run.py`` from beside it (not a package), after ``run.py`` has put this tree
on ``sys.path``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.bench.stats import med

THROUGHPUT_CASES = ("produce_1000", "produce_keyed_1p", "produce_1000_8p", "produce_keyed_8p",
                    "produce_1", "produce_acks_all", "produce_fsync", "consume_tail",
                    "consume_start")
#: franz case -> (its comparison case, metric): the ceiling, or the acks=1 run of the round
RATIOS = {
    "produce_1000": ("ceiling_echo_1000", "rec_per_s"),
    "produce_1": ("ceiling_echo_1", "req_per_s"),
    "consume_tail": ("ceiling_get_1000", "rec_per_s"),
    "consume_start": ("ceiling_get_1000", "rec_per_s"),
    "produce_acks_all": ("produce_1000", "rec_per_s"),
    "produce_fsync": ("produce_1000", "rec_per_s"),
    "produce_keyed_1p": ("produce_1000", "rec_per_s"),
    "produce_1000_8p": ("produce_1000", "rec_per_s"),
    "produce_keyed_8p": ("produce_1000_8p", "rec_per_s"),
}


# --- summary ---------------------------------------------------------------------------------


def summarize(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    keys: list[str] = []
    for r in rounds:
        keys += [k for k in r if k not in keys]
    summary: dict[str, Any] = {}
    for k in keys:
        per = [r[k] for r in rounds if k in r]
        s: dict[str, Any] = {"rounds": len(per)}
        for m in ("rec_per_s", "req_per_s", "mb_per_s", "server_cpu_us_per_req",
                  "client_cpu_us_per_req"):
            if m in per[0]:
                s[m] = med([x.get(m) for x in per])
        s["steal_pct"] = med([x.get("steal_pct") for x in per])
        lat = [x.get("latency_ms") or {} for x in per]
        s["latency_ms"] = {p: med([x.get(p) for x in lat])
                           for p in ("p50", "p90", "p99", "p999", "max")}
        if any(x.get("lost") for x in per):
            s["lost"] = sum(x.get("lost") or 0 for x in per)
        bg = [x["background"]["rec_per_s"] for x in per if x.get("background")]
        if bg:
            s["background_rec_per_s"] = med(bg)
        if k in RATIOS:
            ck, metric = RATIOS[k]
            ratios = [r[k][metric] / r[ck][metric] for r in rounds
                      if k in r and ck in r and r[ck].get(metric)]
            s["ratio"] = med(ratios)
            s["ratios_per_round"] = ratios
            s["ratio_to"] = ck
        summary[k] = s
    return summary


def _v(s: dict[str, Any], case: str, *path: str) -> float | None:
    cur: Any = s.get(case)
    for p in path:
        if not isinstance(cur, dict):
            return None
        cur = cur.get(p)
    return cur if isinstance(cur, (int, float)) else None


def _n(v: float | None, spec: str = ",.0f", unit: str = "") -> str:
    return "n/a" if v is None else f"{format(v, spec)}{unit}"


def targets(s: dict[str, Any], cluster: dict[str, Any]) -> list[dict[str, str]]:
    """The rows of performance.md's "Targets for one broker process"."""
    rows = []

    def row(what: str, target: str, measured: str, ratio: str,
            checks: list[tuple[str, bool | None]]) -> None:
        if any(ok is None for _n_, ok in checks):
            status = "not measured"
        elif all(ok for _n_, ok in checks):
            status = "met"
        else:
            status = "missed: " + ", ".join(n for n, ok in checks if not ok)
        rows.append({"what": what, "target": target, "measured": measured, "ratio": ratio,
                     "status": status})

    def ge(v: float | None, t: float) -> bool | None:
        return None if v is None else v >= t

    def le(v: float | None, t: float) -> bool | None:
        return None if v is None else v <= t

    p, pr = _v(s, "produce_1000", "rec_per_s"), _v(s, "produce_1000", "ratio")
    row("REST produce, 1000-record POSTs, acks=1, 8 connections",
        ">= 0.5 M rec/s and >= 0.35 x raw-orjson echo", _n(p and p / 1e6, ".3f", " M rec/s"),
        f"{_n(pr, '.2f')} x echo ({_n(_v(s, 'ceiling_echo_1000', 'rec_per_s') and _v(s, 'ceiling_echo_1000', 'rec_per_s') / 1e6, '.2f', ' M rec/s')})",  # noqa: E501
        [("absolute", ge(p, 0.5e6)), ("ratio", ge(pr, 0.35))])
    c, cr = _v(s, "consume_tail", "rec_per_s"), _v(s, "consume_tail", "ratio")
    row("REST consume, 1000 records per GET near the tail",
        ">= 0.75 M rec/s and >= 0.5 x GET ceiling", _n(c and c / 1e6, ".3f", " M rec/s"),
        f"{_n(cr, '.2f')} x GET ceiling ({_n(_v(s, 'ceiling_get_1000', 'rec_per_s') and _v(s, 'ceiling_get_1000', 'rec_per_s') / 1e6, '.2f', ' M rec/s')})",  # noqa: E501
        [("absolute", ge(c, 0.75e6)), ("ratio", ge(cr, 0.5))])
    q, qr = _v(s, "produce_1", "req_per_s"), _v(s, "produce_1", "ratio")
    row("1-record produce POSTs", ">= 2.5 k req/s", _n(q and q / 1e3, ".2f", " k req/s"),
        f"{_n(qr, '.2f')} x 1-record echo ({_n(_v(s, 'ceiling_echo_1', 'req_per_s') and _v(s, 'ceiling_echo_1', 'req_per_s') / 1e3, '.2f', ' k req/s')})",  # noqa: E501
        [("absolute", ge(q, 2500))])
    for case, what, p50t, p99t in (
            ("e2e_idle", "end to end, idle: 1-record produce -> long-polling consumer", 1, 5),
            ("e2e_load", "end to end at half the max produce rate", 5, 25)):
        p50, p99 = _v(s, case, "latency_ms", "p50"), _v(s, case, "latency_ms", "p99")
        c50, c99 = (_v(s, "ceiling_latency", "latency_ms", "p50"),
                    _v(s, "ceiling_latency", "latency_ms", "p99"))
        measured = f"p50 {_n(p50, '.2f')} ms, p99 {_n(p99, '.2f')} ms"
        bg = _v(s, case, "background_rec_per_s")
        if bg:
            measured += f" (background {bg / 1e3:,.0f} k rec/s)"
        ratio = (f"ceiling wake-up p50 {_n(c50, '.2f')} ms, p99 {_n(c99, '.2f')} ms: "
                 f"{_n(p50 / c50 if p50 and c50 else None, '.1f')} x / "
                 f"{_n(p99 / c99 if p99 and c99 else None, '.1f')} x")
        row(what, f"p50 <= {p50t} ms, p99 <= {p99t} ms", measured, ratio,
            [("p50", le(p50, p50t)), ("p99", le(p99, p99t))])
    cl_ratio = None
    measured = f"not run ({cluster.get('why')})"
    if cluster.get("status") == "ok":
        cs = cluster["result"].get("produce", {}).get("summary", {})
        cl_ratio = cs.get("ratio_median")
        measured = (f"RF=3 acks=all {_n((cs.get('rf3_acksall') or {}).get('rec_per_s'))} rec/s, "
                    f"RF=1 acks=1 {_n((cs.get('rf1_acks1') or {}).get('rec_per_s'))} rec/s")
    elif cluster.get("status") == "failed":
        measured = f"failed ({cluster.get('why')})"
    row("RF=3, acks=all, 3 brokers on the same machine", ">= 0.5 x the acks=1 rate",
        measured, f"{_n(cl_ratio, '.2f')} x acks=1", [("ratio", ge(cl_ratio, 0.5))])
    f, fr = _v(s, "produce_fsync", "rec_per_s"), _v(s, "produce_fsync", "ratio")
    row("fsync before ack (flush.messages=1 topic)", ">= 0.8 x the acks=1 rate",
        _n(f and f / 1e6, ".3f", " M rec/s"), f"{_n(fr, '.2f')} x acks=1 of the round",
        [("ratio", ge(fr, 0.8))])
    for case, what, base in (
            ("produce_keyed_1p", "keyed produce (1000 keys), 1 partition", "unkeyed 1 partition"),
            ("produce_keyed_8p", "keyed produce (1000 keys), 8 partitions",
             "unkeyed 8 partitions")):
        k, kr = _v(s, case, "rec_per_s"), _v(s, case, "ratio")
        row(what, f">= 0.8 x {base} (issue 18)", _n(k and k / 1e6, ".3f", " M rec/s"),
            f"{_n(kr, '.2f')} x {base} of the round", [("ratio", ge(kr, 0.8))])
    return rows


# --- report ----------------------------------------------------------------------------------


def write_report(path: Path, img_rel: str, result: dict[str, Any], images: list[str]) -> None:
    s, a = result["summary"], result["args"]
    lines = [
        "# Benchmark results (generated)",
        "",
        f"Generated by `benchmarks/run.py` on {result['finished']}: do not edit by hand, "
        "run it again. How to read it: [benchmarks.md](benchmarks.md); targets: "
        "performance.md (\"Targets for one broker process\").",
        "",
        "```sh",
        f"python benchmarks/run.py {result['command']}".rstrip(),
        "```",
        "",
        f"{a['rounds']} round(s) x {a['duration']} s (+ {a['warmup']} s warm-up) per case, "
        f"{a['connections']} connections, big topic {a['big']:,} records; server and ceiling "
        f"servers pinned to CPU {a['server_cpu']}, generator (`franz bench`) to CPU "
        f"{a['client_cpu']}; medians of the rounds, ratios = median of the per-round ratios.",
        "",
        "Machine: " + ", ".join(f"{k} {v}" for k, v in result["machine"].items()) + ". "
        "A load average well above 0 at the start means other work shared the cores, "
        "and CPU steal (per case below: the share of the machine's CPU time the "
        "hypervisor gave to other guests) that the host was busy: absolute figures are "
        "then low, the same-run ratios and the server CPU per request stay comparable.",
        "",
        "## Targets",
        "",
        "| performance.md target | target | measured (median) | ratio | |",
        "|---|---|---|---|---|",
    ]
    for r in result["targets"]:
        lines.append(f"| {r['what']} | {r['target']} | {r['measured']} | {r['ratio']} | "
                     f"{r['status']} |")
    lines += ["", "## Every case", "",
              "| case | records/s | requests/s | MB/s | latency p50 / p90 / p99 / p99.9 / max "
              "(ms) | ratio | server CPU µs/req | CPU steal % |",
              "|---|---:|---:|---:|---|---|---:|---:|"]
    for k, v in s.items():
        lat = v.get("latency_ms") or {}
        lat_s = " / ".join(_n(lat.get(p), ".2f") for p in ("p50", "p90", "p99", "p999", "max"))
        ratio = "" if v.get("ratio") is None else f"{v['ratio']:.2f} x {v['ratio_to']}"
        rec = v.get("rec_per_s") or None  # 0 for the tiny GETs: no records
        lines.append(f"| {k} | {_n(rec)} | {_n(v.get('req_per_s'))} | "
                     f"{_n(v.get('mb_per_s'), '.1f')} | {lat_s} | {ratio} | "
                     f"{_n(v.get('server_cpu_us_per_req'))} | {_n(v.get('steal_pct'), '.1f')} |")
    if result["failures"]:
        lines += ["", "## Failures", ""] + [f"- {f}" for f in result["failures"]]
    if images:
        lines += ["", "## Plots", ""] + [f"![{Path(i).stem}]({img_rel}/{Path(i).name})"
                                         for i in images]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def plot(result: dict[str, Any], img_dir: Path) -> list[str]:
    try:
        import matplotlib  # noqa: PLC0415

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        print("matplotlib is not installed (pip install -e '.[bench]'): no plots", flush=True)
        return []
    s = result["summary"]
    img_dir.mkdir(parents=True, exist_ok=True)
    files = []

    # throughput per case, with its comparison bar
    cases = [c for c in THROUGHPUT_CASES if c in s and s[c].get("rec_per_s")]
    if cases:
        fig, ax = plt.subplots(figsize=(9, 4.5))
        xs = range(len(cases))
        franz = [s[c]["rec_per_s"] / 1e6 for c in cases]
        ceil = [((s.get(RATIOS[c][0]) or {}).get("rec_per_s") or 0) / 1e6 for c in cases]
        ax.bar([x - 0.2 for x in xs], franz, 0.4, label="franz")
        ax.bar([x + 0.2 for x in xs], ceil, 0.4, label="comparison (ceiling or acks=1)",
               color="#bbbbbb")
        ax.set_xticks(list(xs), cases, rotation=20, ha="right")
        ax.set_yscale("log")
        ax.set_ylabel("M records/s (median, log scale)")
        ax.set_title("Throughput per case")
        ax.legend()
        fig.tight_layout()
        f = img_dir / "bench-throughput.png"
        fig.savefig(f, dpi=100)
        plt.close(fig)
        files.append(str(f))

    # latency percentiles
    lat_cases = [c for c in ("ceiling_latency", "e2e_idle", "e2e_load") if c in s]
    if lat_cases:
        fig, ax = plt.subplots(figsize=(9, 4.5))
        ps = ("p50", "p90", "p99", "p999", "max")
        width = 0.8 / len(lat_cases)
        for i, c in enumerate(lat_cases):
            vals = [s[c]["latency_ms"].get(p) or 0 for p in ps]
            ax.bar([x + (i - (len(lat_cases) - 1) / 2) * width for x in range(len(ps))], vals,
                   width, label=c)
        for x, t, label in ((0, 1, "idle"), (0, 5, "load"), (2, 5, "idle"), (2, 25, "load")):
            ax.hlines(t, x - 0.4, x + 0.4, colors="red", linestyles="dashed")
            ax.annotate(f"target {label}", (x + 0.4, t), fontsize=7, color="red",
                        va="bottom", ha="right")
        ax.set_xticks(range(len(ps)), ["p50", "p90", "p99", "p99.9", "max"])
        ax.set_yscale("log")
        ax.set_ylabel("ms (median of rounds, log scale)")
        ax.set_title("End-to-end latency: 1-record produce -> long-polling consumer")
        ax.legend()
        fig.tight_layout()
        f = img_dir / "bench-latency.png"
        fig.savefig(f, dpi=100)
        plt.close(fig)
        files.append(str(f))

    # ratio to ceiling, with the targets
    target_of = {"produce_1000": 0.35, "consume_tail": 0.5, "produce_fsync": 0.8,
                 "produce_keyed_1p": 0.8, "produce_keyed_8p": 0.8, "produce_1000_8p": None,
                 "produce_acks_all": None, "produce_1": None, "consume_start": None}
    rcases = [c for c in THROUGHPUT_CASES if c in s and s[c].get("ratio") is not None]
    if rcases:
        fig, ax = plt.subplots(figsize=(9, 4.5))
        ax.bar(range(len(rcases)), [s[c]["ratio"] for c in rcases], 0.6)
        for i, c in enumerate(rcases):
            t = target_of.get(c)
            if t is not None:
                ax.hlines(t, i - 0.35, i + 0.35, colors="red", linestyles="dashed")
        ax.set_xticks(range(len(rcases)), [f"{c}\n/ {s[c]['ratio_to']}" for c in rcases],
                      fontsize=7)
        ax.set_ylabel("ratio (median of per-round ratios)")
        ax.set_title("Ratio to the same-run comparison (red: performance.md target)")
        fig.tight_layout()
        f = img_dir / "bench-ratio.png"
        fig.savefig(f, dpi=100)
        plt.close(fig)
        files.append(str(f))
    return files

"""The Jepsen queue checker (tests/jepsen/checker.py) on hand-made histories: a clean
one passes, each anomaly is found and named."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jepsen.checker import History, Op, check  # noqa: E402


def send(v, off=None, typ="ok", p=0, t=0.0):
    return Op(process=0, f="send", value=v, invoke=t, complete=t + 0.1, type=typ, partition=p,
              offset=off if typ == "ok" else None, via="n0")


def read(records, p=0, via="n1", final=True):
    return Op(process=9, f="read", invoke=10.0, complete=10.5, type="ok", partition=p,
              records=list(records), final=final, via=via)


def clean() -> list[Op]:
    return [send(1, 0), send(2, 1), send(3, None, "info"), send(4, None, "info"),
            send(5, None, "fail"), read([(0, 1), (1, 2), (2, 3)]),
            read([(0, 1), (1, 2), (2, 3)], via="n2")]


def test_a_clean_history_passes_and_counts() -> None:
    a = check(History(clean()))
    assert a.valid, a.summary()
    assert a.counts["ok"] == 2 and a.counts["info"] == 2 and a.counts["fail"] == 1
    assert a.counts["info-read"] == 1 and a.counts["unseen"] == 1
    assert a.counts["lost"] == 0


def test_an_acknowledged_value_missing_from_a_final_read_is_lost() -> None:
    ops = clean()[:-1] + [read([(0, 1), (2, 3)], via="n2")]  # offset 1 (value 2) gone on n2
    a = check(ops)
    assert not a.valid
    assert [x["value"] for x in a.anomalies["lost"]] == [2]
    assert a.anomalies["lost"][0]["missing_from"] == ["read via n2"]


def test_a_value_read_during_the_run_but_not_at_the_end_is_lost() -> None:
    ops = [send(1, 0), send(2, 1), read([(0, 1), (1, 2)], final=False), read([(0, 1)])]
    a = check(ops)
    assert [x["value"] for x in a.anomalies["lost"]] == [2]


def test_no_read_of_an_acknowledged_partition_is_lost() -> None:
    a = check([send(1, 0, p=1), read([])])
    assert a.anomalies["lost"][0]["missing_from"] == ["no read of its partition"]


def test_a_value_at_two_offsets_is_duplicated() -> None:
    ops = [send(1, 0), send(2, None, "info"), read([(0, 1), (1, 2), (2, 2)])]
    a = check(ops)
    assert [x["value"] for x in a.anomalies["duplicated"]] == [2]
    assert a.anomalies["duplicated"][0]["at"] == [(0, 1), (0, 2)]
    assert not a.anomalies["lost"] and not a.anomalies["inconsistent"]


def test_two_values_at_one_offset_across_reads_are_inconsistent() -> None:
    ops = [send(1, None, "info"), send(2, None, "info"),
           read([(0, 1)], via="n1"), read([(0, 2)], via="n2")]
    a = check(ops)
    assert [(x["partition"], x["offset"]) for x in a.anomalies["inconsistent"]] == [(0, 0)]


def test_an_acknowledged_offset_holding_another_value_is_inconsistent() -> None:
    ops = [send(1, 0), send(2, 0), read([(0, 1), (1, 2)])]  # 2 was acked at 0, read at 1
    a = check(ops)
    kinds = a.anomalies["inconsistent"]
    assert any(x.get("offset") == 0 for x in kinds)  # 0: acked 1 and acked 2
    assert any(x.get("value") == 2 and x["read_at"] == [(0, 1)] for x in kinds)


def test_a_value_never_attempted_is_unexpected() -> None:
    a = check([send(1, 0), read([(0, 1), (1, 99)])])
    assert [x["value"] for x in a.anomalies["unexpected"]] == [99]


def test_a_definitely_failed_value_that_is_read_is_failed_present() -> None:
    a = check([send(1, 0), send(2, typ="fail"), read([(0, 1), (1, 2)])])
    assert [x["value"] for x in a.anomalies["failed-present"]] == [2]


def test_failed_reads_are_ignored_and_partitions_are_separate() -> None:
    ops = [send(1, 0, p=0), send(2, 0, p=1), read([(0, 1)], p=0), read([(0, 2)], p=1),
           Op(process=9, f="read", type="info", partition=0, records=[(0, 7)])]
    a = check(ops)
    assert a.valid, a.summary()


def test_the_history_round_trips_through_its_file(tmp_path: Path) -> None:
    h = History(clean())
    h.write(tmp_path / "h.jsonl")
    back = History.read(tmp_path / "h.jsonl")
    assert back.ops == h.ops
    assert check(back).counts == check(h).counts

"""The net-effect rule on a Spark DataFrame: the same as the plain-Python rule, one sort."""

from __future__ import annotations

import random
from typing import Any

import pytest
from window_builder import lsn

from airflow_provider_sqlserver_cdc.spark.merge.job import configure_session
from airflow_provider_sqlserver_cdc.spark.merge.net_effect_frame import net_effect_frame
from airflow_provider_sqlserver_cdc.window.net_effect import Change, ChangePosition, net_effect


@pytest.mark.spark
def test_spark_net_effect_equals_the_python_rule(spark: Any) -> None:
    generator = random.Random(6)
    rows = []
    for number in range(400):
        start_lsn = generator.randrange(1, 40)
        seqval = generator.randrange(1, 5)
        operation = generator.choice([1, 2, 3, 4])
        rows.append(
            (
                generator.randrange(1, 15),
                f"v{number}",
                lsn(start_lsn),
                lsn(start_lsn * 100 + seqval),
                operation,
            )
        )
    unique = {(r[0], r[2], r[3], r[4]): r for r in rows}  # a position occurs once per key in a real log
    rows = list(unique.values())
    frame = spark.createDataFrame(
        [(*r, None) for r in rows],
        "id INT, v STRING, _cdc_start_lsn BINARY, _cdc_seqval BINARY, _cdc_operation INT, _cdc_commit_time TIMESTAMP",
    )
    from_spark = {
        r.id: (r._cdc_deleted, r.v, bytes(r._cdc_start_lsn), bytes(r._cdc_seqval), r._cdc_operation)
        for r in net_effect_frame(frame, ["id"]).collect()
    }
    changes = [Change(ChangePosition(r[2], r[3], r[4]), {"id": r[0], "v": r[1]}) for r in rows]
    from_python = {
        key[0]: (c.deletes, c.values["v"], c.position.start_lsn, c.position.seqval, c.position.operation)
        for key, c in net_effect(changes, ["id"]).items()
    }
    assert from_spark == from_python
    assert any(v[0] for v in from_python.values()) and any(not v[0] for v in from_python.values())


@pytest.mark.spark
def test_net_effect_sorts_the_changes_once(spark: Any) -> None:
    """After configure_session, the net effect has no partial window-group limit (an extra full sort)."""
    configure_session(spark)
    frame = spark.createDataFrame(
        [(1, b"\x01", b"\x01", 2, None)],
        "id INT, _cdc_start_lsn BINARY, _cdc_seqval BINARY, _cdc_operation INT, _cdc_commit_time TIMESTAMP",
    )
    plan = net_effect_frame(frame, ["id"])._jdf.queryExecution().executedPlan().toString()
    assert "WindowGroupLimit" not in plan
    assert plan.count("Sort [") == 1, plan

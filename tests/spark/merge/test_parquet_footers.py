"""A window's row count and key bounds read from its Parquet footers, against the rows themselves."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_provider_sqlserver_cdc.spark.merge.parquet_footers import FooterFigures, footer_figures

pytestmark = pytest.mark.spark


def _write(path: Path, columns: dict[str, pa.Array], **options: Any) -> str:
    pq.write_table(pa.table(columns), path, **options)
    return str(path)


def test_rows_and_bounds_span_every_row_group_of_every_file(spark: Any, tmp_path: Path) -> None:
    first = _write(
        tmp_path / "a.parquet",
        {"ID": pa.array([50, -7, 12, None, 3], pa.int64()), "name": pa.array(list("abcde"))},
        row_group_size=2,  # three row groups
    )
    second = _write(
        tmp_path / "b.parquet", {"ID": pa.array([900, 901], pa.int64()), "name": pa.array(["f", "g"])}
    )
    figures = footer_figures(spark, [first, second], "id")  # any case, as SQL Server names are
    assert figures == FooterFigures(7, (-7, 901))
    row = spark.read.parquet(first, second).selectExpr("count(*)", "min(ID)", "max(ID)").first()
    assert (figures.rows, figures.key_bounds) == (row[0], (row[1], row[2]))
    assert footer_figures(spark, [first, second], None) == FooterFigures(7, None)  # the row count only


@pytest.mark.parametrize(
    ("key_type", "answered"),
    [
        (pa.int8(), True),
        (pa.int16(), True),
        (pa.int32(), True),
        (pa.uint8(), True),
        (pa.uint16(), True),
        (pa.uint32(), False),  # its statistics order values above 2**31 unsigned
        (pa.decimal128(10, 0), False),  # stored as fixed-length bytes
        (pa.string(), False),
        (pa.timestamp("us"), False),  # a whole number in the file, not a key value
    ],
)
def test_only_whole_numbers_the_statistics_order_as_numbers_are_answered(
    spark: Any, tmp_path: Path, key_type: pa.DataType, answered: bool
) -> None:
    if key_type == pa.string():
        values = pa.array(["3", "1", "2"])
    elif pa.types.is_decimal(key_type):
        values = pa.array([Decimal(3), Decimal(1), Decimal(2)], key_type)
    else:
        values = pa.array([3, 1, 2], pa.int64()).cast(key_type)
    uri = _write(tmp_path / "k.parquet", {"id": values})
    expected = FooterFigures(3, (1, 3)) if answered else None
    assert footer_figures(spark, [uri], "id") == expected


def test_a_footer_without_statistics_or_without_the_key_cannot_tell(spark: Any, tmp_path: Path) -> None:
    bare = _write(tmp_path / "bare.parquet", {"id": pa.array([1, 2], pa.int64())}, write_statistics=False)
    assert footer_figures(spark, [bare], "id") is None
    assert footer_figures(spark, [bare], None) == FooterFigures(2, None)
    other = _write(tmp_path / "other.parquet", {"code": pa.array([1, 2], pa.int64())})
    assert footer_figures(spark, [other], "id") is None


def test_a_key_column_without_values_has_no_bounds(spark: Any, tmp_path: Path) -> None:
    uri = _write(tmp_path / "nulls.parquet", {"id": pa.array([None, None], pa.int64())})
    assert footer_figures(spark, [uri], "id") == FooterFigures(2, None)

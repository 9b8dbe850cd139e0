"""Column masking rules (column_masking): parsing, checks against a table's columns, values, manifest entries."""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
from decimal import Decimal

import pytest

from airflow_provider_sqlserver_cdc.column_masking import (
    ColumnMasking,
    ColumnMaskingError,
    MaskingRule,
    hash_value,
    masking_note,
    parse_rules,
)

COLUMNS = [
    {"name": "id", "sql_type": "int", "max_length": 4, "precision": 10, "scale": 0, "arrow_type": "int32"},
    {
        "name": "Email",
        "sql_type": "nvarchar",
        "max_length": 200,
        "precision": 0,
        "scale": 0,
        "arrow_type": "string",
    },
    {
        "name": "phone",
        "sql_type": "varchar",
        "max_length": 20,
        "precision": 0,
        "scale": 0,
        "arrow_type": "string",
    },
    {"name": "ssn", "sql_type": "char", "max_length": 11, "precision": 0, "scale": 0, "arrow_type": "string"},
    {
        "name": "born",
        "sql_type": "date",
        "max_length": 3,
        "precision": 10,
        "scale": 0,
        "arrow_type": "date32[day]",
    },
]
RULES = {
    "dbo.customers.id": "hash",
    "dbo.customers.email": "hash",
    "dbo.customers.phone": "truncate(3)",
    "dbo.customers.ssn": "drop",
    "dbo.customers.born": "mask",
}


def customers(rules=RULES, salt: str | None = "pepper"):
    return ColumnMasking(rules, salt=salt).for_table(
        "DBO", "Customers", COLUMNS, ["id"], source_types={"Email": "nvarchar(100)", "born": "date"}
    )


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("hash", MaskingRule("c", "hash")),
        (" HASH ", MaskingRule("c", "hash")),
        ("mask", MaskingRule("c", "mask", replacement="****")),
        ("mask(n/a)", MaskingRule("c", "mask", replacement="n/a")),
        ("truncate(4)", MaskingRule("c", "truncate", length=4)),
        ("drop", MaskingRule("c", "drop")),
    ],
)
def test_rules_parse(text, rule):
    assert MaskingRule.parse("c", text, "dbo.t.c") == rule


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("encrypt", "unknown method 'encrypt'"),
        ("truncate", "needs the characters to keep"),
        ("truncate(0)", "needs the characters to keep"),
        ("truncate(x)", "needs the characters to keep"),
        ("hash(sha1)", "hash takes no argument"),
        ("mask()", "needs a replacement"),
    ],
)
def test_invalid_rules_name_table_and_column(text, message):
    with pytest.raises(ColumnMaskingError, match=message) as caught:
        parse_rules({"dbo.t.c": text})
    assert "dbo.t.c" in str(caught.value)


@pytest.mark.parametrize("key", ["t.c", "dbo.t.c.x", "dbo..c", ""])
def test_rule_keys_are_schema_table_column(key):
    with pytest.raises(ColumnMaskingError, match="must be schema.table.column"):
        parse_rules({key: "hash"})


def test_a_column_named_twice_is_refused():
    with pytest.raises(ColumnMaskingError, match="(?i)names dbo.t.c twice"):
        parse_rules({"dbo.t.c": "hash", "DBO.T.C": "drop"})


def test_rules_resolve_against_the_columns_case_insensitively():
    masking = customers()
    assert masking is not None
    assert masking.table == "DBO.Customers"
    assert masking.rule("EMAIL") == MaskingRule("Email", "hash")
    assert masking.rule("name") is None
    assert masking.to_manifest() == {
        "id": "hash",
        "Email": "hash",
        "phone": "truncate(3)",
        "ssn": "drop",
        "born": "mask",
    }


def test_a_table_without_rules_has_no_masking():
    assert ColumnMasking(RULES, salt="s").for_table("dbo", "orders", COLUMNS, ["id"]) is None


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        (
            {"dbo.customers.mail": "hash"},
            r"dbo.customers.mail: the capture instance of dbo.customers has no column",
        ),
        (
            {"dbo.customers.born": "truncate(2)"},
            r"dbo.customers.born: truncate applies to string columns, born is date",
        ),
        ({"dbo.customers.id": "drop"}, r"dbo.customers.id: id is a key column"),
        ({"dbo.customers.id": "mask"}, r"dbo.customers.id: id is a key column"),
        ({"dbo.customers.id": "truncate(1)"}, r"truncate applies to string columns"),
    ],
)
def test_rules_that_cannot_apply_name_table_and_column(rules, message):
    with pytest.raises(ColumnMaskingError, match=message):
        ColumnMasking(rules, salt="s").for_table("dbo", "customers", COLUMNS, ["id"])


def test_hash_without_a_salt_is_refused():
    with pytest.raises(ColumnMaskingError, match="hash needs a salt: set masking.salt_conn_id"):
        customers(salt=None)
    assert customers({"dbo.customers.ssn": "drop"}, salt=None) is not None


def test_the_salt_is_never_shown():
    masking = ColumnMasking(RULES, salt="pepper-secret")
    table = masking.for_table("dbo", "customers", COLUMNS, ["id"])
    for text in (repr(masking), str(masking), repr(table), str(table), str(table.to_manifest())):
        assert "pepper-secret" not in text


def test_hash_is_hmac_sha256_of_the_value_text_keyed_by_the_salt():
    expected = hmac.new(b"pepper", b"42", hashlib.sha256).hexdigest()
    assert hash_value(42, b"pepper") == expected
    assert len(expected) == 64
    # the same value under the same salt: the same hash (a hashed key still matches its updates)
    assert hash_value(42, b"pepper") == hash_value(42, b"pepper")
    assert hash_value(42, b"salt2") != expected
    assert hash_value("42", b"pepper") == expected  # the text form: an int key equals its text
    assert hash_value(None, b"pepper") is None


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (b"\x01\xab", "01ab"),
        (True, "true"),
        (Decimal("12.50"), "12.50"),
        (dt.date(2024, 2, 29), "2024-02-29"),
        (dt.datetime(2024, 2, 29, 1, 2, 3, 4), "2024-02-29T01:02:03.000004"),
        ("Ann", "Ann"),
    ],
)
def test_values_hash_as_their_text(value, text):
    assert hash_value(value, b"k") == hmac.new(b"k", text.encode(), hashlib.sha256).hexdigest()


def test_values_masked_by_each_rule():
    masking = customers()
    assert masking.mask_values(masking.rule("phone"), ["555-0100", None, "55"]) == ["555", None, "55"]
    assert masking.mask_values(masking.rule("born"), [dt.date(2000, 1, 1), None]) == ["****", None]
    assert masking.mask_values(masking.rule("email"), ["a@b", None]) == [
        hmac.new(b"pepper", b"a@b", hashlib.sha256).hexdigest(),
        None,
    ]


def test_manifest_columns_describe_what_the_staging_holds():
    described = {c["name"]: c for c in customers().manifest_columns(COLUMNS)}
    assert "ssn" not in described  # dropped
    assert described["Email"] == {
        **COLUMNS[1],
        "sql_type": "char",
        "max_length": 64,
        "arrow_type": "string",
        "masked": "hash",
        "source_type": "nvarchar(100)",
    }
    assert described["id"]["sql_type"] == "char" and described["id"]["masked"] == "hash"
    assert described["phone"] == {**COLUMNS[2], "masked": "truncate(3)", "source_type": "varchar"}
    assert described["born"]["sql_type"] == "nvarchar" and described["born"]["arrow_type"] == "string"
    assert described["born"]["max_length"] == 8  # 4 characters of ****, two bytes each


def test_a_mask_longer_than_its_string_column_widens_the_description():
    rules = {"dbo.customers.phone": "mask(withheld by policy, see DPA-7)", "dbo.customers.ssn": "mask"}
    described = {
        c["name"]: c
        for c in ColumnMasking(rules).for_table("dbo", "customers", COLUMNS).manifest_columns(COLUMNS)
    }
    assert described["phone"]["sql_type"] == "nvarchar" and described["phone"]["max_length"] == 2 * len(
        "withheld by policy, see DPA-7"
    )
    assert described["ssn"]["sql_type"] == "char" and described["ssn"]["max_length"] == 11  # **** fits


def test_masking_note_of_a_target_comment():
    described = {c["name"]: c for c in customers().manifest_columns(COLUMNS)}
    assert masking_note(described["Email"]) == "; masked: hash of nvarchar(100)"
    assert masking_note(described["phone"]) == "; masked: truncate(3) of varchar"
    assert masking_note(COLUMNS[0]) == ""

from decimal import Decimal

import pytest

from gridtext.align import align_cell, infer_alignment
from gridtext.formatting import format_value, is_number


def test_align_left_right_center():
    assert align_cell("ab", 6) == "ab    "
    assert align_cell("ab", 6, "right") == "    ab"
    assert align_cell("ab", 6, "center") == "  ab  "
    assert align_cell("ab", 5, "center") == " ab  "


def test_align_custom_fill():
    assert align_cell("7", 3, "right", fill="0") == "007"


def test_align_wider_text_is_unchanged():
    assert align_cell("abcdef", 3) == "abcdef"


def test_align_rejects_bad_arguments():
    with pytest.raises(ValueError):
        align_cell("x", 3, "justify")
    with pytest.raises(ValueError):
        align_cell("x", 3, fill="--")


def test_infer_alignment():
    assert infer_alignment([1, 2.5, "3", None, ""]) == "right"
    assert infer_alignment([1, "two"]) == "left"
    assert infer_alignment([]) == "left"
    assert infer_alignment([True, False]) == "left"


def test_is_number():
    assert is_number(3) and is_number(2.5) and is_number(Decimal("1.1"))
    assert is_number("1,234.5") and is_number(" -7 ")
    assert not is_number(True)
    assert not is_number("") and not is_number("abc") and not is_number(None)


def test_format_value():
    assert format_value(None) == ""
    assert format_value(True) == "yes"
    assert format_value(False) == "no"
    assert format_value(1234567) == "1234567"
    assert format_value(1234567, thousands=True) == "1,234,567"
    assert format_value(3.14159) == "3.14"
    assert format_value(3.14159, precision=0) == "3"
    assert format_value(Decimal("2.5"), precision=3) == "2.500"
    assert format_value(float("inf")) == "inf"
    assert format_value("text") == "text"

import pytest

from inikit.errors import DuplicateOptionError, DuplicateSectionError, ParseError
from inikit.parser import parse


def test_basic_sections_and_options():
    data = parse("[a]\nx = 1\ny = 2\n\n[b]\nz = 3\n")
    assert data == {"a": {"x": "1", "y": "2"}, "b": {"z": "3"}}


def test_option_names_are_case_insensitive():
    data = parse("[a]\nMixedCase = 1\n")
    assert data == {"a": {"mixedcase": "1"}}


def test_quoted_values_are_unquoted():
    data = parse('[a]\ngreeting = "  hello  "\n')
    assert data["a"]["greeting"] == "  hello  "


def test_continuation_lines_join_with_newline():
    data = parse("[a]\nlist = one\n  two\n  three\nnext = x\n")
    assert data["a"]["list"] == "one\ntwo\nthree"
    assert data["a"]["next"] == "x"


def test_value_may_start_on_continuation_line():
    data = parse("[a]\nitems =\n    first\n    second\n")
    assert data["a"]["items"] == "first\nsecond"


def test_blank_line_ends_a_multiline_value():
    with pytest.raises(ParseError):
        parse("[a]\nx = 1\n\n   orphan\n")


def test_comments_inside_a_multiline_value_are_skipped():
    data = parse("[a]\nx = 1\n# note\n  2\n")
    assert data["a"]["x"] == "1\n2"


def test_option_before_any_section_is_an_error():
    with pytest.raises(ParseError):
        parse("x = 1\n[a]\n")


def test_duplicate_section_strict():
    with pytest.raises(DuplicateSectionError):
        parse("[a]\nx = 1\n[a]\ny = 2\n")


def test_duplicate_section_non_strict_merges():
    data = parse("[a]\nx = 1\n[a]\ny = 2\n", strict=False)
    assert data == {"a": {"x": "1", "y": "2"}}


def test_duplicate_option_strict_is_case_insensitive():
    with pytest.raises(DuplicateOptionError):
        parse("[a]\nName = 1\nname = 2\n")


def test_same_option_in_two_sections_is_fine():
    assert parse("[a]\nx = 1\n[b]\nx = 2\n") == {"a": {"x": "1"}, "b": {"x": "2"}}


def test_empty_text_gives_no_sections():
    assert parse("") == {}
    assert parse("\n\n# only a comment\n") == {}

import pytest

from inikit.errors import ParseError
from inikit.lexer import Kind, strip_inline_comment, tokenize, unquote


def kinds(text):
    return [tok.kind for tok in tokenize(text)]


def test_classifies_every_kind_of_line():
    text = "[main]\n# a comment\nkey = value\n    more\n\n; other comment\n"
    assert kinds(text) == [
        Kind.SECTION,
        Kind.COMMENT,
        Kind.OPTION,
        Kind.CONTINUATION,
        Kind.BLANK,
        Kind.COMMENT,
    ]


def test_option_name_and_value_are_stripped():
    (tok,) = tokenize("name   =   some value  ")
    assert tok.name == "name"
    assert tok.value == "some value"


def test_colon_is_a_delimiter_too():
    (tok,) = tokenize("host: example.org")
    assert (tok.name, tok.value) == ("host", "example.org")


def test_first_delimiter_wins():
    (tok,) = tokenize("url = http://example.org:8080/a=b")
    assert tok.name == "url"
    assert tok.value == "http://example.org:8080/a=b"


def test_section_name_is_stripped_and_case_kept():
    (tok,) = tokenize("[  Web Server ]")
    assert tok.kind is Kind.SECTION
    assert tok.name == "Web Server"


def test_section_header_may_carry_a_comment():
    (tok,) = tokenize("[db] ; primary database")
    assert tok.name == "db"


def test_inline_comment_needs_leading_whitespace():
    assert strip_inline_comment("value ; comment") == "value"
    assert strip_inline_comment("http://host/#frag") == "http://host/#frag"
    assert strip_inline_comment("a;b") == "a;b"


def test_unquote_removes_one_matching_pair():
    assert unquote('"hello"') == "hello"
    assert unquote("'x'") == "x"
    assert unquote('"mismatched\'') == '"mismatched\''
    assert unquote('""quoted""') == '"quoted"'
    assert unquote('"') == '"'


def test_bom_is_ignored():
    (tok,) = tokenize("\ufeff[main]")
    assert tok.name == "main"


@pytest.mark.parametrize("bad", ["[unterminated", "[]", "just some words", "= value", "[a] trailing"])
def test_malformed_lines_raise_parse_error(bad):
    with pytest.raises(ParseError):
        tokenize("[ok]\n" + bad)

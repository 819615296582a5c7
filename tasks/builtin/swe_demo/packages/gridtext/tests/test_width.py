import pytest

from gridtext.width import char_width, display_width, truncate


@pytest.mark.parametrize(
    "ch,expected",
    [("a", 1), ("é", 1), ("日", 2), ("Ａ", 2), ("\u0301", 0), ("\u200d", 0), ("\t", 0)],
)
def test_char_width(ch, expected):
    assert char_width(ch) == expected


def test_char_width_rejects_strings():
    with pytest.raises(ValueError):
        char_width("ab")


def test_display_width():
    assert display_width("") == 0
    assert display_width("hello") == 5
    assert display_width("日本語") == 6
    assert display_width("e\u0301te\u0301") == 3


def test_truncate_long_text():
    assert truncate("hello world", 8) == "hello w…"
    assert truncate("abcdef", 3, ellipsis="...") == "..."


def test_truncate_short_text_is_unchanged():
    assert truncate("hi", 10) == "hi"
    assert truncate("", 0) == ""


def test_truncate_wide_characters_never_straddle():
    # "日本語" is 6 columns; 4 columns leave room for one wide char + "…"
    assert truncate("日本語", 4) == "日…"
    assert display_width(truncate("日本語テキスト", 7)) <= 7


def test_truncate_too_narrow_for_ellipsis():
    assert truncate("abcdef", 2, ellipsis="...") == ""


def test_truncate_negative_width():
    with pytest.raises(ValueError):
        truncate("abc", -1)

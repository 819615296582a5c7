import pytest

from semverlite import InvalidRange, Range, satisfies


@pytest.mark.parametrize(
    "rng,yes,no",
    [
        ("1.2.3", ["1.2.3", "v1.2.3+build"], ["1.2.4", "1.2.2"]),
        (">=1.2.3", ["1.2.3", "9.0.0"], ["1.2.2"]),
        (">1.2.3 <2", ["1.2.4", "1.99.0"], ["1.2.3", "2.0.0"]),
        ("<=1.2", ["1.2.9", "0.1.0"], ["1.3.0"]),
        (">1.2", ["1.3.0"], ["1.2.9"]),
        ("<1.2", ["1.1.9"], ["1.2.0"]),
        ("1.x", ["1.0.0", "1.9.9"], ["2.0.0", "0.9.9"]),
        ("1.2.*", ["1.2.0", "1.2.7"], ["1.3.0"]),
        ("*", ["0.0.1", "5.5.5"], []),
        ("", ["0.0.0"], []),
        ("^1.2.3", ["1.2.3", "1.9.0"], ["2.0.0", "1.2.2"]),
        ("^1.2", ["1.2.0", "1.5.1"], ["2.0.0", "1.1.9"]),
        ("^0.2", ["0.2.0", "0.2.9"], ["0.3.0"]),
        ("^0.0.3", ["0.0.3"], ["0.0.4", "0.0.2"]),
        ("^0.0", ["0.0.0", "0.0.9"], ["0.1.0"]),
        ("^0", ["0.9.9"], ["1.0.0"]),
        ("~1.2.3", ["1.2.3", "1.2.9"], ["1.3.0"]),
        ("~1.2", ["1.2.0", "1.2.9"], ["1.3.0"]),
        ("~1", ["1.0.0", "1.9.9"], ["2.0.0"]),
        ("1.2.3 - 2.3.4", ["1.2.3", "2.3.4"], ["2.3.5", "1.2.2"]),
        ("1.2 - 2.3", ["1.2.0", "2.3.9"], ["2.4.0"]),
        ("1.x || >=3.0.0 <3.1.0", ["1.5.0", "3.0.5"], ["2.0.0", "3.1.0"]),
        (">= 1.0.0 < 1.5.0", ["1.4.9"], ["1.5.0"]),
    ],
)
def test_range_matrix(rng, yes, no):
    parsed = Range.parse(rng)
    for v in yes:
        assert parsed.contains(v), (rng, v)
    for v in no:
        assert not parsed.contains(v), (rng, v)


def test_prereleases_excluded_by_default():
    assert not satisfies("1.3.0-beta.1", ">=1.2.0")
    assert satisfies("1.3.0-beta.1", ">=1.2.0", include_prerelease=True)


def test_prerelease_allowed_when_range_names_same_triple():
    assert satisfies("1.2.3-rc.2", ">=1.2.3-rc.1")
    assert not satisfies("1.2.4-rc.2", ">=1.2.3-rc.1")
    assert satisfies("1.2.3-beta.1", "^1.2.3-alpha")


def test_invalid_version_does_not_satisfy():
    assert not satisfies("garbage", "*")


def test_in_operator():
    assert "1.4.0" in Range.parse("^1")
    assert 1 not in Range.parse("^1")


@pytest.mark.parametrize("bad", [">=", "^", "1.2.3.4", "~x.y.z!", ">=1.2.3 <=abc"])
def test_invalid_ranges(bad):
    with pytest.raises(InvalidRange):
        Range.parse(bad)


def test_str_shows_desugared_comparators():
    assert str(Range.parse("^1.2.3")) == ">=1.2.3 <2.0.0"
    assert str(Range.parse("~1.2 || 3.0.0")) == ">=1.2.0 <1.3.0 || =3.0.0"

import pytest

from semverlite import InvalidVersion, Version


def test_parse_plain():
    v = Version.parse("1.2.3")
    assert (v.major, v.minor, v.patch) == (1, 2, 3)
    assert v.prerelease == ()
    assert v.build == ()


def test_parse_prerelease_and_build():
    v = Version.parse("v2.0.0-rc.1+build.42")
    assert v.prerelease == ("rc", "1")
    assert v.build == ("build", "42")
    assert str(v) == "2.0.0-rc.1+build.42"


def test_parse_tolerates_whitespace_and_equals():
    assert Version.parse("  =1.0.0 ") == Version(1, 0, 0)


@pytest.mark.parametrize(
    "bad",
    ["1.2", "1.2.3.4", "01.2.3", "1.02.3", "a.b.c", "", "1.2.3-", "1.2.3+", "1.2.3-01", "1.2.3 beta", "-1.2.3"],
)
def test_invalid_versions(bad):
    with pytest.raises(InvalidVersion):
        Version.parse(bad)
    assert not Version.is_valid(bad)


def test_parse_rejects_non_strings():
    with pytest.raises(InvalidVersion):
        Version.parse(123)


def test_invalid_version_is_a_value_error():
    with pytest.raises(ValueError):
        Version.parse("nope")


def test_constructor_validates_numbers():
    with pytest.raises(InvalidVersion):
        Version(1, -1, 0)
    with pytest.raises(InvalidVersion):
        Version(True, 0, 0)


def test_ordering_of_releases():
    assert Version.parse("1.0.0") < Version.parse("2.0.0") < Version.parse("2.1.0") < Version.parse("2.1.1")
    assert Version.parse("1.10.0") > Version.parse("1.9.0")


def test_prerelease_precedence_spec_example():
    chain = ["1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2", "1.0.0-rc.1", "1.0.0"]
    parsed = [Version.parse(s) for s in chain]
    for low, high in zip(parsed, parsed[1:]):
        assert low < high, (low, high)


def test_numeric_identifiers_sort_before_alphanumeric():
    assert Version.parse("1.0.0-1") < Version.parse("1.0.0-a")
    assert Version.parse("1.0.0-alpha.1") < Version.parse("1.0.0-alpha.a")


def test_build_metadata_is_ignored_for_precedence():
    a, b = Version.parse("1.0.0+one"), Version.parse("1.0.0+two")
    assert a == b
    assert hash(a) == hash(b)
    assert not a < b


def test_compare_with_strings():
    assert Version.parse("1.2.3") == "1.2.3"
    assert Version.parse("1.2.3") < "1.2.4"


def test_compare_with_other_types_is_unsupported():
    assert Version.parse("1.0.0") != 1
    with pytest.raises(TypeError):
        Version.parse("1.0.0") < 1


def test_next_versions():
    v = Version.parse("1.2.3")
    assert v.next_patch() == "1.2.4"
    assert v.next_minor() == "1.3.0"
    assert v.next_major() == "2.0.0"


def test_next_versions_from_prerelease():
    assert Version.parse("1.2.3-rc.1").next_patch() == "1.2.3"
    assert Version.parse("1.3.0-rc.1").next_minor() == "1.3.0"
    assert Version.parse("1.2.3-rc.1").next_minor() == "1.3.0"
    assert Version.parse("2.0.0-rc.1").next_major() == "2.0.0"


def test_repr_and_release():
    v = Version.parse("3.1.4-beta+exp")
    assert repr(v) == "Version('3.1.4-beta+exp')"
    assert str(v.release) == "3.1.4"
    assert v.is_prerelease and not v.release.is_prerelease

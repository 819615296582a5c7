import pytest

from semverlite import InvalidVersion, latest, max_satisfying, min_satisfying, sort_versions

VERSIONS = ["1.0.0", "1.2.3", "1.4.0", "2.0.0-rc.1", "2.0.0", "2.1.0", "not-a-version"]


def test_sort_versions():
    assert sort_versions(["1.10.0", "1.2.0", "1.9.1", "1.2.0-rc.1"]) == ["1.2.0-rc.1", "1.2.0", "1.9.1", "1.10.0"]


def test_sort_versions_reverse_keeps_original_spelling():
    assert sort_versions(["v1.0.0", "2.0.0"], reverse=True) == ["2.0.0", "v1.0.0"]


def test_sort_versions_rejects_junk():
    with pytest.raises(InvalidVersion):
        sort_versions(["1.0.0", "banana"])


def test_max_satisfying():
    assert max_satisfying(VERSIONS, "^1.0.0") == "1.4.0"
    assert max_satisfying(VERSIONS, ">=2.0.0") == "2.1.0"


def test_min_satisfying():
    assert min_satisfying(VERSIONS, "^1.1") == "1.2.3"
    assert min_satisfying(VERSIONS, ">=2.0.0-rc.0") == "2.0.0-rc.1"


def test_no_match_gives_none():
    assert max_satisfying(VERSIONS, "^5") is None
    assert min_satisfying([], "*") is None


def test_latest():
    assert latest(["0.9.0", "1.0.0", "1.1.0-beta"]) == "1.0.0"
    assert latest(["0.9.0", "1.0.0", "1.1.0-beta"], include_prerelease=True) == "1.1.0-beta"
    assert latest([]) is None

import pytest

from inikit import Config, NoOptionError, NoSectionError

TEXT = """\
[DEFAULT]
timeout = 30
debug = off

[server]
host = 0.0.0.0
port = 8080
ratio = 0.75
debug = yes
tags = web, api,
    internal

[client]
retries = 3
"""


@pytest.fixture
def cfg():
    return Config.from_string(TEXT)


def test_sections_exclude_default(cfg):
    assert cfg.sections() == ["server", "client"]
    assert cfg.has_section("server")
    assert not cfg.has_section("DEFAULT")


def test_get_and_typed_getters(cfg):
    assert cfg.get("server", "host") == "0.0.0.0"
    assert cfg.getint("server", "port") == 8080
    assert cfg.getfloat("server", "ratio") == pytest.approx(0.75)
    assert cfg.getint("client", "retries") == 3


def test_option_lookup_is_case_insensitive(cfg):
    assert cfg.get("server", "PORT") == "8080"


def test_defaults_are_visible_everywhere(cfg):
    assert cfg.getint("client", "timeout") == 30
    assert cfg.getboolean("client", "debug") is False
    assert cfg.getboolean("server", "debug") is True


@pytest.mark.parametrize(
    "text,expected",
    [("yes", True), ("On", True), ("TRUE", True), ("1", True), ("no", False), ("off", False), ("False", False), ("0", False)],
)
def test_getboolean_accepted_spellings(text, expected):
    cfg = Config.from_string(f"[a]\nflag = {text}\n")
    assert cfg.getboolean("a", "flag") is expected


def test_getint_rejects_garbage():
    cfg = Config.from_string("[a]\nn = twelve\n")
    with pytest.raises(ValueError, match="cannot convert"):
        cfg.getint("a", "n")


def test_getlist_splits_on_commas_and_newlines(cfg):
    assert cfg.getlist("server", "tags") == ["web", "api", "internal"]


def test_missing_section_and_option(cfg):
    with pytest.raises(NoSectionError):
        cfg.get("nope", "x")
    with pytest.raises(NoOptionError):
        cfg.get("server", "nope")
    # both are KeyErrors, like a dict lookup
    with pytest.raises(KeyError):
        cfg.get("server", "nope")


def test_fallback(cfg):
    assert cfg.get("server", "nope", fallback="x") == "x"
    assert cfg.get("nope", "nope", fallback=None) is None
    assert cfg.getint("server", "nope", fallback=0) == 0
    assert cfg.getboolean("client", "missing", fallback=True) is True


def test_has_option_and_options(cfg):
    assert cfg.has_option("client", "retries")
    assert cfg.has_option("client", "timeout")
    assert not cfg.has_option("client", "port")
    assert not cfg.has_option("missing", "port")
    assert cfg.options("client") == ["retries", "timeout", "debug"]


def test_items_include_defaults(cfg):
    assert cfg.items("client") == {"retries": "3", "timeout": "30", "debug": "off"}


def test_set_and_remove(cfg):
    cfg.set("client", "Retries", "5")
    assert cfg.getint("client", "retries") == 5
    assert cfg.remove_option("client", "retries") is True
    assert cfg.remove_option("client", "retries") is False
    with pytest.raises(TypeError):
        cfg.set("client", "retries", 5)


def test_round_trip_through_to_string(cfg):
    again = Config.from_string(cfg.to_string())
    for section in cfg.sections():
        assert again.items(section, raw=True) == cfg.items(section, raw=True)


def test_from_file(tmp_path):
    path = tmp_path / "app.ini"
    path.write_text("[app]\nname = démo\n", encoding="utf-8")
    assert Config.from_file(path).get("app", "name") == "démo"

import pytest

from inikit import Config, InterpolationDepthError
from inikit.interpolate import interpolate, references


def test_same_section_reference():
    cfg = Config.from_string("[paths]\nroot = /srv\nlogs = ${root}/logs\n")
    assert cfg.get("paths", "logs") == "/srv/logs"


def test_reference_to_default():
    cfg = Config.from_string("[DEFAULT]\nhome = /home/me\n[app]\ncache = ${home}/.cache\n")
    assert cfg.get("app", "cache") == "/home/me/.cache"


def test_cross_section_reference():
    cfg = Config.from_string("[db]\nhost = db1\n[app]\ndsn = pg://${db:host}/main\n")
    assert cfg.get("app", "dsn") == "pg://db1/main"


def test_nested_references():
    cfg = Config.from_string("[a]\nx = 1\ny = ${x}2\nz = ${y}3\n")
    assert cfg.get("a", "z") == "123"


def test_reference_names_are_case_insensitive():
    cfg = Config.from_string("[a]\nName = bob\ngreet = hi ${NAME}\n")
    assert cfg.get("a", "greet") == "hi bob"


def test_dollar_escape():
    cfg = Config.from_string("[a]\nprice = $$5 and $$${amount}\namount = 3\n")
    assert cfg.get("a", "price") == "$5 and $3"


def test_raw_and_disabled_interpolation():
    text = "[a]\nx = 1\ny = ${x}\n"
    assert Config.from_string(text).get("a", "y", raw=True) == "${x}"
    assert Config.from_string(text, interpolation=False).get("a", "y") == "${x}"


def test_cycle_is_detected():
    cfg = Config.from_string("[a]\nx = ${y}\ny = ${x}\n")
    with pytest.raises(InterpolationDepthError):
        cfg.get("a", "x")


def test_interpolate_function_with_plain_lookup():
    table = {("s", "a"): "A", ("t", "b"): "${s:a}B"}

    def lookup(section, option):
        return table[(section, option)]

    assert interpolate("<${t:b}>", "s", "opt", lookup) == "<AB>"


def test_references_lists_names():
    assert references("${a} and ${b:c} but not $$") == ["a", "b:c"]

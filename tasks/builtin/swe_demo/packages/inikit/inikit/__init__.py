"""inikit: a small INI configuration parser.

>>> from inikit import Config
>>> cfg = Config.from_string("[server]\nport = 8080\n")
>>> cfg.getint("server", "port")
8080
"""

from .config import Config
from .errors import (
    DuplicateOptionError,
    DuplicateSectionError,
    InikitError,
    InterpolationDepthError,
    InterpolationError,
    InterpolationMissingError,
    NoOptionError,
    NoSectionError,
    ParseError,
)
from .parser import DEFAULT_SECTION, parse

__all__ = [
    "Config",
    "DEFAULT_SECTION",
    "DuplicateOptionError",
    "DuplicateSectionError",
    "InikitError",
    "InterpolationDepthError",
    "InterpolationError",
    "InterpolationMissingError",
    "NoOptionError",
    "NoSectionError",
    "ParseError",
    "parse",
]

__version__ = "0.1.0"

"""semverlite: parse, compare and match semantic versions.

>>> from semverlite import Version, satisfies
>>> Version.parse("1.4.0") > Version.parse("1.4.0-rc.1")
True
>>> satisfies("1.4.2", "^1.2")
True
"""

from .errors import InvalidRange, InvalidVersion, SemverError
from .query import latest, max_satisfying, min_satisfying, sort_versions
from .ranges import Comparator, Range, satisfies
from .version import Version

__all__ = [
    "Comparator",
    "InvalidRange",
    "InvalidVersion",
    "Range",
    "SemverError",
    "Version",
    "latest",
    "max_satisfying",
    "min_satisfying",
    "satisfies",
    "sort_versions",
]

__version__ = "0.1.0"

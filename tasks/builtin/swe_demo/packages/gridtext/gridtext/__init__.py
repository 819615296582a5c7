"""gridtext: aligned text tables that know how wide characters are on screen.

>>> from gridtext import Table
>>> t = Table(["name", "qty"])
>>> t.add_row(["apple", 3])
>>> print(t.render(style="plain"))
name   qty
-----  ---
apple    3
"""

from .align import align_cell, infer_alignment
from .csvio import read_csv, to_csv, write_csv
from .formatting import format_value, is_number
from .table import STYLES, Table
from .width import char_width, display_width, truncate

__all__ = [
    "STYLES",
    "Table",
    "align_cell",
    "char_width",
    "display_width",
    "format_value",
    "infer_alignment",
    "is_number",
    "read_csv",
    "to_csv",
    "truncate",
    "write_csv",
]

__version__ = "0.1.0"

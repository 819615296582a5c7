"""CSV in and out of :class:`~gridtext.table.Table`."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from .table import Table


def read_csv(
    source: str | io.TextIOBase,
    *,
    delimiter: str = ",",
    header: bool = True,
    strict: bool = False,
) -> Table:
    """Build a table from CSV text (or an open text file).

    Without ``header`` the columns are named ``col1``, ``col2``... Short
    rows are padded with empty strings; long rows raise ``ValueError``.
    With ``strict`` short rows raise too. Blank lines are skipped.
    """
    stream = io.StringIO(source) if isinstance(source, str) else source
    records = [row for row in csv.reader(stream, delimiter=delimiter) if row]
    if not records:
        raise ValueError("no CSV data")
    if header:
        headers, body = records[0], records[1:]
    else:
        headers, body = [f"col{i}" for i in range(1, len(records[0]) + 1)], records
    table = Table(headers)
    for lineno, row in enumerate(body, start=2 if header else 1):
        if len(row) > len(headers) or (strict and len(row) < len(headers)):
            raise ValueError(f"record {lineno} has {len(row)} fields, expected {len(headers)}")
        table.add_row(row + [""] * (len(headers) - len(row)))
    return table


def to_csv(table: Table, *, delimiter: str = ",") -> str:
    """Serialise the table (header first) as CSV text with ``\\n`` line ends."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, delimiter=delimiter, lineterminator="\n")
    writer.writerow(table.headers)
    for row in table.rows:
        writer.writerow(["" if v is None else v for v in row])
    return buffer.getvalue()


def write_csv(table: Table, path: str | Path, *, delimiter: str = ",") -> None:
    with open(path, "w", encoding="utf-8", newline="") as handle:
        handle.write(to_csv(table, delimiter=delimiter))

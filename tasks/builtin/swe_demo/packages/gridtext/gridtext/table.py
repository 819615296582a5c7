"""The :class:`Table` builder and its renderers."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .align import align_cell, infer_alignment
from .formatting import format_value
from .width import display_width, truncate

STYLES = ("grid", "markdown", "plain")


class Table:
    """Rows of values under a header, rendered with aligned columns.

    ``align`` maps a column name to ``left``/``right``/``center``; columns
    not named are inferred (numbers right, everything else left).
    ``max_width`` caps every column's width; longer cells are truncated
    with an ellipsis.
    """

    def __init__(
        self,
        headers: Sequence[str],
        rows: Iterable[Sequence[Any]] = (),
        *,
        align: dict[str, str] | None = None,
        max_width: int | None = None,
        formatter: Callable[[Any], str] = format_value,
    ) -> None:
        if not headers:
            raise ValueError("a table needs at least one column")
        if len(set(headers)) != len(headers):
            raise ValueError("column names must be unique")
        if max_width is not None and max_width < 1:
            raise ValueError("max_width must be >= 1")
        self.headers = [str(h) for h in headers]
        self.align = dict(align or {})
        unknown = set(self.align) - set(self.headers)
        if unknown:
            raise KeyError(f"alignment given for unknown columns: {sorted(unknown)}")
        self.max_width = max_width
        self.formatter = formatter
        self.rows: list[list[Any]] = []
        for row in rows:
            self.add_row(row)

    # -- data ---------------------------------------------------------
    def add_row(self, values: Sequence[Any]) -> None:
        values = list(values)
        if len(values) != len(self.headers):
            raise ValueError(f"row has {len(values)} values, table has {len(self.headers)} columns")
        self.rows.append(values)

    def column(self, name: str) -> list[Any]:
        index = self._index(name)
        return [row[index] for row in self.rows]

    def sort_by(self, name: str, *, reverse: bool = False) -> None:
        """Sort rows by a column; ``None`` values go last."""
        index = self._index(name)
        present = [r for r in self.rows if r[index] is not None]
        missing = [r for r in self.rows if r[index] is None]
        present.sort(key=lambda r: r[index], reverse=reverse)
        self.rows = present + missing

    def _index(self, name: str) -> int:
        try:
            return self.headers.index(name)
        except ValueError:
            raise KeyError(name) from None

    def __len__(self) -> int:
        return len(self.rows)

    # -- layout -------------------------------------------------------
    def _cells(self) -> list[list[str]]:
        cells = []
        for row in self.rows:
            texts = [self.formatter(v).replace("\n", " ") for v in row]
            if self.max_width is not None:
                texts = [truncate(t, self.max_width) for t in texts]
            cells.append(texts)
        return cells

    def _headers(self) -> list[str]:
        if self.max_width is None:
            return list(self.headers)
        return [truncate(h, self.max_width) for h in self.headers]

    def _alignments(self) -> list[str]:
        return [
            self.align.get(name) or infer_alignment(self.column(name)) for name in self.headers
        ]

    def column_widths(self) -> list[int]:
        """Display width of every column (header included)."""
        return _widths(self._headers(), self._cells())

    # -- rendering ----------------------------------------------------
    def render(self, style: str = "grid") -> str:
        if style not in STYLES:
            raise ValueError(f"style must be one of {STYLES}, got {style!r}")
        headers, cells = self._headers(), self._cells()
        if style == "markdown":
            cells = [[c.replace("|", "\\|") for c in row] for row in cells]
        widths, aligns = _widths(headers, cells), self._alignments()

        def line(values: Sequence[str], header: bool = False) -> list[str]:
            return [
                align_cell(v, w, "left" if header and style != "markdown" else a)
                for v, w, a in zip(values, widths, aligns)
            ]

        if style == "plain":
            out = ["  ".join(line(headers, True)).rstrip()]
            out.append("  ".join("-" * w for w in widths))
            out += ["  ".join(line(row)).rstrip() for row in cells]
            return "\n".join(out)
        if style == "markdown":
            def rule(w: int, a: str) -> str:
                w = max(w, 3)
                if a == "right":
                    return "-" * (w - 1) + ":"
                if a == "center":
                    return ":" + "-" * (w - 2) + ":"
                return ":" + "-" * (w - 1)

            widths = [max(w, 3) for w in widths]
            out = ["| " + " | ".join(line(headers, True)) + " |"]
            out.append("| " + " | ".join(rule(w, a) for w, a in zip(widths, aligns)) + " |")
            out += ["| " + " | ".join(line(row)) + " |" for row in cells]
            return "\n".join(out)
        border = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
        out = [border, "| " + " | ".join(line(headers, True)) + " |", border.replace("-", "=")]
        out += ["| " + " | ".join(line(row)) + " |" for row in cells]
        out.append(border)
        return "\n".join(out)

    def __str__(self) -> str:
        return self.render()


def _widths(headers: Sequence[str], cells: Sequence[Sequence[str]]) -> list[int]:
    return [
        max([display_width(headers[i])] + [display_width(row[i]) for row in cells])
        for i in range(len(headers))
    ]

"""Column tables from CSV or Parquet files, with errors that name file, line and column.

``read_table(path)`` returns a :class:`Table`: header order, one float64 (or bool) array per
column, and a way to name a row in error messages. CSV files are parsed with the standard
``csv`` module (any line ending, CRLF included) so that every error can name the exact file
line; Parquet files with pyarrow. Cells that are empty or not numbers raise; ``nan``/``inf``
parse but are rejected by :meth:`Table.finite` for the columns a reader uses.
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from neuract.errors import SchemaError

_BOOL = {
    "true": True,
    "false": False,
    "True": True,
    "False": False,
    "TRUE": True,
    "FALSE": False,
    "1": True,
    "0": False,
}


class _LazyColumns(dict):
    """name -> array, converting a CSV column from text on first access only (a bad cell in a
    column nobody uses does not fail the read)."""

    def __init__(self, raw: dict[str, list[str]], path: str, first_line: int) -> None:
        super().__init__()
        self._raw, self._path, self._first = raw, path, first_line

    def __getitem__(self, name: str) -> np.ndarray:
        if not dict.__contains__(self, name):
            if name not in self._raw:
                raise KeyError(name)
            dict.__setitem__(self, name, _convert(self._raw[name], name, self._path, self._first))
        return dict.__getitem__(self, name)

    def __contains__(self, name: object) -> bool:
        return name in self._raw

    def __iter__(self):
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)

    def values(self):
        return [self[k] for k in self._raw]


@dataclass
class Table:
    """Columns of one file. ``columns[name]`` is (N,) float64 or bool."""

    path: str
    header: list[str]
    columns: dict[str, np.ndarray]
    first_line: int  # file line of data row 0 (CSV: 2); 0 for Parquet (rows named by index)
    n_rows: int = 0

    def __len__(self) -> int:
        return self.n_rows

    def where(self, row: int, column: str | None = None) -> str:
        """'file line L (data row r), column 'c'' for data row index ``row``."""
        loc = (
            f"line {row + self.first_line} (data row {row + 1})"
            if self.first_line
            else f"row {row}"
        )
        col = f", column {column!r}" if column is not None else ""
        return f"{self.path} {loc}{col}"

    def require(self, names: list[str], why: str = "") -> None:
        """Raise naming the first missing column and listing the columns found."""
        missing = [n for n in names if n not in self.columns]
        if missing:
            extra = f" ({why})" if why else ""
            raise SchemaError(
                f"{self.path}: missing column(s) {missing}{extra}; columns found: {self.header}"
            )

    def finite(self, name: str) -> np.ndarray:
        """Column ``name`` as float64; raise naming the first NaN/inf cell."""
        x = self.columns[name]
        bad = np.flatnonzero(~np.isfinite(x.astype(np.float64)))
        if bad.size:
            raise SchemaError(
                f"{self.where(int(bad[0]), name)}: value {x[bad[0]]}; expected a "
                f"finite number ({bad.size} non-finite cells in this column)"
            )
        return x.astype(np.float64)

    def bools(self, name: str) -> np.ndarray:
        """Column ``name`` as bool (cells 0/1/true/false); raise naming the first other cell."""
        raw = getattr(self.columns, "_raw", None)
        if raw is not None:  # CSV text
            cells = [c.strip() for c in raw[name]]
            for r, c in enumerate(cells):
                if c not in _BOOL and c not in ("0.0", "1.0"):
                    raise SchemaError(
                        f"{self.where(r, name)}: value {c!r}; expected 0/1 or true/false"
                    )
            return np.array([_BOOL.get(c, c == "1.0") for c in cells], dtype=bool)
        x = self.columns[name]
        if x.dtype != bool:
            bad = np.flatnonzero(~np.isin(x, (0.0, 1.0)))
            if bad.size:
                raise SchemaError(
                    f"{self.where(int(bad[0]), name)}: value {x[bad[0]]}; "
                    "expected 0/1 or true/false"
                )
        return x.astype(bool)

    def time(self, name: str, scale: float = 1.0) -> np.ndarray:
        """Timestamps from column ``name`` times ``scale``; strictly increasing or raise."""
        t = self.finite(name) * scale
        d = np.diff(t)
        bad = np.flatnonzero(d <= 0)
        if bad.size:
            r = int(bad[0]) + 1
            kind = "duplicated" if d[bad[0]] == 0 else "non-monotonic (decreasing)"
            raise SchemaError(
                f"{self.where(r, name)}: {kind} timestamp {float(t[r])!r} after "
                f"{float(t[r - 1])!r}; expected strictly increasing time "
                f"({bad.size} such rows)"
            )
        return t


def _convert(cells: list[str], name: str, path: str, first_line: int) -> np.ndarray:
    try:
        return np.array(cells, dtype=np.float64)
    except ValueError:
        pass
    if all(c in _BOOL for c in cells):
        return np.array([_BOOL[c] for c in cells], dtype=bool)
    for r, c in enumerate(cells):
        try:
            float(c)
        except ValueError:
            what = "empty cell" if not c.strip() else f"value {c!r}"
            raise SchemaError(
                f"{path} line {r + first_line} (data row {r + 1}), column "
                f"{name!r}: {what}; expected a number"
            ) from None
    raise AssertionError("unreachable")


def read_csv(path: str | os.PathLike, delimiter: str = ",") -> Table:
    """Read a CSV file with a header row (see module doc)."""
    p = Path(path)
    src = str(p)
    if not p.is_file():
        raise SchemaError(f"{src}: file not found")
    with open(p, newline="", encoding="utf-8-sig") as fh:
        try:
            rows = list(csv.reader(fh, delimiter=delimiter))
        except csv.Error as exc:
            raise SchemaError(f"{src}: malformed CSV: {exc}") from None
        except UnicodeDecodeError as exc:
            bad = exc.object[exc.start:exc.start + 1].hex()
            raise SchemaError(
                f"{src}: not a text file (byte 0x{bad} is not valid UTF-8); expected a CSV "
                "text file with a header row"
            ) from None
    while rows and not any(c.strip() for c in rows[-1]):  # trailing blank lines
        rows.pop()
    if not rows:
        raise SchemaError(f"{src}: empty file; expected a header row and data rows")
    header = [h.strip() for h in rows[0]]
    seen: set[str] = set()
    for i, h in enumerate(header):
        if not h:
            raise SchemaError(
                f"{src} line 1: header field {i + 1} is empty; every column needs a name"
            )
        if h in seen:
            raise SchemaError(f"{src} line 1: column name {h!r} occurs twice")
        seen.add(h)
    body = rows[1:]
    if not body:
        raise SchemaError(f"{src}: header only, no data rows")
    n = len(header)
    for r, row in enumerate(body):
        if len(row) != n:
            hint = " (truncated file?)" if len(row) < n and r == len(body) - 1 else ""
            raise SchemaError(
                f"{src} line {r + 2} (data row {r + 1}): {len(row)} fields; "
                f"expected {n} like the header{hint}"
            )
    raw = {h: [row[j] for row in body] for j, h in enumerate(header)}
    return Table(src, header, _LazyColumns(raw, src, 2), first_line=2, n_rows=len(body))


def read_parquet(path: str | os.PathLike) -> Table:
    """Read a Parquet file: every column must be numeric or boolean and scalar."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    p = Path(path)
    src = str(p)
    if not p.is_file():
        raise SchemaError(f"{src}: file not found")
    if p.stat().st_size == 0:
        raise SchemaError(f"{src}: empty file; expected a Parquet table")
    try:
        table = pq.read_table(p)
    except (pa.ArrowInvalid, OSError) as exc:
        raise SchemaError(f"{src}: not a readable Parquet file (truncated?): {exc}") from None
    if table.num_rows == 0:
        raise SchemaError(f"{src}: no data rows")
    cols: dict[str, np.ndarray] = {}
    for name in table.column_names:
        col = table.column(name)
        t = col.type
        if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)):
            continue  # non-numeric columns are skipped; `require` reports them if needed
        if col.null_count:
            r = int(np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))[0])
            raise SchemaError(f"{src} row {r}, column {name!r}: null value; expected a number")
        arr = col.to_numpy()
        cols[name] = arr.astype(bool if pa.types.is_boolean(t) else np.float64)
    return Table(src, list(table.column_names), cols, first_line=0, n_rows=table.num_rows)


def read_table(path: str | os.PathLike) -> Table:
    """CSV or Parquet by file suffix (``.parquet``/``.pq`` -> Parquet, else CSV)."""
    suffix = Path(path).suffix.lower()
    if suffix in (".parquet", ".pq"):
        return read_parquet(path)
    return read_csv(path, delimiter="\t" if suffix == ".tsv" else ",")


__all__ = ["Table", "read_csv", "read_parquet", "read_table"]

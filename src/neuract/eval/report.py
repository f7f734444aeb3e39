"""Run reports: Markdown plus a self-contained HTML file (tables, embedded PNG figures).

>>> rep = Report("NeuralActuator on SO-101 twin")
>>> rep.add("Open-loop rollouts", rollout_table(records), "Simulator mode: ...")
>>> rep.add("Rollouts", rollout_figure(t, q, {"neuralactuator": q_sim}, joint_names))
>>> md, html = write_report(run_dir, rep)

Every file is written atomically (temporary sibling + rename) into ``run_dir``: the Markdown
file links its figures as PNG files under ``figures/``; the HTML embeds them as base64 so it
can be mailed or archived alone, each shown at the width it was drawn for (a full-width figure
at the page's content width, :mod:`neuract.eval.figures`). Figures are drawn with matplotlib
(the ``viz`` extra) without pyplot, so no global backend state is touched. A table without
rows is left out, and so is a section left without items.
"""

from __future__ import annotations

import base64
import html
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from neuract.atomic import atomic_path, write_text
from neuract.errors import ConfigError, SchemaError
from neuract.eval.figures import (
    CSS_PX_PER_IN,
    PAGE_WIDTH_PX,
    Figure,
    confusion_figure,
    force_figure,
    rollout_figure,
)

__all__ = [
    "Figure",
    "Report",
    "Table",
    "confusion_figure",
    "estimator_table",
    "force_figure",
    "records_table",
    "rollout_figure",
    "rollout_table",
    "write_report",
]


# ----------------------------------------------------------------------------- items
@dataclass
class Table:
    """A titled table; cells may be numbers, strings or None (shown as a dash)."""

    title: str
    columns: list[str]
    rows: list[list[Any]]
    note: str = ""

    def __post_init__(self) -> None:
        for i, r in enumerate(self.rows):
            if len(r) != len(self.columns):
                raise SchemaError(f"table {self.title!r}: row {i} has {len(r)} cells; "
                                  f"expected {len(self.columns)} ({self.columns})")


def _fmt(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, bool | np.bool_):
        return "yes" if v else "no"
    if isinstance(v, int | np.integer):
        return str(int(v))
    if isinstance(v, float | np.floating):
        v = float(v)
        if not math.isfinite(v):
            return str(v)
        if v != 0 and (abs(v) >= 1e5 or abs(v) < 1e-3):
            return f"{v:.3e}"
        return f"{v:.4g}" if abs(v) >= 100 else f"{v:.3f}"
    return str(v)


def _get(rec: Mapping[str, Any], path: str) -> Any:
    cur: Any = rec
    for part in path.split("."):
        if not isinstance(cur, Mapping) or part not in cur:
            return None
        cur = cur[part]
    return cur


def records_table(records: Iterable[Mapping[str, Any]], columns: Mapping[str, str] | Sequence[str],
                  title: str, note: str = "") -> Table:
    """Table of result records; columns are dotted key paths (``"force.contact"``), given as a
    list or as a mapping path -> header. Missing keys show as a dash."""
    cols = dict(columns) if isinstance(columns, Mapping) else {c: c for c in columns}
    rows = [[_get(r, p) for p in cols] for r in records]
    return Table(title, list(cols.values()), rows, note)


def rollout_table(records: Sequence[Mapping[str, Any]], title: str = "Open-loop rollout joint "
                  "MAE [deg]", note: str = "") -> Table:
    """One row per (model, horizon) from :func:`neuract.eval.evaluate_rollouts` records."""
    joints: list[str] = []
    for r in records:
        for j in r.get("joint_mae_deg") or {}:
            if j not in joints:
                joints.append(j)
    cols = {"model": "model", "mode": "mode", "horizon": "horizon", "n_windows": "windows"}
    cols.update({f"joint_mae_deg.{j}": j for j in joints})
    cols.update({"arm_mean_deg": "arm mean", "arm_max_deg": "arm worst"})
    return records_table(records, cols, title, note)


def estimator_table(records: Sequence[Mapping[str, Any]], title: str = "Estimation "
                    "(estimator mode)", note: str = "") -> Table:
    """One row per model from :func:`neuract.eval.evaluate_estimator` records."""
    cols = {"model": "model", "mode": "mode", "torque_rmse_mean": "torque RMSE [N m]",
            "force.contact": "force MAE contact [N]",
            "force.no_contact": "force MAE no contact [N]", "gate.f1": "gate F1",
            "gate.precision": "gate precision", "gate.recall": "gate recall",
            "gate.latency_mean_s": "gate latency [s]", "condition.accuracy": "condition acc.",
            "condition.auc": "condition AUC"}
    return records_table(records, cols, title, note)


# ---------------------------------------------------------------------------- report
@dataclass
class Report:
    """Sections of tables, figures and paragraphs, rendered to Markdown and HTML."""

    title: str
    intro: str = ""
    sections: list[tuple[str, list[Table | Figure | str]]] = field(default_factory=list)

    def add(self, heading: str, *items: Table | Figure | str) -> Report:
        """Append items to the section ``heading`` (created on first use); tables without
        rows are dropped (and a section is not created for nothing)."""
        items = tuple(it for it in items if not (isinstance(it, Table) and not it.rows))
        if not items:
            return self
        for h, lst in self.sections:
            if h == heading:
                lst.extend(items)
                return self
        self.sections.append((heading, list(items)))
        return self

    def figures(self) -> list[Figure]:
        return [it for _, items in self.sections for it in items if isinstance(it, Figure)]

    # -- rendering -------------------------------------------------------------------
    def to_markdown(self, figure_paths: Mapping[int, str] | None = None) -> str:
        """Markdown text; ``figure_paths`` maps ``id(figure)`` to a relative PNG path."""
        out = [f"# {self.title}", ""]
        if self.intro:
            out += [self.intro, ""]
        for heading, items in self.sections:
            out += [f"## {heading}", ""]
            for it in items:
                if isinstance(it, Table):
                    out += [f"**{it.title}**", ""] if it.title else []
                    out += ["| " + " | ".join(_md_cell(c) for c in it.columns) + " |",
                            "|" + "---|" * len(it.columns)]
                    out += ["| " + " | ".join(_md_cell(_fmt(v)) for v in r) + " |"
                            for r in it.rows]
                    out += ([""] + [it.note] if it.note else []) + [""]
                elif isinstance(it, Figure):
                    path = (figure_paths or {}).get(id(it))
                    if path:
                        out += [f"![{it.title}]({path})", ""]
                    if it.caption:
                        out += [f"*{it.caption}*", ""]
                else:
                    out += [str(it), ""]
        return "\n".join(out).rstrip() + "\n"

    def to_html(self) -> str:
        """Self-contained HTML (inline CSS, figures as base64 data URIs)."""
        e = html.escape
        body = [f"<h1>{e(self.title)}</h1>"]
        if self.intro:
            body.append(f"<p>{e(self.intro)}</p>")
        for heading, items in self.sections:
            body.append(f"<h2>{e(heading)}</h2>")
            for it in items:
                if isinstance(it, Table):
                    head = "".join(f"<th>{e(str(c))}</th>" for c in it.columns)
                    rows = "".join("<tr>" + "".join(_td(v) for v in r) + "</tr>"
                                   for r in it.rows)
                    note = f"<p class='note'>{e(it.note)}</p>" if it.note else ""
                    cap = f"<caption>{e(it.title)}</caption>" if it.title else ""
                    body.append(f"<div class='wide'><table>{cap}<thead><tr>{head}</tr></thead>"
                                f"<tbody>{rows}</tbody></table></div>{note}")
                elif isinstance(it, Figure):
                    b64 = base64.b64encode(it.png).decode("ascii")
                    cap = f"<figcaption>{e(it.caption)}</figcaption>" if it.caption else ""
                    px = round(it.width_in * CSS_PX_PER_IN)
                    body.append(f"<figure><img alt='{e(it.title)}' width='{px}' "
                                f"data-width-in='{it.width_in:.6g}' "
                                f"data-min-font-pt='{it.min_font_pt:.3g}' "
                                f"src='data:image/png;base64,{b64}'/>{cap}</figure>")
                else:
                    body.append(f"<p>{e(str(it))}</p>")
        return (
            "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            f"<title>{e(self.title)}</title><style>{_CSS}</style></head><body>\n"
            + "\n".join(body) + "\n</body></html>\n"
        )


_CSS = ("body{font-family:system-ui,sans-serif;max-width:" + str(PAGE_WIDTH_PX) + "px;"
        "margin:2em auto;padding:0 1em;color:#222;line-height:1.4}"
        "table{border-collapse:collapse;margin:1em 0;font-size:0.9em}"
        ".wide{overflow-x:auto;max-width:100%}"
        "caption{font-weight:bold;text-align:left;padding:0.3em 0}"
        "th,td{border:1px solid #ccc;padding:0.25em 0.6em;text-align:right}"
        "th{background:#f3f3f3}td:first-child,th:first-child,td.txt{text-align:left}"
        "figure{margin:1.5em 0}img{max-width:100%;height:auto;display:block}"
        ".note,figcaption{color:#555;font-size:0.9em}")


def _td(v: Any) -> str:
    """A table cell: numbers (and dashes) right-aligned, text left-aligned (class txt)."""
    txt = isinstance(v, str) and not isinstance(v, bool)
    return (f"<td class='txt'>{html.escape(v)}</td>" if txt
            else f"<td>{html.escape(_fmt(v))}</td>")


def _md_cell(s: str) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def _slug(s: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", s.lower()).strip("_") or "figure"


def write_report(run_dir: str | os.PathLike, report: Report, stem: str = "report"
                 ) -> tuple[Path, Path]:
    """Write ``<stem>.md`` (+ ``figures/*.png``) and ``<stem>.html`` into ``run_dir``.

    Each file is written atomically; existing report files of the same stem are replaced.
    Returns the Markdown and HTML paths.
    """
    run_dir = Path(run_dir)
    if run_dir.exists() and not run_dir.is_dir():
        raise ConfigError(f"run directory {str(run_dir)!r} exists and is not a directory")
    run_dir.mkdir(parents=True, exist_ok=True)
    paths: dict[int, str] = {}
    used: set[str] = set()
    for i, fig in enumerate(report.figures()):
        name = f"{stem}_{i:02d}_{_slug(fig.title)}.png"
        while name in used:
            name = f"_{name}"
        used.add(name)
        with atomic_path(run_dir / "figures" / name) as tmp:
            tmp.write_bytes(fig.png)
        paths[id(fig)] = f"figures/{name}"
    md, htm = run_dir / f"{stem}.md", run_dir / f"{stem}.html"
    write_text(md, report.to_markdown(paths))
    write_text(htm, report.to_html())
    return md, htm

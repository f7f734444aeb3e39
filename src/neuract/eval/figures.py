"""The run report's figures (matplotlib, without pyplot, so no global backend state is touched):
open-loop rollouts, force traces, the condition confusion matrix.

Sized for the HTML report: a full-width figure is drawn at the report's content width
(:data:`PAGE_WIDTH_PX` CSS pixels), so its text shows at its own point size (no text below
:data:`SMALL_FONT_PT`); legends sit outside the axes; the y-range of a panel is set by the
reference (measured / label) and the series closest to it (:func:`series_that_matter`), so
that a diverging baseline does not flatten the lines that matter: it is drawn dashed,
clipped, and the caption names it.
"""

from __future__ import annotations

import contextlib
import io
import math
import textwrap
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from neuract.errors import ConfigError, SchemaError

__all__ = ["CSS_PX_PER_IN", "FULL_WIDTH_IN", "PAGE_WIDTH_PX", "SMALL_FONT_PT", "Figure",
           "clipped_series", "confusion_figure", "force_figure", "rollout_figure",
           "series_that_matter", "y_range"]

PAGE_WIDTH_PX = 1100
"""the HTML report's content width [CSS px]"""
CSS_PX_PER_IN = 96
FULL_WIDTH_IN = PAGE_WIDTH_PX / CSS_PX_PER_IN
"""a full-width figure's width [in]: shown at the content width, its text keeps its size"""
FONT_PT = 12.0
SMALL_FONT_PT = 11.0
"""the smallest text in a figure (tick labels, legends) [pt at the figure's own size]"""
_DPI = 144  # 1.5 image pixels per CSS pixel: sharp on high-density screens too
_RC = {"font.size": FONT_PT, "axes.titlesize": FONT_PT, "axes.labelsize": FONT_PT,
       "xtick.labelsize": SMALL_FONT_PT, "ytick.labelsize": SMALL_FONT_PT,
       "legend.fontsize": SMALL_FONT_PT, "figure.titlesize": FONT_PT + 1}


@dataclass
class Figure:
    """A titled PNG image, drawn ``width_in`` inches wide (shown at ``width_in`` * 96 CSS px,
    at most the page's width); ``min_font_pt``: its smallest text at that size (0: unknown)."""

    title: str
    png: bytes
    caption: str = ""
    width_in: float = FULL_WIDTH_IN
    min_font_pt: float = 0.0


@contextlib.contextmanager
def _style() -> Iterator[None]:
    """The figures' font sizes, for the drawing inside (matplotlib's settings restored after)."""
    try:
        import matplotlib as mpl
    except ImportError:  # pragma: no cover - depends on the install
        raise ConfigError("report figures need matplotlib; install neuract[viz]") from None
    with mpl.rc_context(_RC):
        yield


def _new_figure(width: float = FULL_WIDTH_IN, height: float = 4.0):
    from matplotlib.figure import Figure as MplFigure

    return MplFigure(figsize=(width, height), layout="constrained")


def _figure(fig, title: str, caption: str) -> Figure:
    """The drawn figure as a :class:`Figure` (PNG, width, smallest text)."""
    from matplotlib.text import Text

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=_DPI)
    sizes = [t.get_fontsize() for t in fig.findobj(Text)
             if t.get_visible() and t.get_text().strip()]
    return Figure(title, buf.getvalue(), caption, float(fig.get_figwidth()),
                  float(min(sizes)) if sizes else 0.0)


# ------------------------------------------------------------------------ y-ranges
def _mean_abs(ref: np.ndarray, s: np.ndarray, rows: np.ndarray) -> float:
    d = np.abs(s[rows] - ref[rows])
    return float(d.mean()) if d.size and np.isfinite(d).all() else math.inf


def series_that_matter(ref: Any, series: Mapping[str, Any], k: int = 3, factor: float = 3.0,
                       rows: Any = None) -> list[str]:
    """The names of the series that set a plot's y-range: of the ``k`` closest to ``ref``
    (mean absolute difference over ``rows``, a bool mask of the first axis; default: where
    ``ref`` is finite), those within ``factor`` times the closest one's difference (plus 2 %
    of ``ref``'s span, so that near-perfect series do not exclude good ones). A series with
    a non-finite value on those rows never matters. Closest first."""
    r = np.asarray(ref, dtype=np.float64)
    if rows is None:
        rows = np.isfinite(r).reshape(r.shape[0], -1).all(1)
    rows = np.asarray(rows, bool)
    err = {n: _mean_abs(r, np.asarray(s, dtype=np.float64), rows) for n, s in series.items()}
    ranked = sorted((e, i, n) for i, (n, e) in enumerate(err.items()) if math.isfinite(e))
    if not ranked:
        return []
    fin = r[rows][np.isfinite(r[rows])]
    tol = 0.02 * float(np.ptp(fin)) if fin.size else 0.0
    best = ranked[0][0]
    return [n for e, _, n in ranked[:k] if e <= factor * best + tol]


def y_range(ref: Any, series: Sequence[Any] = (), pad: float = 0.08, min_span: float = 1.0
            ) -> tuple[float, float]:
    """(low, high) y-limits around the finite values of ``ref`` and ``series``, padded by
    ``pad`` of their span, which is at least ``min_span`` (so that a joint that hardly moves
    does not magnify its hundredths of a degree)."""
    vals = [np.asarray(ref, dtype=np.float64).ravel()]
    vals += [np.asarray(s, dtype=np.float64).ravel() for s in series]
    v = np.concatenate(vals)
    v = v[np.isfinite(v)]
    if not v.size:
        return -1.0, 1.0
    lo, hi = float(v.min()), float(v.max())
    if hi - lo < min_span:
        mid = 0.5 * (lo + hi)
        lo, hi = mid - 0.5 * min_span, mid + 0.5 * min_span
    span = hi - lo
    return lo - pad * span, hi + pad * span


def clipped_series(series: Mapping[str, Any], lo: float, hi: float) -> list[str]:
    """The names of the series with a finite value outside [lo, hi] (drawn, cut off there)."""
    out = []
    for n, s in series.items():
        v = np.asarray(s, dtype=np.float64)
        v = v[np.isfinite(v)]
        if v.size and (v.min() < lo or v.max() > hi):
            out.append(n)
    return out


def _clip_note(off: Sequence[str], err: Mapping[str, float], unit: str, keep: Sequence[str],
               ref: str) -> str:
    """The caption's sentence on the series cut off by the y-range ('' if none)."""
    if not off:
        return ""
    what = ", ".join(f"{n} (mean error {err[n]:.3g} {unit})" if math.isfinite(err[n])
                     else f"{n} (non-finite)" for n in off)
    by = f"the {ref}" + (f" and {', '.join(keep)}" if keep else "")
    return (f"The y-range is set by {by}; leaving it, drawn dashed and cut off at the panel's "
            f"edge: {what}.")


def _style_of(name: str, off: Sequence[str]) -> dict[str, Any]:
    """A series' line: dashed where it leaves the panel's y-range."""
    return {"lw": 1.0, "ls": "--", "alpha": 0.8} if name in off else {"lw": 1.4}


# ------------------------------------------------------------------------- figures
def rollout_figure(t: Any, q_meas: Any, q_sim: Mapping[str, Any], joint_names: Sequence[str],
                   title: str = "Open-loop rollout", caption: str = "",
                   ncols: int | None = None) -> Figure:
    """Measured vs simulated joint positions [deg] over time, one panel per joint (two
    columns from four joints on), one legend below; the y-range from the measured trace and
    the models closest to it (:func:`series_that_matter`), the others cut off and named in
    the caption.

    t: (T,) [s]; q_meas: (T, n) [rad]; q_sim: model -> (T, n) [rad] (same samples).
    """
    t = np.asarray(t, dtype=np.float64)
    q = np.degrees(np.asarray(q_meas, dtype=np.float64))
    nj = len(joint_names)
    if q.shape != (t.shape[0], nj):
        raise SchemaError(f"q_meas has shape {q.shape}; expected ({t.shape[0]}, {nj})")
    sims = {}
    for model, qs in q_sim.items():
        qs = np.asarray(qs, dtype=np.float64)
        if qs.shape != q.shape:
            raise SchemaError(f"q_sim[{model!r}] has shape {qs.shape}; expected {q.shape}")
        sims[model] = np.degrees(qs)
    keep = series_that_matter(q, sims)
    rows = np.isfinite(q).all(1)
    err = {m: _mean_abs(q, s, rows) for m, s in sims.items()}
    ncols = ncols or (2 if nj >= 4 else 1)
    nrows = math.ceil(nj / ncols)
    lims = [y_range(q[:, j], [sims[m][:, j] for m in keep], min_span=5.0) for j in range(nj)]
    off = [m for m, s in sims.items()
           if any(clipped_series({m: s[:, j]}, *lims[j]) for j in range(nj))]
    with _style():
        fig = _new_figure(height=2.2 * nrows + 1.2)
        ax = fig.subplots(nrows, ncols, squeeze=False, sharex=True)
        for j, name in enumerate(joint_names):
            a = ax.flat[j]
            a.plot(t, q[:, j], color="black", lw=1.6, label="measured")
            for i, (model, qs) in enumerate(sims.items()):  # the first-named on top
                a.plot(t, qs[:, j], color=f"C{i}", label=model, zorder=3 + len(sims) - i,
                       **_style_of(model, off))
            a.set_ylim(*lims[j])
            a.set_title(name, loc="left")
            a.set_ylabel("[deg]")
        for a in ax.flat[nj:]:
            a.set_visible(False)
        for c in range(ncols):  # the lowest visible panel of each column
            col = [a for a in ax[:, c] if a.get_visible()]
            if col:
                col[-1].set_xlabel("time [s]")
                col[-1].xaxis.set_tick_params(labelbottom=True)
        h, lab = ax.flat[0].get_legend_handles_labels()
        fig.legend(h, lab, loc="outside lower center", ncols=min(len(lab), 5))
        fig.suptitle(title)
        note = _clip_note(off, err, "deg", keep, "measured trace")
        return _figure(fig, title, " ".join(s for s in (caption, note) if s))


def force_figure(t: Any, f_true: Any, f_est: Mapping[str, Any], contact: Any = None,
                 mask: Any = None, title: str = "End-effector force", caption: str = "",
                 groups: Sequence[tuple[str, Sequence[str]]] | None = None) -> Figure:
    """Force components [N] over time: the label (where ``mask``) against the estimates,
    contact shaded. One row of three panels (x, y, z) per group of estimators, each row with
    its legend below it; a panel's y-range from the label and the row's estimates closest to
    it (:func:`series_that_matter`), the others cut off and named in the caption.

    t: (T,) [s]; f_true: (T, 3) [N]; f_est: model -> (T, 3) [N]; contact, mask: (T,) bool;
    groups: (row title, models) per row; default: the models two to a row, in order.
    """
    t = np.asarray(t, dtype=np.float64)
    f = np.asarray(f_true, dtype=np.float64)
    if f.shape != (t.shape[0], 3):
        raise SchemaError(f"f_true has shape {f.shape}; expected ({t.shape[0]}, 3)")
    if mask is not None:
        f = np.where(np.asarray(mask, bool)[:, None], f, np.nan)  # gaps where unlabelled
    est = {}
    for model, fe in f_est.items():
        fe = np.asarray(fe, dtype=np.float64)
        if fe.shape != (t.shape[0], 3):
            raise SchemaError(f"f_est[{model!r}] has shape {fe.shape}; expected "
                              f"({t.shape[0]}, 3)")
        est[model] = fe
    names = list(est)
    if groups is None:
        groups = [("", names[i:i + 2]) for i in range(0, len(names), 2)] or [("", [])]
    for _, g in groups:
        for m in g:
            if m not in est:
                raise SchemaError(f"force_figure group names {m!r}, which f_est lacks "
                                  f"({names})")
    colour = {m: f"C{i}" for i, m in enumerate(names)}
    rows = np.isfinite(f).all(1)
    err = {m: _mean_abs(f, s, rows) for m, s in est.items()}
    c = None if contact is None else np.asarray(contact, bool)
    off: list[str] = []
    keep_all: list[str] = []
    with _style():
        fig = _new_figure(height=2.9 * len(groups) + 0.5)
        sfs = np.atleast_1d(fig.subfigures(len(groups), 1))
        for sf, (label, members) in zip(sfs, groups):
            ax = sf.subplots(1, 3, squeeze=False)[0]
            keep = series_that_matter(f, {m: est[m] for m in members}, rows=rows)
            keep_all += keep
            lims = [y_range(f[:, i], [est[m][:, i] for m in keep]) for i in range(3)]
            row_off = [m for m in members
                       if any(clipped_series({m: est[m][:, i]}, *lims[i]) for i in range(3))]
            off += row_off
            for i, axis in enumerate("xyz"):
                a = ax[i]
                if c is not None:
                    a.fill_between(t, 0, 1, where=c, color="0.85", label="contact",
                                   transform=a.get_xaxis_transform())
                a.plot(t, f[:, i], color="black", lw=1.6, label="label")
                for m in members:
                    a.plot(t, est[m][:, i], color=colour[m], label=m, **_style_of(m, row_off))
                a.set_ylim(*lims[i])
                a.set_title(f"f_{axis} [N]", loc="left")
                a.set_xlabel("time [s]")
            if label:
                sf.suptitle(label, x=0.01, ha="left", fontsize=FONT_PT)
            h, lab = ax[0].get_legend_handles_labels()
            sf.legend(h, lab, loc="outside lower center", ncols=min(len(lab), 4))
        fig.suptitle(title)
        note = _clip_note(off, err, "N", keep_all, "label")
        return _figure(fig, title, " ".join(s for s in (caption, note) if s))


def confusion_figure(cm: Any, class_names: Sequence[str] = ("normal", "degraded"),
                     title: str = "Condition confusion matrix", caption: str = "") -> Figure:
    """Confusion matrix (rows true, columns predicted) as an annotated image."""
    cm = np.asarray(cm)
    k = len(class_names)
    if cm.shape != (k, k):
        raise SchemaError(f"confusion matrix has shape {cm.shape}; expected ({k}, {k}) for "
                          f"classes {list(class_names)}")
    with _style():
        fig = _new_figure(width=5.0, height=4.4)
        a = fig.subplots()
        a.imshow(cm, cmap="Blues")
        for i in range(k):
            for j in range(k):
                a.text(j, i, str(cm[i, j]), ha="center", va="center", fontsize=FONT_PT + 2,
                       color="white" if cm[i, j] > cm.max() / 2 else "black")
        a.set_xticks(range(k), class_names)
        a.set_yticks(range(k), class_names)
        a.set_xlabel("predicted")
        a.set_ylabel("true")
        a.set_title("\n".join(textwrap.wrap(title, 44)))  # a narrow figure
        return _figure(fig, title, caption)

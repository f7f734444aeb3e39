"""Run report: both files written atomically, tables in HTML and Markdown, figures embedded."""

from __future__ import annotations

import base64
import re

import numpy as np
import pytest

from neuract.errors import SchemaError
from neuract.eval import (
    Report,
    Table,
    confusion_figure,
    estimator_table,
    force_figure,
    rollout_figure,
    rollout_table,
    write_report,
)

pytest.importorskip("matplotlib")

ROLLOUTS = [
    {"mode": "simulator", "model": "neuralactuator", "protocol": "open_loop_rollout",
     "horizon": 10, "n_windows": 40, "joint_mae_deg": {"j1": 0.123456, "gripper": 0.5},
     "arm_mean_deg": 0.123456, "arm_max_deg": 0.123456},
    {"mode": "simulator", "model": "<servo>", "protocol": "open_loop_rollout", "horizon": 600,
     "n_windows": 0, "joint_mae_deg": None, "arm_mean_deg": None, "arm_max_deg": None},
]
ESTIMATES = [{"mode": "estimator", "model": "momentum_observer", "torque_rmse_mean": None,
              "force": {"contact": 0.41, "no_contact": 0.05}, "gate": None,
              "condition": {"accuracy": 0.97, "auc": 0.99}}]


def _report() -> Report:
    t = np.linspace(0, 2, 100)
    q = np.stack([np.sin(t), 0.1 * t], 1)
    f = np.zeros((100, 3))
    f[40:60, 2] = -3.0
    contact = f[:, 2] < 0
    rep = Report("Twin evaluation", intro="All numbers on held-out twin episodes.")
    rep.add("Rollouts", rollout_table(ROLLOUTS, note="simulator mode"),
            rollout_figure(t, q, {"neuralactuator": q + 0.01}, ["j1", "gripper"]))
    rep.add("Force", estimator_table(ESTIMATES),
            force_figure(t, f, {"observer": f + 0.1}, contact, mask=np.ones(100, bool)))
    rep.add("Condition", confusion_figure([[50, 2], [1, 47]]), "Random forest baseline.")
    return rep


def test_writes_markdown_and_html_with_tables(tmp_path):
    run = tmp_path / "run"
    md, html = write_report(run, _report())
    assert md.is_file() and html.is_file()
    h = html.read_text()
    assert h.count("<table>") == 2
    assert "<th>j1</th>" in h and "<td>0.123</td>" in h and "<td>—</td>" in h
    assert "&lt;servo&gt;" in h and "<servo>" not in h  # escaped
    imgs = re.findall(r"data:image/png;base64,([A-Za-z0-9+/=]+)", h)
    assert len(imgs) == 3
    assert all(base64.b64decode(s).startswith(b"\x89PNG") for s in imgs)
    m = md.read_text()
    assert "| model | mode | horizon | windows | j1 | gripper | arm mean | arm worst |" in m
    assert "| neuralactuator | simulator | 10 | 40 | 0.123 | 0.500 | 0.123 | 0.123 |" in m
    links = re.findall(r"!\[[^]]*\]\((figures/[^)]+\.png)\)", m)
    assert len(links) == 3 and all((run / p).is_file() for p in links)
    assert not [p for p in run.rglob("*") if p.name.endswith(".tmp")]
    # a second write replaces the files
    rep = Report("Second")
    rep.add("Only text", "nothing else")
    write_report(run, rep)
    assert "Second" in md.read_text() and "Second" in html.read_text()


def test_bad_shapes_raise():
    with pytest.raises(SchemaError, match="row 0"):
        Table("t", ["a", "b"], [[1]])
    with pytest.raises(SchemaError, match="q_meas"):
        rollout_figure(np.arange(5), np.zeros((5, 3)), {}, ["a", "b"])
    with pytest.raises(SchemaError, match="confusion"):
        confusion_figure(np.zeros((3, 3)))

"""``neuract estimate --live``: the streaming estimator on the live bus.

Each sample ``neuract record`` reads (:func:`neuract.record.session.record_session`, the
options under ``--bus.*``) goes through a :class:`~neuract.estimate.stream.StreamingEstimator`
as it arrives: joint torque, end-effector force, contact probability and motor condition per
sample, shown as a live table (rich) and written, episode by episode, beside the telemetry:
the telemetry dataset at ``--bus.out`` (as ``neuract record`` writes it), the estimates at
``--out`` (one parquet file per episode, columns as ``neuract estimate`` writes them, renamed
into place at the episode's end; ``summary.json`` rewritten after each).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from neuract.atomic import atomic_path, check_dest, write_json
from neuract.errors import ConfigError
from neuract.pipeline.checkpoints import load_model
from neuract.pipeline.streaming import ESTIMATE_DEST

KEYS = ("tau", "ee_force", "contact_prob", "condition_prob_joint", "condition_prob")


def live_table(joints, out: dict[str, Any], t: float):
    """A rich table of one sample's estimates."""
    from rich.table import Table

    tab = Table(title=f"live estimates, t = {t:7.2f} s")
    tab.add_column("joint")
    tab.add_column("torque [N m]", justify="right")
    tab.add_column("degraded prob.", justify="right")
    for j, name in enumerate(joints):
        tab.add_row(name, f"{out['tau'][j]:+.3f}", f"{out['condition_prob_joint'][j]:.2f}")
    f = out["ee_force"]
    tab.add_row("end effector", f"force [{f[0]:+.2f} {f[1]:+.2f} {f[2]:+.2f}] N",
                f"contact {out['contact_prob']:.2f}")
    return tab


def run_live(cfg) -> dict[str, Any]:
    """``estimate --live`` (``cfg``: an :class:`~neuract.pipeline.estimate_verb.EstimateConfig`)."""
    import torch

    from neuract.estimate.stream import StreamingEstimator
    from neuract.record.session import record_session

    torch.set_num_threads(1)
    bus = cfg.bus
    out_dir = Path(cfg.out)
    check_dest(out_dir, cfg.overwrite, **ESTIMATE_DEST)
    model = load_model(Path(cfg.checkpoint))
    if model.cfg.mode != "estimator":
        raise ConfigError(f"--checkpoint {str(cfg.checkpoint)!r} is a {model.cfg.mode}-mode "
                          "model; --live estimates need an estimator-mode checkpoint")
    est = StreamingEstimator(model, condition_tau_s=cfg.condition_tau_s,
                             reference_dt=1.0 / bus.rate_hz)
    if "q_goal" in est.inputs and not (bus.leader_port or bus.excite_rad):
        raise ConfigError("the checkpoint reads the goals (q_goal): give --bus.leader-port "
                          "(teleoperation) or --bus.excite-rad, so that goals are sent")
    if out_dir.exists() and cfg.overwrite:
        import shutil
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {"mode": "estimator", "live": True,
                               "checkpoint": str(cfg.checkpoint), "telemetry": str(bus.out),
                               "episodes": []}
    rows: list[dict[str, Any]] = []
    state: dict[str, Any] = {"next": 0.0, "live": None}
    joints: list[str] = []

    def on_episode(event: str, index: int, tr) -> None:
        if event == "begin":
            est.reset()
            rows.clear()
            return
        name = f"episode_{index:06d}"
        if rows:
            table = _table(rows, joints or [f"j{j}" for j in range(len(rows[0]["tau"]))])
            with atomic_path(out_dir / f"{name}.parquet") as tmp:
                pq.write_table(table, tmp)
            v = np.array([r["valid"] for r in rows])
            cp = np.array([r["contact_prob"] for r in rows])
            summary["episodes"].append({"episode": name, "file": f"{name}.parquet",
                                        "samples": len(rows),
                                        "contact_share": float((cp[v] >= 0.5).mean())
                                        if v.any() else 0.0})
        write_json(out_dir / "summary.json", summary)

    def on_tick(tick, sample) -> None:
        if sample is None:
            return
        out = est.step({"t": sample["t"], **{c: sample[c] for c in est.inputs}})
        rows.append({"t": sample["t"], "valid": bool(out["valid"]),  # copies, not the buffers
                     **{k: np.array(out[k], dtype=float) for k in KEYS}})
        now = time.monotonic()
        if state["live"] is not None and out["valid"] and now >= state["next"]:
            state["next"] = now + 0.2
            state["live"].update(live_table(joints, out, sample["t"]))

    from neuract.twin.model import build_model
    joints[:] = list(build_model(bus.arm, 500.0).joint_names)
    if cfg.quiet:
        result = record_session(bus, on_tick=on_tick, on_episode=on_episode)
    else:
        from rich.live import Live
        with Live(refresh_per_second=5) as live:
            state["live"] = live
            result = record_session(bus, on_tick=on_tick, on_episode=on_episode)
    summary["recording"] = result
    write_json(out_dir / "summary.json", summary)
    return summary


def _table(rows: list[dict[str, Any]], joints: list[str]) -> pa.Table:
    """The estimates of an episode, columns as ``neuract estimate`` names them."""
    cols: dict[str, Any] = {"t": np.array([r["t"] for r in rows], float),
                            "valid": np.array([bool(r["valid"]) for r in rows])}
    tau = np.array([r["tau"] for r in rows], float)
    f = np.array([r["ee_force"] for r in rows], float)
    cj = np.array([r["condition_prob_joint"] for r in rows], float)
    for j, name in enumerate(joints):
        cols[f"tau.{name}"] = tau[:, j]
    for a, axis in enumerate("xyz"):
        cols[f"ee_force.{axis}"] = f[:, a]
    cols["contact_prob"] = np.array([r["contact_prob"] for r in rows], float)
    for j, name in enumerate(joints):
        cols[f"degraded_prob.{name}"] = cj[:, j]
    cols["degraded_prob"] = np.array([r["condition_prob"] for r in rows], float)
    return pa.table(cols)


__all__ = ["live_table", "run_live"]

"""``neuract score``: any saved model, open loop on recorded episodes, scored per episode and
per label beside the repetition noise floor.

    neuract score --model runs/fit_sts3215 --data ../shared/data/kscale_sts3215_12v/raw.tgz \\
        --episodes "kp==16 or mass==0.969" --out runs/score_sts3215
    neuract score --model runs/eval/checkpoints/baseline_mlp_actuator_net \\
        --data runs/twin_so101 --out runs/score_mlp

``--model``: a ``neuract fit`` output (parametric servo, actuator net, residual), a fitted
baseline ``neuract evaluate`` saved (``checkpoints/baseline_<name>/``), a simulator-mode
NeuralActuator checkpoint, or the saved MuJoCo servo baseline
(``checkpoints/baseline_mujoco_default_servo``). ``--data``: a dataset directory, BAM pendulum
logs (a ``.json``, a folder or a ``.tgz`` of them) or NAD CSV file(s). How each kind is
simulated: :mod:`neuract.pipeline.score`.

Writes into ``--out`` (all or nothing; an existing one is replaced only with ``--overwrite``):
``scores.json`` (the model, the data, the open-loop MAE overall, per episode and per value of
every label the episodes carry (kp, mass, trajectory, task, split, ...), and the repetition
noise floor: :mod:`neuract.eval.repeats`) and ``report.md`` / ``report.html``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from neuract.atomic import atomic_dir, check_dest, write_json
from neuract.data.dataset import require_channels
from neuract.data.select import select_episodes
from neuract.errors import ConfigError
from neuract.eval.protocol import HIDDEN_LABELS
from neuract.eval.repeats import GOAL_TOL, repeat_floor
from neuract.eval.report import Report, Table, rollout_figure, write_report
from neuract.pipeline.progress import reporter
from neuract.pipeline.score import (
    Rollout,
    Scorable,
    arm_joints,
    check_model_data,
    grid_batch,
    load_scorable,
    read_episodes,
    rollouts,
)


@dataclass
class ScoreConfig:
    """Score a saved model open loop on recorded episodes: MAE per episode and per label,
    the repetition noise floor, a report."""

    model: Path
    """a neuract fit output, an evaluate baseline checkpoint (checkpoints/baseline_<name>), a
    simulator-mode NeuralActuator checkpoint, or a saved MuJoCo servo baseline"""
    data: Path
    """episodes: a dataset directory, BAM pendulum logs (.json, a folder or .tgz of them) or
    NAD CSV file(s)"""
    out: Path = Path("runs/score")
    """output directory: scores.json, report.md, report.html"""
    episodes: str = ""
    """score only the episodes this selects, e.g. "kp==16 or mass==0.969", "split==test",
    "trajectory==sin_sin,brutal and not name==*_01" (empty: all)"""
    robot: str = ""
    """arm model (bundled name or MJCF/URDF path); empty: the arm a fit was made on, the
    episodes' arm for a NeuralActuator"""
    force_robot: bool = False
    """use a bundled --robot (or a model of another arm) on these episodes anyway"""
    substeps: int = 0
    """physics steps per telemetry step (0: the model's own; a NeuralActuator: 2)"""
    overwrite: bool = False
    """replace an existing --out directory (an earlier score's)"""
    quiet: bool = False
    """no progress and no closing table"""


OUTPUTS = ("scores.json", "report.md", "report.html", "figures")
SCORE_DEST = {"marker": "scores.json", "kind": lambda j: j.get("verb") == "score",
              "allowed": lambda name: name in OUTPUTS}
"""what makes a directory an earlier output of this verb"""
SKIPPED_LABELS = frozenset({"episode", "index"})
"""labels that number the episodes: no per-label breakdown"""


def label_keys(trajs_or_labels) -> list[str]:
    """The labels broken down by: every label with a plain value (text, number, yes/no) in
    some episode, less hidden twin truth and episode numbers."""
    labels = [getattr(getattr(t, "meta", None), "labels", t) for t in trajs_or_labels]
    keys: dict[str, None] = {}
    for lab in labels:
        for k, v in lab.items():
            if (k not in HIDDEN_LABELS and k not in SKIPPED_LABELS and v is not None
                    and isinstance(v, str | int | float | bool)):
                keys[k] = None
    return sorted(keys)


def _plain(v: Any) -> bool:
    return v is not None and isinstance(v, str | int | float | bool)


def _sums(r: Rollout) -> tuple[np.ndarray, np.ndarray]:
    """(per-joint sum of |error| [rad], per-joint count) over the scored samples."""
    err = np.where(r.scored, np.abs(r.q_sim - r.q), 0.0)
    return err.sum(0), r.scored.sum(0).astype(np.float64)


def _mae(s: np.ndarray, n: np.ndarray) -> float | None:
    tot = float(n.sum())
    return float(s.sum()) / tot if tot else None


def _deg(x: float | None) -> float | None:
    return None if x is None else math.degrees(x)


def summarize(rolls: list[Rollout], joint_names, floor: dict[str, Any],
              keys: list[str]) -> dict[str, Any]:
    """Overall, per-episode and per-label open-loop MAE of ``rolls`` (pooled over scored
    samples and joints), each label value beside its noise floor."""
    sums = [_sums(r) for r in rolls]
    eps = []
    for r, (s, n) in zip(rolls, sums):
        mae = _mae(s, n)
        eps.append({"episode": r.name, "samples": int(r.scored.any(1).sum()),
                    "mae_rad": mae, "mae_deg": _deg(mae),
                    "joint_mae_deg": {j: (_deg(float(a / b)) if b else None)
                                      for j, a, b in zip(joint_names, s, n)},
                    "labels": {k: r.labels[k] for k in keys if _plain(r.labels.get(k))}})
    S = np.sum([s for s, _ in sums], axis=0)
    N = np.sum([n for _, n in sums], axis=0)
    mae = _mae(S, N)
    done = [e["mae_rad"] for e in eps if e["mae_rad"] is not None]
    overall = {"mae_rad": mae, "mae_deg": _deg(mae), "samples": int(sum(e["samples"]
                                                                        for e in eps)),
               "episodes": len(eps),
               "episode_mean_mae_rad": float(np.mean(done)) if done else None,
               "joint_mae_deg": {j: (_deg(float(a / b)) if b else None)
                                 for j, a, b in zip(joint_names, S, N)},
               "noise_floor_rad": floor["all_rad"],
               "mae_over_noise_floor": (mae / floor["all_rad"] if mae is not None
                                        and floor["all_rad"] else None)}
    per: dict[str, dict[str, Any]] = {}
    for k in keys:
        groups: dict[str, list[int]] = {}
        for i, r in enumerate(rolls):
            if _plain(r.labels.get(k)):
                groups.setdefault(str(r.labels[k]), []).append(i)
        per[k] = {}
        for v, idx in sorted(groups.items(), key=lambda kv: _order(kv[0])):
            s = np.sum([sums[i][0] for i in idx], axis=0)
            n = np.sum([sums[i][1] for i in idx], axis=0)
            m = _mae(s, n)
            fl = floor.get("per_label", {}).get(k, {}).get(v)
            per[k][v] = {"episodes": len(idx), "samples": int(sum(eps[i]["samples"]
                                                                  for i in idx)),
                         "mae_rad": m, "mae_deg": _deg(m), "noise_floor_rad": fl}
    return {"overall": overall, "per_label": per, "episodes": eps}


def _order(v: str) -> tuple:
    try:
        return (0, float(v), "")
    except ValueError:
        return (1, 0.0, v)


def noise_floor(batch, names: list[str], keys: list[str]) -> dict[str, Any]:
    """The repetition noise floor of the episodes (:func:`neuract.eval.repeats.repeat_floor`
    on their grid, repeats matched by labels and goals), episodes named."""
    f = repeat_floor(batch.q.numpy(), batch.mask.numpy(), batch.labels, per=keys,
                     goals=batch.command.numpy(), goal_tol=GOAL_TOL)
    out = {"all_rad": f["all"], "all_deg": _deg(f["all"]), "pairs": f["pairs"],
           "samples": f["samples"], "repeat_labels": f["keys"], "goal_tol_rad": GOAL_TOL,
           "groups": [{"episodes": [names[i] for i in g["episodes"]],
                       "floor_rad": g["floor_rad"]} for g in f["groups"]],
           "per_label": {k: f[k] for k in keys if f[k]}}
    if f["all"] is None:
        out["note"] = ("no repeats: no two episodes share their labels and goals, so no noise "
                       "floor")
    return out


def _report(res: dict[str, Any], rolls: list[Rollout], joint_names) -> Report:
    m, ov, fl = res["model"], res["overall"], res["noise_floor"]
    rep = Report(f"neuract score: {m['label']}",
                 f"Model {m['path']} ({m['kind']}), data {res['data']}"
                 + (f", episodes {res['episodes_selected']!r}" if res["episodes_selected"]
                    else "") + f". {res['protocol']}")
    floor_txt = ("no repeated episodes: no noise floor" if fl["all_rad"] is None else
                 f"{fl['pairs']} pairs of repeats in {len(fl['groups'])} groups")
    rep.add("Overall", Table("Open-loop position error", ["episodes", "samples", "MAE [rad]",
                                                          "MAE [deg]", "noise floor [deg]",
                                                          "MAE / noise floor"],
                             [[ov["episodes"], ov["samples"], ov["mae_rad"], ov["mae_deg"],
                               _deg(ov["noise_floor_rad"]), ov["mae_over_noise_floor"]]],
                             note=f"Noise floor: mean |difference| of repeated episodes' "
                                  f"positions ({floor_txt})."))
    rep.add("Overall", Table("Per joint [deg]", list(ov["joint_mae_deg"]),
                             [list(ov["joint_mae_deg"].values())]))
    single = [k for k, vals in res["per_label"].items() if len(vals) == 1]
    for k, vals in res["per_label"].items():
        if k in single:
            continue
        rep.add("Per label", Table(f"by {k}", [k, "episodes", "samples", "MAE [deg]",
                                               "noise floor [deg]"],
                                   [[v, d["episodes"], d["samples"], d["mae_deg"],
                                     _deg(d["noise_floor_rad"])] for v, d in vals.items()]))
    if single:
        rep.add("Per label", "One value in every episode (scores.json has them): "
                + ", ".join(f"{k}={next(iter(res['per_label'][k]))}" for k in single) + ".")
    rep.add("Per episode", Table("", ["episode", "samples", "MAE [rad]", "MAE [deg]"],
                                 [[e["episode"], e["samples"], e["mae_rad"], e["mae_deg"]]
                                  for e in res["episodes"]]))
    if fl["groups"]:
        rep.add("Repetition noise floor", Table(
            f"repeats: equal labels ({', '.join(fl['repeat_labels']) or 'none'}) and goals "
            f"(mean |difference| <= {fl['goal_tol_rad']} rad)", ["episodes", "floor [rad]"],
            [[", ".join(g["episodes"]), g["floor_rad"]] for g in fl["groups"]]))
    scored = [e for e in res["episodes"] if e["mae_rad"] is not None]
    if scored:
        worst = max(range(len(scored)), key=lambda i: scored[i]["mae_rad"])
        r = next(x for x in rolls if x.name == scored[worst]["episode"])
        try:
            fig = rollout_figure(r.t - r.t[0], r.q, {m["label"]: r.q_sim}, list(joint_names),
                                 title=f"Worst episode: {r.name}",
                                 caption=f"open-loop MAE {scored[worst]['mae_deg']:.3f} deg")
        except ImportError:  # no matplotlib (the viz extra): the tables alone
            fig = None
        if fig is not None:
            rep.add("Worst episode", fig)
    return rep


def run_score(cfg: ScoreConfig) -> dict[str, Any]:
    torch.set_num_threads(1)
    if isinstance(cfg.substeps, bool) or not (isinstance(cfg.substeps, int)
                                              and cfg.substeps >= 0):
        raise ConfigError(f"--substeps {cfg.substeps!r}; accepted: physics steps per "
                          "telemetry step >= 1, or 0 for the model's own")
    out = Path(cfg.out)
    check_dest(out, cfg.overwrite, inputs=(cfg.model, cfg.data, cfg.robot), **SCORE_DEST)
    model: Scorable = load_scorable(cfg.model)
    data = str(cfg.data)
    trajs = select_episodes(read_episodes(cfg.data), cfg.episodes, f"--data {data!r}")
    require_channels(trajs, ("t", "q", "q_goal"), data, f"the model --model {str(cfg.model)!r}")
    check_model_data(model, trajs, data, cfg.robot, cfg.force_robot)
    mtrajs = arm_joints(model, trajs)
    batch = grid_batch(mtrajs)
    joint_names = list(mtrajs[0].meta.joint_names)
    with reporter(cfg.quiet) as progress:
        stage = f"simulate {len(trajs)} episode(s) open loop"
        rolls = rollouts(model, trajs, data, cfg.robot, cfg.force_robot, cfg.substeps,
                         lambda k, n: progress(stage, k, n), batch=batch)
    keys = label_keys(mtrajs)
    floor = noise_floor(batch, [t.meta.name for t in mtrajs], keys)
    res: dict[str, Any] = {
        "verb": "score", "model": model.info(), "data": data,
        "episodes_selected": cfg.episodes or None,
        "protocol": ("Each episode simulated open loop from its measured initial state, driven "
                     "by its goals and known inputs; MAE over the simulated, valid samples "
                     "(joints pooled)."
                     + (" A fit model runs on each episode's uniform grid, as neuract fit "
                        "scores its validation runs." if model.kind == "fit" else
                        " At the recorded samples (rollout protocol).")),
        "joint_names": joint_names,
        **summarize(rolls, joint_names, floor, keys), "noise_floor": floor}
    with atomic_dir(out, overwrite=cfg.overwrite, **SCORE_DEST) as tmp:
        write_json(tmp / "scores.json", res)
        write_report(tmp, _report(res, rolls, joint_names))
    if not cfg.quiet:
        _print(res, out)
    return res


def _print(res: dict[str, Any], out: Path) -> None:
    from rich.console import Console
    from rich.table import Table as RichTable

    ov = res["overall"]
    t = RichTable(title=f"neuract score: {res['model']['label']} -> {out}")
    for c in ("", "episodes", "MAE [deg]", "noise floor [deg]"):
        t.add_column(c)
    fmt = lambda x: "-" if x is None else f"{x:.3f}"  # noqa: E731
    t.add_row("all", str(ov["episodes"]), fmt(ov["mae_deg"]),
              fmt(_deg(ov["noise_floor_rad"])))
    for k, vals in res["per_label"].items():
        if 1 < len(vals) <= 12:  # the labels that split the episodes, not too finely
            for v, d in vals.items():
                t.add_row(f"{k}={v}", str(d["episodes"]), fmt(d["mae_deg"]),
                          fmt(_deg(d["noise_floor_rad"])))
    Console().print(t)


def run(cfg: ScoreConfig) -> dict[str, Any]:
    return run_score(cfg)


__all__ = ["SCORE_DEST", "ScoreConfig", "label_keys", "noise_floor", "run", "run_score",
           "summarize"]

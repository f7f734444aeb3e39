"""A fit's recipe beyond the model options: the held-out test runs, initial values, a warm
start, and a residual network on a fitted servo. ``neuract fit`` and the benchmarks
(``benchmarks/bench_sts3215.py``) fit through :func:`fit_model`, so a command line and a
benchmark given the same options compute the same model and the same held-out figure.

- :class:`~neuract.fit.options.SplitConfig` (``--split.test "kp == 16 or mass == 0.969"``,
  ``--split.test-episodes``): runs held out for testing, by a rule on their labels
  (:func:`neuract.data.splits.label_rule`) or by name; the rest split into training and
  validation at random by run, as before (``--val-fraction``, ``--train.seed``).
- ``--init NAME=VALUE`` (:func:`apply_init`): initial values of fitted parameters, named as
  the report's parameter table names them (or by the last part of that name); a warm start's
  fitted values win over them.
- ``--init-from RUN_DIR`` (:func:`warm_start`): an earlier fit's parameters as the starting
  point (the same model, or a servo that becomes the physical base of a residual network).
- :class:`~neuract.fit.options.BaseConfig` (``--base.fit``, ``--base.freeze``): with
  ``--actuator.residual mlp|gru``, fit the servo alone first, then the residual network on
  the fitted servo, the servo fixed or fine-tuned with it.

Held-out runs are scored by :func:`score_runs`: the mean absolute position error over every
valid sample of the runs, pooled (as the benchmarks score them).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from neuract.actuators.param import Param
from neuract.data.splits import select_by_labels
from neuract.errors import ConfigError
from neuract.fit.batch import RunBatch, split_runs
from neuract.fit.options import BaseConfig, FitConfig, SplitConfig
from neuract.fit.trainer import PlantFactory, SystemModel


# ------------------------------------------------------------------------ the split ------
def split_indices(batch: RunBatch, split: SplitConfig, val_fraction: float, seed: int
                  ) -> tuple[list[int], list[int], list[int]]:
    """(train, validation, test) run indices: the test runs by ``split`` (none if empty), the
    others split at random by run (``val_fraction``, ``seed``). Raises ConfigError naming
    ``--split.test`` for a rule that names a label the runs lack, or that leaves no test or no
    training run."""
    test = select_by_labels(batch.labels, batch.names, split.test, split.test_episodes,
                            option="--split.test", episodes_option="--split.test-episodes")
    if split.any():
        what = " ".join(x for x in (repr(split.test) if split.test.strip() else "",
                                    "(episodes)" if split.test_episodes else "") if x)
        if not test:
            raise ConfigError(f"--split.test {what} holds out no run of the {len(batch)}; "
                              "accepted: a rule some runs satisfy")
        if len(test) == len(batch):
            raise ConfigError(f"--split.test {what} holds out all {len(batch)} runs, none is "
                              "left to train on; accepted: a rule some runs fail")
    held = set(test)
    rest = [i for i in range(len(batch)) if i not in held]
    tr, va = split_runs(len(rest), val_fraction, seed)
    return [rest[i] for i in tr], [rest[i] for i in va], test


# ------------------------------------------------------------------ initial values ------
def _params(model: SystemModel) -> dict[str, Param]:
    return {name: m for name, m in model.named_modules() if isinstance(m, Param)}


def _read_values(path: str, option: str) -> list[tuple[str, Any]]:
    p = Path(path)
    try:
        data = json.loads(p.read_text())
    except OSError as e:
        raise ConfigError(f"{option} {path!r}: not NAME=VALUE and not a readable JSON file "
                          f"({e.strerror or e})") from None
    except ValueError as e:
        raise ConfigError(f"{option} {path!r}: not valid JSON ({e})") from None
    if isinstance(data, dict) and isinstance(data.get("parameters"), dict):
        data = data["parameters"]  # a fit's report.json
    if not isinstance(data, dict):
        raise ConfigError(f"{option} {path!r}: expected a JSON object of parameter name -> "
                          "value (or a fit's report.json)")
    return list(data.items())


def parse_init(items: Sequence[str], option: str = "--init") -> list[tuple[str, Any]]:
    """(name, value) pairs of ``NAME=VALUE`` items and JSON files (``{name: value}``, or a
    fit's report.json: its fitted parameters), in order (a later one wins)."""
    out: list[tuple[str, Any]] = []
    for item in items:
        if "=" not in item:
            out += _read_values(item, option)
            continue
        name, _, text = item.partition("=")
        try:
            value: Any = [float(x) for x in text.split(",")] if "," in text else float(text)
        except ValueError:
            raise ConfigError(f"{option} {item!r}: {text!r} is not a number; accepted: "
                              "NAME=VALUE (a number, or comma-separated, one per joint) or a "
                              "JSON file of them") from None
        out.append((name.strip(), value))
    return out


def _resolve(name: str, params: dict[str, Param], option: str) -> str:
    """The full parameter name of ``name``: itself, or the one it ends (``friction_viscous``
    -> ``actuator.friction.friction_viscous``); ``actuator.X`` also names a residual's base
    ``actuator.base.X``; dashes read as underscores."""
    key = name.replace("-", "_")
    if key in params:
        return key
    if key.startswith("actuator.") and "actuator.base." + key[9:] in params:
        return "actuator.base." + key[9:]
    hits = [p for p in params if p.endswith("." + key)]
    if len(hits) == 1:
        return hits[0]
    if len(hits) > 1:
        raise ConfigError(f"{option} {name}: names {len(hits)} parameters ({', '.join(hits)}); "
                          "give the full name")
    short = sorted({p.rsplit(".", 1)[-1] for p in params})
    raise ConfigError(f"{option} {name}: this model has no such parameter; accepted: "
                      f"{', '.join(short)} (or their full names, as the fit report lists them)")


def apply_init(model: SystemModel, items: Sequence[str], option: str = "--init"
               ) -> dict[str, Any]:
    """Set the initial values ``items`` (:func:`parse_init`) on ``model``'s parameters;
    returns {full name: value}. Raises ConfigError naming ``option`` for an unknown name, a
    value outside the parameter's bounds or of the wrong length."""
    params = _params(model)
    done: dict[str, Any] = {}
    for name, value in parse_init(items, option):
        full = _resolve(name, params, option)
        p = params[full]
        v = torch.as_tensor(value, dtype=torch.float64)
        if not (torch.isfinite(v).all() and v.numel() >= 1):
            raise ConfigError(f"{option} {name}={value!r}; accepted: finite numbers")
        if v.numel() not in (1, p.raw.numel()):
            raise ConfigError(f"{option} {name}: {v.numel()} values for a parameter of "
                              f"{p.raw.numel()}; accepted: one value, or one per joint")
        lo = -math.inf if p.lo is None else p.lo
        hi = math.inf if p.hi is None else p.hi
        if not bool(((v >= lo) & (v <= hi)).all()):
            raise ConfigError(f"{option} {name}={value!r}; accepted: a value in "
                              f"[{lo:g}, {hi:g}] (the parameter's bounds)")
        p.set(v.reshape(p.raw.shape) if v.numel() > 1 else v)
        done[full] = value
    return done


# -------------------------------------------------------------------- warm start --------
def weights_digest(model: SystemModel) -> str:
    """A short checksum of a model's tensors (names and values): what a warm start copies."""
    h = hashlib.sha256()
    for k, v in sorted(model.state_dict().items()):
        h.update(k.encode())
        h.update(v.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def warm_start(model: SystemModel, init: SystemModel, option: str = "--init-from") -> None:
    """Copy ``init``'s fitted parameters into ``model``: the same model, or a servo that
    becomes the physical base of ``model``'s residual network (the network keeps its initial
    weights). ConfigError naming ``option`` where they do not match."""
    try:
        model.warm_start_from(init)
    except (ConfigError, RuntimeError) as e:
        text = str(e).splitlines()[0]
        raise ConfigError(f"{option}: its model does not match this fit's ({text}); accepted: "
                          "a fit of the same actuator and joint options, or of the servo alone "
                          "when --actuator.residual is set") from None


def freeze_base(model: SystemModel) -> int:
    """Fix every physical parameter (servo and joints) of ``model``, leaving its network
    (``actuator.net``) free; returns how many tensors were fixed."""
    n = 0
    for name, p in model.named_parameters():
        if not name.startswith("actuator.net."):
            p.requires_grad_(False)
            n += 1
    return n


# ------------------------------------------------------------------------ scoring -------
@torch.no_grad()
def simulate_runs(model: SystemModel, plant_fn: PlantFactory, batch: RunBatch,
                  substeps: int, label_inputs: tuple[str, ...] = ("kp",),
                  use_voltage: bool = True, chunk: int = 256) -> torch.Tensor:
    """(B, T, n) positions of ``model`` simulated open loop over whole runs, each from its
    measured initial state (``chunk`` runs at a time)."""
    parts = []
    for s in range(0, len(batch), chunk):
        sub = batch.select(range(s, min(s + chunk, len(batch))))
        parts.append(model.rollout(plant_fn(sub.labels), sub, substeps, label_inputs,
                                   use_voltage))
    return torch.cat(parts)


def score_runs(q_sim: torch.Tensor | np.ndarray, batch: RunBatch,
               by: Sequence[str] = ()) -> dict[str, Any]:
    """Mean absolute position error [rad] of ``q_sim`` ((B, T, n), or (B, T) for one joint)
    over every valid sample of ``batch``, pooled (``mae_rad``), and per value of each label
    in ``by`` that the runs carry (``per_<label>``: {value as text: MAE})."""
    q = batch.q.numpy()
    m = batch.mask.numpy()
    qs = np.asarray(q_sim, dtype=np.float64)
    if qs.ndim == 2:
        q, m = q[..., 0], m[..., 0]
    err = np.abs(qs - q) * m
    axes = tuple(range(1, err.ndim))
    run_sum, run_cnt = err.sum(axes), m.sum(axes)

    def mae(sel) -> float:
        sel = np.asarray(sel, dtype=bool)
        return float(run_sum[sel].sum() / max(float(run_cnt[sel].sum()), 1.0))

    out: dict[str, Any] = {"mae_rad": mae(np.ones(len(batch), bool))}
    for key in by:
        if not all(key in lab for lab in batch.labels):
            continue
        values = sorted({str(lab[key]) for lab in batch.labels})
        out[f"per_{key}"] = {g: mae([str(lab[key]) == g for lab in batch.labels])
                             for g in values}
    return out


# --------------------------------------------------------------------- the stages ------
def base_stage(cfg: FitConfig) -> FitConfig:
    """The servo-alone fit that ``--base.fit`` runs first: ``cfg`` without the residual
    network, trained with ``--base.lr`` / ``--base.stage-iters`` where given."""
    train = dataclasses.replace(cfg.train, lr=cfg.base.lr or cfg.train.lr,
                                stage_iters=tuple(cfg.base.stage_iters)
                                or cfg.train.stage_iters)
    return dataclasses.replace(cfg, actuator=dataclasses.replace(cfg.actuator, residual="none"),
                               train=train, base=BaseConfig(), init_from="", preset="")


def check_recipe(cfg: FitConfig) -> None:
    """Refuse recipe options that do not go together (ConfigError naming them); reads
    nothing."""
    residual = cfg.actuator.residual != "none"
    if cfg.base.fit and not residual:
        raise ConfigError("--base.fit fits the servo first, then a residual network on it; "
                          "it needs --actuator.residual mlp or gru (got none)")
    if cfg.base.freeze and not (residual and (cfg.base.fit or cfg.init_from)):
        raise ConfigError("--base.freeze keeps a fitted servo fixed under a residual network; "
                          "it needs --actuator.residual mlp|gru and --base.fit or --init-from")
    if not cfg.base.fit and (cfg.base.lr or cfg.base.stage_iters):
        raise ConfigError("--base.lr and --base.stage-iters set the servo stage of --base.fit; "
                          "add --base.fit or leave them out")
    if not (math.isfinite(cfg.base.lr) and cfg.base.lr >= 0):
        raise ConfigError(f"--base.lr {cfg.base.lr!r}; accepted: a learning rate > 0 (0: "
                          "--train.lr)")
    if cfg.base.fit:
        stage = base_stage(cfg).train
        if len(stage.stage_iters) != len(stage.horizons) or not all(
                isinstance(n, int) and n >= 0 for n in stage.stage_iters) or not sum(
                stage.stage_iters):
            given = " ".join(str(n) for n in cfg.base.stage_iters)
            raise ConfigError(f"--base.stage-iters {given}; accepted: one iteration count >= 0 "
                              f"per stage of --train.horizons ({len(stage.horizons)}), at least "
                              "1 in all")
    parse_init(cfg.init)  # the syntax; the names are checked against the model built
    if cfg.init_from and not Path(cfg.init_from).is_dir():
        raise ConfigError(f"--init-from {cfg.init_from!r}: no such directory; accepted: the "
                          "--out directory of an earlier neuract fit")


def load_init(path: str) -> SystemModel:
    """The fitted model of the ``neuract fit`` output ``path`` (``--init-from``)."""
    from neuract.errors import CheckpointError
    from neuract.fit.saved import load_fit

    try:
        return load_fit(path).system
    except CheckpointError as e:
        raise ConfigError(f"--init-from {path!r}: {e}") from None


def start_model(cfg: FitConfig, n_dof: int, init_model: SystemModel | None = None
                ) -> SystemModel:
    """The model a fit starts from: built from the options (network weights from
    ``--train.seed``), the ``--init`` values set, then ``init_model``'s parameters copied in
    (a warm start's fitted values win over ``--init``), then ``--base.freeze``."""
    from neuract.fit.identify import build_model

    torch.manual_seed(cfg.train.seed)
    model = build_model(cfg.actuator, cfg.joints, n_dof)
    if cfg.init:
        apply_init(model, cfg.init)
    if init_model is not None:
        warm_start(model, init_model)
    if cfg.base.freeze:
        freeze_base(model)
    return model


StageHook = Callable[[FitConfig, SystemModel, dict[str, Any]], None]


def fit_model(cfg: FitConfig, batch: RunBatch,
              indices: tuple[list[int], list[int], list[int]] | None = None,
              init_model: SystemModel | None = None, *, ckpt_dir: str | Path | None = None,
              base_ckpt_dir: str | Path | None = None, run_key: dict[str, Any] | None = None,
              on_base: StageHook | None = None, log=None, progress=None,
              resume_hint: str | None = None, restart_hint: str | None = None,
              score_by: Sequence[str] = ()) -> tuple[SystemModel, dict[str, Any]]:
    """Fit ``cfg`` on ``batch``: what ``neuract fit`` computes, and the benchmarks too.

    indices: (train, validation, test) run indices (default :func:`split_indices` of the
    options); init_model: the warm start (default: ``--init-from``'s model, or none). With
    ``--base.fit`` the servo is fitted first (checkpoints in ``base_ckpt_dir``; ``on_base``
    gets its config, model and report) and becomes the residual's starting point. The report
    adds, where there are test runs,
    ``test_mae_rad`` (pooled over their valid samples, :func:`score_runs`; per value of each
    label in ``score_by`` too), ``n_test_runs`` and ``test_runs``.
    """
    from neuract.fit.identify import identify

    if indices is None:
        indices = split_indices(batch, cfg.split, cfg.val_fraction, cfg.train.seed)
    if init_model is None and cfg.init_from:
        init_model = load_init(cfg.init_from)
    n_dof = batch.q.shape[-1]
    staged = cfg.base.fit and cfg.actuator.residual != "none"
    report_base = None
    if staged:
        bcfg = base_stage(cfg)
        base_key = None if run_key is None else {**run_key, "stage": "base"}
        base_model, report_base = fit_model(
            bcfg, batch, indices, init_model, ckpt_dir=base_ckpt_dir, run_key=base_key,
            log=log, progress=progress, resume_hint=resume_hint, restart_hint=restart_hint,
            score_by=score_by)
        if on_base is not None:
            on_base(bcfg, base_model, report_base)
        init_model = base_model
    model = start_model(cfg, n_dof, init_model)
    tr, va, te = indices
    model, report = identify(
        batch, cfg.actuator, cfg.joints, cfg.train, cfg.robot, cfg.val_fraction,
        ckpt_dir=ckpt_dir, log=log, model=model, run_key=run_key, resume_hint=resume_hint,
        restart_hint=restart_hint, arm_mass=cfg.arm_mass, progress=progress,
        indices=(tr, va))
    if te:
        from neuract.fit.identify import plant_factory

        test = batch.select(te)
        pf = plant_factory(cfg.robot, arm_mass=cfg.arm_mass)
        q = simulate_runs(model, pf, test, cfg.train.substeps, cfg.train.label_inputs,
                          cfg.train.use_voltage)
        scores = score_runs(q, test, score_by)
        report.update(test_mae_rad=scores.pop("mae_rad"), n_test_runs=len(te),
                      test_runs=[batch.names[i] for i in te], **(
                          {"test_per_label": scores} if scores else {}))
    if cfg.split.any():
        report["split_test"] = {"rule": cfg.split.test,
                                "episodes": list(cfg.split.test_episodes)}
    if cfg.init_from:
        report["init_from"] = cfg.init_from
    if report_base is not None:
        report["base"] = {k: report_base.get(k) for k in (
            "train_mae_rad", "val_mae_rad", "test_mae_rad", "fit_seconds", "iteration",
            "best_iteration")}
    if cfg.base.freeze:
        report["base_frozen"] = True
    return model, report


__all__ = ["BaseConfig", "SplitConfig", "apply_init", "base_stage", "check_recipe",
           "fit_model", "freeze_base", "load_init", "parse_init", "score_runs",
           "simulate_runs", "split_indices", "start_model", "warm_start", "weights_digest"]

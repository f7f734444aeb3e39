"""``neuract fit``: identify an actuator (+ joint parameters) from recorded runs, positions only.

    neuract fit --data ../shared/data/kscale_sts3215_12v/raw.tgz --actuator.type sts3215 \\
        --actuator.friction m1 --actuator.delay 0.03 --out runs/sts3215_m1
    neuract fit --preset sts3215-best --data ../shared/data/kscale_sts3215_12v/raw.tgz \\
        --split.test "kp == 16 or mass == 0.969" --out runs/sts3215_best

``--preset NAME`` starts from a named bundle of option values (:mod:`neuract.presets`; the
options given beside it override its values). ``--split.test`` holds out runs by a rule on
their labels (or ``--split.test-episodes`` by name), scored after the fit (``test_mae_rad``);
``--init NAME=VALUE`` sets initial values of fitted parameters; ``--init-from RUN_DIR`` starts
from an earlier fit's parameters; ``--base.fit`` with ``--actuator.residual mlp|gru`` fits
the servo alone first (``--out/base``, itself a fit output) and then the residual network on
the fitted servo (``--base.freeze``: the servo kept fixed). See :mod:`neuract.fit.recipe`.

Writes into ``--out``: ``model.safetensors`` (best-validation weights), ``config.json`` (the
resolved config: rerun with it), ``report.json`` + ``report.md`` (fitted parameters, train and
validation open-loop MAE, learning curve) and ``checkpoint/`` (resumable: rerunning the same
command after a kill continues where the last checkpoint left off).

The checkpoint records the run key (:func:`neuract.fit.identify.fit_run_key`: actuator, joint
and training options, --robot, --val-fraction, --limit, --duration and a fingerprint of the
data). A rerun into the same --out whose key differs stops before touching anything, naming
each differing option with its old and new value: rerun with the original options (kept in
``config.json``), or pass --overwrite to start afresh, or choose another --out. Options that do
not change the result (--out, --threads, --train.checkpoint-every, the --data path of the same
data) may differ on resume.

``--out`` is new, empty, or an earlier fit's output (its ``config.json`` is a fit's): fit
refuses, before reading any data, an ``--out`` that is, holds or lies inside its ``--data``
(or ``--robot`` file), and any other non-empty directory, with or without ``--overwrite``.
Options, data, robot and joints are all checked before anything is written; a first run into
--out that fails later (not an interrupt: that keeps the checkpoint) removes what it wrote.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import shutil
from dataclasses import fields
from pathlib import Path
from typing import Any

import torch

from neuract.actuators import ActuatorConfig, NeuralConfig
from neuract.atomic import check_parent, is_output, undone_on_error, write_json, write_text
from neuract.config import check_rerun, save_resolved
from neuract.errors import ConfigError, NeuractError
from neuract.fit.checkpoint import check_run_key, read_training_state, save_weights
from neuract.fit.identify import (
    build_model,
    fit_run_key,
    load_batch,
    plant_factory,
)
from neuract.fit.options import BaseConfig, FitConfig, SplitConfig
from neuract.fit.recipe import (
    base_stage,
    check_recipe,
    fit_model,
    load_init,
    parse_init,
    split_indices,
    start_model,
    weights_digest,
)
from neuract.fit.trainer import TrainConfig
from neuract.progress import reporter
from neuract.robot.match import check_arm
from neuract.sim.simulate import JointParamsConfig

OUTPUTS = ("model.safetensors", "report.json", "report.md")
"""what a completed fit writes into --out beside config.json and checkpoint/"""
DEST = {"marker": "config.json", "kind": lambda j: j.get("type") == "FitConfig"}
"""what makes a directory an earlier output of this verb (``--overwrite`` discards only such a
directory's model and report)"""


def _markdown(report: dict) -> str:
    lines = ["# neuract fit report", "",
             f"- train open-loop MAE: {report['train_mae_rad']:.5f} rad "
             f"({report['n_train_runs']} runs)"]
    if report.get("val_mae_rad") is not None:
        lines.append(f"- validation open-loop MAE: {report['val_mae_rad']:.5f} rad "
                     f"({report['n_val_runs']} runs)")
    if report.get("test_mae_rad") is not None:
        lines.append(f"- held-out test MAE: {report['test_mae_rad']:.5f} rad "
                     f"({report['n_test_runs']} runs, all valid samples pooled)")
    if report.get("base"):
        b = report["base"]
        val = "n/a" if b.get("val_mae_rad") is None else f"{b['val_mae_rad']:.5f} rad"
        lines.append(f"- servo stage (--out/base): validation MAE {val}"
                     + ("; kept fixed under the residual" if report.get("base_frozen") else ""))
    lines += [f"- fit time: {report.get('fit_seconds', 0.0):.1f} s, iterations: "
              f"{report['iteration']}, best at {report['best_iteration']}", "",
              "| parameter | value |", "|---|---|"]
    lines += [f"| {k} | {v if isinstance(v, list) else f'{v:.6g}'} |"
              for k, v in report["parameters"].items()]
    return "\n".join(lines) + "\n"


def _cli_names(message: str) -> str:
    """``message`` with the fields of fit's option groups (``train.lr_net``,
    ``actuator.neural.hidden``) written as fit's options (``--train.lr-net``)."""
    for group, cls in (("actuator.neural", NeuralConfig), ("actuator", ActuatorConfig),
                       ("joints", JointParamsConfig), ("train", TrainConfig),
                       ("split", SplitConfig), ("base", BaseConfig)):
        names = "|".join(sorted((f.name for f in fields(cls)), key=len, reverse=True))
        message = re.sub(rf"(?<![\w.-]){re.escape(group)}\.({names})\b",
                         lambda m, g=group: f"--{g}.{m.group(1).replace('_', '-')}", message)
    return message


def _option(field: str) -> str:
    """A fit run key's field as the user's option (``train.lr`` -> ``--train.lr``,
    ``val_fraction`` -> ``--val-fraction``); the data fingerprint's fields as what they are."""
    if field == "data" or field.startswith("data."):
        return f"the data ({field})"
    named = _cli_names(field)
    return named if named != field else "--" + field.replace("_", "-")


def check_options(cfg: FitConfig) -> None:
    """Refuse (ConfigError naming the option, the value and what is accepted) every option
    fit cannot run with; reads no data and writes nothing."""
    if not cfg.data:
        raise ConfigError("--data is required (dataset dir, BAM logs dir or .tgz)")
    if not (math.isfinite(cfg.duration) and cfg.duration >= 0):
        raise ConfigError(f"--duration {cfg.duration!r}; expected seconds >= 0 (0: whole runs)")
    if not (isinstance(cfg.limit, int) and cfg.limit >= 0):
        raise ConfigError(f"--limit {cfg.limit!r}; expected a number of runs >= 0 (0: all)")
    if not 0 <= cfg.val_fraction < 1:
        raise ConfigError(f"--val-fraction {cfg.val_fraction!r}; expected 0 <= share < 1")
    if isinstance(cfg.threads, bool) or not (isinstance(cfg.threads, int) and cfg.threads >= 1):
        raise ConfigError(f"--threads {cfg.threads!r}; expected a number of CPU threads >= 1")
    if cfg.arm_mass is not None:
        if cfg.robot != "pendulum":
            raise ConfigError(f"--arm-mass {cfg.arm_mass!r} applies to --robot pendulum (the "
                              f"bench), not to --robot {cfg.robot!r}")
        if not (math.isfinite(cfg.arm_mass) and cfg.arm_mass >= 0):
            raise ConfigError(f"--arm-mass {cfg.arm_mass!r}; accepted: the pendulum arm's "
                              "mass [kg] >= 0")
    cfg.train.validate("--train.")
    cfg.actuator.validate("--actuator.")
    cfg.joints.validate("--joints.")
    check_recipe(cfg)


def _inputs(cfg: FitConfig) -> list[tuple[str, str]]:
    """(option, path) of what fit reads from disk: the data, a robot file, --init-from."""
    out = [("--data", cfg.data)]
    if cfg.init_from:
        out.append(("--init-from", cfg.init_from))
    if cfg.robot != "pendulum" and Path(cfg.robot).is_file():
        out.append(("--robot", cfg.robot))
    return out


def check_out(cfg: FitConfig) -> None:
    """Refuse an ``--out`` that is, holds or lies inside one of fit's inputs, that exists and
    is not a directory, or that is a non-empty directory but not an earlier fit's output
    (:data:`DEST`): fit writes its files into --out in place (a rerun resumes there), so it
    would mix them with whatever else is there. ``--overwrite`` changes none of this."""
    out = Path(cfg.out)
    target = Path(os.path.realpath(out))
    for opt, path in _inputs(cfg):
        if not os.path.lexists(path):
            continue
        src = Path(os.path.realpath(path))
        how = ("is" if src == target else "holds" if target in src.parents
               else "lies inside" if src in target.parents else None)
        if how:
            raise ConfigError(f"--out {str(out)!r} {how} the {opt} input {path!r}; fit writes "
                              "its config, checkpoint, model and report into --out: choose "
                              "another --out")
    if not os.path.lexists(out):
        check_parent(out, "--out")
        return
    if not out.is_dir():
        raise ConfigError(f"--out {str(out)!r} exists and is not a directory: choose another "
                          "--out")
    if any(out.iterdir()) and not is_output(out, **DEST):
        raise ConfigError(f"--out {str(out)!r} is a non-empty directory and not a fit's "
                          "output (no fit config.json); fit writes its files into --out "
                          "(--overwrite replaces only an earlier fit): choose a new or empty "
                          "--out")


def _label_inputs(batch, keys: tuple[str, ...]) -> None:
    """Each run label fed to the actuator (``--train.label-inputs``) must be carried by every
    run or by none (then the actuator's configured value is used)."""
    for k in keys:
        lacking = [name for name, lab in zip(batch.names, batch.labels) if k not in lab]
        if lacking and len(lacking) < len(batch):
            raise ConfigError(f"--train.label-inputs {k}: {len(lacking)} of {len(batch)} runs "
                              f"lack the label {k!r} (e.g. {lacking[0]!r}) that the others "
                              "carry; accepted: labels every run carries (or none does)")


def prepare(cfg: FitConfig) -> tuple[list, Any]:
    """(runs, batch): the data read, and checked against the model and the plant by a
    two-step rollout (joint counts, pendulum labels, run labels, network inputs), so that
    nothing fit would fail on later is found after --out was written."""
    runs, batch = load_batch(cfg.data, cfg.limit, cfg.duration)
    if batch.q.shape[1] < 2:
        raise ConfigError(f"--duration {cfg.duration!r} keeps {batch.q.shape[1]} step of "
                          f"{batch.dt:g} s per run; accepted: 0 (whole runs) or at least "
                          f"{batch.dt:g} s (2 steps)")
    n = batch.q.shape[-1]
    names = list(runs[0].meta.joint_names)
    data = f"--data {cfg.data!r}"
    model = build_model(cfg.actuator, cfg.joints, n)
    try:
        pf = plant_factory(cfg.robot, arm_mass=cfg.arm_mass)
    except NeuractError as e:
        raise type(e)(f"--robot {cfg.robot!r}: {e}") from None
    if cfg.robot == "pendulum":
        if n != 1:
            logged = runs[0].meta.robot
            hint = f"--robot {logged}" if logged and logged != "pendulum" else "--robot NAME"
            raise ConfigError(
                f"--robot 'pendulum' (the default: a 1-joint bench pendulum) does not fit "
                f"{data}: its runs have {n} joints {names}; pass {hint} (a bundled robot "
                "name or an MJCF/URDF file of the arm the data were logged on)")
    else:
        check_arm(cfg.robot, pf([]).joint_names, names, data, runs[0].meta.robot,
                  cfg.force_robot)
    try:
        plant = pf(batch.labels)
    except NeuractError as e:
        raise type(e)(f"--robot {cfg.robot!r} with {data}: {e}") from None
    _label_inputs(batch, cfg.train.label_inputs)
    with torch.no_grad():
        model.rollout(plant, batch, cfg.train.substeps, cfg.train.label_inputs,
                      cfg.train.use_voltage, horizon=2)
    return runs, batch


def prepare_recipe(cfg: FitConfig, batch) -> tuple[tuple[list, list, list], Any]:
    """((train, validation, test) run indices, the --init-from model or None): the split
    by --split.test, the --init values and the warm start checked on a model built as the
    fit will build it (unknown labels or parameter names, a model that does not match), so
    that nothing fit would refuse later is found after --out was written."""
    indices = split_indices(batch, cfg.split, cfg.val_fraction, cfg.train.seed)
    if not indices[0]:
        raise ConfigError(f"--split.test leaves {len(batch) - len(indices[2])} run(s) to train "
                          "and validate on, none for training; accepted: a rule that holds out "
                          "fewer runs, or a smaller --val-fraction")
    init_model = load_init(cfg.init_from) if cfg.init_from else None
    n = batch.q.shape[-1]
    if init_model is not None and init_model.joints.armature.raw.shape[0] != n:
        raise ConfigError(f"--init-from {cfg.init_from!r}: a model of "
                          f"{init_model.joints.armature.raw.shape[0]} joints, the data has {n}")
    staged = cfg.base.fit and cfg.actuator.residual != "none"
    first = start_model(base_stage(cfg) if staged else cfg, n, init_model)
    if staged:
        start_model(cfg, n, first)
    return indices, init_model


def _key(cfg: FitConfig, batch, init_model) -> dict:
    """The run key (:func:`fit_run_key`) with the recipe's options where given: a key of a fit
    without them is the key an earlier version wrote."""
    extra: dict[str, Any] = {} if cfg.arm_mass is None else {"arm_mass": cfg.arm_mass}
    if cfg.split.any():
        extra["split"] = {"test": cfg.split.test, "test_episodes": list(cfg.split.test_episodes)}
    if cfg.init:
        extra["init"] = [[k, v] for k, v in parse_init(cfg.init)]
    if init_model is not None:
        extra["init_from"] = weights_digest(init_model)
    if cfg.base != BaseConfig():
        extra["base"] = dataclasses.asdict(cfg.base)
    return fit_run_key(batch, cfg.actuator, cfg.joints, cfg.train, cfg.robot, cfg.val_fraction,
                       limit=cfg.limit, duration=cfg.duration, **extra)


def run(cfg: FitConfig) -> dict:
    from neuract.scale import ddp

    world = ddp.init_from_env()  # under torchrun: this process's rank
    if world.size > 1 and not world.writer:
        import contextlib

        cfg, private = rank_config(cfg, world)
        try:  # a rank other than 0 trains alike, writing (and saying) nothing of its own
            with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):
                return run_rank(cfg)
        finally:
            shutil.rmtree(private, ignore_errors=True)
    return run_rank(cfg)


def rank_config(cfg: FitConfig, world) -> tuple[FitConfig, Path]:
    """A rank other than 0's options: --out in a private temporary folder holding a copy of
    the config and training states found in --out (rank 0's, which every rank resumes from),
    so that only rank 0 writes --out. Returns (options, the private folder)."""
    import tempfile

    private = Path(tempfile.mkdtemp(prefix=f"neuract-fit-rank{world.rank}-"))
    out, mine = Path(cfg.out), private / "out"
    if not cfg.overwrite and (out / "config.json").is_file():
        mine.mkdir()
        shutil.copy2(out / "config.json", mine / "config.json")
        for rel in ("checkpoint", "base/checkpoint"):
            for f in sorted((out / rel).glob("*.safetensors")):
                (mine / rel).mkdir(parents=True, exist_ok=True)
                shutil.copy2(f, mine / rel / f.name)
    return dataclasses.replace(cfg, out=str(mine)), private


def run_rank(cfg: FitConfig) -> dict:
    try:
        return _run(cfg)
    except ConfigError as e:  # a library message in fit's own option names
        msg = _cli_names(str(e))
        if msg == str(e):
            raise
        raise type(e)(msg) from None


def _run(cfg: FitConfig) -> dict:
    # everything that can be refused (options, --out, data, robot, joints) before any write
    check_options(cfg)
    check_out(cfg)
    torch.set_num_threads(cfg.threads)
    out = Path(cfg.out)
    ckpt = out / "checkpoint"
    runs, batch = prepare(cfg)
    indices, init_model = prepare_recipe(cfg, batch)
    key = _key(cfg, batch, init_model)
    hints = {"resume_hint": f"rerun with the original options and data (options kept in "
                            f"{str(out / 'config.json')!r})",
             "restart_hint": f"pass --overwrite (discards its checkpoint) or choose another "
                             f"--out than {str(out)!r}"}
    last = ckpt / "last.safetensors"
    if cfg.overwrite:  # afresh: an interrupted run must not leave the old model and report
        old = [out / name for name in OUTPUTS if (out / name).exists()]
        for f in [*ckpt.glob("*.safetensors"), *old]:
            f.unlink()
        if (out / "base").is_dir():  # the servo stage of an earlier --base.fit
            shutil.rmtree(out / "base")
    elif last.is_file():  # refuse another run's checkpoint before config.json is rewritten
        check_run_key(last, read_training_state(last), key, option=_option, **hints)
    elif (base_last := out / "base" / "checkpoint" / "last.safetensors").is_file():
        # a run stopped in its servo stage (--base.fit): that stage's checkpoint
        check_run_key(base_last, read_training_state(base_last), {**key, "stage": "base"},
                      option=_option, **hints)
    elif any((out / name).exists() for name in OUTPUTS):  # a finished run, its state gone
        check_rerun(cfg, out, restart=f"Pass --overwrite (discards that run) or choose another "
                                      f"--out than {str(out)!r}")
    # a failed first run leaves nothing behind, unless it saved a training state: a failure
    # after training began (a full disk) keeps it, to resume from when rerun; an interrupt
    # keeps the checkpoint too
    kept = lambda o: any(o.glob("checkpoint/*.safetensors")) or any(  # noqa: E731
        o.glob("base/checkpoint/*.safetensors"))
    with undone_on_error(out, keep=kept):
        out.mkdir(parents=True, exist_ok=True)
        return _fit(cfg, out, ckpt, batch, key, hints, indices, init_model)


def _write_outputs(cfg: FitConfig, out: Path, model, report: dict) -> dict:
    """model.safetensors, report.json and report.md of a fit (or of its servo stage)."""
    save_weights(model, out / "model.safetensors",
                 {"actuator": cfg.actuator.type, "val_mae_rad": report.get("val_mae_rad")})
    report = {k: v for k, v in report.items() if k != "history"} | {
        "learning_curve": report.get("history", [])}
    write_json(out / "report.json", json.loads(json.dumps(report, default=float)))
    write_text(out / "report.md", _markdown(report))
    return report


def _fit(cfg: FitConfig, out: Path, ckpt: Path, batch, key: dict, hints: dict, indices,
         init_model) -> dict:
    save_resolved(cfg, out)
    tr, va, te = indices
    split = f" ({len(tr)} train, {len(va)} validation, {len(te)} test)" if te else ""
    print(f"neuract fit: {len(batch)} runs{split}, {batch.q.shape[1]} steps of "
          f"{batch.dt:.4f} s, actuator {cfg.actuator.type} (friction {cfg.actuator.friction}"
          + (f", {cfg.actuator.residual} residual" if cfg.actuator.residual != "none" else "")
          + ")" + (f", preset {cfg.preset}" if cfg.preset else ""))

    def on_base(bcfg: FitConfig, model, report: dict) -> None:
        base = out / "base"
        save_resolved(dataclasses.replace(bcfg, out=str(base)), base)
        rep = _write_outputs(bcfg, base, model, report)
        val = rep["val_mae_rad"]
        print("neuract fit: servo stage done, validation MAE "
              + ("n/a" if val is None else f"{val:.5f} rad") + f" -> {base}")

    with reporter() as progress:  # iterations, loss, elapsed, ETA; evaluations; a resume
        stage = ["fit"]

        def base_first(bcfg, model, report):
            on_base(bcfg, model, report)
            stage[0] = "fit residual"

        if cfg.base.fit:
            stage[0] = "fit servo"
        model, report = fit_model(
            cfg, batch, indices, init_model, ckpt_dir=ckpt, base_ckpt_dir=out / "base" /
            "checkpoint", run_key=key, on_base=base_first, log=progress.note,
            progress=lambda it, n, info: progress(stage[0], it, n, loss=info.get("train_loss")),
            **hints)
    report = _write_outputs(cfg, out, model, report)
    val = report["val_mae_rad"]
    val_s = "n/a" if val is None else f"{val:.5f} rad"
    test = report.get("test_mae_rad")
    test_s = "" if test is None else f", held-out test MAE {test:.5f} rad"
    print(f"neuract fit: train MAE {report['train_mae_rad']:.5f} rad, validation MAE {val_s}"
          f"{test_s} -> {out}")
    return report

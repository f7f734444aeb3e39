"""``neuract identify``: fit an arm dynamics model to logged (q, qd, [qdd], tau) data.

Input: a dataset directory (``neuract.data`` layout; episodes need ``q``, ``qd``, ``tau``,
optionally ``qdd`` and ``t``) or an ``.npz`` file with arrays ``q, qd, tau`` (N, n_dof) and
optionally ``qdd`` and ``t`` (N,), strictly increasing (a 1-D channel is one joint). The
contents are validated up front (keys, dtypes, shapes, finite values). Missing
accelerations are differentiated from ``qd`` with a Savitzky-Golay filter. The last
``test_fraction`` of every episode is held out.

Output (``out/``): ``config.json`` (resolved config), ``report.json`` + ``report.md``
(per-joint nMSE on train and held-out data beside two references that need no fit, the
training mean and the nominal model (the description's rigid-body dynamics), with a warning
where the fit does worse than the mean; the expected and the actual fit time; a drift check of
the held-out residuals against the training residuals, see ``neuract.control.drift``), and the
model: ``params.json`` for rigid-body fits, ``model.safetensors`` + ``model.json`` for learned
ones. Before fitting, identify prints the fit's expected run time
(:mod:`neuract.control.identify_cost`).
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from neuract.atomic import check_dest
from neuract.control.identify_cost import duration, expected_seconds, references
from neuract.errors import ConfigError, SchemaError

MODEL_TYPES = ("least_squares", "consistent", "lagrangian", "mlp", "hybrid")


DEST = {"marker": "config.json", "kind": lambda j: j.get("type") == "IdentifyConfig"}
"""what makes a directory an earlier output of this verb (``--overwrite`` replaces only such
a directory)"""

@dataclass
class IdentifyConfig:
    """Identify arm dynamics (rigid-body least squares or a learned model) from torque logs."""

    data: Path
    """dataset directory or .npz file with q, qd, tau [, qdd, t]"""
    out: Path = Path("runs/identify")
    """output directory (created; must be empty unless --overwrite)"""
    model: str = "least_squares"
    """least_squares | consistent | lagrangian | mlp | hybrid"""
    robot: str = ""
    """bundled robot name or MJCF/URDF path (needed by least_squares, consistent, hybrid)"""
    force_robot: bool = False
    """use a bundled --robot on data recorded on another arm (refused otherwise)"""
    test_fraction: float = 0.2
    """tail fraction of every episode held out for the report"""
    rate_hz: float = 0.0
    """sampling rate when the data carry no time stamps (0: required from the data)"""
    sg_window: int = 21
    """Savitzky-Golay window [samples] for qdd when the data carry none (>= 5; shrunk to an
    episode's length when it is shorter)"""
    epochs: int = 60
    """training epochs of learned models"""
    max_samples: int = 20000
    """cap on training samples (random subset) for learned models"""
    seed: int = 0
    overwrite: bool = False


MIN_SG_WINDOW = 5
"""Smallest Savitzky-Golay window (the cubic filter needs polyorder + 2 samples)."""
MIN_SPLIT = 2
"""Fewest samples in the training and in the held-out part."""
CHANNELS = ("q", "qd", "qdd", "tau")


def _check_options(cfg: IdentifyConfig) -> None:
    if cfg.model not in MODEL_TYPES:
        raise ConfigError(f"--model {cfg.model!r}; accepted: {', '.join(MODEL_TYPES)}")
    if not (math.isfinite(cfg.test_fraction) and 0 < cfg.test_fraction < 1):
        raise ConfigError(f"--test-fraction {cfg.test_fraction!r}; accepted: a number "
                          "strictly between 0 and 1")
    if not (math.isfinite(cfg.rate_hz) and cfg.rate_hz >= 0):
        raise ConfigError(f"--rate-hz {cfg.rate_hz!r}; accepted: a finite rate > 0 [Hz], or "
                          "0 to take the rate from the data's time stamps")
    if cfg.sg_window < MIN_SG_WINDOW:
        raise ConfigError(f"--sg-window {cfg.sg_window}; accepted: an integer >= "
                          f"{MIN_SG_WINDOW} [samples] (even values are rounded up to odd)")
    if cfg.epochs < 1:
        raise ConfigError(f"--epochs {cfg.epochs}; accepted: an integer >= 1")
    if cfg.max_samples < MIN_SPLIT:
        raise ConfigError(f"--max-samples {cfg.max_samples}; accepted: an integer >= "
                          f"{MIN_SPLIT}")
    check_dest(cfg.out, cfg.overwrite, inputs=(cfg.data, cfg.robot), **DEST)  # before any work


def _load_npz(path: Path) -> dict[str, np.ndarray]:
    import zipfile
    import zlib

    expected = "expected an .npz archive with arrays q, qd, tau (N, n_dof) [, qdd, t (N,)]"
    where = f"--data {str(path)!r}"
    try:
        d = np.load(path, allow_pickle=False)
    except (zipfile.BadZipFile, EOFError, ValueError) as exc:
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise SchemaError(f"{where}: cannot read it ({why}); {expected}") from None
    if not isinstance(d, np.lib.npyio.NpzFile):
        raise SchemaError(f"{where}: holds a single array, not an archive; {expected}")
    with d:
        try:
            return {k: np.asarray(d[k]) for k in d.files}
        except (zipfile.BadZipFile, zlib.error, EOFError, ValueError, KeyError) as exc:
            why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise SchemaError(f"{where}: cannot read it ({why}); {expected}") from None


def _episodes(cfg: IdentifyConfig) -> list[tuple[str, dict[str, np.ndarray]]]:
    """(where, episode) pairs; ``where`` names the file (and episode) in errors."""
    path = Path(cfg.data)
    if path.is_dir():
        from neuract.data import load_dataset
        from neuract.data.dataset import is_dataset

        is_dataset(path)  # one that lacks its meta/info.json is refused as such

        eps = []
        for i, tr in enumerate(load_dataset(path)):
            ep = {k: tr[k] for k in ("q", "qd", "qdd", "tau", "t") if k in tr}
            if "t" not in ep and tr.meta.rate_hz and "q" in ep:
                ep["t"] = np.arange(len(ep["q"])) / tr.meta.rate_hz
            eps.append((f"--data {str(path)!r} episode {i}", ep))
        if not eps:
            raise SchemaError(f"--data {str(path)!r}: the dataset holds no episodes")
        return eps
    if path.suffix == ".npz" and path.is_file():
        return [(f"--data {str(path)!r}", _load_npz(path))]
    if not path.exists():
        raise ConfigError(f"--data {str(path)!r}: no such file or directory; expected a "
                          "dataset directory or an .npz file")
    raise ConfigError(f"--data {str(path)!r}: expected a dataset directory or an .npz file")


def _joint_names(cfg: IdentifyConfig) -> tuple[list[str] | None, str | None]:
    """The joint names and the robot a dataset directory records (None: an .npz, or none
    recorded)."""
    if not Path(cfg.data).is_dir():
        return None, None
    from neuract.data import load_dataset

    ds = load_dataset(Path(cfg.data))
    names = list(ds[0].meta.joint_names or []) if len(ds) else []
    return names or None, (ds[0].meta.robot if len(ds) else None)


def _validate(where: str, ep: dict[str, np.ndarray], cfg: IdentifyConfig) -> dict:
    """Keys, dtypes, shapes, lengths, finiteness and time stamps of one episode."""
    out: dict[str, np.ndarray] = {}
    for k in ("q", "qd", "tau"):
        if k not in ep:
            fix = ("; compute qd (and qdd) from q with neuract ingest --derivatives"
                   if k == "qd" and "q" in ep else "")
            raise SchemaError(f"{where}: channel {k!r} missing (found: "
                              f"{', '.join(sorted(ep)) or 'none'}); need q, qd, tau "
                              f"[, qdd, t]{fix}")
    for k in [c for c in CHANNELS if c in ep] + (["t"] if "t" in ep else []):
        x = np.asarray(ep[k])
        if x.dtype.kind not in "iuf":
            raise SchemaError(f"{where}: channel {k!r} has dtype {x.dtype}; accepted: real "
                              "numbers")
        x = x.astype(np.float64)
        if k != "t" and x.ndim == 1:
            x = x[:, None]  # one joint
        want = "(N,)" if k == "t" else "(N, n_dof)"
        if x.ndim != (1 if k == "t" else 2) or 0 in x.shape:
            raise SchemaError(f"{where}: channel {k!r} has shape {tuple(np.shape(ep[k]))}; "
                              f"accepted: {want} with N >= 1")
        if not np.isfinite(x).all():
            raise SchemaError(f"{where}: channel {k!r} holds NaN/inf "
                              f"({int((~np.isfinite(x)).sum())} values)")
        out[k] = x
    q = out["q"]
    for k in [c for c in ("qd", "qdd", "tau") if c in out]:
        if out[k].shape != q.shape:
            raise SchemaError(f"{where}: channel {k!r} has shape {out[k].shape} but 'q' has "
                              f"{q.shape}; accepted: q, qd, qdd, tau of one shape "
                              "(N, n_dof)")
    n = len(q)
    if "t" in out:
        if len(out["t"]) != n:
            raise SchemaError(f"{where}: 't' has {len(out['t'])} samples but 'q' has {n}; "
                              "accepted: one time stamp per sample")
        bad = np.nonzero(np.diff(out["t"]) <= 0)[0]
        if bad.size:
            i = int(bad[0])
            raise SchemaError(f"{where}: 't' is not strictly increasing (t[{i}] = "
                              f"{out['t'][i]:g}, t[{i + 1}] = {out['t'][i + 1]:g}); "
                              "accepted: strictly increasing time stamps [s]")
    k = _split_index(n, cfg.test_fraction)
    if min(k, n - k) < MIN_SPLIT:
        raise SchemaError(f"{where}: {n} samples split by --test-fraction "
                          f"{cfg.test_fraction:g} into {k} training / {n - k} held-out; "
                          f"accepted: at least {MIN_SPLIT} in each part")
    if "qdd" not in out and n < MIN_SG_WINDOW:
        raise SchemaError(f"{where}: {n} samples and no 'qdd'; differentiating qd with the "
                          f"Savitzky-Golay filter (--sg-window) needs at least "
                          f"{MIN_SG_WINDOW} samples")
    return out


def _prepare(where: str, ep: dict[str, np.ndarray], cfg: IdentifyConfig) -> dict:
    ep = _validate(where, ep, cfg)
    if "qdd" not in ep:
        from scipy.signal import savgol_filter

        if "t" in ep:
            dt = float(np.median(np.diff(ep["t"])))
        elif cfg.rate_hz > 0:
            dt = 1.0 / cfg.rate_hz
        else:
            raise SchemaError(f"{where}: no 'qdd' and no time stamps 't'; pass --rate-hz")
        w = min(cfg.sg_window | 1, (len(ep["qd"]) - 1) | 1)
        ep = {**ep, "qdd": savgol_filter(ep["qd"], w, 3, deriv=1, delta=dt, axis=0)}
    return ep


def _split_index(n: int, frac: float) -> int:
    """Samples of an n-sample episode before its held-out tail of share ``frac``."""
    return int(round(n * (1 - frac)))


def _split(eps, frac):
    train, test = [], []
    for ep in eps:
        k = _split_index(len(ep["q"]), frac)
        arrs = [torch.from_numpy(np.asarray(ep[c], dtype=np.float64)) for c in
                ("q", "qd", "qdd", "tau")]
        train.append([a[:k] for a in arrs])
        test.append([a[k:] for a in arrs])
    cat = lambda parts: tuple(torch.cat([p[i] for p in parts]) for i in range(4))  # noqa: E731
    return cat(train), cat(test)


def _fit(cfg: IdentifyConfig, train) -> tuple[torch.nn.Module, dict]:
    from neuract.fit.inverse_dynamics import fit_inverse_model
    from neuract.fit.least_squares import base_parameters, identify_consistent, identify_ls
    from neuract.models import HybridModel, LagrangianModel, MLPModel

    q, qd, qdd, tau = train
    n = q.shape[-1]
    robot = None
    rigid = cfg.model in ("least_squares", "consistent", "hybrid")
    if rigid and not cfg.robot:
        raise ConfigError(f"--model {cfg.model!r} needs --robot (bundled name or file)")
    info: dict = {}
    if cfg.robot:
        from neuract.robot import load_robot

        robot = load_robot(cfg.robot)
        if robot.n_dof != n:
            raise SchemaError(f"--robot {cfg.robot!r} has {robot.n_dof} joints, but --data "
                              f"{str(cfg.data)!r} has {n}; accepted: the robot the data were "
                              "logged on")
        info["robot"] = {"robot": cfg.robot, "n_dof": n,
                         "joint_names": list(robot.joint_names)}
    if rigid:
        y = torch.cat([robot.regressor(q[i:i + 4000], qd[i:i + 4000], qdd[i:i + 4000])
                       for i in range(0, len(q), 4000)])
        if cfg.model == "consistent":
            prior = robot.inertial_parameters().reshape(-1, 10)
            res = identify_consistent(y, tau, qd, prior=prior, prior_weight=1e-3)
        else:
            res = identify_ls(y, tau, qd, base_parameters(robot.regressor, n))
        info["params"] = {"beta": res.beta.tolist(), "columns": res.columns.tolist(),
                          "fv": res.fv.tolist(), "fc": res.fc.tolist(), "cond": res.cond,
                          "robot": cfg.robot, "kind": cfg.model, "n_dof": n,
                          "joint_names": list(robot.joint_names)}
        model = res.model(robot.regressor)
        if cfg.model != "hybrid":
            return model, info
    torch.manual_seed(cfg.seed)  # the learned models' initial weights come from --seed
    if cfg.model == "hybrid":
        learned = HybridModel(model)
    elif cfg.model == "lagrangian":
        learned = LagrangianModel(n)
    elif cfg.model == "mlp":
        learned = MLPModel(n)
    else:
        raise ConfigError(f"--model {cfg.model!r}; accepted: {', '.join(MODEL_TYPES)}")
    if len(q) > cfg.max_samples:
        idx = torch.randperm(len(q), generator=torch.Generator().manual_seed(cfg.seed))
        q, qd, qdd, tau = (x[idx[:cfg.max_samples]] for x in (q, qd, qdd, tau))
    hist = fit_inverse_model(learned, q, qd, qdd, tau, epochs=cfg.epochs, seed=cfg.seed)
    info["train_loss_last"] = hist[-1]
    return learned, info


def _drift(preds, train, test) -> dict:
    """Held-out residuals (joint-normalised torque error norm per sample) against the training
    residuals, in 4 consecutive windows: does the model already need retraining?"""
    from neuract.control.drift import DriftMonitor

    scale = train[3].std(0).clamp_min(1e-9)
    res = {k: ((preds[k] - part[3]) / scale).norm(dim=-1).detach().numpy()
           for k, part in (("train", train), ("test", test))}
    if len(res["train"]) < 20 or len(res["test"]) < 20:
        return {"checked": False, "reason": "fewer than 20 samples"}
    mon = DriftMonitor(res["train"], patience=2)
    windows = mon.scan(res["test"], max(5, len(res["test"]) // 4))
    return {"checked": True, "windows": [w.to_dict() for w in windows],
            "retrain_due": mon.retrain_due}


def run(cfg: IdentifyConfig) -> dict:
    from safetensors.torch import save_file

    from neuract.atomic import atomic_dir, atomic_path, write_json, write_text
    from neuract.config import save_resolved
    from neuract.control.replay import json_safe
    from neuract.models import nmse

    _check_options(cfg)
    eps = [_prepare(where, ep, cfg) for where, ep in _episodes(cfg)]
    dofs = {ep["q"].shape[1] for ep in eps}
    if len(dofs) > 1:
        raise SchemaError(f"--data {str(cfg.data)!r}: episodes have different numbers of "
                          f"joints {sorted(dofs)}; accepted: one robot per dataset")
    if cfg.robot:  # the arm model against the data's joints (names where the data has them)
        from neuract.robot import load_robot
        from neuract.robot.match import check_arm

        names, logged = _joint_names(cfg)
        check_arm(cfg.robot, load_robot(cfg.robot).joint_names, names or dofs.pop(),
                  f"--data {str(cfg.data)!r}", logged, cfg.force_robot)
    train, test = _split(eps, cfg.test_fraction)
    if cfg.model in ("least_squares", "consistent", "hybrid") and not cfg.robot:
        raise ConfigError(f"--model {cfg.model!r} needs --robot (bundled name or file)")
    nominal = _nominal_robot(cfg, train[0].shape[-1])
    est = expected_seconds(cfg.model, train, cfg.epochs, cfg.max_samples,
                           nominal if cfg.model in ("least_squares", "consistent", "hybrid")
                           else None)
    print(f"identify: {cfg.model} on {len(train[0])} training samples: expected run time "
          f"{'at most' if est['upper_bound'] else 'about'} {duration(est['seconds'])} "
          f"(an estimate from timing it on a few samples here: {est['basis']})", flush=True)
    t0 = time.perf_counter()
    model, info = _fit(cfg, train)
    fit_seconds = time.perf_counter() - t0
    with torch.no_grad():
        preds = {name: model.inverse(*part[:3]) for name, part in (("train", train),
                                                                   ("test", test))}
    scores = {name: nmse(preds[name], part[3]).tolist()
              for name, part in (("train", train), ("test", test))}
    refs = references(train, {"train": train, "test": test}, nominal)
    warnings_ = _worse_than_mean(cfg.model, scores, refs)
    report = {"model": cfg.model, "n_train": len(train[0]), "n_test": len(test[0]),
              "nmse_per_joint": scores,
              "references": {k: {"nmse_per_joint": v, **({"robot": nominal_name(cfg, nominal)}
                                                          if k == "nominal model" else {})}
                             for k, v in refs.items()},
              "warnings": warnings_,
              "expected_seconds": round(est["seconds"], 4), "expected_basis": est["basis"],
              "fit_seconds": round(fit_seconds, 4),
              **{k: v for k, v in info.items() if k not in ("params", "robot")},
              "drift": _drift(preds, train, test)}
    with atomic_dir(cfg.out, overwrite=cfg.overwrite, **DEST) as out:
        out = Path(out)
        save_resolved(cfg, out)
        write_json(out / "report.json", json_safe(report))
        if "params" in info and cfg.model != "hybrid":
            write_json(out / "params.json", info["params"])
        else:
            state = {k: v.detach().contiguous() for k, v in model.state_dict().items()
                     if isinstance(v, torch.Tensor)}
            with atomic_path(out / "model.safetensors") as tmp:  # the umask's permissions
                save_file(state, str(tmp))
            write_json(out / "model.json", {"type": cfg.model, "n_dof": train[0].shape[-1],
                                            **info.get("robot", {}),
                                            **({"params": info["params"]} if "params" in info
                                               else {})})
        md = [f"# neuract identify: {cfg.model}", "", f"data: `{cfg.data}`; "
              f"{report['n_train']} train / {report['n_test']} held-out samples; fit in "
              f"{duration(fit_seconds)} (expected {duration(est['seconds'])})", "",
              "| model, split | " + " | ".join(f"j{i + 1}" for i in range(len(scores['test'])))
              + " | mean |", "|---|" + "---|" * (len(scores["test"]) + 1)]
        md += [_md_row(f"{cfg.model}, {k}", v) for k, v in scores.items()]
        md += [_md_row(f"{name}, test", v["test"]) for name, v in refs.items()]
        md += ["", "nMSE: mean squared torque error over the torque's variance, per joint "
               "(the training mean scores about 1; the nominal model is the description's "
               "rigid-body dynamics without friction"
               + ("" if nominal is not None else ": n/a, no --robot given") + ")."]
        md += ["", *[f"**Warning:** {w}" for w in warnings_]] if warnings_ else []
        d = report["drift"]
        if d["checked"]:
            md += ["", "Drift of held-out residuals vs training residuals (KS test + shift, 4 "
                   "windows): " + ", ".join("drift" if w["drift"] else "ok" for w in d["windows"])
                   + f"; retrain due: {'yes' if d['retrain_due'] else 'no'}"]
        write_text(out / "report.md", "\n".join(md) + "\n")
    print(f"identify: {cfg.model}: held-out nMSE per joint "
          + ", ".join(f"{x:.4f}" for x in scores["test"]) + f" -> {cfg.out}")
    for name, v in refs.items():
        print(f"identify: {name}: held-out nMSE per joint "
              + (", ".join(f"{x:.4f}" for x in v["test"]) if v["test"] is not None
                 else "n/a (no --robot)"))
    print(f"identify: fit took {duration(fit_seconds)} (expected {duration(est['seconds'])})")
    for w in warnings_:
        print(f"identify: warning: {w}", file=sys.stderr)
    return report


def _md_row(name: str, v) -> str:
    if v is None:
        return f"| {name} | n/a (no --robot) |"
    return (f"| {name} | " + " | ".join(f"{x:.4f}" for x in v)
            + f" | {sum(v) / len(v):.4f} |")


def _nominal_robot(cfg: IdentifyConfig, n: int):
    """The arm model of the nominal reference: --robot, else the bundled robot the dataset
    names (when its joints are the data's); None where none is known."""
    from neuract.errors import NeuractError
    from neuract.robot import load_robot
    from neuract.robot.bundled import BUNDLED_ROBOTS

    name = cfg.robot or (_joint_names(cfg)[1] or "")
    if not name or (not cfg.robot and name not in BUNDLED_ROBOTS):
        return None
    try:
        robot = load_robot(name)
    except NeuractError:
        return None
    return robot if robot.n_dof == n else None


def nominal_name(cfg: IdentifyConfig, robot) -> str | None:
    return None if robot is None else (cfg.robot or _joint_names(cfg)[1])


def _worse_than_mean(kind: str, scores: dict, refs: dict) -> list[str]:
    """A warning where the fitted model predicts the held-out torques worse (mean nMSE over
    the joints) than the training mean does."""
    mine = sum(scores["test"]) / len(scores["test"])
    mean = sum(refs["training mean"]["test"]) / len(refs["training mean"]["test"])
    if mine > mean:
        return [f"{kind} predicts the held-out torques worse than the training mean does "
                f"(mean nMSE {mine:.3f} against {mean:.3f}): the fit does not generalise; try "
                "another model, more varied data or a larger --test-fraction"]
    return []


__all__ = ["IdentifyConfig", "run"]

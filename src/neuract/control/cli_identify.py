"""``neuract identify``: fit an arm dynamics model to logged (q, qd, [qdd], tau) data.

Input: a dataset directory (``neuract.data`` layout; episodes need ``q``, ``qd``, ``tau``,
optionally ``qdd`` and ``t``) or an ``.npz`` file with arrays ``q, qd, tau`` (N, n_dof) and
optionally ``qdd`` and ``t``. Missing accelerations are differentiated from ``qd`` with a
Savitzky-Golay filter. The last ``test_fraction`` of every episode is held out.

Output (``out/``): ``config.json`` (resolved config), ``report.json`` + ``report.md``
(per-joint nMSE on train and held-out data; a drift check of the held-out residuals against
the training residuals, see ``neuract.control.drift``), and the model: ``params.json`` for
rigid-body fits, ``model.safetensors`` + ``model.json`` for learned ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from neuract.errors import ConfigError, SchemaError

MODEL_TYPES = ("least_squares", "consistent", "lagrangian", "mlp", "hybrid")


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
    test_fraction: float = 0.2
    """tail fraction of every episode held out for the report"""
    rate_hz: float = 0.0
    """sampling rate when the data carry no time stamps (0: required from the data)"""
    sg_window: int = 21
    """Savitzky-Golay window [samples] for qdd when the data carry none"""
    epochs: int = 60
    """training epochs of learned models"""
    max_samples: int = 20000
    """cap on training samples (random subset) for learned models"""
    seed: int = 0
    overwrite: bool = False


def _episodes(cfg: IdentifyConfig) -> list[dict[str, np.ndarray]]:
    path = Path(cfg.data)
    if path.is_dir():
        from neuract.data import load_dataset

        eps = []
        for tr in load_dataset(path):
            ep = {k: tr[k] for k in ("q", "qd", "qdd", "tau", "t") if k in tr}
            if "t" not in ep and tr.meta.rate_hz:
                ep["t"] = np.arange(len(ep["q"])) / tr.meta.rate_hz
            eps.append(ep)
        return eps
    if path.suffix == ".npz" and path.is_file():
        d = np.load(path)
        return [{k: d[k] for k in d.files}]
    raise ConfigError(f"data={str(path)!r}: expected a dataset directory or an .npz file")


def _prepare(ep: dict[str, np.ndarray], cfg: IdentifyConfig) -> dict[str, np.ndarray]:
    for k in ("q", "qd", "tau"):
        if k not in ep:
            raise SchemaError(f"{cfg.data}: channel {k!r} missing; need q, qd, tau")
        if not np.isfinite(ep[k]).all():
            raise SchemaError(f"{cfg.data}: channel {k!r} holds NaN/inf")
    if "qdd" not in ep:
        from scipy.signal import savgol_filter

        if "t" in ep:
            dt = float(np.median(np.diff(ep["t"])))
        elif cfg.rate_hz > 0:
            dt = 1.0 / cfg.rate_hz
        else:
            raise SchemaError(f"{cfg.data}: no qdd and no time stamps; pass --rate-hz")
        w = min(cfg.sg_window | 1, (len(ep["qd"]) - 1) | 1)
        ep = {**ep, "qdd": savgol_filter(ep["qd"], w, 3, deriv=1, delta=dt, axis=0)}
    return ep


def _split(eps, frac):
    train, test = [], []
    for ep in eps:
        k = int(round(len(ep["q"]) * (1 - frac)))
        arrs = [torch.from_numpy(np.asarray(ep[c], dtype=np.float64)) for c in
                ("q", "qd", "qdd", "tau")]
        train.append([a[:k] for a in arrs])
        test.append([a[k:] for a in arrs])
    cat = lambda parts: tuple(torch.cat([p[i] for p in parts]) for i in range(4))  # noqa: E731
    return cat(train), cat(test)


def _fit(cfg: IdentifyConfig, train) -> tuple[torch.nn.Module, dict]:
    from neuract.fit.least_squares import base_parameters, identify_consistent, identify_ls
    from neuract.models import HybridModel, LagrangianModel, MLPModel, fit_inverse_model

    q, qd, qdd, tau = train
    n = q.shape[-1]
    robot = None
    if cfg.model in ("least_squares", "consistent", "hybrid"):
        if not cfg.robot:
            raise ConfigError(f"model={cfg.model!r} needs --robot (bundled name or file)")
        from neuract.robot import load_robot

        robot = load_robot(cfg.robot)
        if robot.n_dof != n:
            raise SchemaError(f"robot {cfg.robot!r} has {robot.n_dof} joints, data has {n}")
    info: dict = {}
    if robot is not None:
        y = torch.cat([robot.regressor(q[i:i + 4000], qd[i:i + 4000], qdd[i:i + 4000])
                       for i in range(0, len(q), 4000)])
        if cfg.model == "consistent":
            prior = robot.inertial_parameters().reshape(-1, 10)
            res = identify_consistent(y, tau, qd, prior=prior, prior_weight=1e-3)
        else:
            res = identify_ls(y, tau, qd, base_parameters(robot.regressor, n))
        info["params"] = {"beta": res.beta.tolist(), "columns": res.columns.tolist(),
                          "fv": res.fv.tolist(), "fc": res.fc.tolist(), "cond": res.cond,
                          "robot": cfg.robot, "kind": cfg.model}
        model = res.model(robot.regressor)
        if cfg.model != "hybrid":
            return model, info
        learned = HybridModel(model)
    elif cfg.model == "lagrangian":
        learned = LagrangianModel(n)
    elif cfg.model == "mlp":
        learned = MLPModel(n)
    else:
        raise ConfigError(f"model={cfg.model!r}; accepted: {', '.join(MODEL_TYPES)}")
    torch.manual_seed(cfg.seed)
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

    from neuract.atomic import atomic_dir, write_json, write_text
    from neuract.config import save_resolved
    from neuract.models import nmse

    if cfg.model not in MODEL_TYPES:
        raise ConfigError(f"model={cfg.model!r}; accepted: {', '.join(MODEL_TYPES)}")
    if not 0 < cfg.test_fraction < 1:
        raise ConfigError(f"test_fraction={cfg.test_fraction}; accepted: 0 < x < 1")
    eps = [_prepare(ep, cfg) for ep in _episodes(cfg)]
    train, test = _split(eps, cfg.test_fraction)
    model, info = _fit(cfg, train)
    with torch.no_grad():
        preds = {name: model.inverse(*part[:3]) for name, part in (("train", train),
                                                                   ("test", test))}
    scores = {name: nmse(preds[name], part[3]).tolist()
              for name, part in (("train", train), ("test", test))}
    report = {"model": cfg.model, "n_train": len(train[0]), "n_test": len(test[0]),
              "nmse_per_joint": scores, **{k: v for k, v in info.items() if k != "params"},
              "drift": _drift(preds, train, test)}
    with atomic_dir(cfg.out, overwrite=cfg.overwrite) as out:
        out = Path(out)
        save_resolved(cfg, out)
        write_json(out / "report.json", report)
        if "params" in info and cfg.model != "hybrid":
            write_json(out / "params.json", info["params"])
        else:
            state = {k: v.detach().contiguous() for k, v in model.state_dict().items()
                     if isinstance(v, torch.Tensor)}
            save_file(state, str(out / "model.safetensors"))
            write_json(out / "model.json", {"type": cfg.model, "n_dof": train[0].shape[-1],
                                            **({"params": info["params"]} if "params" in info
                                               else {})})
        md = [f"# neuract identify: {cfg.model}", "", f"data: `{cfg.data}`; "
              f"{report['n_train']} train / {report['n_test']} held-out samples", "",
              "| split | " + " | ".join(f"j{i + 1}" for i in range(len(scores['test'])))
              + " |", "|---|" + "---|" * len(scores["test"])]
        md += [f"| {k} nMSE | " + " | ".join(f"{x:.4f}" for x in v) + " |"
               for k, v in scores.items()]
        d = report["drift"]
        if d["checked"]:
            md += ["", "Drift of held-out residuals vs training residuals (KS test + shift, 4 "
                   "windows): " + ", ".join("drift" if w["drift"] else "ok" for w in d["windows"])
                   + f"; retrain due: {'yes' if d['retrain_due'] else 'no'}"]
        write_text(out / "report.md", "\n".join(md) + "\n")
    print(f"identify: {cfg.model}: held-out nMSE per joint "
          + ", ".join(f"{x:.4f}" for x in scores["test"]) + f" -> {cfg.out}")
    return report


__all__ = ["IdentifyConfig", "run"]

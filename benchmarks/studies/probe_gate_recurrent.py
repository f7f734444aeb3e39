"""Probe: a causal recurrent contact gate (GRU) over the twin benchmark's telemetry channels,
and how it scales with extra twin data. Exploratory; not part of the product yet.

Reads the twin benchmark's estimator checkpoint (``runs/bench_neuralactuator_twin``, written by
``bench_neuralactuator_twin.py``). Stages, each cached under ``runs/gate_recurrent/``:

* ``gen``: the benchmark's episodes again (its seed, split and worn-motor push episodes);
* ``cache``: per valid sample of every episode, the checkpoint's normalised last-step
  feature row (its 144 channels: physics, context, servo-reference and identification
  channels included), its gate logit and force, and the 0.5 N contact label; the training
  episodes split as the benchmark does (calibration episodes held out);
* ``extra SEED``: 216 more minutes of push, degraded and pick episodes of four other units
  (twin data seed SEED), the same per-sample rows (the checkpoint's normalisation and
  reference servo), for training only;
* ``train``: a GRU (input layer, ``--hidden`` units, causal over whole episodes) trained with
  binary cross-entropy on random crops of the training episodes (and the extra ones). Every
  250 iterations the decision threshold is chosen on the calibration episodes; the reported
  test F1 is the one at the iteration with the best calibration F1 (all printed). Variant A
  reads the feature rows only; B also the checkpoint's gate logit and force.

Run, after the twin benchmark (one core each; ``extra`` about 10 min per seed):

    .venv/bin/python benchmarks/studies/probe_gate_recurrent.py gen
    .venv/bin/python benchmarks/studies/probe_gate_recurrent.py cache
    .venv/bin/python benchmarks/studies/probe_gate_recurrent.py extra 101   # and 102, 103, 104
    .venv/bin/python benchmarks/studies/probe_gate_recurrent.py train A --hidden 64 --lr 1e-3 \\
        --iters 3000 --seed 1 --crop 800 --batch 16 --extra 101 102 103 104

Measured (session 19, a rerun of the benchmark whose own gate scores 0.911;
docs/limitations.md), variant A, 64 units, ``--lr 1e-3 --crop 800 --batch 16 --iters 3000``,
with 0 / 216 / 432 / 864 extra minutes (seeds 101, 101-102, 101-104): test F1 0.898 / 0.925 (2000
iterations) / 0.931 / 0.939 on training seed 1, 0.942 with 864 minutes on training seed 2;
1296 minutes (101-106): 0.945 / 0.940 on training seeds 1 / 2.
"""

from __future__ import annotations

import argparse
import os
import pickle
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for common.py

import numpy as np  # noqa: E402
import torch  # noqa: E402

from common import ROOT  # noqa: E402

DIR = ROOT / "runs" / "gate_recurrent"
TRAJ = DIR / "episodes.pkl"
CACHE = DIR / "rows.pkl"


def extra_path(seed: int) -> Path:
    return DIR / f"extra_s{seed}.pkl"


def _dump(obj, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as f:
        pickle.dump(obj, f)
    os.replace(tmp, path)


def _load(path: Path):
    if not path.is_file():
        raise SystemExit(f"{path} is missing: run the stage that writes it first (see --help)")
    with open(path, "rb") as f:
        return pickle.load(f)


def gen_traj() -> None:
    from common import twin_config
    from neuract.pipeline.twin_data import twin_split

    t0 = time.time()
    train, test, n_worn = twin_split(twin_config().data)
    print(f"generated {len(train)} train ({n_worn} worn) + {len(test)} test in "
          f"{time.time() - t0:.0f} s", flush=True)
    _dump((train, test), TRAJ)


def _rows(model, tr) -> dict:
    """The per-sample rows of one episode (valid samples only)."""
    from neuract.neuralactuator.features import windows

    mc = model.cfg
    x = windows(tr, mc.channels, mc.n_joints, mc.history, physics=mc.physics,
                context_s=mc.context_s, reference=model.reference,
                ident_memory=mc.ident_memory)
    with torch.no_grad():
        _, force, gate, _ = model(x)
        xn = (x[:, -1] - model.x_mean) / model.x_std
    h = mc.history
    return {"name": tr.meta.name, "task": tr.meta.labels.get("task"),
            "logit": gate.numpy().astype(np.float32),
            "force": force.numpy().astype(np.float32),
            "xn": xn.numpy().astype(np.float32),
            "y": np.asarray(tr["contact"], bool)[h - 1:],
            "t": np.asarray(tr["t"], np.float64)[h - 1:]}


def build_cache() -> None:
    from common import load_estimator, twin_config
    from neuract.pipeline.splits import calibration_split
    from neuract.pipeline.twin_data import contact_labelled

    torch.set_num_threads(1)
    model = load_estimator()
    if model is None:
        raise SystemExit(2)
    cfg = twin_config()
    train, test = _load(TRAJ)
    thr = cfg.data.contact_min_force_n
    train, test = contact_labelled(train, thr), contact_labelled(test, thr)
    _, calib = calibration_split(train, cfg.experiment.calibration_fraction)
    calib_names = {tr.meta.name for tr in calib}
    out = {"fit": [], "calib": [], "test": []}
    for group, eps in (("train", train), ("test", test)):
        for tr in eps:
            key = ("test" if group == "test" else
                   "calib" if tr.meta.name in calib_names else "fit")
            out[key].append(_rows(model, tr))
    print({k: len(v) for k, v in out.items()}, flush=True)
    _dump(out, CACHE)


def gen_extra(seed: int, minutes: float = 216.0) -> None:
    from common import load_estimator, twin_config
    from neuract.pipeline.twin_data import TwinDataConfig, contact_labelled, generate_twin

    torch.set_num_threads(1)
    model = load_estimator()
    if model is None:
        raise SystemExit(2)
    base = twin_config().data
    if seed == base.seed:
        raise SystemExit(f"extra seed {seed} is the benchmark's own data seed: choose another")
    dc = TwinDataConfig(robot=base.robot, minutes=minutes, units=base.units,
                        tasks=("push", "degraded", "pick"), episode_s=base.episode_s,
                        degraded_fraction=base.degraded_fraction, seed=seed)
    t0 = time.time()
    eps = contact_labelled(generate_twin(dc), base.contact_min_force_n)
    print(f"generated {len(eps)} extra episodes in {time.time() - t0:.0f} s", flush=True)
    _dump([_rows(model, tr) for tr in eps], extra_path(seed))
    print(f"rows in {time.time() - t0:.0f} s", flush=True)


def f1(pred, y) -> float:
    tp = (pred & y).sum()
    fp = (pred & ~y).sum()
    fn = (~pred & y).sum()
    return 2 * tp / max(2 * tp + fp + fn, 1)


class RGate(torch.nn.Module):
    """Input layer, GRU, logit: causal over a whole episode."""

    def __init__(self, n_in: int, hidden: int = 64, layers: int = 1):
        super().__init__()
        self.inp = torch.nn.Linear(n_in, hidden)
        self.gru = torch.nn.GRU(hidden, hidden, num_layers=layers, batch_first=True)
        self.out = torch.nn.Linear(hidden, 1)

    def forward(self, x):
        h, _ = self.gru(torch.relu(self.inp(x)))
        return self.out(h).squeeze(-1)


def inputs(rec: dict, variant: str) -> np.ndarray:
    parts = [rec["xn"]]
    if variant == "B":
        parts += [rec["logit"][:, None], rec["force"] / 2.0,
                  np.linalg.norm(rec["force"], axis=1, keepdims=True) / 2.0]
    return np.concatenate(parts, 1).astype(np.float32)


def predict(net, recs, variant):
    with torch.no_grad():
        return [net(torch.from_numpy(inputs(r, variant))[None])[0].numpy() for r in recs]


def best_thr(ps, ys):
    p, y = np.concatenate(ps), np.concatenate(ys)
    grid = np.linspace(-4, 4, 161)
    s = [f1(p >= g, y) for g in grid]
    i = int(np.argmax(s))
    return grid[i], s[i]


def train(variant: str, seed: int = 0, iters: int = 2000, crop: int = 400, batch: int = 32,
          hidden: int = 64, lr: float = 2e-3, extra: tuple[int, ...] = (),
          save: str | None = None, layers: int = 1) -> None:
    torch.set_num_threads(1)
    d = _load(CACHE)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    tr = list(d["fit"])
    for s in extra:
        tr += _load(extra_path(s))
    X = [torch.from_numpy(inputs(r, variant)) for r in tr]
    Y = [torch.from_numpy(r["y"].astype(np.float32)) for r in tr]
    net = RGate(X[0].shape[1], hidden, layers)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, iters)
    best = (-1.0, None, None)
    t0 = time.time()
    y_calib = [r["y"] for r in d["calib"]]
    y_test = np.concatenate([r["y"] for r in d["test"]])
    for it in range(1, iters + 1):
        idx = rng.integers(0, len(X), batch)
        xb, yb = [], []
        for i in idx:
            s = rng.integers(0, len(X[i]) - crop)
            xb.append(X[i][s:s + crop])
            yb.append(Y[i][s:s + crop])
        xb, yb = torch.stack(xb), torch.stack(yb)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(net(xb), yb)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        sched.step()
        if it % 250 == 0:
            pc = predict(net, d["calib"], variant)
            g, sc = best_thr(pc, y_calib)
            pt = predict(net, d["test"], variant)
            st = f1(np.concatenate(pt) >= g, y_test)
            print(f"{variant} it {it} loss {loss.item():.4f} calib F1 {sc:.4f} thr {g:.2f} "
                  f"test F1 {st:.4f} ({time.time() - t0:.0f} s)", flush=True)
            if sc > best[0]:
                best = (sc, st, it)
                if save:
                    _dump({"calib": pc, "test": pt, "it": it,
                           "state": {k: v.clone() for k, v in net.state_dict().items()}},
                          Path(save))
    print(f"{variant}: best calibration F1 {best[0]:.4f} at iteration {best[2]} -> test F1 "
          f"{best[1]:.4f} ({len(tr)} training episodes)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="stage", required=True)
    sub.add_parser("gen")
    sub.add_parser("cache")
    e = sub.add_parser("extra")
    e.add_argument("seed", type=int)
    t = sub.add_parser("train")
    t.add_argument("variant", choices=("A", "B"))
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--iters", type=int, default=2000)
    t.add_argument("--crop", type=int, default=400)
    t.add_argument("--batch", type=int, default=32)
    t.add_argument("--hidden", type=int, default=64)
    t.add_argument("--lr", type=float, default=2e-3)
    t.add_argument("--extra", type=int, nargs="*", default=())
    t.add_argument("--layers", type=int, default=1)
    t.add_argument("--save", default=None, help="pickle the best iteration's logits and weights")
    a = ap.parse_args()
    if a.stage == "gen":
        gen_traj()
    elif a.stage == "cache":
        build_cache()
    elif a.stage == "extra":
        gen_extra(a.seed)
    else:
        train(a.variant, a.seed, a.iters, a.crop, a.batch, a.hidden, a.lr, tuple(a.extra),
              a.save, a.layers)
    return 0


if __name__ == "__main__":
    sys.exit(main())

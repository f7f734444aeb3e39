"""Generalisation check: the STS3215 bench's best recipe, unchanged, on other servo families.

Issue 44 part 4. The recipe is the ``neuract fit --preset sts3215-best`` model (the
STS3215 bench's best servo model -- M6 friction, latency, punch, error-gain correction,
backlash, error clamp, goal speed limit, 2 substeps -- fitted first, then a GRU residual
trained with it), run with ``--actuator.type FAMILY``. The only values changed are the ones
that name the servo: the DC-motor start values ``kt`` and ``R`` and the scales of the
network's context (default kp, nominal voltage) come from the family's registry entry
(:mod:`neuract.servos`), because the preset spells out the STS3215's. Each bench's figures
record the ``neuract fit`` command line that reproduces them.

Benches (``../shared/data``; each README / PROVENANCE read):

- ``bam_xl330_2026/raw``: Dynamixel XL330-M288, 16 runs of 6 s (about 190 Hz), mass 0.49 kg
  at 0.10 m, kp in {100, 200, 400, 800}, 4 trajectories; one mass, no repetitions.
- ``bam_feetech_2024``: Feetech STS3250, 4 runs of 6 s (about 50 Hz), mass 1.13 kg at
  0.12 m, kp 32 (metadata only: the recorder could not set it), 4 trajectories; one kp, one
  mass, no repetitions.
- ``bam_atomic_mx_2024`` (MX-64 / MX-106): static characterisation (PWM against error,
  no-load speed) and one free-fall log, no position-controlled pendulum runs: no bench.
- XM430: no pendulum logs in ``../shared/data`` (the NAD and OpenManipulator-X data are arm
  logs): no bench.
- STS3215 (``kscale_sts3215_12v``): not re-run here; its row is copied from
  ``benchmarks/results/sts3215_pendulum.json`` (``bench_sts3215.py``, model
  ``ours_residual_gru``: the same preset).

Held-out runs, by a fixed rule (:func:`held_out_rule`): for each of the labels kp and mass
that takes at least 3 distinct values on the bench, every run with the second-highest value
is a test run (an interior value, so the test interpolates, as kp 16 and mass 0.969 do on
the STS3215 bench). XL330: ``kp == 400``. A bench where no label qualifies (STS3250: one kp,
one mass) is scored leave-one-trajectory-out (:func:`trajectory_folds`): one fit per
trajectory type with that type's runs as the test runs, the held-out MAE pooled over every
run's valid samples, each run scored by the fit that never saw it. The rest of the runs are
train / validation as ``neuract fit`` splits them (10 % validation by run, at least one run,
seed 0). Score: open-loop position MAE [rad] over valid samples, as ``neuract fit`` scores
its test runs.

Noise floor (:func:`repeat_floor`): mean absolute position difference between repetitions
(runs with the same mass, length, kp and trajectory), over the test runs; null when the
bench has no repetitions -- then the 1.5x target cannot be judged on it, and the result
says so (the XL330 and STS3250 benches hold one run per configuration).

Peer: a published BAM fit for the family found in the bench's data folder, simulated with
``neuract.io.bam_params``; null with the reason where there is none or the reader does not
map the family's BAM actuator (it maps only ``sts3215v12``).

Budget: the full run is the preset's own schedule (servo 70 + 40 iterations, residual 150 +
80, up to 48 runs per iteration, early stopping), uncapped, on 1 thread: 5 fits (XL330 one,
STS3250 four folds), about 30 CPU minutes by the ``--quick`` timings scaled (``--quick``: 3.5
CPU minutes, 11 wall minutes on 2 busy shared cores), so 60-90 wall minutes on busy cores.
``--quick`` shortens every fit (15 + 5 iterations per stage) and writes
``servo_families_quick.json``.

    .venv/bin/python benchmarks/bench_servo_families.py [--quick] [--families xl330 sts3250]

Writes benchmarks/results/servo_families.json and .md.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from common import ROOT, SCORE_BY, STS3215_DATA, read_result, sts3215_load, write_result
from neuract.atomic import write_text

DATA = ROOT.parent / "shared" / "data"
RESULTS = ROOT / "benchmarks" / "results"
PRESET = "sts3215-best"
TARGET = 1.5
"""held-out MAE within this factor of the repetition noise floor"""
REPEAT_KEYS = ("mass", "length", "kp", "trajectory")
"""the labels that make two runs repetitions of one configuration"""
HELD_OUT_LABELS = ("kp", "mass")
QUICK_OPTIONS = ("--train.stage-iters", "15", "5", "--base.stage-iters", "15", "5",
                 "--train.val-every", "5", "--train.patience", "3")
"""``--quick``: the ``neuract fit`` options that shorten every fit"""


@dataclasses.dataclass(frozen=True)
class Bench:
    family: str
    data: Path | None  # None: no pendulum bench for this family
    about: str


BENCHES = (
    Bench("xl330", DATA / "bam_xl330_2026" / "raw",
          "Dynamixel XL330-M288 on BAM's pendulum bench (Rhoban/bam, 2026-01-15): 16 runs, "
          "mass 0.49 kg at 0.10 m, kp 100/200/400/800, 4 trajectories, 7.4 V"),
    Bench("sts3250", DATA / "bam_feetech_2024",
          "Feetech STS3250 on BAM's pendulum bench (Rhoban/bam, 2024-10-26): 4 runs, mass "
          "1.13 kg at 0.12 m, kp 32 (metadata only), 4 trajectories, 12 V"),
    Bench("mx64", None, "../shared/data/bam_atomic_mx_2024 holds static MX-64 measurements "
          "(PWM against error, no-load speed) and one free-fall log, no pendulum runs"),
    Bench("mx106", None, "../shared/data/bam_atomic_mx_2024 holds static MX-106 measurements "
          "(PWM against error, no-load speed), no pendulum runs"),
    Bench("xm430", None, "no XM430 pendulum logs in ../shared/data (the OpenManipulator-X "
          "and NAD logs are arm logs)"),
)


# ------------------------------------------------------------------ pure helpers ------
def held_out_rule(labels: Sequence[dict], keys: Sequence[str] = HELD_OUT_LABELS,
                  min_values: int = 3) -> str:
    """The ``--split.test`` rule of a bench: for each label of ``keys`` with at least
    ``min_values`` distinct values over ``labels``, its second-highest value; joined by
    ``or``. Empty when no label qualifies."""
    parts = []
    for k in keys:
        values = sorted({float(lab[k]) for lab in labels if k in lab})
        if len(values) >= min_values:
            v = values[-2]
            parts.append(f"{k} == {int(v) if v.is_integer() else v!r}")
    return " or ".join(parts)


def trajectory_folds(labels: Sequence[dict]) -> list[str]:
    """One ``--split.test`` rule per trajectory type of ``labels`` (sorted): the
    leave-one-trajectory-out folds of a bench without a held-out label."""
    return [f'trajectory == "{t}"' for t in sorted({str(lab["trajectory"]) for lab in labels})]


def repeat_floor(q: np.ndarray, mask: np.ndarray, labels: Sequence[dict],
                 keys: Sequence[str] = REPEAT_KEYS) -> float | None:
    """Mean absolute difference between repetitions (runs whose ``keys`` labels are all
    equal), pooled over every pair's jointly valid samples; ``q``, ``mask``: (runs, samples).
    None when no two runs are repetitions."""
    keys = [k for k in keys if all(k in lab for lab in labels)]
    groups: dict[tuple, list[int]] = {}
    for i, lab in enumerate(labels):
        groups.setdefault(tuple(lab[k] for k in keys), []).append(i)
    tot, cnt = 0.0, 0
    for idx in groups.values():
        for a in range(len(idx)):
            for c in range(a + 1, len(idx)):
                m = mask[idx[a]] & mask[idx[c]]
                tot += float(np.abs(q[idx[a]] - q[idx[c]])[m].sum())
                cnt += int(m.sum())
    return tot / cnt if cnt else None


def pooled_mae(parts: Sequence[tuple[float, int]]) -> float:
    """The MAE over the union of samples of parts given as (MAE, number of samples)."""
    n = sum(c for _, c in parts)
    return sum(m * c for m, c in parts) / n


def verdict(mae: float | None, floor: float | None, target: float = TARGET) -> dict:
    """The ratio of ``mae`` to the noise ``floor`` and whether it is within ``target``; both
    None (and why) when either figure is missing."""
    if mae is None or floor is None:
        why = "no held-out MAE" if mae is None else "no repetitions: no noise floor"
        return {"ratio_to_floor": None, "within_target": None, "why_not_judged": why}
    r = mae / floor
    return {"ratio_to_floor": r, "within_target": bool(r <= target)}


# ------------------------------------------------------------------ the recipe ------
def family_config(family: str, data: Path, rule: str, options: Sequence[str] = ()):
    """The ``neuract fit`` config: the preset, ``--actuator.type family`` with the family's
    registry kt, R and context scales, the test rule, then ``options``."""
    from neuract.fit.verb import FitConfig
    from neuract.presets import apply, default_for
    from neuract.servos import family as family_of

    fam = family_of(family)
    cfg = default_for("fit", FitConfig, ["--preset", PRESET])
    cfg = apply(cfg, {"data": str(data), "actuator.type": family,
                      "actuator.kt": fam.kt.value, "actuator.R": fam.R.value,
                      "actuator.neural.context_scale": (fam.kp.value,
                                                        fam.nominal_voltage.value, 1.0),
                      "split.test": rule})
    if options:
        import tyro

        cfg = tyro.cli(FitConfig, args=list(options), default=cfg)
    return cfg


def command_line(cfg) -> str:
    """``cfg`` as the ``neuract fit`` command that fits it: the preset and what differs."""
    from neuract.fit.verb import FitConfig
    from neuract.presets import default_for, options

    base = default_for("fit", FitConfig, ["--preset", PRESET])
    base = dataclasses.replace(base, data=cfg.data, out=cfg.out)
    rest = options(cfg, base)
    return shlex.join(["neuract", "fit", "--data", shown(Path(cfg.data)), "--preset", PRESET,
                       *rest])


def shown(path: Path) -> str:
    """``path`` as the repository's docs write shared data: ``../shared/data/...``."""
    try:
        return "../shared/data/" + str(Path(path).relative_to(DATA))
    except ValueError:
        return str(path)


def fit_split(cfg, batch, rule: str, name: str) -> dict:
    """Fit ``cfg`` with ``rule``'s test runs held out; the held-out figures."""
    from neuract.fit.recipe import SplitConfig, fit_model, split_indices

    indices = split_indices(batch, SplitConfig(test=rule), cfg.val_fraction, cfg.train.seed)
    t0 = time.perf_counter()
    _, rep = fit_model(cfg, batch, indices, score_by=SCORE_BY,
                       log=lambda s: print(f"  [{name}] {s}", flush=True))
    n = int(batch.select(indices[2]).mask.sum())
    out = {"rule": rule, "n_train": len(indices[0]), "n_val": len(indices[1]),
           "n_test": len(indices[2]), "n_test_samples": n,
           "heldout_mae_rad": float(rep["test_mae_rad"]),
           "servo_only_heldout_mae_rad": (rep.get("base") or {}).get("test_mae_rad"),
           "val_mae_rad": float(rep["val_mae_rad"]),
           "fit_seconds": time.perf_counter() - t0,
           "per_label": rep.get("test_per_label", {})}
    print(f"  [{name}] held-out MAE {out['heldout_mae_rad']:.4f} rad (servo alone "
          f"{out['servo_only_heldout_mae_rad']}) in {out['fit_seconds']:.0f} s", flush=True)
    return out


def published_peer(data: Path) -> tuple[float | None, str]:
    """A published BAM fit in ``data``'s folder, if any: (MAE, note) -- here always (None,
    why), found files being checked by ``neuract.io.bam_params``."""
    from neuract.errors import NeuractError
    from neuract.io.bam_params import BAM_ACTUATORS, load_bam_params

    folder = data if (data / "PROVENANCE.md").is_file() else data.parent
    found = sorted(p for p in folder.rglob("m[1-6].json"))
    if not found:
        return None, (f"no published BAM fit in {shown(folder)} (BAM "
                      "publishes its fits in its repository's bam/params/, not among the "
                      "data we hold)")
    for p in found:
        try:
            load_bam_params(p)
        except NeuractError as e:
            return None, f"{p.name}: {e} (neuract.io.bam_params maps {', '.join(BAM_ACTUATORS)})"
    return None, f"fits found ({', '.join(p.name for p in found)}) but no simulation wired"


def run_bench(bench: Bench, options: Sequence[str]) -> dict:
    from neuract.fit.recipe import SplitConfig, split_indices

    print(f"== {bench.family}: {bench.data}", flush=True)
    b = sts3215_load(bench.data)
    rule = held_out_rule(b.labels)
    splits = [rule] if rule else trajectory_folds(b.labels)
    folds = []
    for r in splits:
        cfg = family_config(bench.family, bench.data, r, options)
        folds.append(fit_split(cfg, b, r, f"{bench.family} {r}") | {
            "neuract_fit": command_line(cfg)})
    mae = pooled_mae([(f["heldout_mae_rad"], f["n_test_samples"]) for f in folds])
    servo = [(f["servo_only_heldout_mae_rad"], f["n_test_samples"]) for f in folds]
    test = sorted({i for r in splits for i in split_indices(
        b, SplitConfig(test=r), 0.1, 0)[2]})
    tb = b.select(test)
    floor = repeat_floor(tb.q.numpy()[..., 0], tb.mask.numpy()[..., 0], tb.labels)
    peer, peer_note = published_peer(bench.data)
    return {"status": "measured", "data": shown(bench.data),
            "about": bench.about, "n_runs": len(b),
            "split": ("held-out label values: " + rule) if rule else
                     "leave-one-trajectory-out (no label with 3 or more values), pooled",
            "heldout_mae_rad": mae,
            "servo_only_heldout_mae_rad": (pooled_mae(servo) if all(
                m is not None for m, _ in servo) else None),
            "noise_floor_rad": floor,
            "noise_floor_note": ("mean |q_a - q_b| between repetitions of a configuration, "
                                 "test runs" if floor is not None else
                                 "no repetitions on this bench (one run per mass, length, kp "
                                 "and trajectory): no repetition noise floor"),
            "peer_mae_rad": peer, "peer_note": peer_note,
            **verdict(mae, floor), "folds": folds}


def sts3215_row() -> dict:
    """The STS3215 bench's figures, copied from bench_sts3215.py's committed results."""
    path = RESULTS / "sts3215_pendulum.json"
    if not path.is_file():
        return {"status": "not measured", "notes": f"{path.name} not found"}
    d = json.loads(path.read_text())
    m = d["models"]
    best = m.get("ours_residual_gru", {})
    peers = {k: v["heldout_mae_rad"] for k, v in m.items()
             if k.startswith("kscale_") and "published_ours_sim" in k
             and v.get("heldout_mae_rad") is not None}
    peer = min(peers, key=peers.get) if peers else None
    mae, floor = best.get("heldout_mae_rad"), d.get("repeat_to_repeat_mae_rad")
    return {"status": "copied", "data": shown(STS3215_DATA / "raw.tgz"),
            "about": "copied from benchmarks/results/sts3215_pendulum.json (bench_sts3215.py, "
                     "model ours_residual_gru = the sts3215-best preset); not re-run here",
            "split": "held-out label values: " + d["split"]["test_rule"],
            "heldout_mae_rad": mae, "noise_floor_rad": floor,
            "noise_floor_note": "repeat_to_repeat_mae_rad of sts3215_pendulum.json (test runs)",
            "peer_mae_rad": peers.get(peer), "peer_note": (
                f"K-Scale's published BAM fit, best of them: {peer}" if peer else
                "no published fit scored"),
            **verdict(mae, floor)}


def fmt(x, nd: int = 4) -> str:
    return "n/a" if x is None else f"{x:.{nd}f}"


def markdown(res: dict) -> str:
    lines = ["# Servo families: the sts3215-best recipe on other pendulum benches", "",
             "Generated by `benchmarks/bench_servo_families.py`"
             + (" --quick (NOT the full schedule)" if res["quick"] else "") + ". Target: "
             f"held-out MAE within {TARGET}x of the bench's repetition noise floor.", "",
             "| family | held-out MAE [rad] | servo alone | noise floor | ratio | peer (published "
             "BAM fit) | split |", "|---|---|---|---|---|---|---|"]
    for fam, r in res["families"].items():
        if r["status"] in ("no bench", "not measured"):
            lines.append(f"| {fam} | {r['status']} | | | | | {r.get('about', '')} |")
            continue
        ratio = r.get("ratio_to_floor")
        lines.append(f"| {fam} | {fmt(r['heldout_mae_rad'])} | "
                     f"{fmt(r.get('servo_only_heldout_mae_rad'))} | "
                     f"{fmt(r['noise_floor_rad'])} | "
                     f"{'n/a' if ratio is None else f'{ratio:.2f}x'} | "
                     f"{fmt(r['peer_mae_rad'])} | {r['split']} |")
    lines += ["", "Notes:", ""]
    for fam, r in res["families"].items():
        if r["status"] == "measured":
            lines.append(f"- **{fam}**: {r['about']}. Noise floor: {r['noise_floor_note']}. "
                         f"Peer: {r['peer_note']}.")
            for f in r["folds"]:
                lines.append(f"  - `{f['rule']}`: {f['n_train']} train / {f['n_val']} val / "
                             f"{f['n_test']} test runs, MAE {f['heldout_mae_rad']:.4f} "
                             f"(fit {f['fit_seconds']:.0f} s): `{f['neuract_fit']}`")
        else:
            lines.append(f"- **{fam}**: {r.get('about', r.get('notes', ''))}.")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="short fits, *_quick results")
    ap.add_argument("--families", nargs="*", default=None, help="subset of families")
    ap.add_argument("--out-name", default=None)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    opts = list(QUICK_OPTIONS) if args.quick else []
    fams: dict[str, dict] = {"sts3215": sts3215_row()}
    t0 = time.perf_counter()
    for bench in BENCHES:
        if args.families is not None and bench.family not in args.families:
            continue
        if bench.data is None:
            fams[bench.family] = {"status": "no bench", "about": bench.about,
                                  "heldout_mae_rad": None, "noise_floor_rad": None,
                                  "peer_mae_rad": None}
        elif not bench.data.exists():
            fams[bench.family] = {"status": "not measured", "about": f"{bench.data} absent",
                                  "heldout_mae_rad": None, "noise_floor_rad": None,
                                  "peer_mae_rad": None}
        else:
            fams[bench.family] = run_bench(bench, opts)
    res = {"benchmark": "servo_families", "preset": PRESET, "target_ratio": TARGET,
           "quick": args.quick, "fit_options": opts, "threads": args.threads,
           "wall_seconds": time.perf_counter() - t0, "families": fams}
    stem = args.out_name or ("servo_families_quick" if args.quick else "servo_families")
    out = RESULTS / f"{stem}.json"
    sts = RESULTS / "sts3215_pendulum.json"  # the copied row's provenance goes with it
    parts = [read_result(sts)[1]] if sts.is_file() else []
    write_result(out, json.loads(json.dumps(res, default=float)), parts=parts)
    write_text(out.with_suffix(".md"), markdown(res))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

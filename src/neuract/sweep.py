"""``neuract sweep``: run a verb over a grid (or a random search) of its options and seeds.

    neuract sweep --verb fit --out runs/sweep_fit --base "--data runs/twin --robot so101" \
        --grid train.lr=0.03,0.1 actuator.friction=m1,stribeck --seeds 0 1

Every trial is a normal run directory of the verb (``OUT/trials/<name>``, with its own
``config.json``, checkpoint and report), made by the verb's own command line in a process of
its own: on this machine one after another, or with ``--ray`` as Ray Tune trials spread over a
cluster (``--workers`` at once). The sweep is resumable: a rerun skips the finished trials
(their result file is there) and the verbs resume their unfinished ones from their
checkpoints. ``OUT/summary.json`` and ``OUT/summary.md`` tabulate each trial's options, seed,
status and metrics (rewritten as trials finish).
"""

from __future__ import annotations

import itertools
import json
import math
import re
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from neuract.atomic import write_json, write_text
from neuract.errors import ConfigError

SWEEPABLE: dict[str, dict[str, Any]] = {
    "fit": {"seed": "train.seed", "result": "report.json",
            "metrics": ("val_mae_rad", "train_mae_rad", "test_mae_rad")},
    "evaluate": {"seed": "experiment.seed", "result": "results.json", "metrics": ()},
    "adapt": {"seed": "seed", "result": "report.json", "metrics": ()},
    "policy": {"seed": "seed", "result": "results.json", "metrics": ()},
}
"""the verbs a sweep runs: their seed option, result file and default metrics (none: every
number at the top two levels of the result file, at most :data:`MAX_COLUMNS`)"""
MAX_COLUMNS = 8
RESULT_FIELDS = ("verb", "base", "grid", "seeds", "seed_option", "samples", "search_seed")
"""the options that decide the trials (a rerun into the same --out must share them)"""


@dataclass
class SweepConfig:
    """Run a verb (fit, evaluate, adapt, policy) over a grid or random search of its options
    and seeds; each trial a normal run directory; resumable; a summary table of metrics."""

    verb: str
    """the verb to sweep: fit, evaluate, adapt or policy"""
    out: Path
    """sweep directory: trials/<name>/ (one run directory each), sweep.json, summary.json,
    summary.md"""
    grid: tuple[str, ...] = ()
    """the options swept, each OPTION=V1,V2,... (the verb's option without its dashes, e.g.
    train.lr=0.03,0.1); trials: every combination (or --samples of them) times each seed"""
    seeds: tuple[int, ...] = (0,)
    """the seeds each combination runs with (integers >= 0), given as the verb's seed option"""
    base: str = ""
    """the verb's other options, one quoted string shared by every trial, e.g. "--data
    runs/twin --robot so101" (not --out, which each trial gets)"""
    seed_option: str = ""
    """the verb's option the seeds are given as (default: fit train.seed, evaluate
    experiment.seed, adapt and policy seed)"""
    samples: int = 0
    """0: every combination of the grid; N > 0: N combinations drawn at random from it (a
    random search, the same for the same --search-seed)"""
    search_seed: int = 0
    """seed of the random search's draws (integer >= 0)"""
    metrics: tuple[str, ...] = ()
    """the numbers of each trial's result file tabulated (dotted keys, e.g. val_mae_rad;
    default: the verb's usual ones)"""
    ray: str | None = None
    """run the trials as Ray Tune trials on a cluster (pip install 'neuract[scale]'): auto,
    local (this machine, --workers CPUs) or HOST:PORT; default: one after
    another on this machine"""
    workers: int = 1
    """trials at once on Ray (each on one CPU)"""
    quiet: bool = False
    """print no per-trial lines"""


# ------------------------------------------------------------------ the trials
def _parse_grid(verb: str, grid: tuple[str, ...], known: set[str] | None
                ) -> list[tuple[str, list[str]]]:
    out: list[tuple[str, list[str]]] = []
    for item in grid:
        name, sep, values = str(item).partition("=")
        name = name.strip().lstrip("-")
        vals = [v.strip() for v in values.split(",")]
        if not sep or not name or not values.strip() or any(not v for v in vals):
            raise ConfigError(f"--grid {item!r}; expected OPTION=V1,V2,... (the verb's option "
                              "without its dashes, e.g. train.lr=0.03,0.1)")
        if known is not None and name not in known:
            near = sorted(k for k in known if k.split(".")[-1] == name.split(".")[-1])
            raise ConfigError(f"--grid {item!r}: neuract {verb} has no option --{name}"
                              + (f" (did you mean {', '.join('--' + k for k in near)}?)"
                                 if near else "; see neuract " + verb + " --help"))
        if name in (n for n, _ in out):
            raise ConfigError(f"--grid {item!r}: --{name} is swept twice; give its values once")
        out.append((name, vals))
    return out


def _known_options(verb: str) -> set[str] | None:
    """The verb's options (dashes dropped) from the stored help; None where it is stale."""
    from neuract.cli_help import cached

    spec = cached(verb)
    if spec is None:
        return None
    return {f.lstrip("-") for g in spec.get("groups", []) for o in g.get("options", [])
            for f in o.get("flags", []) if f.startswith("--")}


def check(cfg: SweepConfig) -> tuple[list[tuple[str, list[str]]], list[str], str]:
    """Refuse bad options (ConfigError naming the option); returns (grid, base args, seed
    option)."""
    if cfg.verb not in SWEEPABLE:
        raise ConfigError(f"--verb {cfg.verb!r}; a sweep runs one of: {', '.join(SWEEPABLE)}")
    for name in ("samples", "search_seed", "workers"):
        v, lo = getattr(cfg, name), 1 if name == "workers" else 0
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise ConfigError(f"--{name.replace('_', '-')} {v!r}; expected an integer >= {lo}")
    seeds = list(cfg.seeds)
    if not seeds or any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in seeds):
        raise ConfigError(f"--seeds {seeds}; expected one or more integers >= 0")
    if len(set(seeds)) != len(seeds):
        raise ConfigError(f"--seeds {seeds}: a seed given twice would run the same trial twice")
    try:
        base = shlex.split(cfg.base)
    except ValueError as e:
        raise ConfigError(f"--base {cfg.base!r}: {e}; expected the verb's options as one "
                          "string") from None
    known = _known_options(cfg.verb)
    seed_option = (cfg.seed_option or SWEEPABLE[cfg.verb]["seed"]).lstrip("-")
    if known is not None and seed_option not in known:
        raise ConfigError(f"--seed-option {cfg.seed_option!r}: neuract {cfg.verb} has no "
                          f"option --{seed_option}")
    grid = _parse_grid(cfg.verb, cfg.grid, known)
    given = {a.split("=", 1)[0].lstrip("-") for a in base if a.startswith("--")}
    clash = sorted(given & ({"out", seed_option} | {n for n, _ in grid}))
    if clash:
        raise ConfigError(f"--base {cfg.base!r} gives {', '.join('--' + c for c in clash)}, "
                          "which the sweep sets for each trial; leave it out of --base")
    return grid, base, seed_option


def trials(cfg: SweepConfig, grid: list[tuple[str, list[str]]]) -> list[dict[str, Any]]:
    """Every trial: ``name``, ``options`` ({option: value}) and ``seed``, in a fixed order
    (the combinations, each with every seed)."""
    combos = [dict(zip([n for n, _ in grid], vals))
              for vals in itertools.product(*[v for _, v in grid])]
    if cfg.samples and cfg.samples < len(combos):
        pick = np.random.default_rng(cfg.search_seed).choice(len(combos), cfg.samples,
                                                             replace=False)
        combos = [combos[i] for i in sorted(int(i) for i in pick)]
    out = []
    for c, opts in enumerate(combos):
        for s in cfg.seeds:
            tag = "_".join(f"{k.split('.')[-1]}={v}" for k, v in opts.items())
            name = re.sub(r"[^A-Za-z0-9_.=+-]", "-", f"t{len(out):03d}_{tag}_seed={s}"
                          if tag else f"t{len(out):03d}_seed={s}")[:120]
            out.append({"name": name, "options": opts, "seed": int(s), "combo": c})
    return out


def command(verb: str, base: list[str], trial: dict[str, Any], seed_option: str,
            out: Path) -> list[str]:
    """The verb's command line of one trial (run as ``python -m neuract ...``)."""
    args = [verb, *base, "--out", str(out), f"--{seed_option}", str(trial["seed"])]
    for k, v in trial["options"].items():
        args += [f"--{k}", *v.split()]  # a tuple option's values: space-separated
    return args


# ------------------------------------------------------------------ one trial
def _flat(d: Any, prefix: str = "", depth: int = 2) -> dict[str, float]:
    out: dict[str, float] = {}
    if isinstance(d, dict) and depth > 0:
        for k, v in d.items():
            if k == "provenance":
                continue
            out.update(_flat(v, f"{prefix}{k}.", depth - 1) if isinstance(v, dict)
                       else _flat(v, f"{prefix}{k}", 0))
    elif isinstance(d, (int, float)) and not isinstance(d, bool) and prefix:
        out[prefix.rstrip(".")] = float(d)
    return out


def read_metrics(result: Path) -> dict[str, float]:
    """Every number at the top two levels of a trial's result file (dotted keys)."""
    return _flat(json.loads(result.read_text()))


def run_trial(verb: str, args: list[str], out: str) -> dict[str, Any]:
    """Run one trial's command in a process of its own; its status, seconds, error line and
    metrics (read from its result file)."""
    result = Path(out) / SWEEPABLE[verb]["result"]
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "neuract", *args], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    rec: dict[str, Any] = {"seconds": time.perf_counter() - t0}
    if proc.returncode == 0 and result.is_file():
        rec.update(status="done", metrics=read_metrics(result))
    else:
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        err = next((ln for ln in reversed(lines) if "error" in ln.lower()),
                   lines[-1] if lines else f"exit status {proc.returncode}")
        rec.update(status="failed", error=err.strip()[:300], metrics={})
    return rec


def _tune_trial(config: dict[str, Any]) -> None:
    """A Ray Tune trainable: one trial, its metrics reported to Tune."""
    from ray import tune

    rec = run_trial(config["verb"], config["args"], config["out"])
    tune.report({"done": rec["status"] == "done", "seconds": rec["seconds"],
                 "error": rec.get("error", ""), **rec["metrics"]})


# ------------------------------------------------------------------ the sweep
def _summary(cfg: SweepConfig, rows: list[dict[str, Any]], metrics: list[str]) -> None:
    out = Path(cfg.out)
    write_json(out / "summary.json", {"verb": cfg.verb, "metrics": metrics, "trials": rows})
    names = list(dict.fromkeys(k for r in rows for k in r["options"]))
    head = ["trial", *names, "seed", "status", *metrics]
    lines = [f"# neuract sweep: {cfg.verb} ({sum(r['status'] == 'done' for r in rows)} of "
             f"{len(rows)} trials done)", "", "| " + " | ".join(head) + " |",
             "|" + " --- |" * len(head)]

    def fmt(v: Any) -> str:
        return "" if v is None else f"{v:.5g}" if isinstance(v, float) and math.isfinite(v) \
            else str(v)

    for r in rows:
        cells = [r["name"], *[r["options"].get(n, "") for n in names], str(r["seed"]),
                 r["status"] + (f": {r['error']}" if r.get("error") else ""),
                 *[fmt(r["metrics"].get(m)) for m in metrics]]
        lines.append("| " + " | ".join(str(c).replace("|", "/") for c in cells) + " |")
    write_text(out / "summary.md", "\n".join(lines) + "\n")


def _check_same_sweep(cfg: SweepConfig, out: Path) -> None:
    mine = {k: getattr(cfg, k) for k in RESULT_FIELDS}
    mine = json.loads(json.dumps(mine))
    path = out / "sweep.json"
    if path.is_file():
        try:
            old = json.loads(path.read_text())
        except (OSError, ValueError):
            old = None
        if old != mine:
            diff = [k for k in RESULT_FIELDS if not isinstance(old, dict)
                    or old.get(k) != mine[k]]
            raise ConfigError(f"--out {str(out)!r} holds another sweep (its --"
                              f"{', --'.join(d.replace('_', '-') for d in diff)} differ"
                              f"{'' if not isinstance(old, dict) else ''}); rerun with its "
                              "options to resume it, or choose another --out")
    elif out.exists() and any(out.iterdir()):
        raise ConfigError(f"--out {str(out)!r} is a non-empty directory and not a sweep "
                          "(no sweep.json): choose another --out")
    out.mkdir(parents=True, exist_ok=True)
    write_json(path, mine)


def run(cfg: SweepConfig) -> dict[str, Any]:
    grid, base, seed_option = check(cfg)
    todo = trials(cfg, grid)
    out = Path(cfg.out)
    if cfg.ray is not None:
        from neuract.scale.ray import _import_ray

        _import_ray("--ray")
        try:
            import ray.tune  # noqa: F401
        except ImportError:
            raise ConfigError("--ray for a sweep needs Ray Tune, which is not installed: pip "
                              "install 'neuract[scale]'") from None
    _check_same_sweep(cfg, out)
    result_name = SWEEPABLE[cfg.verb]["result"]
    rows: dict[str, dict[str, Any]] = {}
    for t in todo:  # the finished trials are kept
        res = out / "trials" / t["name"] / result_name
        rows[t["name"]] = {**t, "status": "done" if res.is_file() else "pending",
                           "metrics": read_metrics(res) if res.is_file() else {}}
    metrics = list(cfg.metrics or SWEEPABLE[cfg.verb]["metrics"])

    def columns() -> list[str]:
        if metrics:
            return metrics
        seen = list(dict.fromkeys(k for r in rows.values() for k in r["metrics"]))
        return seen[:MAX_COLUMNS]

    def say(msg: str) -> None:
        if not cfg.quiet:
            print(msg, flush=True)

    def finished(name: str, rec: dict[str, Any]) -> None:
        rows[name].update(rec)
        _summary(cfg, list(rows.values()), columns())
        say(f"neuract sweep: {name} {rec['status']}"
            + (f" ({rec['error']})" if rec.get("error") else "")
            + f" in {rec['seconds']:.1f} s")

    pending = [t for t in todo if rows[t["name"]]["status"] != "done"]
    say(f"neuract sweep: {len(todo)} trials of neuract {cfg.verb}, {len(todo) - len(pending)} "
        f"done before, {len(pending)} to run" + (f" on Ray ({cfg.ray})" if cfg.ray else ""))
    jobs = [(t["name"], command(cfg.verb, base, t, seed_option,
                                (out / "trials" / t["name"]).resolve())) for t in pending]
    if cfg.ray is None:
        for name, args in jobs:
            finished(name, run_trial(cfg.verb, args, args[args.index("--out") + 1]))
    elif jobs:
        _run_tune(cfg, out, jobs, finished)
    _summary(cfg, list(rows.values()), columns())
    failed = [r["name"] for r in rows.values() if r["status"] != "done"]
    say(f"neuract sweep: {len(rows) - len(failed)} of {len(rows)} trials done -> "
        f"{out / 'summary.md'}" + (f"; failed: {', '.join(failed)} (rerun to retry them)"
                                    if failed else ""))
    return {"trials": list(rows.values()), "failed": failed}


def _run_tune(cfg: SweepConfig, out: Path, jobs: list[tuple[str, list[str]]],
              finished) -> None:
    import ray
    from ray import tune

    from neuract.scale import ray as scale_ray

    owned = scale_ray.connect(cfg.ray, cfg.workers)
    try:
        space = {"job": tune.grid_search(list(range(len(jobs))))}
        by_index = {i: {"verb": cfg.verb, "args": a, "out": a[a.index("--out") + 1]}
                    for i, (_, a) in enumerate(jobs)}

        def trainable(config: dict[str, Any]) -> None:
            _tune_trial(by_index[config["job"]])

        tuner = tune.Tuner(
            tune.with_resources(trainable, {"cpu": 1}), param_space=space,
            tune_config=tune.TuneConfig(max_concurrent_trials=cfg.workers),
            run_config=tune.RunConfig(name="tune", storage_path=str((out / "ray").resolve()),
                                      verbose=0))
        for res in tuner.fit():
            i = int(res.config["job"])
            name, args = jobs[i]
            trial_out = Path(args[args.index("--out") + 1])
            result = trial_out / SWEEPABLE[cfg.verb]["result"]
            got = res.metrics or {}
            rec = {"seconds": float(got.get("seconds", math.nan))}
            if res.error is None and result.is_file():
                rec.update(status="done", metrics=read_metrics(result))
            else:
                err = str(res.error or got.get("error") or "no result file").strip()
                rec.update(status="failed", error=(err.splitlines() or [""])[-1][:300],
                           metrics={})
            finished(name, rec)
    finally:
        if owned:
            ray.shutdown()

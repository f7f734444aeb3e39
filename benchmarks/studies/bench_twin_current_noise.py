"""Twin current register at rest: the reading noise ``SimConfig.current_noise_lsb`` against
the real NAD files.

The twin's current register carries no reading noise by default, so at rest it changes far
less often than a real one (``realism.UNCHECKED``). Per real NAD file with rest segments,
this replays the file's goals on four twin units (``neuract.twin.realism.replay``, seed 0)
at each noise level in :data:`LEVELS` and reports ``current_change_rest`` (the share of
consecutive rest samples whose current register reads differently, median over the arm
joints 1-4; the twin's figure is the median over its four units) beside the real file's.
Per robot, the level whose mean over the files is nearest the real files' mean is named.

Writes ``benchmarks/results/twin_current_noise.json`` and ``.md``. Needs
``../shared/data/nad``. Run: ``.venv/bin/python benchmarks/studies/bench_twin_current_noise.py``
(about 30 s).
"""

from __future__ import annotations

import os
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for common.py

import numpy as np  # noqa: E402

from common import (  # noqa: E402
    RESULTS,
    ROOT,
    write_result,
)
from neuract.atomic import write_text  # noqa: E402

NAD = ROOT.parent / "shared" / "data" / "nad"
LEVELS = (0.0, 0.3, 0.7, 1.0)
"""reading-noise std levels [register LSBs] replayed"""
UNITS = 4


def file_rows(nad: Path = NAD, levels=LEVELS) -> list[dict]:
    """One row per NAD file with rest samples: the real value and the twin's per level."""
    from neuract.io.nad import find_nad_files, read_nad_csv
    from neuract.twin import realism

    rows = []
    for path in find_nad_files(nad):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            real = read_nad_csv(path)
        r = realism.stats(real).get("current_change_rest")
        if r is None or not np.isfinite(r):
            continue
        twin = {}
        for lv in levels:
            vals = [realism.stats(t).get("current_change_rest", np.nan) for t in
                    realism.replay(real, n_units=UNITS, seed=0, current_noise_lsb=lv)]
            twin[str(lv)] = float(np.nanmedian(vals))
        rows.append({"file": str(path.relative_to(nad)), "robot": real.meta.robot,
                     "real": float(r), "twin": twin})
    return rows


def summarize(rows: list[dict], levels=LEVELS) -> dict:
    """Per robot: the mean real value, the twin's mean per level, the nearest level."""
    out = {}
    for robot in sorted({r["robot"] for r in rows}):
        mine = [r for r in rows if r["robot"] == robot]
        real = float(np.mean([r["real"] for r in mine]))
        twin = {str(lv): float(np.mean([r["twin"][str(lv)] for r in mine])) for lv in levels}
        best = min(twin, key=lambda k: abs(twin[k] - real))
        out[robot] = {"files": len(mine), "real_mean": real, "twin_mean": twin,
                      "nearest_level_lsb": float(best)}
    return out


def markdown(res: dict) -> str:
    levels = res["levels_lsb"]
    head = " | ".join(f"twin {lv:g} LSB" for lv in levels)
    lines = ["# Twin current register at rest against the NAD files", "",
             "Share of consecutive rest samples whose current register reads differently "
             "(median over the arm joints 1-4), the real file and the twin replaying its "
             f"goals on {UNITS} units (median over the units), per reading-noise level "
             "`SimConfig.current_noise_lsb` [register LSBs; SO-101 6.5 mA, OMX 2.69 mA]. "
             "The twin's default is 0.", "",
             f"| file | robot | real | {head} |",
             "|---|---|---|" + "---|" * len(levels)]
    for r in res["files"]:
        vals = " | ".join(f"{r['twin'][str(lv)]:.2f}" for lv in levels)
        lines.append(f"| {r['file']} | {r['robot']} | {r['real']:.2f} | {vals} |")
    lines += ["", "| robot | files | real mean | " + head + " | nearest level |",
              "|---|---|---|" + "---|" * len(levels) + "---|"]
    for robot, s in res["summary"].items():
        vals = " | ".join(f"{s['twin_mean'][str(lv)]:.2f}" for lv in levels)
        lines.append(f"| {robot} | {s['files']} | {s['real_mean']:.2f} | {vals} | "
                     f"{s['nearest_level_lsb']:g} LSB |")
    lines += ["", f"Wall time {res['wall_s']:.0f} s."]
    return "\n".join(lines) + "\n"


def main() -> int:
    if not NAD.is_dir():
        print(f"no NAD data at {NAD}: nothing to compare")
        return 1
    t0 = time.perf_counter()
    rows = file_rows()
    res = {"levels_lsb": list(LEVELS), "units": UNITS, "files": rows,
           "summary": summarize(rows), "wall_s": time.perf_counter() - t0}
    RESULTS.mkdir(parents=True, exist_ok=True)
    write_result(RESULTS / "twin_current_noise.json", res)
    text = markdown(res)
    write_text(RESULTS / "twin_current_noise.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

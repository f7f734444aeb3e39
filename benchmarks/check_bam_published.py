"""K-Scale's published BAM fits m1..m6, read by ``neuract.io.bam_params``, simulated on the
STS3215 protocol's 360 held-out runs (the rows ``kscale_m*_published_ours_sim_*`` of
``bench_sts3215.py``), against the figures recorded in ``results/sts3215_pendulum.json``.

    PYTHONPATH=src .venv/bin/python benchmarks/check_bam_published.py

Prints one line per model and supply; writes nothing.
"""

from __future__ import annotations

import json

from common import (
    ROOT,
    STS3215_DATA,
    kscale_published,
    sts3215_load,
    sts3215_scores,
    sts3215_split,
)


def main() -> int:
    b = sts3215_load(STS3215_DATA)
    test = b.select(sts3215_split(b)[2])
    rec = json.loads((ROOT / "benchmarks" / "results" / "sts3215_pendulum.json").read_text())
    for which in ("m1", "m2", "m3", "m4", "m5", "m6"):
        for volt, tag in ((15.0, "15V"), (None, "measured_V")):
            mae = sts3215_scores(kscale_published(test, which, volt), test)["heldout_mae_rad"]
            old = rec["models"].get(f"kscale_{which}_published_ours_sim_{tag}", {})
            old = old.get("heldout_mae_rad")
            shown = "not recorded" if old is None else f"recorded {old:.6f}"
            print(f"{which} {tag:10s} held-out MAE {mae:.6f} rad ({shown})", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""neuract sweep: trials of a grid (or a random search) times seeds, each a normal run
directory; resumable; a summary table; refusals in one line; the same on Ray Tune."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neuract.errors import ConfigError
from neuract.sweep import SweepConfig, check, command, run, trials

FIT = "--actuator.friction m1 --train.stage-iters 2 2 2 --train.val-every 2 --val-fraction 0.25"


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    from test_fit_identify import _write_pendulum_dataset

    path = tmp_path_factory.mktemp("sweep") / "ds"
    _write_pendulum_dataset(path)
    return path


def _cfg(out, data="ds", **kw):
    return SweepConfig(verb="fit", out=Path(out), base=f"--data {data} {FIT}", **kw)


def test_trials_grid_search_and_refusals(tmp_path):
    cfg = _cfg(tmp_path, grid=("train.lr=0.1,0.3", "train.substeps=1,2"), seeds=(0, 1))
    grid, base, seed_opt = check(cfg)
    assert seed_opt == "train.seed" and base[:2] == ["--data", "ds"]
    ts = trials(cfg, grid)
    assert len(ts) == 8 and len({t["name"] for t in ts}) == 8
    assert ts[0]["options"] == {"train.lr": "0.1", "train.substeps": "1"}
    assert [t["seed"] for t in ts[:2]] == [0, 1]
    args = command("fit", base, ts[1], seed_opt, tmp_path / "t")
    assert args[-6:] == ["--train.seed", "1", "--train.lr", "0.1", "--train.substeps", "1"]
    search = SweepConfig(**{**cfg.__dict__, "samples": 3, "search_seed": 5})
    a, b = trials(search, grid), trials(search, check(search)[0])
    assert len(a) == 6 and a == b  # the same draws for the same --search-seed
    other = trials(SweepConfig(**{**search.__dict__, "search_seed": 6}), grid)
    assert len(other) == 6
    bad = [(dict(verb="twin"), "--verb 'twin'"),
           (dict(grid=("train.lr",)), "expected OPTION=V1,V2"),
           (dict(grid=("train.lr=",)), "expected OPTION=V1,V2"),
           (dict(grid=("lr=0.1",)), "no option --lr .*did you mean .*--train.lr"),
           (dict(grid=("train.lr=1", "train.lr=2")), "swept twice"),
           (dict(seeds=()), "--seeds"), (dict(seeds=(1, 1)), "given twice"),
           (dict(samples=-1), "--samples"), (dict(base="--out x"), "leave it out of --base"),
           (dict(grid=("actuator.friction=m1,m6",)), "gives --actuator.friction"),
           (dict(base="--train.seed 3"), "--train.seed"), (dict(base="'x"), "--base")]
    for kw, msg in bad:
        with pytest.raises(ConfigError, match=msg) as e:
            check(SweepConfig(**{**_cfg(tmp_path).__dict__, **kw}))
        assert "\n" not in str(e.value)


def test_sweep_runs_trials_as_run_directories_and_resumes(tmp_path, dataset, capsys):
    out = tmp_path / "sweep"
    cfg = _cfg(out, data=dataset, grid=("train.lr=0.1,-1",))
    res = run(cfg)
    assert res["failed"] == ["t001_lr=-1_seed=0"]
    s = json.loads((out / "summary.json").read_text())
    done, failed = s["trials"]
    assert done["status"] == "done" and failed["status"] == "failed"
    assert "lr" in failed["error"]
    assert 0 < done["metrics"]["val_mae_rad"] < 1
    trial = out / "trials" / done["name"]
    for f in ("config.json", "report.json", "model.safetensors"):
        assert (trial / f).is_file(), f
    conf = json.loads((trial / "config.json").read_text())["config"]
    assert conf["train"]["lr"] == 0.1 and conf["train"]["seed"] == 0
    md = (out / "summary.md").read_text()
    assert "| trial | train.lr | seed | status | val_mae_rad |" in md and "failed" in md
    stamp = (trial / "report.json").stat().st_mtime_ns
    capsys.readouterr()
    run(cfg)  # resumed: the finished trial is kept, the failed one tried again
    assert "1 done before, 1 to run" in capsys.readouterr().out
    assert (trial / "report.json").stat().st_mtime_ns == stamp
    with pytest.raises(ConfigError, match="another sweep .*--grid differ"):
        run(_cfg(out, data=dataset, grid=("train.lr=0.2",)))


def test_sweep_on_ray_tune(tmp_path, dataset):
    pytest.importorskip("ray.tune")
    out = tmp_path / "tune"
    res = run(_cfg(out, data=dataset, grid=("train.lr=0.1,0.2",), ray="local", workers=2,
                   quiet=True))
    assert res["failed"] == []
    s = json.loads((out / "summary.json").read_text())
    assert [t["status"] for t in s["trials"]] == ["done", "done"]
    assert all((out / "trials" / t["name"] / "report.json").is_file() for t in s["trials"])
    lrs = {json.loads((out / "trials" / t["name"] / "config.json").read_text())["config"]
           ["train"]["lr"] for t in s["trials"]}
    assert lrs == {0.1, 0.2}

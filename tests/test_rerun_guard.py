"""A run directory (demo, evaluate, NAD experiment) is reused so that a rerun resumes its
training; a run with other options into it is refused before anything is written."""

from __future__ import annotations

import json

import pytest

from neuract.config import check_rerun, save_resolved
from neuract.errors import ConfigError
from neuract.pipeline.experiment_config import ExperimentConfig
from neuract.pipeline.twin_data import TwinDataConfig
from neuract.pipeline.twin_experiment import TwinExperimentConfig, run_twin_experiment


def _cfg(out, steps=30, minutes=1.0):
    return TwinExperimentConfig(out, TwinDataConfig(minutes=minutes),
                                ExperimentConfig(sim_steps=steps, est_steps=steps))


def test_check_rerun_passes_fresh_and_identical_runs(tmp_path):
    out = tmp_path / "run"
    check_rerun(_cfg(out), out)  # missing
    out.mkdir()
    check_rerun(_cfg(out), out)  # empty
    save_resolved(_cfg(out, steps=60), out)
    check_rerun(_cfg(out), out)  # nothing but config.json: nothing to mix with
    (out / "results.json").write_text("{}")
    check_rerun(_cfg(out, steps=60), out)  # the same run: resumed
    # where it is written, or how often it saves its training state, does not make it
    # another run
    check_rerun(_cfg(tmp_path / "elsewhere", steps=60), out)
    cfg = _cfg(out, steps=60)
    cfg.experiment.checkpoint_every = 7
    check_rerun(cfg, out)


def test_check_rerun_refuses_other_options_naming_them(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    save_resolved(_cfg(out, steps=60), out)
    (out / "checkpoints").mkdir()
    with pytest.raises(ConfigError) as e:
        check_rerun(_cfg(out, steps=30), out)
    msg = str(e.value)
    assert "--experiment.sim-steps: 60 then, 30 now" in msg
    assert "--experiment.est-steps: 60 then, 30 now" in msg
    assert "minutes" not in msg and "another --out" in msg
    # named as a verb's options where its groups differ from the config's fields
    with pytest.raises(ConfigError, match=r"--twin\.minutes: 1\.0 then, 2\.0 now"):
        check_rerun(_cfg(out, steps=60, minutes=2.0), out, options={"data": "twin"})
    (out / "config.json").write_text("{not json")
    with pytest.raises(ConfigError, match="unreadable config.json"):
        check_rerun(_cfg(out), out)
    (out / "config.json").write_text(json.dumps({"type": "IdentifyConfig", "config": {}}))
    with pytest.raises(ConfigError, match="holds the output of neuract identify \\(its "
                       "config.json is of type \"IdentifyConfig\"\\)"):
        check_rerun(_cfg(out), out)


def test_twin_experiment_refuses_before_writing(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    save_resolved(_cfg(out, steps=60), out)
    (out / "results.json").write_text('{"old": true}')
    before = (out / "config.json").read_bytes()
    with pytest.raises(ConfigError, match="sim-steps: 60 then, 30 now"):
        run_twin_experiment(_cfg(out, steps=30))
    assert (out / "config.json").read_bytes() == before
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "results.json"]



def test_sigterm_unwinds_like_ctrl_c(tmp_path, monkeypatch, capsys):
    """SIGTERM (timeout, docker stop) while a verb writes its output: exit 143 with a line
    saying so, no partial output left (only the twin's hidden resume folder of finished
    episodes, which the rerun uses and removes), the handler put back."""
    import os
    import signal

    from neuract import cli
    from neuract.data import dataset

    to_table, calls = dataset._to_table, []

    def terminated_while_writing(tr):
        calls.append(1)
        if len(calls) == 2:  # the second episode's file: the first is already written
            os.kill(os.getpid(), signal.SIGTERM)
        return to_table(tr)

    def outside(signum, frame):  # this process's own handler (pytest's would be the default)
        raise RuntimeError("SIGTERM reached the handler cli.main should have replaced")

    monkeypatch.setattr(dataset, "_to_table", terminated_while_writing)
    before = signal.signal(signal.SIGTERM, outside)
    try:
        out = tmp_path / "twin"
        assert cli.main(["twin", "--out", str(out), "--minutes", "2", "--units", "1"]) == 143
        assert "neuract twin: terminated (SIGTERM)." in capsys.readouterr().err
        assert len(calls) == 2
        assert [p.name for p in tmp_path.iterdir()] in ([], [".twin.partial"])
        assert signal.getsignal(signal.SIGTERM) is outside
        monkeypatch.setattr(dataset, "_to_table", to_table)
        assert cli.main(["twin", "--out", str(out), "--minutes", "2", "--units", "1"]) == 0
        assert [p.name for p in tmp_path.iterdir()] == ["twin"]
    finally:
        signal.signal(signal.SIGTERM, before)

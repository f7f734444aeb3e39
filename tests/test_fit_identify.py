"""Identification from positions only: known-truth recovery, gradcheck, resume, determinism."""

from __future__ import annotations

import json
import math

import pytest
import torch

from neuract.actuators import ActuatorConfig, ServoActuator, build_actuator
from neuract.actuators.param import Param
from neuract.fit.batch import RunBatch, split_runs
from neuract.fit.trainer import SystemModel, TrainConfig, evaluate, fit
from neuract.robot.pendulum import Pendulum
from neuract.sim.simulate import JointParams, JointParamsConfig

D = torch.float64
PLANT = lambda labels: Pendulum.from_meta(labels)  # noqa: E731


def _commands(B: int, T: int, dt: float, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    t = torch.arange(T, dtype=D) * dt
    out = []
    for b in range(B):
        r = torch.rand(3, generator=g, dtype=D)
        kind = b % 3
        if kind == 0:  # chirp-like sine
            c = (0.6 + 0.6 * r[0]) * torch.sin(2 * math.pi * (0.3 + 0.6 * r[1]) * t * (1 + t / 4))
        elif kind == 1:  # steps up and down
            c = ((t > 0.3) & (t < 0.3 + 0.6 + r[0])).to(D) * (0.4 + r[1]) - 0.3 * (t > 1.6)
        else:  # product of sines
            c = (0.7 + 0.4 * r[2]) * torch.sin(2 * math.pi * 0.8 * t) * torch.sin(
                2 * math.pi * (0.15 + 0.2 * r[0]) * t + 0.5)
        out.append(c)
    return torch.stack(out)[..., None]


def _labels(B: int) -> list[dict]:
    return [{"mass": [0.5, 0.8, 1.1][b % 3], "length": [0.1, 0.15][(b // 3) % 2],
             "arm_mass": 0.04, "kp": [8, 16, 32][(b // 2) % 3]} for b in range(B)]


def synthetic_batch(truth: SystemModel, B: int = 12, T: int = 201, dt: float = 0.01,
                    seed: int = 0, substeps: int = 2) -> RunBatch:
    """Simulate ``truth`` from rest; measured q is the simulated q (positions only)."""
    cmd = _commands(B, T, dt, seed)
    z = torch.zeros(B, T, 1, dtype=D)
    b0 = RunBatch(q=z, qd=z, command=cmd, voltage=torch.full_like(z, 12.0),
                  enable=torch.ones_like(z), mask=torch.ones(B, T, 1, dtype=torch.bool), dt=dt,
                  labels=_labels(B), names=[f"run{b}" for b in range(B)])
    with torch.no_grad():
        q = truth.rollout(PLANT(b0.labels), b0, substeps=substeps)
    qd = torch.gradient(q, spacing=dt, dim=1)[0]
    return RunBatch(q=q, qd=qd, command=cmd, voltage=b0.voltage, enable=b0.enable,
                    mask=b0.mask, dt=dt, labels=b0.labels, names=b0.names)


def _freeze(p: Param) -> None:
    p.raw.requires_grad_(False)


TRUTH = dict(kt=3.0, friction_base=0.06, friction_stribeck=0.08, backlash=0.02, armature=0.025)


def _stribeck_model(kt, fb, fs, backlash, armature, smooth=False) -> SystemModel:
    a = build_actuator(ActuatorConfig(type="sts3215", friction="stribeck", backlash=backlash,
                                      kt=kt, R=9.0, smooth=smooth)).double()
    f = a.friction
    f.friction_base.set(fb)
    f.friction_stribeck.set(fs)
    f.friction_viscous.set(0.05)
    f.dtheta_stribeck.set(0.1)
    f.alpha.set(1.5)
    j = JointParams(1, JointParamsConfig(armature=armature, fit_offset=False)).double()
    return SystemModel(a, j)


@pytest.mark.slow
def test_known_truth_recovery_stribeck_backlash_torque_constant():
    truth = _stribeck_model(**{"kt": TRUTH["kt"], "fb": TRUTH["friction_base"],
                               "fs": TRUTH["friction_stribeck"], "backlash": TRUTH["backlash"],
                               "armature": TRUTH["armature"]})
    data = synthetic_batch(truth, B=18, T=251)
    model = _stribeck_model(kt=3.6, fb=0.03, fs=0.04, backlash=0.01, armature=0.02)
    # identified: kt, Coulomb and Stribeck budgets, backlash, armature. Fixed at the truth:
    # R and viscous (both only shift the total damping kt^2/R + viscous, so one is redundant)
    # and the Stribeck shape (velocity scale, exponent).
    for p in (model.actuator.R, model.actuator.friction.friction_viscous,
              model.actuator.friction.dtheta_stribeck, model.actuator.friction.alpha):
        _freeze(p)
    cfg = TrainConfig(horizons=(0.5, 1.0, 2.5), stage_iters=(60, 50, 50), lr=0.05,
                      val_every=10, patience=100, label_inputs=("kp",))
    fit(model, PLANT, data, data, cfg)
    got = model.physical_parameters()
    pairs = {"actuator.kt": "kt", "actuator.friction.friction_base": "friction_base",
             "actuator.friction.friction_stribeck": "friction_stribeck",
             "actuator.backlash.width": "backlash", "joints.armature": "armature"}
    for name, key in pairs.items():
        assert got[name] == pytest.approx(TRUTH[key], rel=0.05), (name, got[name])


class _HysteresisServo(ServoActuator):
    """Truth outside the BAM family: a play-operator hysteresis torque with memory."""

    def _reset_state(self, ids) -> None:
        super()._reset_state(ids)
        self._z = None

    def _observe_state(self, frame, state) -> None:
        super()._observe_state(frame, state)
        z = self._z if getattr(self, "_z", None) is not None else torch.zeros_like(state.q)
        self._z = (z + state.qd * self.cfg.control_dt / 0.05).clamp(-1, 1)

    def torque(self, command, state, history=None):
        tau = super().torque(command, state, history)
        return tau - 0.35 * self._z


@pytest.mark.slow
def test_neural_residual_beats_parametric_when_truth_is_outside_the_family():
    torch.manual_seed(0)
    cfg_truth = ActuatorConfig(type="sts3215", friction="m1", kt=3.0, R=9.0)
    from neuract.actuators import _servo_config

    truth_act = _HysteresisServo(_servo_config(cfg_truth, {"kp": 32.0, "error_gain": 0.1649,
                                                            "voltage": 12.0})).double()
    truth = SystemModel(truth_act, JointParams(1, JointParamsConfig(armature=0.025)).double())
    data = synthetic_batch(truth, B=24, T=201, seed=3)
    tr, va = split_runs(len(data), 0.25, seed=0)
    train, test = data.select(tr), data.select(va)
    cfg = TrainConfig(horizons=(0.5, 2.0), stage_iters=(60, 40), lr=0.05, lr_net=3e-3,
                      val_every=10, patience=100)

    def make(residual: str) -> SystemModel:
        a = build_actuator(ActuatorConfig(type="sts3215", friction="m1", residual=residual,
                                          kt=3.3, R=9.0)).double()
        return SystemModel(a, JointParams(1, JointParamsConfig(armature=0.02,
                                                               fit_offset=False)).double())

    param = make("none")
    fit(param, PLANT, train, train, cfg)
    neural = make("mlp")
    neural.warm_start_from(param)  # residual on the fitted model
    e_start, _ = evaluate(neural, PLANT, test, cfg)
    assert e_start == pytest.approx(evaluate(param, PLANT, test, cfg)[0], rel=1e-9)
    fit(neural, PLANT, train, train, cfg)
    e_param, _ = evaluate(param, PLANT, test, cfg)
    e_neural, _ = evaluate(neural, PLANT, test, cfg)
    assert e_neural < 0.8 * e_param, (e_neural, e_param)


def test_gradcheck_short_identification_rollout():
    model = _stribeck_model(kt=3.0, fb=0.05, fs=0.05, backlash=0.02, armature=0.025,
                            smooth=True)
    data = synthetic_batch(model, B=3, T=6)
    names = ["actuator.kt.raw", "actuator.friction.friction_base.raw",
             "actuator.backlash.width.raw", "joints.armature.raw"]
    params = dict(model.named_parameters())
    start = tuple(params[n].detach().clone().requires_grad_(True) for n in names)


    def q_of(*raws):
        q = torch.func.functional_call(model, dict(zip(names, raws)),
                                       args=(PLANT(data.labels), data), kwargs={"substeps": 2})
        return q[:, 1:]

    assert torch.autograd.gradcheck(q_of, start, eps=1e-6, atol=1e-5, rtol=1e-3)


def _small_fit(tmp, seed=0, stop_after=None):
    truth = _stribeck_model(kt=3.0, fb=0.06, fs=0.08, backlash=0.02, armature=0.025)
    data = synthetic_batch(truth, B=4, T=51)
    model = _stribeck_model(kt=3.6, fb=0.03, fs=0.04, backlash=0.01, armature=0.02)
    cfg = TrainConfig(seed=seed, horizons=(0.2, 0.5), stage_iters=(5, 5), runs_per_iter=3,
                      val_every=3, checkpoint_every=3, substeps=1)
    rep = fit(model, PLANT, data, data, cfg, ckpt_dir=tmp, stop_after=stop_after)
    return model, rep


def test_resume_after_kill_equals_uninterrupted_fit(tmp_path):
    ref, rep_ref = _small_fit(tmp_path / "a")
    killed, rep_k = _small_fit(tmp_path / "b", stop_after=7)  # dies after 7; last ckpt at 6
    assert rep_k["interrupted"] and (tmp_path / "b" / "last.safetensors").is_file()
    resumed, rep_r = _small_fit(tmp_path / "b")  # a fresh process would start like this
    assert not rep_r["interrupted"] and rep_r["iteration"] == rep_ref["iteration"] == 10
    for (n, a), (_, b) in zip(ref.state_dict().items(), resumed.state_dict().items()):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12, msg=n)
    assert rep_r["best_val"] == pytest.approx(rep_ref["best_val"], abs=1e-12)


def test_short_fit_lowers_the_validation_error_and_keeps_the_best_weights():
    """Ten iterations from a wrong start cut the open-loop error several times; with a step
    large enough that validation gets worse again after its best, the model ends holding
    the best-validation weights, not the last ones."""
    truth = _stribeck_model(kt=3.0, fb=0.06, fs=0.08, backlash=0.02, armature=0.025)
    data = synthetic_batch(truth, B=4, T=51)
    model = _stribeck_model(kt=3.6, fb=0.03, fs=0.04, backlash=0.01, armature=0.02)
    cfg = TrainConfig(horizons=(0.2, 0.5), stage_iters=(5, 5), runs_per_iter=3, val_every=1,
                      substeps=1, lr=0.2)
    start, _ = evaluate(model, PLANT, data, cfg)
    rep = fit(model, PLANT, data, data, cfg)
    vals = [h["val_mae"] for h in rep["history"]]
    assert len(vals) == 10 and rep["best_val"] == min(vals)
    assert rep["best_val"] < start / 4, (start, vals)  # measured 0.0140 -> 0.0026 rad
    assert rep["best_iteration"] < 10 and vals[-1] > 1.1 * rep["best_val"]  # the rule is live
    assert evaluate(model, PLANT, data, cfg)[0] == pytest.approx(rep["best_val"], rel=1e-12)


def test_fit_is_deterministic_with_a_seed(tmp_path):
    a, _ = _small_fit(None, seed=1)
    b, _ = _small_fit(None, seed=1)
    c, _ = _small_fit(None, seed=2)
    pa, pb, pc = (m.physical_parameters() for m in (a, b, c))
    assert pa == pb
    assert pa != pc


def test_rollout_never_sees_measured_positions_after_t0():
    truth = _stribeck_model(kt=3.0, fb=0.06, fs=0.08, backlash=0.02, armature=0.025)
    data = synthetic_batch(truth, B=3, T=50)
    q1 = truth.rollout(PLANT(data.labels), data)
    corrupted = RunBatch(**{**data.__dict__, "q": data.q.clone(), "qd": data.qd.clone()})
    corrupted.q[:, 1:] += 1.0  # measurements after t = 0 must not matter
    corrupted.qd[:, 1:] -= 3.0
    q2 = truth.rollout(PLANT(data.labels), corrupted)
    torch.testing.assert_close(q1, q2)


def _write_pendulum_dataset(path, B: int = 4, T: int = 61) -> None:
    """B synthetic pendulum runs of T samples at 100 Hz as a neuract dataset at ``path``."""
    from neuract.data import Trajectory, TrajectoryMeta, write_dataset

    truth = _stribeck_model(kt=3.0, fb=0.06, fs=0.08, backlash=0.0 + 0.02, armature=0.025)
    data = synthetic_batch(truth, B=B, T=T)
    trajs = []
    for b in range(B):
        t = torch.arange(T, dtype=D).numpy() * 0.01
        ch = {"t": t, "q": data.q[b].numpy(), "qd": data.qd[b].numpy(),
              "q_goal": data.command[b].numpy()}
        meta = TrajectoryMeta(robot="pendulum", joint_names=("pendulum",), source="synthetic",
                              rate_hz=100.0, name=f"run{b}", labels=data.labels[b])
        trajs.append(Trajectory(ch, meta))
    write_dataset(trajs, path)


def test_fit_verb_writes_checkpoint_config_and_report(tmp_path, capsys):
    from neuract.cli import main
    from neuract.config import load_resolved
    from neuract.fit.verb import FitConfig

    _write_pendulum_dataset(tmp_path / "ds")
    out = tmp_path / "run"
    rc = main(["fit", "--data", str(tmp_path / "ds"), "--out", str(out),
               "--actuator.friction", "m1", "--train.stage-iters", "3", "3", "3",
               "--train.val-every", "3", "--val-fraction", "0.25"])
    assert rc == 0
    for f in ("model.safetensors", "config.json", "report.json", "report.md"):
        assert (out / f).is_file(), f
    cfg = load_resolved(FitConfig, out / "config.json")
    assert cfg.actuator.friction == "m1" and cfg.train.stage_iters == (3, 3, 3)
    report = json.loads((out / "report.json").read_text())
    assert report["n_val_runs"] == 1 and report["val_mae_rad"] > 0
    # the saved model is the best-validation one: its error is the best the fit recorded
    curve = [r["val_mae"] for r in report["learning_curve"] if "val_mae" in r]
    assert report["val_mae_rad"] == pytest.approx(report["best_val"], rel=1e-9)
    assert report["best_val"] == min(curve)
    rc = main(["fit", "--data", str(tmp_path / "ds"), "--actuator.type", "nope",
               "--out", str(tmp_path / "bad")])
    assert rc == 1 and "valid actuator types" in capsys.readouterr().err


FIT_ARGS = ["--actuator.friction", "m1", "--train.stage-iters", "3", "3", "3",
            "--train.val-every", "3", "--train.checkpoint-every", "3", "--val-fraction", "0.25"]


def _fit_cli(capsys, ds, out, *extra):
    from neuract.cli import main

    capsys.readouterr()
    rc = main(["fit", "--data", str(ds), "--out", str(out), *FIT_ARGS, *extra])
    return rc, capsys.readouterr()


def test_fit_verb_resume_after_kill_equals_uninterrupted_run(tmp_path, capsys, monkeypatch):
    import functools

    from safetensors.torch import load_file

    import neuract.fit.identify as ident

    _write_pendulum_dataset(tmp_path / "ds")
    assert _fit_cli(capsys, tmp_path / "ds", tmp_path / "a")[0] == 0
    with monkeypatch.context() as m:  # killed after 4 iterations: last checkpoint at 3
        m.setattr(ident, "fit", functools.partial(ident.fit, stop_after=4))
        assert _fit_cli(capsys, tmp_path / "ds", tmp_path / "b")[0] == 0
    rc, cap = _fit_cli(capsys, tmp_path / "ds", tmp_path / "b")
    assert rc == 0 and "at step 3 of 9" in cap.err, cap.err  # the progress reporter says so
    a, b = (load_file(str(tmp_path / d / "model.safetensors")) for d in ("a", "b"))
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=0, atol=1e-12, msg=k)
    # options that do not change the result may differ on resume
    rc, cap = _fit_cli(capsys, tmp_path / "ds", tmp_path / "b", "--threads", "2",
                       "--train.checkpoint-every", "5")
    assert rc == 0 and "at step 9 of 9" in cap.err, cap.err


def test_fit_verb_refuses_a_checkpoint_of_another_run(tmp_path, capsys):
    from neuract.config import load_resolved
    from neuract.fit.verb import FitConfig

    ds, out = tmp_path / "ds", tmp_path / "run"
    _write_pendulum_dataset(ds)
    assert _fit_cli(capsys, ds, out)[0] == 0
    ckpt = (out / "checkpoint" / "last.safetensors").read_bytes()

    rc, cap = _fit_cli(capsys, ds, out, "--train.lr", "0.01")
    assert rc == 1 and "resumed" not in cap.out
    assert "--train.lr: 0.03 (checkpoint) -> 0.01 (this run)" in cap.err
    assert "--overwrite" in cap.err and "config.json" in cap.err and "--out" in cap.err
    assert "actuator" not in cap.err and "data." not in cap.err  # only what differs
    # nothing was touched: the checkpoint and the recorded options are the first run's
    assert (out / "checkpoint" / "last.safetensors").read_bytes() == ckpt
    assert load_resolved(FitConfig, out / "config.json").train.lr == 0.03

    rc, cap = _fit_cli(capsys, ds, out, "--train.stage-iters", "3", "3", "4")
    assert rc == 1 and "--train.stage-iters: [3, 3, 3] (checkpoint) -> [3, 3, 4]" in cap.err

    rc, cap = _fit_cli(capsys, ds, out, "--limit", "3")
    assert rc == 1 and "--limit: 0 (checkpoint) -> 3 (this run)" in cap.err
    assert "the data (data.episodes): 4 (checkpoint) -> 3 (this run)" in cap.err
    assert "train." not in cap.err

    rc, cap = _fit_cli(capsys, ds, out, "--duration", "0.4")
    assert rc == 1 and "--duration: 0.0 (checkpoint) -> 0.4 (this run)" in cap.err
    assert "data.samples" in cap.err

    rc, cap = _fit_cli(capsys, ds, out, "--actuator.friction", "stribeck")
    assert rc == 1 and "missing" not in cap.err
    assert '--actuator.friction: "m1" (checkpoint) -> "stribeck" (this run)' in cap.err
    assert "--overwrite" in cap.err

    rc, cap = _fit_cli(capsys, ds, out, "--train.lr", "0.01", "--overwrite")
    assert rc == 0 and "resumed" not in cap.err
    rc, cap = _fit_cli(capsys, ds, out, "--train.lr", "0.01")
    assert rc == 0 and "at step 9 of 9" in cap.err


def test_fit_refuses_other_data_options_and_keyless_checkpoints(tmp_path):
    from neuract.errors import CheckpointError
    from neuract.fit.checkpoint import load_training, save_training

    _small_fit(tmp_path, stop_after=4)  # last checkpoint at 3
    truth = _stribeck_model(kt=3.0, fb=0.06, fs=0.08, backlash=0.02, armature=0.025)
    model = _stribeck_model(kt=3.6, fb=0.03, fs=0.04, backlash=0.01, armature=0.02)
    cfg = TrainConfig(horizons=(0.2, 0.5), stage_iters=(5, 5), runs_per_iter=3, val_every=3,
                      checkpoint_every=3, substeps=1)
    other = synthetic_batch(truth, B=3, T=51)
    with pytest.raises(CheckpointError, match=r"data\.train\.episodes: 4 \(checkpoint\) -> 3"):
        fit(model, PLANT, other, other, cfg, ckpt_dir=tmp_path)
    data = synthetic_batch(truth, B=4, T=51)
    cfg.lr = 0.01
    with pytest.raises(CheckpointError, match=r"train\.lr: 0\.03 \(checkpoint\) -> 0\.01"):
        fit(model, PLANT, data, data, cfg, ckpt_dir=tmp_path)
    # a state written before run keys were stored: refused, not resumed blindly
    opt = torch.optim.Adam(model.parameters())
    path = tmp_path / "last.safetensors"
    state = load_training(path, model, opt, torch.Generator())
    key = state.pop("key")
    save_training(path, model, opt, torch.Generator(), state)
    cfg.lr = 0.03
    with pytest.raises(CheckpointError, match="records no run key"):
        fit(model, PLANT, data, data, cfg, ckpt_dir=tmp_path)
    # a key from before a field was added: said so, not "rerun with the original options"
    for part in ("train", "val"):
        key["data"][part].pop("inputs_sha256")
    save_training(path, model, opt, torch.Generator(), {**state, "key": key})
    with pytest.raises(CheckpointError, match="older neuract.*inputs_sha256") as err:
        fit(model, PLANT, data, data, cfg, ckpt_dir=tmp_path)
    assert "original options" not in str(err.value)


class _SpyServo(ServoActuator):
    """Records every (command, state) the simulator hands to ``torque``."""

    def torque(self, command, state, history=None):
        self.seen.append((command.detach().clone(), state))
        return super().torque(command, state, history)


def test_actuator_state_is_simulated():
    """The rollout builds each ActuatorState from its own simulated state (not the measured
    one), with the plant's external torque, the effective joint inertia, the physics step and
    the runs' known inputs (label kp, supply voltage, torque enable)."""
    truth = _stribeck_model(kt=3.0, fb=0.06, fs=0.08, backlash=0.02, armature=0.025)
    data = synthetic_batch(truth, B=3, T=8)
    q_meas = data.q.clone()
    q_meas[:, 1:] += 1.0  # measurements after t = 0 that the simulation must never see
    volts = data.voltage - 1.0 + 0.1 * torch.arange(data.q.shape[1], dtype=D)[:, None]  # (B, T, 1)
    measured = RunBatch(**{**data.__dict__, "q": q_meas, "voltage": volts})
    act = _SpyServo(truth.actuator.cfg).double()
    act.load_state_dict(truth.actuator.state_dict())
    act.seen = []
    model = SystemModel(act, truth.joints)
    plant = PLANT(data.labels)
    with torch.no_grad():
        q_sim = model.rollout(plant, measured, substeps=2)
    T = data.q.shape[1]
    assert len(act.seen) == 2 * T  # two physics substeps per control step
    arm = float(truth.joints.armature().detach())
    kp = torch.tensor([[lab["kp"]] for lab in data.labels], dtype=D)
    for k, (cmd, st) in enumerate(act.seen):
        t = k // 2
        torch.testing.assert_close(cmd, data.command[:, t])
        if k % 2 == 0:  # first substep of control step t: the rollout's state at t
            torch.testing.assert_close(st.q, q_sim[:, t], rtol=0, atol=0)
        if k == 0:
            torch.testing.assert_close(st.q, measured.q[:, 0])  # only t = 0 is measured
            torch.testing.assert_close(st.qd, measured.qd[:, 0])
        elif t > 0:
            assert (st.q - measured.q[:, t]).abs().min() > 0.5  # never the measurement
        assert st.dt == pytest.approx(data.dt / 2)
        M = plant.mass_matrix(st.q)
        torch.testing.assert_close(st.inertia, torch.diagonal(M, dim1=-2, dim2=-1) + arm)
        torch.testing.assert_close(st.tau_ext, -plant.bias_forces(st.q, st.qd))
        torch.testing.assert_close(st.inputs["kp"], kp)
        torch.testing.assert_close(st.inputs["voltage"], measured.voltage[:, t])
        torch.testing.assert_close(st.inputs["torque_enable"], measured.enable[:, t])


def test_fit_verb_refuses_another_run_over_a_finished_one_without_checkpoint(tmp_path, capsys):
    """A finished fit whose checkpoint/ was removed still holds its model and report: a fit
    with other options into it is refused (it would mix with them if interrupted); the same
    options may run again."""
    import shutil

    ds, out = tmp_path / "ds", tmp_path / "run"
    _write_pendulum_dataset(ds)
    assert _fit_cli(capsys, ds, out)[0] == 0
    shutil.rmtree(out / "checkpoint")
    model = (out / "model.safetensors").read_bytes()
    rc, cap = _fit_cli(capsys, ds, out, "--train.lr", "0.01")
    assert rc == 1 and "--train.lr: 0.03 then, 0.01 now" in cap.err
    assert "--overwrite" in cap.err
    assert (out / "model.safetensors").read_bytes() == model
    assert _fit_cli(capsys, ds, out, "--threads", "2")[0] == 0


def test_fit_overwrite_with_a_bad_option_keeps_the_earlier_run(tmp_path, capsys):
    """--overwrite discards the earlier fit only once every option is known good, and only
    where --out is a fit's output."""
    ds, out = tmp_path / "ds", tmp_path / "run"
    _write_pendulum_dataset(ds)
    assert _fit_cli(capsys, ds, out)[0] == 0
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    for bad in (["--robot", "nosuchrobot"], ["--actuator.type", "bogus"]):
        rc, cap = _fit_cli(capsys, ds, out, *bad, "--overwrite")
        assert rc == 1, cap.err
        assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    other = tmp_path / "other"
    other.mkdir()
    (other / "report.json").write_text("{}")
    rc, cap = _fit_cli(capsys, ds, other, "--overwrite")
    assert rc == 1 and "not a fit's output" in cap.err
    assert (other / "report.json").read_text() == "{}"

"""Servo families from datasheets (neuract.servos): every family loads and builds an actuator,
every constant names its source, the readers take their register scales from the registry,
the BAM reader labels every log with its family and arm mass, and on the real bench logs a
family's own constants beat another family's."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
import torch

from neuract import servos
from neuract.actuators import ACTUATORS, SERVO_TYPES, ActuatorConfig, build_actuator
from neuract.actuators.base import ActuatorState
from neuract.errors import ConfigError, SchemaError
from neuract.io import registers
from neuract.io.bam import iter_bam_logs, iter_kscale_runs, read_bam_log
from neuract.io.bam_log import ARM_MASS_ASSUMED, KSCALE_ARM_MASS_SOURCE
from neuract.io.common import DataRepairWarning
from neuract.servos import SERVOS, Const, Register

FAMILIES = ("sts3215", "sts3250", "xm430", "xl330", "mx64", "mx106")


# ------------------------------------------------------------------------- the registry
def test_the_registry_holds_every_servo_of_our_data():
    assert tuple(SERVOS) == FAMILIES
    for name, fam in SERVOS.items():
        assert fam.name == name and fam.maker in ("Feetech", "ROBOTIS")
        assert fam.protocol and fam.model and fam.gain_semantics
        assert servos.family(name) is fam
        assert servos.family_of_motor(name) is fam


@pytest.mark.parametrize("name", FAMILIES)
def test_every_constant_has_a_unit_a_value_and_a_source(name):
    fam = SERVOS[name]
    consts = fam.constants()
    kinds = {"position", "velocity", "voltage", "temperature", "current"}
    assert kinds <= set(fam.registers), fam.registers.keys()
    assert {"load", "pwm"} & set(fam.registers)  # the duty the firmware applied
    assert len(consts) >= 11 + len(fam.registers)
    for key, c in consts.items():
        assert isinstance(c, Const | Register), key
        assert c.source.strip() and len(c.source) > 15, f"{name}.{key}: no source"
        assert c.unit.strip(), f"{name}.{key}: no unit"
        value = c.value if isinstance(c, Const) else c.scale
        assert math.isfinite(value) and value >= 0, f"{name}.{key} = {value}"
    for key in ("nominal_voltage", "stall_torque", "no_load_speed", "gear_ratio", "kt", "R",
                "kp", "error_gain", "max_duty", "temperature_limit"):
        assert getattr(fam, key).value > 0, f"{name}.{key}"
    assert 0 < fam.max_duty.value <= 1
    assert fam.stall_current is None or fam.stall_current.source


@pytest.mark.parametrize("name", FAMILIES)
def test_motor_constants_agree_with_the_datasheet_ratings(name):
    """The motor a fit starts from is the servo the datasheet rates: its stall torque
    (kt V / R) and no-load speed (V / kt) within a factor of 2 (catches a unit slip)."""
    fam = SERVOS[name]
    V, kt, R = fam.nominal_voltage.value, fam.kt.value, fam.R.value
    assert 0.5 < kt * V / R / fam.stall_torque.value < 2.0
    assert 0.5 < V / kt / fam.no_load_speed.value < 2.0
    if fam.stall_current is not None:  # a stall point fixes kt and R
        assert kt == pytest.approx(fam.stall_torque.value / fam.stall_current.value, rel=0.02)
    assert fam.registers["position"].scale == pytest.approx(2 * math.pi / 4096)


def test_dynamixel_gain_semantics_follow_the_e_manual_divisors():
    per_unit = 4096 / (2 * math.pi) / 885  # duty per (PWM count per pulse) per rad
    assert SERVOS["xm430"].error_gain.value == pytest.approx(per_unit / 128)
    assert SERVOS["xl330"].error_gain.value == pytest.approx(per_unit / 256)
    assert "256" in SERVOS["xl330"].error_gain.source and "128" in SERVOS["xm430"].gain_semantics


def test_motor_names_map_to_families_and_unknown_ones_to_none():
    for motor, name in (("XL330-M288-T", "xl330"), ("MX-64", "mx64"), ("mx106", "mx106"),
                        ("STS3215", "sts3215"), ("sts3215v12", "sts3215"),
                        ("xm430_w350", "xm430"), (" sts3250 ", "sts3250")):
        assert servos.family_of_motor(motor).name == name, motor
    for motor in ("sts3251", "xl320", "", "erob80_100"):
        assert servos.family_of_motor(motor) is None
    with pytest.raises(ConfigError, match="known families: sts3215, sts3250, xm430"):
        servos.family("nope")
    with pytest.raises(ConfigError, match="has no 'pwm' register; it has position"):
        SERVOS["sts3215"].register("pwm")


# ------------------------------------------------------------------- actuator types
@pytest.mark.parametrize("name", FAMILIES)
def test_each_family_is_an_actuator_type_with_its_own_defaults(name):
    assert name in ACTUATORS and name in SERVO_TYPES
    act = build_actuator(ActuatorConfig(type=name, friction="none"), n_dof=1)
    fam = SERVOS[name]
    for key, value in fam.servo_defaults().items():
        assert getattr(act.cfg, key) == value, key
    assert float(act.kt().detach()) == pytest.approx(fam.kt.value)
    # a 0.1 rad error at the family's default kp: the P law, as the registry states it
    q = torch.zeros(1, 1, dtype=torch.float64)
    state = ActuatorState(q=q, qd=q.clone())
    duty = act.duty(torch.full((1, 1), 0.1, dtype=torch.float64), state)
    expect = min(fam.kp.value * fam.error_gain.value * 0.1, fam.max_duty.value)
    assert float(duty) == pytest.approx(expect)


def test_an_unknown_type_lists_every_family():
    with pytest.raises(ConfigError) as exc:
        ActuatorConfig(type="sts3251").validate()
    msg = str(exc.value)
    assert "--actuator.type 'sts3251'" in msg or "actuator.type 'sts3251'" in msg
    assert "valid actuator types" in msg
    for name in (*FAMILIES, "servo", "mlp", "gru", "transformer"):
        assert name in msg, name
    with pytest.raises(ConfigError, match="residual net applies to the servo types servo, "
                       "sts3215, sts3250, xm430, xl330, mx64, mx106"):
        ActuatorConfig(type="mlp", residual="gru").validate()


def test_fit_refuses_an_unknown_type_naming_the_families(tmp_path, capsys):
    from neuract.cli import main

    rc = main(["fit", "--data", str(tmp_path / "none"), "--actuator.type", "xl331",
               "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc != 0 and "xl331" in err and "xl330" in err and "mx106" in err, err
    assert not (tmp_path / "o").exists()


# -------------------------------------------------------- readers take the registry's scales
def test_register_scales_come_from_the_registry():
    sts = SERVOS["sts3215"]
    assert registers.STS3215_RAD_PER_STEP == sts.register("position").scale
    assert registers.STS3215_A_PER_CURRENT_COUNT == sts.register("current").scale == 6.5e-3
    assert registers.STS3215_V_PER_VOLTAGE_COUNT == sts.register("voltage").scale
    assert 1.0 / registers.STS3215_LOAD_FULL_SCALE == sts.register("load").scale
    assert 1.0 / registers.DXL_PWM_FULL_SCALE == pytest.approx(SERVOS["xl330"].register(
        "pwm").scale, rel=1e-15)


def test_to_si_decodes_each_encoding():
    # STS speed: sign-magnitude, bit 15 = direction; load: bit 10
    np.testing.assert_allclose(registers.to_si(np.array([100, 0x8000 | 100]), "sts3250",
                                               "velocity"), np.array([100, -100]) * 2 * math.pi
                               / 4096)
    np.testing.assert_allclose(registers.to_si(np.array([500, 1024 + 500]), "sts3215", "load"),
                               [0.5, -0.5])
    # Dynamixel X: two's complement PWM (885 = 100 %) and 1 mA (XL330) current
    np.testing.assert_allclose(registers.to_si(np.array([885, 65536 - 885]), "xl330", "pwm"),
                               [1.0, -1.0])
    np.testing.assert_allclose(registers.to_si(np.array([65535]), "xl330", "current"), [-1e-3])
    np.testing.assert_allclose(registers.to_si(np.array([2**32 - 4096]), "xm430", "position"),
                               [-2 * math.pi])
    # MX protocol 1.0: current 4.5 mA * (CURRENT - 2048): the e-Manual's 2148 -> 450 mA
    np.testing.assert_allclose(registers.to_si(np.array([2148, 2048]), "mx64", "current"),
                               [0.45, 0.0])
    np.testing.assert_allclose(registers.to_si(np.array([1024 + 300]), "mx106", "velocity"),
                               [-300 * 0.114 * 2 * math.pi / 60])
    with pytest.raises(ConfigError, match="register encoding 'bcd'; accepted"):
        registers.decode(np.array([1]), "bcd")


# ----------------------------------------------------------------------- the BAM reader
def _log(motor=None, length=0.1, **meta):
    t = np.arange(20) * 0.01
    entries = [{"timestamp": float(x), "position": 0.1 * math.sin(x), "speed": 0.1,
                "goal_position": 0.1, "torque_enable": True, "input_volts": 7.4, "temp": 30.0,
                "load": 0} for x in t]
    d = {"mass": 0.49, "length": length, "kp": 400, "trajectory": "sin_sin", **meta,
         "entries": entries}
    if motor is not None:
        d["motor"] = motor
    return d


def _read(tmp_path, log, name="run.json"):
    p = tmp_path / name
    p.write_text(json.dumps(log))
    return read_bam_log(p).meta.labels


def test_bam_reader_labels_family_and_arm_mass_for_every_family(tmp_path):
    for motor, family in (("xl330", "xl330"), ("XL330-M288-T", "xl330"),
                          ("sts3250", "sts3250"), ("mx64", "mx64"), ("MX-106", "mx106"),
                          ("xm430", "xm430"), ("sts3215", "sts3215")):
        lab = _read(tmp_path, _log(motor, length=0.12))
        assert lab["family"] == family and lab["motor"] == motor
        assert lab["arm_mass"] == 0.0 and lab["arm_mass_source"] == ARM_MASS_ASSUMED
    # a K-Scale arm length on an STS3215: that arm's mass
    lab = _read(tmp_path, _log("sts3215", length=0.15))
    assert lab["arm_mass"] == 0.05 and lab["arm_mass_source"] == KSCALE_ARM_MASS_SOURCE
    assert _read(tmp_path, _log("xl330", length=0.15))["arm_mass"] == 0.0  # not a K-Scale arm
    # the log's own arm mass wins, under either of BAM's spellings
    lab = _read(tmp_path, _log("sts3215", length=0.15, arm_mass=0.02))
    assert lab["arm_mass"] == 0.02 and "arm_mass_source" not in lab
    lab = _read(tmp_path, _log("mx64", **{"arm-mass": 0.03}))
    assert lab["arm_mass"] == 0.03 and "arm-mass" in lab["arm_mass_source"]
    # no motor: no family and nothing assumed (the pendulum falls back as before)
    lab = _read(tmp_path, _log(None))
    assert "family" not in lab and "arm_mass" not in lab


def test_bam_reader_refuses_an_unknown_motor_naming_file_and_accepted_motors(tmp_path):
    with pytest.raises(SchemaError) as exc:
        _read(tmp_path, _log("xl320"), name="odd.json")
    msg = str(exc.value)
    assert "odd.json" in msg and "'xl320'" in msg and "accepted motors" in msg
    for name in FAMILIES:
        assert name in msg
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "odd.json").write_text(json.dumps(_log("foo")))
    with pytest.raises(SchemaError, match=r"odd.json: motor 'foo'"):
        list(iter_bam_logs(tmp_path / "dir"))


def test_xl330_pwm_is_decoded_for_any_spelling_of_the_motor(tmp_path):
    log = _log("XL330-M288-T")
    for i, e in enumerate(log["entries"]):
        e["load"] = 65536 - 885 if i % 2 else 885
    p = tmp_path / "x.json"
    p.write_text(json.dumps(log))
    pwm = read_bam_log(p)["pwm"][:, 0]
    np.testing.assert_allclose(pwm, np.where(np.arange(20) % 2, -1.0, 1.0))


def test_a_given_arm_mass_replaces_an_assumed_label_but_not_a_logged_one():
    from neuract.robot.pendulum import Pendulum

    assumed = {"mass": 0.5, "length": 0.1, "arm_mass": 0.0, "arm_mass_source": ARM_MASS_ASSUMED}
    logged = {"mass": 0.5, "length": 0.1, "arm_mass": 0.02}
    p = Pendulum.from_meta([assumed, logged], arm_mass=0.04)
    assert p.arm_mass.tolist() == [0.04, 0.02]
    assert Pendulum.from_meta([assumed, logged]).arm_mass.tolist() == [0.0, 0.02]


# ------------------------------------------------------------------ real bench data
BAM_SETS = (("bam_xl330_2026/raw", "xl330", 16), ("bam_xl330_2026/processed", "xl330", 16),
            ("bam_feetech_2024", "sts3250", 4))


@pytest.mark.realdata
@pytest.mark.parametrize("sub,family,n", BAM_SETS)
def test_every_bam_dataset_reads_with_its_family_and_arm_mass(shared_data, sub, family, n):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataRepairWarning)
        runs = list(iter_bam_logs(shared_data / sub))
    assert len(runs) == n
    for tr in runs:
        lab = tr.meta.labels
        assert lab["family"] == family
        assert lab["arm_mass"] == 0.0 and lab["arm_mass_source"] == ARM_MASS_ASSUMED
        assert {"mass", "length", "kp", "motor", "trajectory"} <= set(lab)


@pytest.mark.realdata
def test_kscale_runs_read_as_sts3215_with_their_arm_masses(shared_data):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataRepairWarning)
        runs = list(iter_kscale_runs(shared_data / "kscale_sts3215_12v" / "raw.tgz", limit=3))
    for tr in runs:
        lab = tr.meta.labels
        assert lab["family"] == "sts3215" and lab["arm_mass_source"] == KSCALE_ARM_MASS_SOURCE
        assert lab["arm_mass"] == {0.1: 0.036, 0.15: 0.05}[round(lab["length"], 3)]


@pytest.mark.realdata
def test_xl330_error_gain_matches_the_bench_logs(shared_data):
    """The XL330 P law (P / 256, not the e-Manual's 128): Present PWM against kp * error over
    the unsaturated samples of every raw run."""
    gain = SERVOS["xl330"].error_gain.value
    for tr in iter_bam_logs(shared_data / "bam_xl330_2026/raw"):
        on = tr["torque_enable"][:, 0].astype(bool)
        pwm, err = tr["pwm"][:, 0], (tr["q_goal"] - tr["q"])[:, 0]
        m = on & (np.abs(pwm) < 0.95) & (np.abs(pwm) > 0.02)
        fitted = np.sum(pwm[m] * err[m]) / np.sum(err[m] ** 2) / tr.meta.labels["kp"]
        assert fitted == pytest.approx(gain, rel=0.05), tr.meta.name


@pytest.mark.realdata
@pytest.mark.parametrize("name", ["mx64", "mx106"])
def test_mx_error_gain_and_no_load_speed_match_the_atomic_measurements(shared_data, name):
    d = json.loads((shared_data / "bam_atomic_mx_2024" / f"pwm_{name}.json").read_text())
    duty = np.array([s["period"] for s in d["samples"]]) / d["pwm_period"]
    x = np.array([s["kp"] * np.deg2rad(abs(s["position"] - s["target"])) for s in d["samples"]])
    assert np.sum(duty * x) / np.sum(x * x) == pytest.approx(SERVOS[name].error_gain.value,
                                                             rel=0.005)
    v = json.loads((shared_data / "bam_atomic_mx_2024" / f"velocity_{name}.json").read_text())
    volts = np.array([float(k) for k in v])
    speed12 = np.interp(12.0, volts, np.array(list(v.values())))
    assert speed12 == pytest.approx(SERVOS[name].no_load_speed.value, rel=0.10)


@pytest.mark.realdata
@pytest.mark.parametrize("sub,own", [("bam_xl330_2026/raw", "xl330"),
                                     ("bam_feetech_2024", "sts3250")])
def test_a_family_s_own_constants_beat_borrowed_ones_on_its_bench(shared_data, sub, own):
    """Before any fitting, the open-loop error of the family's own servo model on its bench
    logs is at most half that of the constants a user had to borrow before the registry
    (--actuator.type sts3215 or xm430, the only families then)."""
    from neuract.fit.batch import batch_from_trajectories
    from neuract.fit.identify import build_model, load_runs, plant_factory
    from neuract.fit.trainer import TrainConfig, evaluate
    from neuract.sim.simulate import JointParamsConfig

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runs = [r for r in load_runs(shared_data / sub)
                if r.meta.labels["trajectory"] in ("sin_sin", "up_and_down")]
    batch = batch_from_trajectories(runs, duration=3.0)
    mae = {}
    for name in (own, "sts3215", "xm430"):
        model = build_model(ActuatorConfig(type=name), JointParamsConfig(), 1)
        mae[name] = evaluate(model, plant_factory(), batch, TrainConfig())[0]
    assert mae[own] < 0.5 * min(mae["sts3215"], mae["xm430"]), mae


@pytest.mark.realdata
@pytest.mark.parametrize("sub,family", [("bam_xl330_2026/raw", "xl330"),
                                        ("bam_feetech_2024", "sts3250")])
def test_fit_runs_on_a_family_s_bench_logs(shared_data, tmp_path, capsys, sub, family):
    from neuract.cli import main

    out = tmp_path / "fit"
    rc = main(["fit", "--data", str(shared_data / sub), "--actuator.type", family,
               "--limit", "4", "--duration", "1.0", "--val-fraction", "0.25",
               "--train.horizons", "0.2", "--train.stage-iters", "2", "--train.val-every", "2",
               "--out", str(out)])
    assert rc == 0, capsys.readouterr().err
    cfg = json.loads((out / "config.json").read_text())["config"]
    assert cfg["actuator"]["type"] == family
    report = json.loads((out / "report.json").read_text())
    assert report["iteration"] == 2 and math.isfinite(report["train_mae_rad"])
    kt = report["parameters"]["actuator.kt"]
    assert 0.5 < float(np.ravel(kt)[0]) / SERVOS[family].kt.value < 2.0

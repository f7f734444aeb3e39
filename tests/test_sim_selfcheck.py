"""``neuract selfcheck`` runs end to end and reports passing checks, and fails when a
reference comparison does."""

from __future__ import annotations

from neuract import cli
from neuract.sim.selfcheck import SelfCheckConfig, run


def test_selfcheck_passes_on_bundled_so101(capsys):
    res = run(SelfCheckConfig(robot="so101", n_states=5, seconds=0.1))
    assert res["passed"] == 1.0
    assert res["mujoco/mass_matrix"] < 1e-9
    # both references were compared (MuJoCo and, for the bundled MJCF, Pinocchio), every row
    # below the tolerance; the rollout moved and matched MuJoCo's
    rows = {k: v for k, v in res.items() if k.startswith(("mujoco/", "pinocchio/"))}
    assert {"mujoco/inverse_dynamics", "mujoco/forward_dynamics_ext", "pinocchio/aba",
            "pinocchio/rnea", "mujoco/forward_dynamics", "mujoco/forward_dynamics_torch",
            "mujoco/mass_matrix_torch", "mujoco/bias_forces_torch"} <= set(rows)
    assert max(rows.values()) < 1e-9, rows
    assert res["rollout_max_q_travel"] > 0.01 and res["rollout_max_q_error_vs_mujoco"] < 1e-8
    out = capsys.readouterr().out
    assert "ALL CHECKS PASSED" in out
    assert "dynamics: the compiled kernel" in out or "dynamics: the torch path" in out


def test_selfcheck_fails_when_a_reference_comparison_does(monkeypatch, capsys):
    import neuract.sim.selfcheck as sc

    real = sc.compare_with_mujoco

    def off(*args, **kwargs):  # a mass matrix 1e-6 off MuJoCo's
        return {**real(*args, **kwargs), "mass_matrix": 1e-6}

    monkeypatch.setattr(sc, "compare_with_mujoco", off)
    res = run(SelfCheckConfig(robot="so101", n_states=5, seconds=0.1))
    assert res["passed"] == 0.0 and res["mujoco/mass_matrix"] == 1e-6
    assert "SOME CHECKS FAILED" in capsys.readouterr().out


def test_selfcheck_verb_registered():
    assert cli.VERBS["selfcheck"][0] == "neuract.sim.selfcheck"
    assert cli.main(["selfcheck", "--robot", "planar2", "--n-states", "3", "--seconds",
                     "0.05"]) == 0

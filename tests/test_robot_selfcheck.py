"""``neuract selfcheck`` runs end to end and reports passing checks."""

from __future__ import annotations

from neuract import cli
from neuract.robot.selfcheck import SelfCheckConfig, run


def test_selfcheck_passes_on_bundled_so101(capsys):
    res = run(SelfCheckConfig(robot="so101", n_states=5, seconds=0.1))
    assert res["passed"] == 1.0
    assert res["mujoco/mass_matrix"] < 1e-9
    assert "ALL CHECKS PASSED" in capsys.readouterr().out


def test_selfcheck_verb_registered():
    assert cli.VERBS["selfcheck"][0] == "neuract.robot.selfcheck"
    assert cli.main(["selfcheck", "--robot", "planar2", "--n-states", "3", "--seconds",
                     "0.05"]) == 0

"""The compiled forward-dynamics kernel (neuract.robot.native): same values and gradients as
the torch path (the reference), gradcheck of its hand-written backward, exact second
derivatives, MuJoCo agreement, and the cases where it steps aside for the torch path."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from _robot_cases import load_case
from neuract.robot import native
from neuract.robot.validate import mujoco_rollout, random_states
from neuract.sim import rollout
from neuract.sim.integrators import accelerations

CASES = ["toy", "bundled:so101", "bundled:panda"]  # toy: tree, slide joint, q_ref != 0

pytestmark = pytest.mark.skipif(
    native._compiler() is None, reason="no C++ compiler: the torch path runs everywhere")


def test_kernel_builds_where_a_compiler_exists():
    assert native.available(), native.build_error()


def _states(robot, B=4, seed=0, dtype=torch.float64):
    q, qd, _ = random_states(robot, B, seed=seed)
    tau = np.random.default_rng(seed).normal(size=q.shape)
    return [torch.as_tensor(x, dtype=dtype) for x in (q, qd, tau)]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize(("passive", "implicit_dt"), [(False, 0.0), (True, 0.0), (True, 0.01)])
def test_values_and_gradients_equal_the_torch_path(case, passive, implicit_dt, tmp_path):
    robot = load_case(case, tmp_path)
    robot = robot.replace(frictionloss=torch.full_like(robot.frictionloss, 0.05))
    q, qd, tau = (x.requires_grad_(True) for x in _states(robot, seed=1))
    got = native.accelerations(robot, q, qd, tau, passive, 1e-2, implicit_dt)
    assert got is not None
    ref = native._reference(robot, q, qd, tau, passive, 1e-2, implicit_dt)
    torch.testing.assert_close(got, ref, rtol=1e-12, atol=1e-12)
    g = torch.randn_like(ref)
    ga = torch.autograd.grad(got, (q, qd, tau), g)
    gb = torch.autograd.grad(ref, (q, qd, tau), g)
    for a, b in zip(ga, gb):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("case", ["toy", "bundled:so101"])
def test_gradcheck_and_second_derivatives(case, tmp_path):
    robot = load_case(case, tmp_path)
    q, qd, tau = (x.requires_grad_(True) for x in _states(robot, B=2, seed=2))

    def fn(q, qd, tau):
        return native.accelerations(robot, q, qd, tau, True, 1e-2, 0.01)

    assert torch.autograd.gradcheck(fn, (q, qd, tau))
    # create_graph: the backward recomputes on the torch path, so Hessians are exact
    assert torch.autograd.gradgradcheck(fn, (q, qd, tau))


def test_broadcast_inputs_and_float32(tmp_path):
    robot = load_case("bundled:so101", tmp_path)
    q, qd, tau = _states(robot, B=5, seed=3)
    tau1 = tau[0].clone().requires_grad_(True)  # (n,) against a batch of states
    q = q.requires_grad_(True)
    got = native.accelerations(robot, q, qd[:1], tau1)
    ref = native._reference(robot, q, qd[:1], tau1, True, 1e-2, 0.0)
    torch.testing.assert_close(got, ref, rtol=1e-12, atol=1e-12)
    for a, b in zip(torch.autograd.grad(got.sum(), (q, tau1)),
                    torch.autograd.grad(ref.sum(), (q, tau1))):
        assert a.shape == b.shape
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)
    r32 = robot.to(dtype=torch.float32)
    got32 = native.accelerations(r32, *(x.detach().float() for x in (q, qd, tau)))
    assert got32.dtype == torch.float32
    ref64 = native._reference(robot, q.detach(), qd, tau, True, 1e-2, 0.0)
    torch.testing.assert_close(got32.double(), ref64, rtol=1e-5, atol=1e-4)


def test_steps_aside_for_the_torch_path(tmp_path):
    robot = load_case("bundled:so101", tmp_path)
    q, qd, tau = _states(robot, seed=4)
    assert native.accelerations(robot, q, qd, tau) is not None
    for name in ("pi_link", "armature", "damping", "frictionloss", "pos_const", "rot_cos",
                 "q_ref", "gravity"):
        r = robot.replace(**{name: getattr(robot, name).clone().requires_grad_(True)})
        assert native.accelerations(r, q, qd, tau) is None, name
    assert native.accelerations(robot, q.float(), qd, tau) is None  # mixed dtypes
    assert native.accelerations(robot, q, qd, tau, implicit_dt=torch.tensor(0.01)) is None
    with native.disabled():
        assert native.accelerations(robot, q, qd, tau) is None
    assert native.enabled()
    # with parameters that need a gradient the integrator still differentiates them (torch)
    damping = robot.damping.clone().requires_grad_(True)
    acc = accelerations(robot.replace(damping=damping), q, qd.requires_grad_(True), tau)
    g, = torch.autograd.grad(acc.sum(), damping)
    assert g.abs().sum() > 0


def test_inplace_change_of_a_robot_tensor_is_seen(tmp_path):
    robot = load_case("bundled:so101", tmp_path)
    robot = robot.replace(damping=robot.damping.clone())
    q, qd, tau = _states(robot, seed=5)
    before = native.accelerations(robot, q, qd, tau)
    robot.damping.add_(0.5)  # the cached constants are rebuilt
    after = native.accelerations(robot, q, qd, tau)
    assert (after - before).abs().max() > 1e-6
    torch.testing.assert_close(after, native._reference(robot, q, qd, tau, True, 1e-2, 0.0),
                               rtol=1e-12, atol=1e-12)


def test_singular_mass_matrix_falls_back_to_the_torch_path(tmp_path):
    robot = load_case("bundled:so101", tmp_path)
    massless = robot.replace(pi_link=torch.zeros_like(robot.pi_link),
                             armature=torch.zeros_like(robot.armature))
    q, qd, tau = _states(robot, seed=6)
    assert native.accelerations(massless, q, qd, tau) is None


def test_without_a_compiler_everything_runs_on_the_torch_path(tmp_path, monkeypatch):
    robot = load_case("bundled:so101", tmp_path)
    q, qd, tau = _states(robot, seed=7)
    want = robot.forward_dynamics(q, qd, tau)
    monkeypatch.setattr(native, "_state", {"lib": None, "error": None, "tried": False,
                                           "enabled": True})
    monkeypatch.setattr(native, "_compiler", lambda: None)
    assert native.accelerations(robot, q, qd, tau) is None
    assert "compiler" in native.build_error()
    torch.testing.assert_close(robot.forward_dynamics(q, qd, tau), want, rtol=1e-12, atol=0)


def test_build_failure_is_reported_and_falls_back(tmp_path, monkeypatch):
    monkeypatch.setattr(native, "_state", {"lib": None, "error": None, "tried": False,
                                           "enabled": True})
    monkeypatch.setattr(native, "SOURCE", tmp_path / "broken.cpp")
    (tmp_path / "broken.cpp").write_text("this is not C++\n")
    monkeypatch.setenv("NEURACT_CACHE_DIR", str(tmp_path / "cache"))
    assert not native.available()
    assert "broken.cpp" in native.build_error()
    assert not list((tmp_path / "cache").rglob("*.so"))  # nothing half-written is kept


def test_rollout_gradients_equal_the_torch_path(tmp_path):
    robot = load_case("toy", tmp_path)
    gen = torch.Generator().manual_seed(8)
    tau = 0.1 * torch.randn(3, 15, robot.n_dof, dtype=torch.float64, generator=gen)
    q0 = 0.1 * torch.randn(3, robot.n_dof, dtype=torch.float64, generator=gen)

    def grads():
        t, q = tau.clone().requires_grad_(True), q0.clone().requires_grad_(True)
        out = rollout(robot, q, torch.zeros_like(q), t, 0.01)
        out2 = rollout(robot, q, torch.zeros_like(q), t, 0.01, implicit_damping=True,
                       integrator="euler")
        out3 = rollout(robot, q, torch.zeros_like(q), t, 0.01, integrator="rk4")
        loss = (out.q.square().sum() + out.qd.sum() + out2.q.sin().sum()
                + out3.qd.square().sum())
        return torch.autograd.grad(loss, (t, q))

    fast = grads()
    with native.disabled():
        ref = grads()
    for a, b in zip(fast, ref):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("use_native", [True, False])
def test_rollout_matches_mujoco_both_paths(use_native, tmp_path):
    """The same check as test_sim_rollout's, for the kernel and for the torch reference."""
    robot = load_case("bundled:so101", tmp_path)
    robot = robot.replace(frictionloss=torch.zeros_like(robot.frictionloss))
    rng = np.random.default_rng(3)
    q0, qd0 = rng.uniform(-0.5, 0.5, robot.n_dof), rng.normal(size=robot.n_dof)
    tau = rng.normal(size=(200, robot.n_dof)) * 0.2
    ref = mujoco_rollout(robot, q0, qd0, tau, 0.002)
    native.set_enabled(use_native)
    try:
        out = rollout(robot, torch.as_tensor(q0), torch.as_tensor(qd0), torch.as_tensor(tau),
                      0.002, implicit_damping=True)
    finally:
        native.set_enabled(True)
    assert np.abs(ref - q0).max() > 0.1
    assert np.abs(out.q.numpy() - ref).max() < 1e-8


@pytest.mark.parametrize("case", CASES)
def test_mass_matrix_and_bias_equal_the_torch_path(case, tmp_path):
    robot = load_case(case, tmp_path)
    q, qd, _ = (x.requires_grad_(True) for x in _states(robot, seed=9))
    M, b = native.mass_matrix_and_bias(robot, q, qd)
    M0, b0 = native._reference_mass_bias(robot, q, qd)
    torch.testing.assert_close(M, M0, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(b, b0, rtol=1e-12, atol=1e-12)
    gM, gb = torch.randn_like(M0), torch.randn_like(b0)
    for loss, loss0 in (((M * gM).sum() + (b * gb).sum(), (M0 * gM).sum() + (b0 * gb).sum()),
                        ((M * gM).sum(), (M0 * gM).sum()),  # one output unused
                        ((b * gb).sum(), (b0 * gb).sum())):
        ga = torch.autograd.grad(loss, (q, qd), retain_graph=True, allow_unused=True)
        gr = torch.autograd.grad(loss0, (q, qd), retain_graph=True, allow_unused=True)
        for a, r in zip(ga, gr):
            if r is None:  # M does not depend on qd
                assert a is None or a.abs().max() == 0
            else:
                torch.testing.assert_close(a, r, rtol=1e-10, atol=1e-10)
    # the public functions take the kernel
    torch.testing.assert_close(robot.mass_matrix(q), M0, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(robot.bias_forces(q, qd), b0, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", ["toy", "bundled:so101"])
def test_mass_matrix_and_bias_gradcheck(case, tmp_path):
    robot = load_case(case, tmp_path)
    q, qd, _ = (x.requires_grad_(True) for x in _states(robot, B=2, seed=10))

    def fn(q, qd):
        return native.mass_matrix_and_bias(robot, q, qd)

    assert torch.autograd.gradcheck(fn, (q, qd))
    assert torch.autograd.gradgradcheck(fn, (q, qd))


def test_simulate_with_the_kernel_equals_the_torch_path(tmp_path):
    """The open-loop rollout that `neuract fit` differentiates (actuator, joint parameters with
    gradients, offset moving q): same positions and parameter gradients either way."""
    from neuract.actuators import ActuatorConfig, build_actuator
    from neuract.sim.simulate import JointParams, JointParamsConfig, simulate

    robot = load_case("bundled:so101", tmp_path)
    n = robot.n_dof
    act = build_actuator(ActuatorConfig(), n_dof=n).double()
    joints = JointParams(n, JointParamsConfig(damping=0.05, fit_damping=True)).double()
    gen = torch.Generator().manual_seed(11)
    cmd = 0.3 * torch.randn(3, 20, n, dtype=torch.float64, generator=gen)
    q0 = 0.2 * torch.randn(3, n, dtype=torch.float64, generator=gen)
    params = [p for p in [*act.parameters(), *joints.parameters()] if p.requires_grad]
    assert len(params) >= 3

    def run():
        out = simulate(robot, act, joints, q0, torch.zeros_like(q0), cmd, 0.01, substeps=2)
        return out.q, torch.autograd.grad(out.q.square().sum(), params)

    q_native, g_native = run()
    with native.disabled():
        q_torch, g_torch = run()
    assert (q_native - q0[:, None]).abs().max() > 1e-3  # it moved
    torch.testing.assert_close(q_native, q_torch, rtol=1e-10, atol=1e-12)
    for a, b in zip(g_native, g_torch):
        torch.testing.assert_close(a, b, rtol=1e-8, atol=1e-10)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.jit.trace
def test_graph_capture_and_inference_mode(tmp_path):
    robot = load_case("bundled:so101", tmp_path)
    q, qd, tau = _states(robot, seed=12)
    want = native._reference(robot, q, qd, tau, True, 1e-2, 0.0)
    traced = torch.jit.trace(lambda q, qd, tau: accelerations(robot, q, qd, tau), (q, qd, tau))
    torch.testing.assert_close(traced(q, qd, tau), want, rtol=1e-12, atol=1e-12)
    with torch.inference_mode():
        r = load_case("bundled:so101", tmp_path)
        torch.testing.assert_close(native.accelerations(r, q, qd, tau), want, rtol=1e-12,
                                   atol=1e-12)

"""Native rigid-body dynamics: one compiled kernel call per batch instead of hundreds of
torch operations.

The torch implementation (:mod:`neuract.robot.dynamics`) spends most of its time in the
dispatch of small tensor operations: a step of a 6-DoF arm is a few hundred of them, forward
and backward, whatever the batch. ``csrc/rigid_body.cpp`` computes the same quantities
sample by sample in plain C++ (double arithmetic for float32 and float64 tensors):

* :func:`accelerations`: kinematics, world inertias, RNEA bias forces, CRBA mass matrix
  (armature and MuJoCo's implicit damping on its diagonal), passive torques, Cholesky solve;
  its backward is a vector-Jacobian product: ``u = M^-1 g`` is the torque gradient, and one
  reverse pass through the RNEA at the computed accelerations gives the gradients of q and
  qd (implicit-function theorem, as in :mod:`neuract.robot.adjoint`);
* :func:`mass_matrix_and_bias`: M(q) and b(q, qd), with the reverse pass through the CRBA
  and the RNEA as backward.

It is compiled with the system C++ compiler on first use (about 2-5 s; ``$CXX``, else
``c++``, ``g++`` or ``clang++``) into a cache (:func:`cache_dir`, else a temporary
directory) and loaded with ctypes; it needs no torch headers. When there is no compiler, the
build fails, ``NEURACT_NATIVE=0`` is set or :func:`set_enabled` / :func:`disabled` turned it
off, everything runs on the torch path, which stays the reference: the tests hold the two to
1e-12 in float64, and both to MuJoCo at 1e-9.

The kernel applies when the tensors are on the CPU in the robot's dtype (float32/float64),
there are no external wrenches and no tensor of the robot requires a gradient (then gradients
flow to q, qd and tau only); otherwise the callers use the torch path. Second derivatives
(``create_graph``) are exact: the backward then recomputes with the differentiable torch path.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import weakref
from pathlib import Path

import torch
from torch import Tensor

from neuract.atomic import atomic_path
from neuract.robot.dynamics_backward import solve_symmetric
from neuract.robot.kinematics import link_poses, motion_subspace
from neuract.robot.rigid_body import _crba_vec, _rnea_vec, _world_params

__all__ = ["SOURCE", "available", "set_enabled", "enabled", "disabled", "cache_dir",
           "accelerations", "mass_matrix_and_bias", "build_error", "PARAM_FIELDS"]

SOURCE = Path(__file__).with_name("csrc") / "rigid_body.cpp"
LIBRARY = "neuract_rigid_body.so"
FLAGS = ("-O3", "-shared", "-fPIC", "-std=c++17")
PARAM_FIELDS = ("q_ref", "T_cos", "T_sin", "T_const", "T_slide", "pi_link", "armature",
                "damping", "frictionloss", "gravity")
"""the robot's tensors the kernel reads; none may require a gradient"""

_state: dict = {"lib": None, "error": None, "tried": False,
                "enabled": os.environ.get("NEURACT_NATIVE", "1") != "0"}


def set_enabled(on: bool) -> None:
    """Use the kernel where it applies (default; ``NEURACT_NATIVE=0`` starts with it off)."""
    _state["enabled"] = bool(on)


def enabled() -> bool:
    """Whether callers use the kernel where it applies (it may still be unavailable)."""
    return _state["enabled"]


@contextlib.contextmanager
def disabled():
    """Run the torch path inside this block (the reference), then restore the setting."""
    was = _state["enabled"]
    _state["enabled"] = False
    try:
        yield
    finally:
        _state["enabled"] = was


def cache_dir() -> Path:
    """``$NEURACT_CACHE_DIR``, else ``$XDG_CACHE_HOME/neuract/ops`` (``~/.cache/neuract/ops``),
    the same place as the int8 operator's library."""
    env = os.environ.get("NEURACT_CACHE_DIR")
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "neuract" / "ops"


def _compiler() -> str | None:
    for name in (os.environ.get("CXX"), "c++", "g++", "clang++"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def _build(cxx: str) -> Path:
    src = SOURCE.read_bytes()
    key = hashlib.sha256(src + " ".join((cxx, *FLAGS, sys.platform)).encode()).hexdigest()[:16]
    for root in (cache_dir(), Path(tempfile.gettempdir()) / f"neuract-ops-{os.getuid()}"):
        lib = root / f"rigid_body-{key}" / LIBRARY
        if lib.is_file():
            return lib
        try:
            lib.parent.mkdir(parents=True, exist_ok=True)
            with atomic_path(lib) as tmp:  # a failed compile leaves no library behind
                done = subprocess.run([cxx, *FLAGS, str(SOURCE), "-o", str(tmp)],
                                      capture_output=True, text=True, timeout=300)
                if done.returncode != 0:
                    raise RuntimeError(f"{cxx} exit {done.returncode}: {done.stderr[-1500:]}")
            return lib
        except OSError:  # unwritable cache: try the temporary directory
            continue
    raise RuntimeError("no writable directory for the compiled kernel")


def _load():
    if _state["tried"]:
        return _state["lib"]
    _state["tried"] = True
    cxx = _compiler()
    if cxx is None:
        _state["error"] = "no C++ compiler found ($CXX, c++, g++, clang++)"
        return None
    try:
        lib = ctypes.CDLL(str(_build(cxx)))
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        _state["error"] = f"building {SOURCE.name} failed: {exc}"
        return None
    p, i32, i64, d = ctypes.c_void_p, ctypes.c_int, ctypes.c_int64, ctypes.c_double
    for suffix in ("f64", "f32"):
        fwd = getattr(lib, f"nr_forward_{suffix}")
        fwd.argtypes = [i32, p, p, p, i64, p, p, p, p, i32, d, d]
        fwd.restype = i32
        bwd = getattr(lib, f"nr_backward_{suffix}")
        bwd.argtypes = [i32, p, p, p, i64, p, p, p, p, p, p, p, i32, d, d]
        bwd.restype = i32
        mb = getattr(lib, f"nr_mass_bias_{suffix}")
        mb.argtypes = [i32, p, p, p, i64, p, p, p, p]
        mb.restype = i32
        mbb = getattr(lib, f"nr_mass_bias_backward_{suffix}")
        mbb.argtypes = [i32, p, p, p, i64, p, p, p, p, p, p]
        mbb.restype = i32
    if lib.nr_abi_version() != 2:
        _state["error"] = f"{SOURCE.name}: unexpected library version"
        return None
    _state["lib"] = lib
    return lib


def available() -> bool:
    """Whether the kernel is built and loaded (builds it on the first call)."""
    return _load() is not None


def build_error() -> str | None:
    """Why the kernel is unavailable (``None`` when it is loaded or not yet tried)."""
    return _state["error"]


_consts: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _robot_consts(robot):
    """(parent int32, hinge int32, constants float64) of the robot, cached per robot object
    and rebuilt when one of its tensors was changed in place; ``None`` when the kernel cannot
    take this robot (a link listed before its parent)."""
    tensors = [getattr(robot, f) for f in PARAM_FIELDS]
    try:
        version = tuple(t._version for t in tensors)
    except RuntimeError:  # inference tensors keep no version counter (and are not modified)
        version = None
    hit = _consts.get(robot)
    if hit is not None and hit[0] == version:
        return hit[1]
    if any(par >= i for i, par in enumerate(robot.parent)):
        packed = None
    else:
        n = robot.n_dof
        f64 = [t.detach().to("cpu", torch.float64) for t in tensors]
        q_ref, T_cos, T_sin, T_const, T_slide, pi, arm, damp, fric, grav = f64
        I_l = pi[:, 4:]
        xx, yy, zz, xy, xz, yz = I_l.unbind(-1)
        I3 = torch.stack([xx, xy, xz, xy, yy, yz, xz, yz, zz], -1)
        parts = [q_ref, *(T[:, :3, :].reshape(n, 12) for T in (T_const, T_cos, T_sin, T_slide)),
                 pi[:, 0], pi[:, 1:4], I3, arm, damp, fric, grav]
        consts = torch.cat([x.reshape(-1) for x in parts]).contiguous()
        parent = torch.tensor(robot.parent, dtype=torch.int32)
        hinge = robot.is_hinge.to("cpu", torch.int32).contiguous()
        packed = (parent, hinge, consts)
    _consts[robot] = (version, packed)
    return packed


def _reference(robot, q, qd, tau, passive, eps, implicit_dt):
    """The torch path of the same quantity (plain autograd, twice differentiable)."""
    R, p = link_poses(robot, q)
    S, W = motion_subspace(robot, R, p), _world_params(robot, R, p)
    M = _crba_vec(robot, W, S)
    force = tau - _rnea_vec(robot, W, S, qd, None, None)
    if passive:
        force = force - robot.damping * qd - robot.frictionloss * torch.tanh(qd / eps)
    if implicit_dt > 0.0:
        M = M + torch.diag_embed(implicit_dt * robot.damping)
    return solve_symmetric(M, force)


def _dense(x: Tensor, shape) -> Tensor:
    return x if x.shape == shape and x.is_contiguous() else x.expand(shape).contiguous()


def _shape(q: Tensor, qd: Tensor, tau: Tensor):
    if q.shape == qd.shape == tau.shape:
        return q.shape
    return torch.broadcast_shapes(q.shape, qd.shape, tau.shape)


def _forward(q, qd, tau, packed, opts, shape):
    """qdd (shape) by the kernel; q, qd, tau are broadcast to ``shape``."""
    passive, eps, implicit_dt = opts
    qc, qdc, tauc = _dense(q, shape), _dense(qd, shape), _dense(tau, shape)
    qdd = torch.empty(shape, dtype=q.dtype)
    n = shape[-1]
    lib = _state["lib"]
    fn = lib.nr_forward_f64 if q.dtype == torch.float64 else lib.nr_forward_f32
    parent, hinge, consts = packed
    if fn(n, parent.data_ptr(), hinge.data_ptr(), consts.data_ptr(), qdd.numel() // n,
          qc.data_ptr(), qdc.data_ptr(), tauc.data_ptr(), qdd.data_ptr(), passive, eps,
          implicit_dt):
        raise _NotPositiveDefinite  # the torch path decides what a singular M gives
    return qdd


class _NotPositiveDefinite(Exception):
    pass


class _NativeAccelerations(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, qd, tau, robot, packed, opts, shape):
        qdd = _forward(q, qd, tau, packed, opts, shape)
        ctx.robot, ctx.packed, ctx.opts = robot, packed, opts
        ctx.shapes = (q.shape, qd.shape, tau.shape)
        ctx.save_for_backward(q, qd, tau, qdd)
        return qdd

    @staticmethod
    def backward(ctx, g):
        q, qd, tau, qdd = ctx.saved_tensors
        need = ctx.needs_input_grad[:3]
        if torch.is_grad_enabled():  # create_graph: differentiate the torch path instead
            wanted = [x for x, nd in zip((q, qd, tau), need) if nd]
            with torch.enable_grad():
                ref = _reference(ctx.robot, q, qd, tau, *ctx.opts)
                got = iter(torch.autograd.grad(ref, wanted, g, create_graph=True,
                                               allow_unused=True))
            return (*(next(got) if nd else None for nd in need), None, None, None, None)
        shape = qdd.shape
        qc, qdc, gc = _dense(q, shape), _dense(qd, shape), g.contiguous()
        gq, gqd, gtau = (torch.empty(shape, dtype=qdd.dtype) for _ in range(3))
        n = shape[-1]
        lib = _state["lib"]
        fn = lib.nr_backward_f64 if qdd.dtype == torch.float64 else lib.nr_backward_f32
        parent, hinge, consts = ctx.packed
        passive, eps, implicit_dt = ctx.opts
        fn(n, parent.data_ptr(), hinge.data_ptr(), consts.data_ptr(), qdd.numel() // n,
           qc.data_ptr(), qdc.data_ptr(), qdd.data_ptr(), gc.data_ptr(), gq.data_ptr(),
           gqd.data_ptr(), gtau.data_ptr(), passive, eps, implicit_dt)
        out = [(x if x.shape == s else x.sum_to_size(s)) if nd else None
               for x, s, nd in zip((gq, gqd, gtau), ctx.shapes, need)]
        return (*out, None, None, None, None)


def _reference_mass_bias(robot, q, qd):
    R, p = link_poses(robot, q)
    S, W = motion_subspace(robot, R, p), _world_params(robot, R, p)
    return _crba_vec(robot, W, S), _rnea_vec(robot, W, S, qd, None, None)


def _mass_bias(q, qd, packed, shape):
    qc, qdc = _dense(q, shape), _dense(qd, shape)
    n = shape[-1]
    M = torch.empty((*shape, n), dtype=q.dtype)
    b = torch.empty(shape, dtype=q.dtype)
    lib = _state["lib"]
    fn = lib.nr_mass_bias_f64 if q.dtype == torch.float64 else lib.nr_mass_bias_f32
    parent, hinge, consts = packed
    fn(n, parent.data_ptr(), hinge.data_ptr(), consts.data_ptr(), b.numel() // n,
       qc.data_ptr(), qdc.data_ptr(), M.data_ptr(), b.data_ptr())
    return M, b


class _NativeMassBias(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, qd, robot, packed, shape):
        M, b = _mass_bias(q, qd, packed, shape)
        ctx.robot, ctx.packed = robot, packed
        ctx.shapes = (q.shape, qd.shape)
        ctx.save_for_backward(q, qd)
        return M, b

    @staticmethod
    def backward(ctx, gM, gb):
        q, qd = ctx.saved_tensors
        need = ctx.needs_input_grad[:2]
        if torch.is_grad_enabled():  # create_graph: differentiate the torch path instead
            wanted = [x for x, nd in zip((q, qd), need) if nd]
            with torch.enable_grad():
                M, b = _reference_mass_bias(ctx.robot, q, qd)
                outs = [(o, g) for o, g in ((M, gM), (b, gb)) if g is not None]
                got = iter(torch.autograd.grad([o for o, _ in outs], wanted,
                                               [g for _, g in outs], create_graph=True,
                                               allow_unused=True))
            return (*(next(got) if nd else None for nd in need), None, None, None)
        shape = torch.broadcast_shapes(*ctx.shapes)
        qc, qdc = _dense(q, shape), _dense(qd, shape)
        gMc = None if gM is None else gM.contiguous()
        gbc = None if gb is None else gb.contiguous()
        gq, gqd = torch.empty(shape, dtype=q.dtype), torch.empty(shape, dtype=q.dtype)
        n = shape[-1]
        lib = _state["lib"]
        fn = (lib.nr_mass_bias_backward_f64 if q.dtype == torch.float64
              else lib.nr_mass_bias_backward_f32)
        parent, hinge, consts = ctx.packed
        fn(n, parent.data_ptr(), hinge.data_ptr(), consts.data_ptr(), gq.numel() // n,
           qc.data_ptr(), qdc.data_ptr(), None if gMc is None else gMc.data_ptr(),
           None if gbc is None else gbc.data_ptr(), gq.data_ptr(), gqd.data_ptr())
        out = [(x if x.shape == s else x.sum_to_size(s)) if nd else None
               for x, s, nd in zip((gq, gqd), ctx.shapes, need)]
        return (*out, None, None, None)


_FLOAT = (torch.float32, torch.float64)


def _applies(robot, *xs: Tensor):
    """The robot's packed constants when the kernel can take these tensors, else None."""
    if not _state["enabled"] or torch.compiler.is_compiling() or torch.jit.is_tracing():
        return None  # graph capture (torch.compile / export / jit) traces the torch path
    dt = xs[0].dtype
    if dt not in _FLOAT or robot.pi_link.dtype != dt or robot.pi_link.device.type != "cpu":
        return None
    for x in xs:
        if x.dtype != dt or x.device.type != "cpu":
            return None
    if _state["lib"] is None and (_state["tried"] or _load() is None):
        return None
    if any(getattr(robot, f).requires_grad for f in PARAM_FIELDS):
        return None
    return _robot_consts(robot)


def mass_matrix_and_bias(robot, q: Tensor, qd: Tensor) -> tuple[Tensor, Tensor] | None:
    """M(q) (..., n, n) (armature included) and b(q, qd) (..., n) by the kernel,
    differentiable in q and qd; ``None`` where the kernel does not apply (module doc)."""
    packed = _applies(robot, q, qd)
    if packed is None:
        return None
    shape = q.shape if q.shape == qd.shape else torch.broadcast_shapes(q.shape, qd.shape)
    if torch.is_grad_enabled() and (q.requires_grad or qd.requires_grad):
        return _NativeMassBias.apply(q, qd, robot, packed, shape)
    return _mass_bias(q, qd, packed, shape)


def accelerations(robot, q: Tensor, qd: Tensor, tau: Tensor, passive: bool = True,
                  friction_eps: float = 1e-2, implicit_dt: float = 0.0) -> Tensor | None:
    """qdd (..., n_dof) = (M + dt_i D)^-1 (tau - b(q, qd) [+ passive torques]) by the kernel,
    differentiable in q, qd and tau; ``None`` when the kernel is off or unavailable or does
    not apply (see the module doc): then use the torch path."""
    if isinstance(implicit_dt, Tensor) or isinstance(friction_eps, Tensor):
        return None  # a per-row time step: the torch path
    packed = _applies(robot, q, qd, tau)
    if packed is None:
        return None
    opts = (int(bool(passive)), float(friction_eps), float(implicit_dt))
    shape = _shape(q, qd, tau)
    try:
        if torch.is_grad_enabled() and (q.requires_grad or qd.requires_grad
                                        or tau.requires_grad):
            return _NativeAccelerations.apply(q, qd, tau, robot, packed, opts, shape)
        return _forward(q, qd, tau, packed, opts, shape)
    except _NotPositiveDefinite:
        return None

"""mujoco.sysid on the STS3215 benchmark: the Menagerie-style MuJoCo servo, joint parameters
fitted by MuJoCo's own system identification (Gauss-Newton, finite-difference Jacobians over
batched rollouts). Runs in the peers venv (``mujoco[sysid]`` extra).

Called by bench_sts3215.py as ``PEERS_PYTHON peers_sts3215_sysid.py IN.npz OUT.npz``. Fits
damping, armature, frictionloss, the position gain per unit of firmware kp and the force
range, starting from the Menagerie STS3215 values, on the given training runs except
``lift_and_drop`` (a MuJoCo position actuator cannot be switched off through its control
signal); the benchmark then simulates the test runs with the fitted values in MuJoCo C.
Not imported by neuract; not run by run_all (no ``bench_`` prefix).
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np

XML = """<mujoco model="pendulum_bench">
  <option timestep="{ts}" integrator="Euler" gravity="0 0 -9.80665"/>
  <worldbody>
    <body name="arm">
      <joint name="pendulum" type="hinge" axis="0 1 0" damping="0.6" armature="0.028"
             frictionloss="0.052"/>
      <inertial pos="0 0 {half}" mass="{am}" diaginertia="{ai} {ai} 1e-9"/>
      <body name="tip" pos="0 0 {neg}">
        <inertial pos="0 0 0" mass="{m}" diaginertia="1e-9 1e-9 1e-9"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <position name="servo_kp{kp}" joint="pendulum" kp="{gain}" forcerange="-3.35 3.35"/>
  </actuator>
  <sensor>
    <jointpos name="q" joint="pendulum"/>
  </sensor>
</mujoco>
"""


def main() -> int:
    import mujoco
    from mujoco import sysid

    inp, outp = sys.argv[1], sys.argv[2]
    z = np.load(inp)
    dt = float(z["train_dt"])
    ts = dt / 2
    traj = [str(x) for x in z["train_trajectory"]] if "train_trajectory" in z.files else None
    groups: dict[tuple, list[int]] = {}
    for i in range(len(z["train_mass"])):
        if z["train_enable"][i].min() < 0.5:  # torque switched off (lift_and_drop)
            continue
        key = (float(z["train_mass"][i]), float(z["train_length"][i]),
               float(z["train_arm_mass"][i]), int(z["train_kp"][i]))
        groups.setdefault(key, []).append(i)
    seqs = []
    n_used = 0
    for (m, ell, am, kp), idx in groups.items():
        xml = XML.format(ts=ts, half=-ell / 2, am=max(am, 1e-9),
                         ai=max(am * ell**2 / 12, 1e-9), neg=-ell, m=m, kp=kp,
                         gain=17.8 * kp / 32)
        spec = mujoco.MjSpec.from_string(xml)
        model = spec.compile()
        inits, ctrls, sens, names = [], [], [], []
        for i in idx:
            T = int(z["train_mask"][i].sum())  # valid length (runs are padded at the end)
            T = min(T, z["train_q"].shape[1])
            t = np.arange(T) * dt
            inits.append(sysid.create_initial_state(model, np.array([z["train_q"][i, 0]]),
                                                    np.array([z["train_qd"][i, 0]])))
            ctrls.append(sysid.TimeSeries(t, z["train_goal"][i, :T, None]))
            sens.append(sysid.TimeSeries.from_names(t[1:], z["train_q"][i, 1:T, None], model))
            names.append(f"run{i}")
            n_used += 1
        seqs.append(sysid.ModelSequences(f"m{m}_l{ell}_kp{kp}", spec, names, inits, ctrls,
                                         sens))

    def set_gain(s, p):
        for a in s.actuators:
            kp = float(a.name.split("kp")[1])
            a.gainprm[0] = p.value[0] * kp
            a.biasprm[1] = -p.value[0] * kp

    def set_force(s, p):
        for a in s.actuators:
            a.forcerange = [-p.value[0], p.value[0]]

    params = sysid.ParameterDict()
    params.add(sysid.Parameter("damping", 0.60, 0.01, 5.0,
                               modifier=lambda s, p: setattr(s.joint("pendulum"), "damping",
                                                             [p.value[0], 0, 0])))
    params.add(sysid.Parameter("armature", 0.028, 0.001, 0.1,
                               modifier=lambda s, p: setattr(s.joint("pendulum"), "armature",
                                                             p.value[0])))
    params.add(sysid.Parameter("frictionloss", 0.052, 0.0, 0.5,
                               modifier=lambda s, p: setattr(s.joint("pendulum"),
                                                             "frictionloss", p.value[0])))
    params.add(sysid.Parameter("kp_per_fw_kp", 17.8 / 32, 0.05, 3.0, modifier=set_gain))
    params.add(sysid.Parameter("forcerange", 3.35, 0.5, 10.0, modifier=set_force))
    t0 = time.perf_counter()
    residual_fn = sysid.build_residual_fn(models_sequences=seqs)
    opt, result = sysid.optimize(initial_params=params, residual_fn=residual_fn,
                                 optimizer="mujoco", verbose=False, max_iters=15)
    secs = time.perf_counter() - t0
    values = {k: float(opt[k].value[0]) for k in opt.keys()}
    info = {"fit_seconds": secs, "values": values, "n_runs": n_used,
            "n_groups": len(seqs)}
    print(f"mujoco.sysid: {n_used} runs in {len(seqs)} groups, {secs:.0f} s: {values}")
    np.savez(outp, info=np.array(json.dumps(info)))
    _ = traj, result
    return 0


if __name__ == "__main__":
    sys.exit(main())

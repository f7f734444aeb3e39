"""Tiny SO-101 twin episodes and a tiny trained NeuralActuator, shared by the verb tests."""

from __future__ import annotations

TINY = dict(d_model=16, n_layers=1, n_heads=2, d_ff=16, d_trunk=16)


def tiny_episodes(minutes: float, seed: int = 0) -> list:
    """``minutes`` of one-unit free-motion twin episodes of 6 s."""
    from neuract.pipeline.twin_data import TwinDataConfig, generate_twin

    return generate_twin(TwinDataConfig(minutes=minutes, units=1, tasks=("free",),
                                        episode_s=6.0, seed=seed))


def tiny_model(eps: list, robot, mode: str, steps: int, horizon: int):
    """A tiny NeuralActuator (load effort) trained pose-only on ``eps`` for ``steps``."""
    from neuract.neuralactuator import NeuralActuatorConfig, train_neuralactuator
    from neuract.neuralactuator.train import NeuralActuatorTrainConfig as TrainConfig

    cfg = NeuralActuatorConfig(n_joints=6, mode=mode, effort="load", **TINY)
    model, _ = train_neuralactuator(eps, robot, cfg, TrainConfig(steps=steps, batch=4,
                                                                 horizon=horizon))
    return model


def fitted_servo(act, joints):
    """12-s free-motion twin SO-101 episodes (one unit, 0.4 min), the SO-101 setup and the
    parametric servo ``act`` (joint parameters ``joints``) briefly fitted pose-only on them."""
    import torch

    from neuract.fit.trainer import TrainConfig
    from neuract.pipeline import baselines as bl
    from neuract.pipeline.setups import so101_setup
    from neuract.pipeline.twin_data import TwinDataConfig, generate_twin

    torch.manual_seed(0)
    trajs = generate_twin(TwinDataConfig(minutes=0.4, units=1, tasks=("free",),
                                         episode_s=12.0))
    setup = so101_setup()
    tc = TrainConfig(horizons=(0.3, 0.8), stage_iters=(2, 2), windows_per_run=4,
                     runs_per_iter=8, label_inputs=(), use_voltage=True, lr_net=3e-3)
    sm, _ = bl.fit_actuator(trajs, setup.robot64, act, tc, joints=joints)
    return trajs, setup, sm

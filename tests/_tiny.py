"""Tiny SO-101 twin episodes and a tiny trained NeuralActuator, shared by the verb tests."""

from __future__ import annotations

TINY = dict(d_model=16, n_layers=1, n_heads=2, d_ff=16, d_trunk=16)


def tiny_episodes(minutes: float, seed: int = 0) -> list:
    """``minutes`` of one-unit free-motion twin episodes of 6 s."""
    from neuract.pipeline.twin_experiment import TwinDataConfig, generate_twin

    return generate_twin(TwinDataConfig(minutes=minutes, units=1, tasks=("free",),
                                        episode_s=6.0, seed=seed))


def tiny_model(eps: list, robot, mode: str, steps: int, horizon: int):
    """A tiny NeuralActuator (load effort) trained pose-only on ``eps`` for ``steps``."""
    from neuract.neuralactuator import NeuralActuatorConfig, train_neuralactuator
    from neuract.neuralactuator.train import TrainConfig

    cfg = NeuralActuatorConfig(n_joints=6, mode=mode, effort="load", **TINY)
    model, _ = train_neuralactuator(eps, robot, cfg, TrainConfig(steps=steps, batch=4,
                                                                 horizon=horizon))
    return model

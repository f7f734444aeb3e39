"""Fitting: losses, the trainer, checkpoints, least squares, excitation.

The differentiable rollout they fit through is :mod:`neuract.sim.simulate`.

- :mod:`~neuract.fit.batch`: recorded runs as one tensor batch; splits by run.
- :mod:`~neuract.fit.loop`: the one training loop every trainer runs on (resumable state).
- :mod:`~neuract.fit.trainer`: multiple shooting, horizon curriculum, early stopping, resume.
- :mod:`~neuract.fit.inverse_dynamics`: supervised training of learned dynamics models.
- :mod:`~neuract.fit.checkpoint`: safetensors + JSON checkpoints.
- :mod:`~neuract.fit.identify`: runs on disk -> fitted model (``neuract fit``, :mod:`.verb`).
- :mod:`~neuract.fit.least_squares`, :mod:`~neuract.fit.excitation`: linear identification.

Names are imported lazily (no work at import time). ``identify`` is also a module name here:
use ``neuract.fit.identify.identify``.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "RunBatch": "neuract.fit.batch",
    "batch_from_trajectories": "neuract.fit.batch",
    "split_runs": "neuract.fit.batch",
    "SystemModel": "neuract.fit.trainer",
    "TrainConfig": "neuract.fit.trainer",
    "fit": "neuract.fit.trainer",
    "evaluate": "neuract.fit.trainer",
    "load_runs": "neuract.fit.identify",
    "Trainer": "neuract.fit.loop",
    "StateFile": "neuract.fit.loop",
    "Evaluation": "neuract.fit.loop",
    "fit_inverse_model": "neuract.fit.inverse_dynamics",
    "save_weights": "neuract.fit.checkpoint",
    "load_weights": "neuract.fit.checkpoint",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'neuract.fit' has no attribute {name!r}")


__all__ = sorted(_LAZY)

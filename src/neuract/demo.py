"""``neuract demo``: the main job on the embedded default.

Placeholder until the full pipeline lands: prints what is available.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class DemoConfig:
    """Run the main neuract pipeline on the embedded default data."""

    seed: int = 0
    """random seed"""


def run(cfg: DemoConfig) -> None:
    print(f"neuract demo (seed {cfg.seed}): pipeline under construction")

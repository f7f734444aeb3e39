"""Policies on the arm environments (issue 43): a scripted expert that may read privileged
information, behaviour cloning of it with and without the frozen estimator's external-force
estimate f̂, and paired evaluation (see docs/policy.md).

- :mod:`.expert`: the expert (reference + gravity feed-forward with the true payload) and the
  tasks' success criteria;
- :mod:`.rollout`: one episode of an environment under a controller, f̂ streamed online;
- :mod:`.bc`: the MLP policy, its demonstrations, training, save and load;
- :mod:`.trials`: paired trials, Wilson and Newcombe intervals, report and plot.
"""

from neuract.policy.bc import BCConfig, BCPolicy, load_policy, save_policy, train_bc
from neuract.policy.expert import Expert, ExpertConfig, Kinematics
from neuract.policy.rollout import ForceStream, Step, Trace, run_episode
from neuract.policy.trials import PolicyRun, newcombe_paired, paired_trials, summarize, wilson

__all__ = ["BCConfig", "BCPolicy", "Expert", "ExpertConfig", "ForceStream", "Kinematics",
           "PolicyRun", "Step", "Trace", "load_policy", "newcombe_paired", "paired_trials",
           "run_episode", "save_policy", "summarize", "train_bc", "wilson"]

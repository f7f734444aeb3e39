"""Does a robot model fit the data it is given? Joints are matched by position.

``check_joints("omx", robot.joint_names, names, "--data 'runs/so101'")`` refuses a model whose
joint count differs from the data's, or that lists the same joints in another order (matching
by position would pair the wrong ones), and warns where the names differ (data may name its
joints its own way, but it may also be another arm): what ``neuract simulate`` and ``neuract
adapt`` do, for every verb that pairs a robot model with recorded joints.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

from neuract.errors import ConfigError


def check_joints(robot: str, robot_joints: Sequence[str], data_joints: Sequence[str] | int,
                 data: str = "the data", option: str = "--robot") -> None:
    """Refuse (:class:`ConfigError`) or warn (``UserWarning``) where the model ``robot`` (as
    given to ``option``), whose joints are ``robot_joints``, does not fit ``data`` (how the
    message names the data, e.g. ``--data 'x'``), whose joints are ``data_joints`` (names, or
    only their count where the data name none)."""
    ours = list(robot_joints)
    if isinstance(data_joints, int):
        names, n = None, data_joints
    else:
        names, n = [str(x) for x in data_joints], len(data_joints)
    if len(ours) != n:
        theirs = f"{n} {names}" if names is not None else str(n)
        k = 0
        while names is not None and k < min(n, len(ours)) and ours[k] == names[k]:
            k += 1
        eg = ("; e.g. a gripper modelled as two finger joints where the data log one"
              if len(ours) > n else "")
        why = (f"they share {ours[:k]}, the rest differs ({ours[k:]} in the model, "
               f"{names[k:]} in the data{eg})" if k else "not the same arm")
        raise ConfigError(f"{option} {robot!r} has {len(ours)} joint(s) {ours}; {data} has "
                          f"{theirs}: {why}. Accepted: a model whose joints are the data's, "
                          "one for one")
    if names is None or ours == names:
        return
    if set(ours) == set(names):
        raise ConfigError(f"{option} {robot!r} orders its joints {ours}; {data} {names}: joints "
                          "are matched by position, so the data must list them in the model's "
                          "order")
    warnings.warn(f"the arm model {robot!r} names its joints {ours}, {data} {names}: matched by "
                  "position; check that it is the same arm", stacklevel=2)

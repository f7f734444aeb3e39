"""Spreading work over a lab cluster: twin generation on Ray (:mod:`neuract.scale.ray`) and
training under ``torchrun`` (:mod:`neuract.scale.ddp`); a sweep of a verb's options on Ray
Tune is the ``sweep`` verb (:mod:`neuract.sweep`).

Both are optional (``pip install neuract[scale]`` brings Ray; torch.distributed ships with
torch); without them everything runs on one machine as before, with the same results.
"""

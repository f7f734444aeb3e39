"""Training under torchrun's data parallelism (gloo, 2 processes on CPU): the same loss curve
and weights as one process on the same global batch, checkpoints written by rank 0 alone,
a stopped run resumed by both ranks to the uninterrupted result."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import socket
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as tmp_mp

from neuract.scale import ddp

TOL = 1e-9  # float64 (the actuator fit): the sums over ranks differ only in order
NA_TOL = 1e-5  # float32 (NeuralActuator), relative to the largest loss


def test_shard_splits_rows_and_shares_add_up():
    for n in (2, 5, 7, 32):
        parts = [ddp.shard(n, ddp.World(r, 2)) for r in range(2)]
        rows = [i for p in parts for i in range(n)[p.rows]]
        assert rows == list(range(n)) and all(p.split for p in parts)
        assert sum(p.share for p in parts) == pytest.approx(1.0)
    few = [ddp.shard(2, ddp.World(r, 3)) for r in range(3)]  # fewer rows than ranks
    assert all(p.rows == slice(0, 2) and not p.split for p in few)
    assert sum(p.share for p in few) == pytest.approx(1.0)
    assert ddp.shard(5) == ddp.Shard(slice(0, 5), 1.0, False)  # not distributed
    assert ddp.init_from_env().size == 1 and ddp.world().writer


def _setup():
    from neuract.fit.trainer import TrainConfig
    from test_fit_identify import _stribeck_model, synthetic_batch

    truth = _stribeck_model(kt=3.0, fb=0.06, fs=0.08, backlash=0.02, armature=0.025)
    data = synthetic_batch(truth, B=5, T=41)
    data.mask[1, 25:] = False  # windows with fewer measured samples: the count is global
    data.mask[3, :10] = False
    cfg = TrainConfig(horizons=(0.15, 0.3), stage_iters=(2, 4), runs_per_iter=5,
                      windows_per_run=1, val_every=3, checkpoint_every=2, substeps=1, lr=0.2)
    return data, cfg


def _fit(ckpt, stop_after=None):
    from neuract.fit.trainer import fit
    from test_fit_identify import PLANT, _stribeck_model

    data, cfg = _setup()
    model = _stribeck_model(kt=3.6, fb=0.03, fs=0.04, backlash=0.01, armature=0.02)
    rep = fit(model, PLANT, data, data, cfg, ckpt_dir=ckpt, stop_after=stop_after)
    return model, rep


def _na(folder=None):
    """NeuralActuator simulator-mode training (float32) on the tiny planar arm."""
    from neuract.neuralactuator import NeuralActuatorConfig
    from neuract.neuralactuator.train import NeuralActuatorTrainConfig, train_neuralactuator
    from neuract.robot import load_robot
    from test_neuralactuator_train import POSE_ONLY, TAU_MAX, TINY, synth

    robot = load_robot("planar2", dtype=torch.float32)
    trajs = synth(robot, n_eps=2, T=50, payload=False)
    cfg = NeuralActuatorConfig(**TINY, n_joints=2, mode="simulator", tau_max=(TAU_MAX,),
                               kp_init=2.0, kd_init=0.1)
    tc = NeuralActuatorTrainConfig(steps=6, batch=6, horizon=4, lr=3e-2, **POSE_ONLY,
                                   checkpoint=None if folder is None else
                                   os.path.join(folder, "state.safetensors"))
    model, rep = train_neuralactuator(trajs, robot, cfg, tc)
    return [h["loss"] for h in rep["history"]], model


def _inverse():
    """A loop that does not split its batch (the learned inverse dynamics): every rank trains
    it whole, as one process would (no gradient is summed)."""
    from neuract.fit.inverse_dynamics import fit_inverse_model
    from test_fit_loop import _data, _mlp

    model = _mlp()
    fit_inverse_model(model, *_data(64), epochs=2, batch_size=32, lr=5e-3, seed=2)
    return {k: v.tolist() for k, v in model.state_dict().items()}


def _rank(rank: int, port: int, folder: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE="2", LOCAL_RANK=str(rank))
    torch.set_num_threads(1)
    w = ddp.init_from_env()
    assert w == ddp.World(rank, 2)
    try:
        # a run stopped after 4 steps (its state written at 4); rank 1 is given its own
        # checkpoint folder, which it must not write
        _, rep = _fit(os.path.join(folder, "b" if rank == 0 else "b_rank1"), stop_after=4)
        ddp.barrier()
        # resumed by both ranks from rank 0's state
        model_b, rep_b = _fit(os.path.join(folder, "b"))
        na_curve, _ = _na(os.path.join(folder, "na" if rank == 0 else "na_rank1"))
        out = {"na_curve": na_curve, "inverse": _inverse(),
               "curve": [h["train_loss"] for h in rep["history"]],
               "curve_b": [h["train_loss"] for h in rep_b["history"]],
               "weights_b": {k: v.tolist() for k, v in model_b.state_dict().items()}}
        with open(os.path.join(folder, f"rank{rank}.json"), "w") as f:
            json.dump(out, f)
    finally:
        torch.distributed.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _max_diff(a, b) -> float:
    if isinstance(a, list):
        assert len(a) == len(b)
        return max([_max_diff(x, y) for x, y in zip(a, b)], default=0.0)
    return abs(a - b)


def test_two_gloo_ranks_train_as_one_process_and_resume(tmp_path):
    torch.set_num_threads(1)
    model, rep = _fit(tmp_path / "single")
    na_curve, _ = _na()
    inverse = _inverse()
    curve = [h["train_loss"] for h in rep["history"]]
    tmp_mp.spawn(_rank, args=(_free_port(), str(tmp_path)), nprocs=2, join=True)
    r0 = json.loads((tmp_path / "rank0.json").read_text())
    r1 = json.loads((tmp_path / "rank1.json").read_text())
    assert len(curve) == 6
    assert _max_diff(r0["curve"], curve[:4]) < TOL
    assert r1["curve"] == r0["curve"]  # both ranks see the global loss
    assert _max_diff(r0["curve"], [c * 1.001 for c in curve[:4]]) > TOL  # (not vacuous)
    want = {k: v.tolist() for k, v in model.state_dict().items()}
    for r in (r0, r1):
        assert _max_diff([r["weights_b"][k] for k in want], list(want.values())) < TOL
        assert _max_diff(r["curve_b"], curve) < TOL  # resumed: the uninterrupted curve
    assert (tmp_path / "b" / "last.safetensors").is_file()
    assert not (tmp_path / "b_rank1").exists()  # rank 0 alone writes
    # NeuralActuator (float32): the loss curve within float32 rounding of its sums
    assert len(na_curve) == 6 and r1["na_curve"] == r0["na_curve"]
    assert _max_diff(r0["na_curve"], na_curve) < NA_TOL * max(map(abs, na_curve))
    assert (tmp_path / "na" / "state.safetensors").is_file()
    assert not (tmp_path / "na_rank1").exists()
    for r in (r0, r1):  # a loop that does not split its batch is not summed over the ranks
        assert r["inverse"] == inverse


def test_fit_rank_other_than_0_writes_a_private_copy_and_says_nothing(tmp_path, monkeypatch):
    from neuract.fit.options import FitConfig
    from neuract.fit.verb import rank_config
    from neuract.progress import reporter

    out = tmp_path / "run"
    (out / "checkpoint").mkdir(parents=True)
    (out / "config.json").write_text("{}")
    (out / "checkpoint" / "last.safetensors").write_bytes(b"state")
    cfg = FitConfig(data=str(tmp_path / "ds"), out=str(out))
    mine, private = rank_config(cfg, ddp.World(1, 2))
    fresh, private2 = rank_config(dataclasses.replace(cfg, overwrite=True), ddp.World(1, 2))
    try:
        assert Path(mine.out).parent == private and private != out
        assert (Path(mine.out) / "checkpoint" / "last.safetensors").read_bytes() == b"state"
        assert (Path(mine.out) / "config.json").is_file()
        assert not Path(fresh.out).exists()  # --overwrite: rank 0 starts afresh, so does 1
    finally:
        shutil.rmtree(private), shutil.rmtree(private2)
    monkeypatch.setenv("RANK", "1")
    assert reporter().quiet
    monkeypatch.setenv("RANK", "0")
    assert not reporter().quiet

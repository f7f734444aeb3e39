"""The neural descriptors of the touch stack: Vector Neuron layers, the equivariant occupancy
network, its training and checkpoints, and grasp transfer by descriptor matching."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from neuract.errors import CheckpointError, ConfigError
from neuract.touch.descriptors import (
    MatchConfig,
    match_pose,
    pose_error,
    pose_loss,
    random_rotations,
    record_demo,
    so3_exp,
    transfer_grasp,
)
from neuract.touch.field import DescriptorField, DescriptorFieldConfig
from neuract.touch.field_train import (
    FieldTrainConfig,
    evaluate_field,
    load_field,
    save_field,
    train_field,
)
from neuract.touch.training_shapes import make_shape
from neuract.touch.views import partial_cloud
from neuract.touch.vn import VNLeakyReLU, VNLinear, VNMaxPool, knn_edge_features, vn_invariant

TINY = DescriptorFieldConfig(latent=24, edge=8, hidden=16, encoder_blocks=2, knn=8,
                             decoder_hidden=32, decoder_blocks=2)


def _rotation(seed: int) -> torch.Tensor:
    return torch.as_tensor(random_rotations(1, np.random.default_rng(seed))[0])


def _field(seed: int = 0, cfg: DescriptorFieldConfig = TINY) -> DescriptorField:
    torch.manual_seed(seed)
    return DescriptorField(cfg).double().eval()


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max().detach() / b.abs().max().detach())


def test_random_rotations_are_rotations_and_so3_exp_matches_rodrigues():
    r = random_rotations(5, np.random.default_rng(0))
    assert np.allclose(r @ r.transpose(0, 2, 1), np.eye(3), atol=1e-12)
    assert np.allclose(np.linalg.det(r), 1.0)
    w = torch.tensor([0.3, -0.2, 0.5], dtype=torch.float64)
    a = w.norm()
    k = torch.tensor([[0, -w[2], w[1]], [w[2], 0, -w[0]], [-w[1], w[0], 0]]) / a
    rodrigues = torch.eye(3, dtype=torch.float64) + a.sin() * k + (1 - a.cos()) * k @ k
    assert torch.allclose(so3_exp(w), rodrigues, atol=1e-12)


@pytest.mark.parametrize("layer", [VNLinear(5, 7), VNLeakyReLU(5, 7), VNMaxPool(5)])
def test_vector_neuron_layers_commute_with_rotations(layer):
    torch.manual_seed(0)
    layer = layer.double()
    x = torch.randn(2, 30, 3, 5, dtype=torch.float64)
    rot = _rotation(1)
    out = layer(x)
    turned = layer(rot @ x)
    assert _rel(turned, rot @ out) < 1e-12
    assert _rel(turned, out) > 1e-2  # the output does turn: not a trivial field


def test_invariant_coordinates_and_edge_features():
    torch.manual_seed(0)
    x, frame = torch.randn(4, 3, 6, dtype=torch.float64), torch.randn(4, 3, 2, dtype=torch.float64)
    rot = _rotation(2)
    assert _rel(vn_invariant(rot @ x, rot @ frame), vn_invariant(x, frame)) < 1e-12
    pts = torch.randn(2, 40, 3, dtype=torch.float64)
    e = knn_edge_features(pts, 5)
    assert e.shape == (2, 40, 5, 3, 3)
    assert _rel(knn_edge_features(pts @ rot.T, 5), rot @ e) < 1e-12
    # the first neighbour is the nearest other point
    d = torch.cdist(pts, pts) + torch.eye(40) * 1e9
    assert torch.allclose(e[..., 0, :, 0].norm(dim=-1), d.min(-1).values)


def test_latent_turns_with_the_cloud_and_ignores_translation():
    field = _field()
    cloud = torch.randn(2, 200, 3, dtype=torch.float64) * 0.05 + 0.3
    rot, t = _rotation(3), torch.tensor([0.2, -0.5, 0.1], dtype=torch.float64)
    z = field.encode(cloud).z
    moved = field.encode(cloud @ rot.T + t)
    assert _rel(moved.z, rot @ z) < 1e-10
    assert torch.allclose(moved.centre, cloud.mean(1) @ rot.T + t)
    assert _rel(field.encode(cloud + t).z, z) < 1e-10  # translation: centring
    assert _rel(moved.z, z) > 1e-2


def test_descriptors_and_occupancy_are_se3_invariant():
    field = _field()
    cloud = torch.randn(1, 200, 3, dtype=torch.float64) * 0.05
    query = torch.randn(1, 64, 3, dtype=torch.float64) * 0.05
    rot, t = _rotation(4), torch.tensor([0.4, 0.1, -0.3], dtype=torch.float64)
    lat = field.encode(cloud)
    logit, desc = field.decode(lat, query)
    logit2, desc2 = field.decode(field.encode(cloud @ rot.T + t), query @ rot.T + t)
    assert desc.shape == (1, 64, TINY.descriptor_dim)
    assert _rel(desc2, desc) < 1e-10 and _rel(logit2, logit) < 1e-10
    # turning only the queries (or only the cloud) does change them
    assert _rel(field.decode(lat, query @ rot.T)[1], desc) > 1e-3


def test_partial_clouds_are_float_and_resample_any_density():
    shape = make_shape("mug", np.random.default_rng(0))
    field = _field()
    cloud = partial_cloud(shape, 150, np.random.default_rng(1))
    q = torch.as_tensor(cloud[:10])
    out = field(torch.as_tensor(cloud), q)
    assert out.shape == (1, 10) and torch.isfinite(out).all()


def test_config_validation_names_the_field():
    with pytest.raises(ConfigError, match="DescriptorFieldConfig.scale"):
        DescriptorFieldConfig(scale=0.0).validate()
    with pytest.raises(ConfigError, match="FieldTrainConfig.families"):
        FieldTrainConfig(families=("teapot",)).validate()
    with pytest.raises(ConfigError, match="MatchConfig.starts"):
        MatchConfig(starts=0).validate()


def _train(tmp_path, steps: int, name: str = "state.safetensors", lr: float = 3e-3):
    cfg = FieldTrainConfig(steps=steps, batch=4, n_points=128, n_queries=256, lr=lr,
                           families=("peg",), dense=3000, view_cell=0.008,
                           checkpoint=str(tmp_path / name), checkpoint_every=2)
    return train_field(TINY, cfg)


def test_training_reduces_the_occupancy_loss(tmp_path):
    """Pegs of random size seen from random directions: the occupancy loss on held-out pegs
    falls, below what knowing only the fraction of occupied queries would give."""
    torch.manual_seed(0)
    untrained = DescriptorField(TINY).eval()
    pegs = lambda rng: make_shape("peg", rng)  # noqa: E731
    kw = {"n_objects": 8, "n_points": 128, "n_queries": 512, "dense": 3000, "cell": 0.008}
    before = evaluate_field(untrained, pegs, **kw)
    model, report = _train(tmp_path, 60)
    after = evaluate_field(model, pegs, **kw)
    assert report["steps"] == 60 and report["final"]["step"] == 60
    assert after["loss"] < 0.75 * before["loss"], (before, after)
    assert after["loss"] < 0.95 * after["prior_loss"], after
    assert after["iou"] > 0.2


def test_training_resumes_to_the_same_weights_and_refuses_another_run(tmp_path):
    whole, _ = _train(tmp_path, 6, "a.safetensors")
    _train(tmp_path, 3, "b.safetensors")  # a shorter run, continued to 6 steps below
    resumed, report = _train(tmp_path, 6, "b.safetensors")
    assert report["steps"] == 6
    for (name, a), b in zip(whole.state_dict().items(), resumed.state_dict().values(),
                            strict=True):
        assert torch.equal(a, b), name
    with pytest.raises(CheckpointError, match="lr"):
        _train(tmp_path, 8, "b.safetensors", lr=1e-3)


def test_checkpoint_round_trip_and_refusals(tmp_path):
    field = _field().float()
    out = save_field(field, tmp_path / "field", extra={"note": "test"})
    back = load_field(out)
    cloud, q = torch.randn(1, 64, 3) * 0.05, torch.randn(1, 16, 3) * 0.05
    assert torch.equal(back.descriptors(cloud, q), field.descriptors(cloud, q))
    assert back.cfg == field.cfg
    with pytest.raises(CheckpointError, match="not found"):
        load_field(tmp_path / "nothing")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "config.json").write_text('{"kind": "neuralactuator"}')
    with pytest.raises(CheckpointError, match="kind"):
        load_field(tmp_path / "other")
    with pytest.raises(ConfigError):  # an existing checkpoint is replaced only on request
        save_field(field, out)
    save_field(field, out, overwrite=True)


def _perturb(rng: np.random.Generator, angle: float, dist: float) -> np.ndarray:
    p = np.eye(4)
    p[:3, :3] = so3_exp(torch.as_tensor(rng.normal(0, angle, 3))).numpy()
    p[:3, 3] = rng.normal(0, dist, 3)
    return p


def _moved(a: np.ndarray, cloud: np.ndarray) -> np.ndarray:
    return cloud @ a[:3, :3].T + a[:3, 3]


@pytest.fixture(scope="module")
def mug_demo():
    field = _field(1)
    rng = np.random.default_rng(0)
    shape = make_shape("mug", rng)
    cloud = partial_cloud(shape, 300, rng, direction=np.array([1.0, 0.4, 0.7]))
    cfg = MatchConfig(n_query=64, starts=4, iters=100, seed=3)
    a = _perturb(rng, 2.0, 0.2)  # a known motion of the object
    return field, cloud, cfg, record_demo(field, cloud, shape.grasp, cfg, family="mug"), a


def test_matching_is_equivariant(mug_demo):
    """Moving the cloud and the start poses by a known A moves every pose found by A."""
    field, cloud, cfg, demo, a = mug_demo
    starts = np.stack([_perturb(np.random.default_rng(i), 1.0, 0.05) for i in range(4)])
    starts[:, :3, 3] += cloud.mean(0)
    here = match_pose(field, demo, cloud, cfg, init=starts)
    there = match_pose(field, demo, _moved(a, cloud), cfg, init=a @ starts)
    assert np.allclose(there.poses, a @ here.poses, atol=1e-6)
    assert np.allclose(there.losses, here.losses, rtol=1e-6)
    assert not np.allclose(here.poses, starts, atol=1e-3)  # the search did move


def test_matching_recovers_a_known_transform_of_the_demo_cloud(mug_demo):
    """The demonstration's cloud moved by A: the loss is zero at A @ demo.pose, and from a
    start over 1 cm and 10 degrees off the search converges there."""
    field, cloud, cfg, demo, a = mug_demo
    truth = a @ demo.pose
    start = truth @ _perturb(np.random.default_rng(5), 0.12, 0.009)
    assert pose_error(start, truth)[0] > 0.01 and pose_error(start, truth)[1] > 10
    found = match_pose(field, demo, _moved(a, cloud), MatchConfig(
        n_query=64, starts=4, iters=300, seed=3), init=start[None])
    dist, angle = pose_error(found.poses[0], truth)
    assert dist < 0.002 and angle < 2.0, (dist, angle, found.losses)
    at_truth, at_start = pose_loss(field, demo, _moved(a, cloud), np.stack([truth, start]))
    assert at_truth < 1e-9 * at_start
    assert found.losses[0] < 0.1 * at_start
    assert found.loss == found.losses.min()


def test_transfer_needs_a_demonstration_of_the_family():
    field = _field()
    cloud = np.random.default_rng(0).normal(0, 0.05, (50, 3))
    demo = record_demo(field, cloud, np.eye(4), MatchConfig(n_query=8))
    with pytest.raises(ConfigError, match="demonstrated: mug"):
        transfer_grasp(field, {"mug": demo}, "bottle", cloud)
    with pytest.raises(ConfigError, match="accepted: \\(N, 3\\)"):
        match_pose(field, demo, cloud[:, :2])
    with pytest.raises(ConfigError, match="NaN"):
        match_pose(field, demo, np.full((5, 3), np.nan))

"""Twin generation on Ray: the same bytes as one process whatever the workers, an unreachable
cluster refused in one line, a dead worker's run kept and completed by a rerun."""

from __future__ import annotations

import hashlib
import os
import socket
import sys
import time

import pytest

from neuract.data.dataset import write_dataset
from neuract.errors import ClusterError, ConfigError
from neuract.twin.config import SimConfig
from neuract.twin.generate import EpisodeSpool, GenerateConfig, generate

gen_mod = sys.modules["neuract.twin.generate"]


def _small(workers=1, n_envs=2):
    return GenerateConfig(robot="so101", tasks=("free", "pick"), minutes=4 * 1.0 / 60, units=2,
                          seed=3, workers=workers, sim=SimConfig(episode_s=1.0, n_envs=n_envs))


def _hashes(path):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted((path / "data").glob("*.parquet"))} | {
        "info": hashlib.sha256((path / "meta" / "info.json").read_bytes()).hexdigest()}


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # free once closed: nothing listens there


def test_spool_keeps_episodes_and_a_rerun_makes_the_same_bytes(tmp_path):
    ref = write_dataset(generate(_small()), tmp_path / "ref")
    spool = EpisodeSpool(tmp_path / "spool", _small())
    first = generate(_small(), spool=spool)
    assert len(list((tmp_path / "spool").glob("episode_*.pkl"))) == 4
    (tmp_path / "spool" / "episode_000002.pkl").unlink()  # as if it had not finished
    seen = []
    again = generate(_small(workers=2), spool=EpisodeSpool(tmp_path / "spool", _small(2)),
                     on_chunk=seen.append)
    assert seen == [3, 1]  # three kept, one generated
    b = write_dataset(again, tmp_path / "b")
    assert _hashes(b) == _hashes(ref)
    assert len(first) == 4
    # another generation's spool is not used
    other = EpisodeSpool(tmp_path / "spool", GenerateConfig(**{**_small().__dict__, "seed": 4}))
    assert other.load() == {}
    assert not list((tmp_path / "spool").glob("episode_*.pkl"))


def test_no_ray_or_unreachable_address_is_one_line_config_error(tmp_path):
    from neuract.scale.ray import check_reachable

    port = _closed_port()
    t0 = time.perf_counter()
    with pytest.raises(ConfigError, match=rf"--ray = '127.0.0.1:{port}': no Ray head") as e:
        check_reachable(f"127.0.0.1:{port}")
    assert time.perf_counter() - t0 < 10 and "\n" not in str(e.value)
    with pytest.raises(ConfigError, match="expected 'auto'"):
        check_reachable("nohostport")


def test_cli_unreachable_ray_address_writes_nothing(tmp_path, capsys):
    pytest.importorskip("ray")
    from neuract.cli import main

    port = _closed_port()
    out = tmp_path / "twin"
    assert main(["twin", "--out", str(out), "--minutes", "0.05", "--episode-s", "3",
                 "--ray", f"127.0.0.1:{port}"]) == 1
    err = capsys.readouterr().err
    assert f"--ray = '127.0.0.1:{port}'" in err and "Traceback" not in err
    assert sorted(os.listdir(tmp_path)) == []


def _dying_chunk(cfg, rows):
    if any(r[0] == 3 for r in rows):
        os._exit(1)  # the worker dies, as a killed process would
    return gen_mod.run_chunk(cfg, rows)


@pytest.fixture(scope="module")
def local_ray():
    ray = pytest.importorskip("ray")
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()


def test_ray_same_bytes_whatever_the_workers_and_a_dead_worker(local_ray, tmp_path,
                                                               monkeypatch):
    ref = _hashes(write_dataset(generate(_small(n_envs=4)), tmp_path / "ref"))
    for w in (1, 2):
        got = write_dataset(generate(_small(workers=w), ray="local"), tmp_path / f"ray{w}")
        assert _hashes(got) == ref
    # a worker dies on episode 3 (batches of one, one at a time: 0-2 finished before)
    folder = tmp_path / "spool"
    monkeypatch.setattr(gen_mod, "run_chunk", _dying_chunk)
    with pytest.raises(ClusterError, match="a Ray worker died running episode batch 3"):
        generate(_small(n_envs=1), ray="local", spool=EpisodeSpool(folder, _small()),
                 ray_retries=0)
    assert sorted(p.name for p in folder.glob("*.pkl")) == [
        f"episode_00000{i}.pkl" for i in range(3)]
    monkeypatch.undo()
    seen = []
    done = generate(_small(workers=2), ray="local", spool=EpisodeSpool(folder, _small()),
                    on_chunk=seen.append)
    assert seen[0] == 3 and sum(seen) == 4
    assert _hashes(write_dataset(done, tmp_path / "rerun")) == ref

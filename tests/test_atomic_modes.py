"""neuract.atomic: output permissions follow the umask; overwrite replaces only directories."""

from __future__ import annotations

import os
import stat

import pytest

from neuract.atomic import atomic_dir, atomic_path, write_json
from neuract.errors import ConfigError


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def _mode(p) -> int:
    return stat.S_IMODE(os.stat(p).st_mode)


def test_safetensors_outputs_follow_umask(tmp_path, umask_022):
    """safetensors' save_file replaces the file it is given with one of mode 0600; the
    checkpoints written through atomic_path still get the umask's permissions."""
    import torch

    from neuract.fit.checkpoint import save_training, save_weights

    lin = torch.nn.Linear(2, 1)
    save_weights(lin, tmp_path / "w.safetensors")
    opt = torch.optim.Adam(lin.parameters())
    save_training(tmp_path / "s.safetensors", lin, opt, torch.default_generator, {"step": 0})
    assert _mode(tmp_path / "w.safetensors") == 0o644
    assert _mode(tmp_path / "s.safetensors") == 0o644


def test_atomic_path_file_mode_follows_umask(tmp_path, umask_022):
    out = tmp_path / "ckpt.pt"
    with atomic_path(out) as tmp:
        assert _mode(tmp) == 0o644  # already right while the caller writes
        tmp.write_bytes(b"x")
    assert _mode(out) == 0o644
    write_json(tmp_path / "r.json", {"a": 1})
    assert _mode(tmp_path / "r.json") == 0o644


def test_atomic_path_replacing_file_gets_umask_mode(tmp_path, umask_022):
    out = tmp_path / "r.txt"
    out.write_text("old")
    os.chmod(out, 0o600)
    with atomic_path(out) as tmp:
        tmp.write_text("new")
    assert out.read_text() == "new"
    assert _mode(out) == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["r.txt"]


def test_atomic_path_other_umask(tmp_path):
    old = os.umask(0o027)
    try:
        with atomic_path(tmp_path / "f") as tmp:
            tmp.write_text("x")
        with atomic_dir(tmp_path / "d") as tmp:
            pass
    finally:
        os.umask(old)
    assert _mode(tmp_path / "f") == 0o640
    assert _mode(tmp_path / "d") == 0o750


def test_atomic_dir_modes_follow_umask(tmp_path, umask_022):
    out = tmp_path / "ds"
    with atomic_dir(out) as tmp:
        (tmp / "a.txt").write_text("x")
        with atomic_path(tmp / "sub" / "b.json") as f:
            f.write_text("{}")
    assert _mode(out) == 0o755
    assert _mode(out / "a.txt") == 0o644
    assert _mode(out / "sub") == 0o755
    assert _mode(out / "sub" / "b.json") == 0o644


def test_atomic_dir_overwrite_refuses_regular_file(tmp_path):
    data = tmp_path / "data.csv"
    data.write_text("t,q\n0,1\n")
    before = os.stat(data)
    ran = False
    with pytest.raises(ConfigError, match=r"data\.csv.*not a directory"):
        with atomic_dir(data, overwrite=True) as tmp:
            ran = True
            (tmp / "x").write_text("x")
    assert not ran  # refused before any work was done
    assert data.is_file() and data.read_text() == "t,q\n0,1\n"
    assert os.stat(data).st_ino == before.st_ino
    assert [p.name for p in tmp_path.iterdir()] == ["data.csv"]


def test_atomic_dir_overwrite_refuses_file_appearing_meanwhile(tmp_path):
    out = tmp_path / "out"
    with pytest.raises(ConfigError, match="not a directory"):
        with atomic_dir(out, overwrite=True) as tmp:
            (tmp / "x").write_text("x")
            out.write_text("user file")
    assert out.read_text() == "user file"
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_atomic_dir_overwrite_refuses_symlink(tmp_path):
    target = tmp_path / "real"
    target.mkdir()
    (target / "keep").write_text("k")
    link = tmp_path / "link"
    link.symlink_to(target)
    with pytest.raises(ConfigError, match="symlink"):
        with atomic_dir(link, overwrite=True):
            pass
    assert link.is_symlink() and (target / "keep").read_text() == "k"


def test_atomic_dir_overwrite_replaces_directory_and_removes_old(tmp_path):
    out = tmp_path / "ds"
    out.mkdir()
    (out / "stale.txt").write_text("old")
    (out / "nested").mkdir()
    (out / "nested" / "deep.txt").write_text("old")
    with atomic_dir(out, overwrite=True) as tmp:
        (tmp / "a.txt").write_text("new")
    assert sorted(p.name for p in out.iterdir()) == ["a.txt"]
    assert (out / "a.txt").read_text() == "new"
    assert [p.name for p in tmp_path.iterdir()] == ["ds"]  # no .ds.*.old / .tmp sibling


def _unlink_as_owner(real_unlink):
    """os.unlink that refuses, as the kernel does for a non-root owner, to remove an entry of a
    directory without its owner write bit (root bypasses the bit, so the test would be vacuous
    as root without this): the refusal happens whoever runs the test."""

    def unlink(path, *, dir_fd=None):
        full = os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), path) if dir_fd is not None \
            else os.fspath(path)
        if not os.stat(os.path.dirname(full)).st_mode & stat.S_IWUSR:
            raise PermissionError(13, "Permission denied", full)
        return real_unlink(path, dir_fd=dir_fd)

    return unlink


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
def test_atomic_dir_overwrite_removes_read_only_old_copy(tmp_path, monkeypatch):
    out = tmp_path / "ds"
    (out / "ro").mkdir(parents=True)
    (out / "ro" / "f").write_text("old")
    os.chmod(out / "ro", 0o500)
    monkeypatch.setattr(os, "unlink", _unlink_as_owner(os.unlink))
    try:
        with atomic_dir(out, overwrite=True) as tmp:
            (tmp / "a.txt").write_text("new")
    finally:
        for p in tmp_path.rglob("ro"):
            os.chmod(p, 0o700)
    assert sorted(p.name for p in out.iterdir()) == ["a.txt"]
    assert [p.name for p in tmp_path.iterdir()] == ["ds"]


def test_atomic_dir_failure_keeps_existing_directory(tmp_path):
    out = tmp_path / "ds"
    out.mkdir()
    (out / "keep.txt").write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_dir(out, overwrite=True) as tmp:
            (tmp / "a.txt").write_text("new")
            raise RuntimeError("boom")
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt"]
    assert [p.name for p in tmp_path.iterdir()] == ["ds"]


def test_atomic_dir_swap_failure_restores_original(tmp_path, monkeypatch):
    out = tmp_path / "ds"
    out.mkdir()
    (out / "keep.txt").write_text("old")
    real_replace = os.replace
    calls = []

    def flaky_replace(src, dst):
        calls.append((src, dst))
        if len(calls) == 2:  # the move of the new content onto ``out``
            raise OSError("disk on fire")
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", flaky_replace)
    with pytest.raises(OSError, match="disk on fire"):
        with atomic_dir(out, overwrite=True) as tmp:
            (tmp / "a.txt").write_text("new")
    monkeypatch.undo()
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt"]
    assert [p.name for p in tmp_path.iterdir()] == ["ds"]


def test_atomic_dir_without_overwrite_still_refuses(tmp_path):
    f = tmp_path / "f"
    f.write_text("x")
    with pytest.raises(ConfigError, match="is not a directory"):  # --overwrite would not help
        with atomic_dir(f):
            pass
    assert f.read_text() == "x"
    (tmp_path / "d").mkdir()
    with pytest.raises(ConfigError, match="already exists; pass --overwrite"):
        with atomic_dir(tmp_path / "d"):
            pass


def test_atomic_dir_of_the_current_directory_with_overwrite(tmp_path, monkeypatch):
    """'.' has no name to put a sibling by (Path('.').with_name raised ValueError, a traceback
    under --overwrite): it is resolved first, then checked like any directory."""
    from neuract.errors import ConfigError

    run = tmp_path / "run"
    run.mkdir()
    (run / "notes.txt").write_text("keep")
    monkeypatch.chdir(run)
    with pytest.raises(ConfigError, match="not an earlier output"):
        with atomic_dir(".", overwrite=True, marker="summary.json"):
            pass
    (run / "notes.txt").unlink()
    (run / "summary.json").write_text("{}")
    with atomic_dir(".", overwrite=True, marker="summary.json") as tmp:
        (tmp / "summary.json").write_text("new")
    assert (tmp_path / "run" / "summary.json").read_text() == "new"


def test_overwrite_replaces_only_an_earlier_output_of_the_same_kind(tmp_path):
    from neuract.errors import ConfigError

    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("keep")
    with pytest.raises(ConfigError, match="not an earlier output"):
        with atomic_dir(out, overwrite=True, marker="summary.json"):
            pass
    (out / "summary.json").write_text("{}")
    with pytest.raises(ConfigError, match="notes.txt"):
        with atomic_dir(out, overwrite=True, marker="summary.json",
                        allowed=lambda n: n.endswith(".json")):
            pass
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt", "summary.json"]
    with atomic_dir(out, overwrite=True, marker="summary.json") as tmp:
        (tmp / "summary.json").write_text("new")
    assert [p.name for p in out.iterdir()] == ["summary.json"]


def test_overwrite_checks_the_marker_content_and_the_inputs(tmp_path):
    """A marker file of another kind (every run directory has a config.json) does not make a
    directory replaceable; an output directory may not be or hold an input (links followed)."""
    from neuract.atomic import check_dest
    from neuract.errors import ConfigError

    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text('{"type": "FitConfig"}')
    is_ck = {"marker": "config.json", "kind": lambda j: j.get("type") == "IdentifyConfig"}
    with pytest.raises(ConfigError, match="not an earlier output"):
        check_dest(run, True, **is_ck)
    (run / "config.json").write_text('{"type": "IdentifyConfig"}')
    check_dest(run, True, **is_ck)
    (run / "data.csv").write_text("t,q")
    link = tmp_path / "latest"
    link.symlink_to(run / "data.csv")
    for inp in (run / "data.csv", link, run):
        with pytest.raises(ConfigError, match="is or holds the input"):
            check_dest(run, True, inputs=(inp,), **is_ck)
    check_dest(run, True, inputs=(tmp_path / "elsewhere", None, ""), **is_ck)

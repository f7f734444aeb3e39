"""Package-level behaviour: lazy import, error hierarchy, registry, atomic writes, CLI."""

from __future__ import annotations

import dataclasses
import json

import pytest

import neuract
from neuract import cli
from neuract.atomic import atomic_dir, write_json
from neuract.config import from_dict, save_resolved, to_dict
from neuract.errors import ConfigError, NeuractError, SchemaError
from neuract.registry import Registry


def test_error_hierarchy():
    assert issubclass(SchemaError, NeuractError)
    assert issubclass(ConfigError, ValueError)


def test_registry_unknown_name_lists_valid_names():
    reg: Registry[type] = Registry("actuator")
    reg.register("dc_motor")(object)
    reg.register("stribeck")(int)
    assert reg.get("stribeck") is int
    with pytest.raises(ConfigError, match="dc_motor, stribeck"):
        reg.get("nope")
    with pytest.raises(ConfigError, match="already registered"):
        reg.register("stribeck")(float)


def test_atomic_dir_leaves_nothing_on_failure(tmp_path):
    out = tmp_path / "ds"
    with pytest.raises(RuntimeError):
        with atomic_dir(out) as tmp:
            (tmp / "a.txt").write_text("x")
            raise RuntimeError("boom")
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []
    with atomic_dir(out) as tmp:
        (tmp / "a.txt").write_text("x")
    assert (out / "a.txt").read_text() == "x"
    with pytest.raises(ConfigError, match="already exists"):
        with atomic_dir(out):
            pass


@dataclasses.dataclass
class _Inner:
    lr: float = 1e-3


@dataclasses.dataclass
class _Outer:
    name: str = "x"
    inner: _Inner = dataclasses.field(default_factory=_Inner)
    sizes: tuple[int, ...] = (1, 2)


def test_config_roundtrip(tmp_path):
    cfg = _Outer(name="y", inner=_Inner(lr=0.5), sizes=(3,))
    path = save_resolved(cfg, tmp_path)
    data = json.loads(path.read_text())
    assert data["config"] == to_dict(cfg)
    assert from_dict(_Outer, data["config"]) == cfg
    with pytest.raises(ConfigError, match="unknown field"):
        from_dict(_Outer, {"bogus": 1})


def test_write_json_atomic(tmp_path):
    write_json(tmp_path / "r.json", {"a": 1})
    assert json.loads((tmp_path / "r.json").read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_cli_unknown_verb(capsys):
    assert cli.main(["frobnicate"]) == 2
    assert "valid verbs" in capsys.readouterr().err


def test_cli_help_lists_verbs(capsys):
    assert cli.main([]) == 0
    out = capsys.readouterr().out
    # every verb, each on its own line with its one-line help
    for verb, (_, _, summary) in cli.VERBS.items():
        assert any(line.split()[:1] == [verb] and summary in line
                   for line in out.splitlines()), verb
    for flag in ("-h", "--help", "help"):
        assert cli.main([flag]) == 0
        assert capsys.readouterr().out == out


def test_lazy_attribute_error():
    with pytest.raises(AttributeError):
        neuract.does_not_exist  # noqa: B018


@pytest.mark.parametrize("name", sorted(neuract._LAZY))
def test_lazy_public_names_resolve(name):
    obj = getattr(neuract, name)
    # the public object itself (a class or function of that name), from the package named
    assert getattr(obj, "__name__", None) == name
    assert obj.__module__.startswith(neuract._LAZY[name])
    assert name in neuract.__all__


@pytest.mark.parametrize("verb", sorted(cli.VERBS))
def test_cli_every_verb_has_help(verb, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main([verb, "--help"])
    assert exc.value.code == 0
    assert f"neuract {verb}" in capsys.readouterr().out


def test_light_modules_do_not_import_torch():
    import subprocess
    import sys

    code = ("import sys, neuract, neuract.io, neuract.data, neuract.eval; "
            "print(sorted(m for m in ('torch', 'mujoco') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_cli_path_errors_are_messages_not_tracebacks(monkeypatch, capsys):
    import sys
    import types

    @dataclasses.dataclass
    class BoomConfig:
        out: str = "/dev/null/x"

    def run(cfg):
        with open(cfg.out, "w"):
            pass

    mod = types.ModuleType("_neuract_test_boom")
    mod.BoomConfig, mod.run = BoomConfig, run
    monkeypatch.setitem(sys.modules, mod.__name__, mod)
    monkeypatch.setitem(cli.VERBS, "boom", (mod.__name__, "BoomConfig", "test verb"))
    assert cli.main(["boom"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("neuract boom: error:") and "/dev/null/x" in err

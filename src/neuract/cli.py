"""Command-line entry point: ``neuract <verb> [options]``.

Each verb is one typed dataclass config plus one ``run(cfg)`` function in its own module; the
options are generated from the dataclass with tyro. Modules are imported only when their verb
runs, so ``neuract --help`` and ``neuract VERB --help`` (read from the stored description of the
verb's options, :mod:`neuract.cli_help`) stay fast.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import re
import select
import signal
import sys
import threading

from neuract.errors import ConfigError, NeuractError

# verb -> (module, config class, one-line help). Each module defines ``run(cfg)``.
VERBS: dict[str, tuple[str, str, str]] = {
    "adapt": ("neuract.pipeline.adapt_verb", "AdaptConfig", "fine-tune a checkpoint on a new unit"),
    "control": ("neuract.control.cli_control", "ControlConfig", "replay-test model-based control"),
    "demo": ("neuract.demo", "DemoConfig", "twin SO-101 -> NeuralActuator + baselines -> report"),
    "estimate": ("neuract.pipeline.estimate_verb", "EstimateConfig",
                 "stream telemetry through a model"),
    "evaluate": ("neuract.pipeline.evaluate_verb", "EvaluateConfig",
                 "NeuralActuator vs baselines, report"),
    "export": ("neuract.pipeline.export_verb", "ExportConfig",
               "a checkpoint to ONNX / AOTInductor, a fitted servo to MJCF / BAM / TorchScript"),
    "identify": ("neuract.control.cli_identify", "IdentifyConfig", "fit arm dynamics to torques"),
    "fit": ("neuract.fit.verb", "FitConfig", "identify an actuator model from positions only"),
    "ingest": ("neuract.io.ingest", "IngestConfig", "convert telemetry logs into a dataset"),
    "policy": ("neuract.pipeline.policy_verb", "PolicyConfig",
               "train or evaluate a policy on the arm environments (BC, PPO)"),
    "score": ("neuract.pipeline.score_verb", "ScoreConfig",
              "score any saved model open loop on episodes: MAE per episode and label"),
    "selfcheck": ("neuract.sim.selfcheck", "SelfCheckConfig", "validate dynamics vs MuJoCo"),
    "simulate": ("neuract.pipeline.simulate_verb", "SimulateConfig",
                 "replay commands open loop through a learned simulator"),
    "twin": ("neuract.twin.verb", "TwinConfig", "simulate servo arms with hidden physics"),
}


def _usage() -> str:
    width = max(len(v) for v in VERBS)
    lines = ["usage: neuract <verb> [options]    (neuract <verb> --help for a verb's options)", ""]
    lines += [f"  {verb:<{width}}  {VERBS[verb][2]}" for verb in sorted(VERBS)]
    lines += ["", "neuract --version prints the version."]
    return "\n".join(lines)


# library config classes (or a dotted part of one, listed before the class) -> the option
# prefix a verb gives them on its command line
OPTION_PREFIX: dict[str, dict[str, str]] = {
    "demo": {"ExperimentConfig": "--experiment.", "TwinDataConfig": "--data.",
             "GenerateConfig.sim": "--data.", "GenerateConfig": "--data."},
    "evaluate": {"ExperimentConfig": "--experiment.", "TwinDataConfig": "--twin.",
                 "TwinPretrainConfig": "--twin-pretrain.", "GenerateConfig.sim": "--twin.",
                 "GenerateConfig": "--twin."},
    "twin": {"GenerateConfig.sim": "--", "GenerateConfig": "--"},
}


def cli_names(verb: str, message: str) -> str:
    """A library error message with its config field names (``ExperimentConfig.sim_prior``,
    ``ExperimentConfig.size.n_heads``) written as the verb's options
    (``--experiment.sim-prior``, ``--experiment.size.n-heads``)."""
    for cls, prefix in OPTION_PREFIX.get(verb, {}).items():
        message = re.sub(rf"\b{re.escape(cls)}\.([a-z_]+(?:\.[a-z_]+)*)",
                         lambda m, p=prefix: p + m.group(1).replace("_", "-"), message)
    return message


def check_seeds(cfg, path: tuple[str, ...] = ()) -> None:
    """Refuse a negative ``seed`` anywhere in a verb's config (numpy's and torch's random
    generators take seeds >= 0): a ConfigError naming the option (``--seed``,
    ``--twin.seed``), before the verb runs."""
    for f in dataclasses.fields(cfg):
        v = getattr(cfg, f.name, None)
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            check_seeds(v, (*path, f.name))
        elif (f.name == "seed" and isinstance(v, int) and not isinstance(v, bool)
              and v < 0):
            option = "--" + ".".join((*path, f.name)).replace("_", "-")
            raise ConfigError(f"{option} {v}; expected an integer >= 0")


RESUMABLE = ("adapt", "demo", "evaluate", "fit")
"""verbs that save their training state as they go and resume from it when rerun"""


class Terminated(KeyboardInterrupt):
    """Raised in the main thread on SIGTERM while a verb runs, so that it unwinds as on
    Ctrl-C (temporary outputs removed, training states kept)."""


def _on_sigterm():
    """Install the SIGTERM handler that raises :class:`Terminated`; returns the previous
    handler (None where signals cannot be handled here: not the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        return None

    pid = os.getpid()

    def handler(signum, frame):
        if os.getpid() != pid:  # a forked worker process: end as SIGTERM's default does
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        raise Terminated()

    return signal.signal(signal.SIGTERM, handler)


def _restore_sigterm(previous) -> None:
    if previous is not None:
        signal.signal(signal.SIGTERM, previous)


SIGPIPE_EXIT = 128 + 13
"""exit status when the reader of the output went away (``neuract ... | head -1``): the status
a shell reports for a command ended by SIGPIPE"""


def _output_closed() -> bool:
    """Whether the reader of stdout or stderr has gone (a pipe whose read end is closed polls
    as an error); True where that cannot be told (no file descriptor, no poll)."""
    try:
        poll = select.poll()
        for stream in (sys.stdout, sys.stderr):
            poll.register(stream.fileno(), select.POLLOUT)
        return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in poll.poll(0))
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is an OSError
        return True


def _stdout_file() -> tuple[int, int] | None:
    """(device, inode) of the file stdout writes to, None where it has no descriptor."""
    try:
        st = os.fstat(sys.stdout.fileno())
    except (AttributeError, OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


def _rich_broken_pipe(exc: SystemExit, before: tuple[int, int] | None) -> bool:
    """Whether a SystemExit(1) out of a verb is rich's answer to a closed stdout (its consoles
    point stdout at the null device, then exit 1), not the verb's own."""
    try:
        st = os.stat(os.devnull)
    except OSError:  # pragma: no cover
        return False
    null = (st.st_dev, st.st_ino)
    return exc.code == 1 and before not in (None, null) and _stdout_file() == null


def _discard_output() -> None:
    """Point stdout (and a closed stderr) at the null device, so that the interpreter's final
    flush of what is still buffered does not fail again on the closed pipe."""
    for stream in (sys.stdout, sys.stderr):
        try:
            fd = stream.fileno()
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, fd)
            os.close(devnull)
        except (AttributeError, OSError, ValueError):
            pass


def main(argv: list[str] | None = None) -> int:
    """Run one verb. Exit status: 0 done; 1 a clear error (bad input, unwritable path) or a
    check that failed (a verb returning ``{"passed": 0}``, e.g. selfcheck); 2 a usage error;
    130 interrupted (Ctrl-C); 141 the reader of the output went away (``| head``), quietly, as
    a command ended by SIGPIPE; 143 terminated (SIGTERM, e.g. ``timeout`` or ``docker stop``:
    handled as Ctrl-C is, so partial outputs are removed and training states kept).
    ``VERB --help`` prints the verb's help and raises SystemExit(0), as argparse does."""
    try:
        try:
            return _main(argv)
        finally:
            sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
    except BrokenPipeError:
        _discard_output()
        return SIGPIPE_EXIT


def _main(argv: list[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0
    if argv[0] == "--version":
        from neuract import __version__

        print(f"neuract {__version__}")
        return 0
    verb, rest = argv[0], argv[1:]
    if verb not in VERBS:
        print(f"neuract: unknown verb {verb!r}; valid verbs: {', '.join(sorted(VERBS))}",
              file=sys.stderr)
        return 2
    options = rest[:rest.index("--")] if "--" in rest else rest
    if "-h" in options or "--help" in options:
        from neuract.cli_help import verb_help  # no torch: the stored option descriptions

        text = verb_help(verb)
        if text is not None:  # else tyro prints its own, below
            sys.stdout.write(text)
            sys.stdout.flush()
            raise SystemExit(0)

    import tyro  # here, not at the top: help does without it

    mod_name, cfg_name, _ = VERBS[verb]
    module = importlib.import_module(mod_name)
    cfg_cls = getattr(module, cfg_name)
    cfg = tyro.cli(cfg_cls, args=rest, prog=f"neuract {verb}")
    previous = _on_sigterm()
    stdout_before = _stdout_file()
    try:
        if dataclasses.is_dataclass(cfg):
            check_seeds(cfg)
        result = module.run(cfg)
    except (NeuractError, OSError) as exc:  # OSError: an unreadable/unwritable path given
        if isinstance(exc, BrokenPipeError) and _output_closed():
            raise  # the reader of the output went away: main exits quietly
        print(f"neuract {verb}: error: {cli_names(verb, str(exc))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:
        print(f"\nneuract {verb}: "
              + ("terminated (SIGTERM)." if isinstance(exc, Terminated) else "interrupted.")
              + (" Rerun the same command to resume: it continues from the last saved training "
                 "state where one was saved (what ran before it is done again)."
                 if verb in RESUMABLE else ""), file=sys.stderr)
        return 143 if isinstance(exc, Terminated) else 130
    except SystemExit as exc:
        if _rich_broken_pipe(exc, stdout_before):
            raise BrokenPipeError("stdout closed") from None
        raise
    finally:
        _restore_sigterm(previous)
    if isinstance(result, dict) and result.get("passed") == 0:  # a check verb that failed
        print(f"neuract {verb}: checks failed (see above)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

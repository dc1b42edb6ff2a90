"""Bad input (issue 26): fuzzed SFT, RL and evaluation configs are accepted or refused with one sentence
(ConfigFieldError from from_configdict), and the command lines print one line and exit 2 for a bad config, task file
or checkpoint."""
import json
import random
import subprocess
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cudaperf_jax.eval.config import EvalConfig
from cudaperf_jax.experiment.config import ConfigFieldError, from_configdict
from cudaperf_jax.rl.config import RLConfig
from cudaperf_jax.sft.config import SFTConfig

REPO = Path(__file__).resolve().parents[2]
FAST = settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
VALUES = st.none() | st.booleans() | st.integers(-2**40, 2**40) | st.floats() | st.text(max_size=8) \
    | st.lists(st.integers() | st.text(max_size=4), max_size=3)


def _leaves(c, prefix=()):
    for k in c:
        v = c[k]
        if hasattr(v, "keys"):
            yield from _leaves(v, (*prefix, k))
        else:
            yield (*prefix, k)


def _mutated(config, seed: int, value, n: int):
    c = config.to_dict()
    rnd = random.Random(seed)
    for _ in range(n):
        *path, last = rnd.choice(list(_leaves(c)))
        parent = c
        for k in path:
            parent = parent[k]
        parent[last] = value
    return c


def _one_line(fn, errors, *args):
    try:
        return fn(*args)
    except errors as e:
        assert str(e) and "\n" not in str(e) and len(str(e)) < 600, str(e)
        return None


@FAST
@given(seed=st.integers(0, 10**6), value=VALUES, n=st.integers(1, 3))
def test_sft_config_mutations(seed, value, n):
    from experiments.configs import sft_cpu
    _one_line(from_configdict, ConfigFieldError, SFTConfig, _mutated(sft_cpu.get_config(), seed, value, n))


@FAST
@given(seed=st.integers(0, 10**6), value=VALUES, n=st.integers(1, 3))
def test_rl_config_mutations(seed, value, n):
    import ml_collections

    from experiments.configs import rl_tiny
    c = ml_collections.ConfigDict(_mutated(rl_tiny.get_config(), seed, value, n))
    _one_line(from_configdict, ConfigFieldError, RLConfig, c)


@FAST
@given(seed=st.integers(0, 10**6), value=VALUES, n=st.integers(1, 3))
def test_eval_config_mutations(seed, value, n):
    from experiments.configs import evaluate
    _one_line(from_configdict, ConfigFieldError, EvalConfig, _mutated(evaluate.get_config(), seed, value, n))


def _cli(*args, cwd=REPO):
    return subprocess.run([sys.executable, "-m", *args], cwd=cwd, capture_output=True, text=True, timeout=300,
                          check=False, env={"JAX_PLATFORMS": "cpu", "PATH": "/usr/bin:/bin", "HOME": str(cwd)})


def test_command_lines_print_one_line_for_bad_input(tmp_path):
    bad_task = tmp_path / "task.json"
    bad_task.write_text(json.dumps({"id": "x", "track": "c2cuda", "entry": "f", "source": "", "signature": [],
                                    "configs": [{"N": float("nan")}]}))
    (tmp_path / "s.cu").write_text("// nothing")
    (tmp_path / "model.gguf").write_bytes(b"GGUF" + bytes(range(200)))
    runs = [
        (("kernels_harness", "eval", "--task", str(bad_task), "--solution", str(tmp_path / "s.cu"), "--backend", "cpu"),
         "needs at least one 'out'"),
        (("experiments.train_rl", "--config=experiments/configs/rl_tiny.py", "--config.rollout.turns=0",
          f"--workdir={tmp_path / 'rl'}"), "config.rollout"),
        (("experiments.train_sft", "--config=experiments/configs/sft_cpu.py", "--config.optim.learning_rate=-1",
          f"--workdir={tmp_path / 'sft'}"), "config.optim: learning_rate=-1.0"),
        (("experiments.train_rl", "--config=experiments/configs/rl_tiny.py", "--config.mesh.fsdp=64",
          f"--workdir={tmp_path / 'rl3'}"), "config.mesh: data=1 fsdp=64 tensor=1 needs 64 devices"),
        (("experiments.train_rl", "--config=experiments/configs/rl_tiny.py", f"--config.model={tmp_path / 'model.gguf'}",
          f"--workdir={tmp_path / 'rl2'}"), "not a readable GGUF file"),
    ]
    for args, said in runs:
        out = _cli(*args)
        lines = [ln for ln in out.stderr.splitlines() if ln.strip() and not ln.startswith(("WARNING", "I0", "W0"))]
        assert out.returncode == 2, (args, out.stderr[-2000:])
        assert len(lines) == 1 and lines[0].startswith("error: ") and said in lines[0], (args, out.stderr[-2000:])

"""Multi-turn GRPO on the unified reward through the harness (cudaperf_jax.rl.trainer).

    python -m experiments.train_rl --config=experiments/configs/rl.py --config.model=PATH --workdir=runs/rl

The ConfigDict becomes an rl.config.RLConfig (one sentence naming the field when it cannot); config.json records it
resolved. Resumes from the workdir's last checkpoint; writes metrics.jsonl, TensorBoard, summary.json, rl_curves.png,
policy.json (load_policy(workdir) is the trained policy), WORKDIR/policy (HF) and, with LoRA, WORKDIR/adapter (PEFT).
LoRA: --config=experiments/configs/rl_lora.py (--config.model=runs/sft_lora: on an SFT run's merged policy).
JAX's GPU memory fraction comes from config.memory_fraction (written before JAX starts; recorded in
environment.json), the rest of the GPU is the harness's, whose candidates run in their own processes.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from experiments import launch

launch.define_config("experiments/configs/rl.py")


def set_memory_fraction(config, workdir) -> None:
    """XLA_PYTHON_CLIENT_MEM_FRACTION from the config, before JAX initialises; recorded in the run directory."""
    frac = float(config.memory_fraction)
    if not 0.0 <= frac < 1.0:
        raise ValueError("memory_fraction must lie in [0, 1); 0 leaves JAX's default")
    if "jax" in sys.modules and frac:
        import jax
        if jax._src.xla_bridge.backends_are_initialized():   # too late to take effect: say so
            print("warning: JAX already started; memory_fraction not applied", file=sys.stderr)
    if frac:
        os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"] = f"{frac:.3f}"
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "true")
    Path(workdir).mkdir(parents=True, exist_ok=True)
    (Path(workdir) / "environment.json").write_text(json.dumps(
        {k: os.environ.get(k) for k in ("XLA_PYTHON_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_PREALLOCATE",
                                         "JAX_PLATFORMS")}, indent=2))


def main(config, workdir):
    from cudaperf_jax.experiment.config import from_configdict
    from cudaperf_jax.rl.config import RLConfig
    cfg = from_configdict(RLConfig, config)          # typed and validated before anything starts
    set_memory_fraction(cfg, workdir)
    from cudaperf_jax.rl.trainer import train
    summary = train(cfg, workdir)
    final = {k: v for k, v in summary["final"].items() if not k.startswith(("time/", "_", "notes/"))}
    print("[train_rl] final step: " + json.dumps(final), file=sys.stderr)
    print(f"[train_rl] wrote {workdir}/metrics.jsonl, summary.json, rl_curves.png", file=sys.stderr)


if __name__ == "__main__":
    launch.run(main, name="train_rl")

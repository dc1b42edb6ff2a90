"""The config files are the typed configs' defaults plus overrides: each converts to its dataclass, the production
files are exactly the defaults, the resolved config is what a run records, and every field reaches its section
(EvalConfig's rollout is a whole RolloutConfig)."""
import importlib

import pytest

from cudaperf_jax.experiment.config import (
    ConfigFieldError,
    field_docs,
    flat_fields,
    from_configdict,
    to_configdict,
)

FILES = ("rl", "rl_tiny", "rl_lora", "sft", "sft_cpu", "sft_lora", "evaluate")


@pytest.mark.parametrize("name", FILES)
def test_config_files_convert_to_their_dataclass(name):
    mod = importlib.import_module(f"experiments.configs.{name}")
    cfg = from_configdict(mod.TYPED, mod.get_config())
    assert flat_fields(to_configdict(cfg)) == flat_fields(mod.get_config())     # nothing dropped, nothing added
    if name in ("rl", "sft", "evaluate"):                                        # production = the defaults
        assert cfg == mod.TYPED()
    docs = field_docs(mod.TYPED)
    assert docs["mesh.fsdp" if name != "evaluate" else "rollout.history"]


def test_production_values_and_sections():
    from experiments.configs import evaluate, rl, rl_tiny, sft
    r = from_configdict(rl.TYPED, rl.get_config())
    assert (r.grpo.kl_beta, r.grpo.clip_eps_high, r.dtype, r.mesh.devices, r.lora.rank) == (0.02, 0.28, "bfloat16", 1, 0)
    assert r.grpo.optim().learning_rate == 1e-6 and r.grpo.optim().schedule == "constant"
    s = from_configdict(sft.TYPED, sft.get_config())
    assert (s.dtype, s.data.seq_len, s.data.batch_rows, s.data.refine, s.data.micro_batches) == ("bfloat16", 3072, 6,
                                                                                                0.5, 1)
    tiny = from_configdict(rl_tiny.TYPED, rl_tiny.get_config())
    assert tiny.tasks.suite and tiny.rollout.turns == 2 and tiny.grpo.kl_beta == 0.05
    c = evaluate.get_config()
    c.rollout.top_k, c.rollout.history, c.rollout.feedback_chars, c.rollout.gen_batch = 7, "last", 300, 4
    e = from_configdict(evaluate.TYPED, c)
    assert (e.rollout.top_k, e.rollout.history, e.rollout.feedback_chars, e.rollout.gen_batch) == (7, "last", 300, 4)
    assert (e.rollout.samples_per_task, e.rollout.temperature, e.rollout.top_p) == (1, 0.7, 0.95)


@pytest.mark.parametrize("name,changed", [
    ("sft_lora", {"model": "qwen2.5-coder-1.5b", "lora.rank": 16, "lora.dropout": 0.05, "optim.learning_rate": 2e-4,
                  "optim.warmup_steps": 30, "optim.b2": 0.999, "data.micro_rows": 2}),
    ("rl_lora", {"model": "qwen2.5-coder-1.5b", "lora.rank": 16, "grpo.lr": 2e-5, "grpo.micro_batch": 4})])
def test_lora_configs_set_only_what_lora_changes(name, changed):
    """Qwen2.5-Coder-1.5B with rank-16 adapters (alpha 32, q,k,v,o: the LoRAConfig defaults) and LoRA's learning
    rates; every other field is its dataclass's default."""
    mod = importlib.import_module(f"experiments.configs.{name}")
    got = flat_fields(mod.get_config())
    default = flat_fields(to_configdict(mod.TYPED()))
    assert {k: v for k, v in got.items() if default[k] != v} == changed
    cfg = from_configdict(mod.TYPED, mod.get_config())
    assert (cfg.lora.rank, cfg.lora.alpha, cfg.lora.targets) == (16, 32.0, "q,k,v,o")
    if name == "rl_lora":
        assert (cfg.grpo.kl_beta, cfg.grpo.clip_eps, cfg.grpo.clip_eps_high, cfg.lora.dropout) == (0.02, 0.2, 0.28, 0)


def test_errors_name_the_field():
    from experiments.configs import evaluate, rl, sft
    with pytest.raises(ConfigFieldError, match=r"unknown config field grpo.kl_bta; did you mean grpo.kl_beta\?"):
        from_configdict(rl.TYPED, {"grpo": {"kl_bta": 0.1}})
    with pytest.raises(ConfigFieldError, match=r"unknown config field samples_per_task; did you mean "
                                               r"rollout.samples_per_task\?"):
        from_configdict(evaluate.TYPED, {"samples_per_task": 2})
    with pytest.raises(ConfigFieldError, match=r"config.data: micro_rows=4: use 0 .* a divisor of batch_rows=6"):
        from_configdict(sft.TYPED, {"data": {"micro_rows": 4}})
    with pytest.raises(ConfigFieldError, match=r"rloo' needs rollout.samples_per_task >= 2"):
        from_configdict(rl.TYPED, {"grpo": {"advantage": "rloo"}, "rollout": {"samples_per_task": 1}})
    with pytest.raises(ConfigFieldError, match=r"lora.targets must name distinct projections among .*, not 'q,x'"):
        from_configdict(rl.TYPED, {"lora": {"targets": "q,x"}})
    with pytest.raises(ConfigFieldError, match=r"call_timeout_s=90.0 and job_timeout_s=60.0: give 0 < call_timeout_s "
                                               r"<= job_timeout_s"):
        from_configdict(rl.TYPED, {"harness": {"call_timeout_s": 90.0}})


def test_rl_harness_section_reaches_the_pool():
    from experiments.configs import rl
    c = from_configdict(rl.TYPED, {"harness": {"call_timeout_s": 5.0, "workers": 3}})
    assert c.harness.pool_kwargs() == {"backend": "auto", "workers": 3, "compile_workers": None, "seed": 0,
                                       "call_timeout_s": 5.0, "job_timeout_s": 60.0}


def test_a_partial_section_keeps_its_parents_defaults():
    """EvalConfig's rollout defaults (1 sample at temperature 0.7) are not RolloutConfig's (8 at 1.0): a section given
    in part takes the rest from its parent's default instance."""
    from cudaperf_jax.eval.config import EvalConfig
    e = from_configdict(EvalConfig, {"rollout": {"turns": 2}})
    assert (e.rollout.turns, e.rollout.samples_per_task, e.rollout.temperature) == (2, 1, 0.7)
    assert from_configdict(EvalConfig, {}) == EvalConfig()

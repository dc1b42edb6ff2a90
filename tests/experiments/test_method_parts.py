"""The method chain's parts (experiments/method*.py): the exact state of an SFT or RL stage of Qwen2.5-Coder-1.5B fits one
chain file, the configs are typed and agree with the evaluation, the plan's commands name only ROOT-relative paths,
pack keeps to its limits and restore never goes back, the SFT early stop, combined PEFT adapters, and the report's
goals on records whose answers are known."""
import json
import tarfile
from pathlib import Path

import numpy as np
import pytest

from cudaperf_jax import prompts
from experiments import method_chain as chain
from experiments.method_plan import Plan, PlanError

# Qwen2.5-Coder-1.5B-Instruct's and 0.5B's config.json (the shapes of the registered GGUFs)
QWEN = {"model_type": "qwen2", "max_position_embeddings": 32768, "rope_theta": 1000000.0, "rms_norm_eps": 1e-6,
        "tie_word_embeddings": True, "vocab_size": 151936, "num_key_value_heads": 2}
SHAPES = {"1.5b": {**QWEN, "hidden_size": 1536, "intermediate_size": 8960, "num_hidden_layers": 28,
                   "num_attention_heads": 12},
          "0.5b": {**QWEN, "hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24,
                   "num_attention_heads": 14}}


def _state_bytes(shape: dict, lora_cfg, optim_cfg, steps: int) -> int:
    """Bytes of the checkpointed state of a LoRA run (the adapters' A [in, r] and B [r, out] of every target and
    layer, float32, the optimizer's state over them, RNG, step), from shapes alone."""
    import jax
    import jax.numpy as jnp

    from cudaperf_jax.models.config import ModelConfig
    from cudaperf_jax.models.lora import adapter_shapes
    from cudaperf_jax.training import make_optimizer, run_state, state_bytes
    cfg = ModelConfig.from_hf(shape)
    r = lora_cfg.rank
    params = {f"{i}/{t}": {"lora_a": jax.ShapeDtypeStruct((n_in, r), jnp.float32),
                           "lora_b": jax.ShapeDtypeStruct((r, n_out), jnp.float32)}
              for i in range(cfg.num_layers) for t, (n_in, n_out, _, _) in adapter_shapes(cfg, lora_cfg.names).items()}
    opt, _ = make_optimizer(optim_cfg, steps)
    return state_bytes(jax.eval_shape(lambda p: run_state(p, opt.init(p), 0), params))


@pytest.mark.parametrize("stage", ["sft", "rl"])
def test_the_exact_state_of_a_stage_fits_one_chain_file(stage):
    """Adapter + Adam's two moments (float32) + RNG + step of the configured LoRA: under the 16 MB a device call brings
    back per file for the 1.5B (with 1 MB for metrics and the archive), and rank 2 would not fit."""
    import dataclasses

    from cudaperf_jax.experiment.config import from_configdict
    from experiments.configs import method_rl, method_sft
    mod = method_sft if stage == "sft" else method_rl
    cfg = from_configdict(mod.TYPED, mod.get_config("full"))
    optim = cfg.optim if stage == "sft" else cfg.grpo.optim()
    size = _state_bytes(SHAPES["1.5b"], cfg.lora, optim, cfg.steps)
    assert 13.5e6 < size < 15e6, size                      # 1,154,048 parameters x 12 bytes = 13.85 MB
    assert _state_bytes(SHAPES["0.5b"], cfg.lora, optim, cfg.steps) < 7e6
    assert _state_bytes(SHAPES["1.5b"], dataclasses.replace(cfg.lora, rank=2), optim, cfg.steps) > 16e6


def test_method_configs_are_typed_and_agree_with_the_evaluation():
    from cudaperf_jax.experiment.config import (
        flat_fields,
        from_configdict,
        to_configdict,
    )
    from experiments.configs import method_rl, method_sft, rl_lora, sft_lora
    for size in ("full", "dev"):
        s = from_configdict(method_sft.TYPED, method_sft.get_config(size))
        r = from_configdict(method_rl.TYPED, method_rl.get_config(size))
        e = Plan.of("qwen2.5-coder-1.5b", size).evals
        assert s.data.prompt == r.rollout.prompt == e.prompt == prompts.DEFAULT   # one prompt everywhere
        assert r.rollout.turns == e.turns == 2 and r.grpo.gamma == 0.4
        assert s.lora == r.lora and (s.lora.rank, s.lora.targets) == (1, "q,k,v,o,gate,up,down")
        assert not s.export_merged and not r.export_merged and s.early_stop_patience > 0
        assert r.tasks.split == "train" and r.tasks.dataset == "tasks" and s.data.prompt == prompts.DEFAULT
    r = from_configdict(method_rl.TYPED, method_rl.get_config())
    assert (r.steps, r.tasks_per_step, r.rollout.samples_per_task) == (200, 8, 8)
    assert (r.grpo.lr, r.grpo.kl_beta, r.grpo.clip_eps, r.grpo.clip_eps_high) == (2e-5, 0.01, 0.2, 0.28)
    assert r.reward.terms == "correct,speed,structure,ranker,penalty" and r.reward.ranker_path == "runs/ranker"
    changed = {k for k, v in flat_fields(method_rl.get_config()).items() if flat_fields(rl_lora.get_config())[k] != v}
    assert "grpo.micro_batch" not in changed and "dtype" not in changed      # the rest is rl_lora's
    assert flat_fields(to_configdict(r)) == flat_fields(method_rl.get_config())
    s = from_configdict(method_sft.TYPED, method_sft.get_config())
    assert s.optim == from_configdict(sft_lora.TYPED, sft_lora.get_config()).optim
    with pytest.raises(ValueError, match="unknown size"):
        method_rl.get_config("huge")


def test_the_plan_names_stages_in_order_and_commands_with_root_relative_paths(tmp_path):
    plan = Plan.of("qwen2.5-coder-1.5b")
    names = [s.name for s in plan.stages()]
    assert names == ["tasks", "base-1.5b", "eval_zero_shot-1.5b", "sft-1.5b", "eval_sft-1.5b", "ranker",
                     "rl_full_s0-1.5b", "eval_rl_full_s0-1.5b", "rl_abl_s0-1.5b", "eval_rl_abl_s0-1.5b",
                     "rl_full_s1-1.5b", "eval_rl_full_s1-1.5b"]
    assert [s.name for s in plan.select(["eval_sft", "sft-1.5b", "zero_shot"])] == [
        "eval_zero_shot-1.5b", "sft-1.5b", "eval_sft-1.5b"]
    with pytest.raises(PlanError, match="unknown stage"):
        plan.select(["rl"])
    repo = Path("/somewhere/repo")
    for st in plan.stages():
        argv = plan.command(st, repo, 5.0)
        paths = [a.split("=", 1)[1] for a in argv if a.startswith(("--workdir=", "--out=", "--work=", "--tasks=",
                                                                      "--config.model=", "--models="))]
        assert all(not p.startswith("/") for p in paths), (st.name, paths)   # ROOT-relative: restorable anywhere
    rl = plan.command(plan.select(["rl_abl_s0"])[0], repo, 5.0)
    assert "--config.reward.terms=correct,speed,penalty" in rl and "--config.reward.ranker_path=" in rl
    assert "--config.model=base/1.5b+runs/sft-1.5b/adapter" in rl and "--config.seed=0" in rl
    ev = plan.command(plan.select(["eval_rl_full_s1"])[0], repo, 5.0)
    assert "--models=base/1.5b+runs/sft-1.5b/adapter+runs/rl_full_s1-1.5b/adapter" in ev
    zs = plan.command(plan.select(["zero_shot"])[0], repo, 5.0)
    assert "--models=qwen2.5-coder-1.5b" in zs and "--labels=qwen2.5-coder-1.5b" in zs   # the ladder's own cells
    assert {"--samples=4", "--turns=2", "--temperature=0.2", "--kernelbench_tasks=100", "--test_tasks=96",
            "--val_tasks=48"} <= set(zs)
    assert Plan.of("qwen2.5-coder-0.5b").tag == "0.5b" and Plan.of(str(tmp_path / "m.gguf")).tag == "m"


def test_the_zero_shot_cells_are_named_as_the_ladder_names_them(tmp_path):
    """The plan names the zero-shot cells as benchmarks/zero_shot.py's `label` does (the zero-shot stage reuses the
    ladder's cells by name)."""
    import importlib.util

    from experiments.method_plan import Plan
    spec = importlib.util.spec_from_file_location("zero_shot_for_test", Path(__file__).resolve().parents[2]
                                                  / "benchmarks" / "zero_shot.py")
    ladder = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ladder)
    (tmp_path / "runs" / "sft" / "export").mkdir(parents=True)
    (tmp_path / "q.gguf").write_bytes(b"")
    for model in ("qwen2.5-coder-1.5b", str(tmp_path / "q.gguf"), str(tmp_path / "runs" / "sft" / "export"),
                  str(tmp_path / "runs"), "a b+c"):
        plan = Plan.of(model)
        assert plan.cell_label(f"zero_shot-{plan.tag}") == ladder.label(model), model


def test_the_chains_cells_have_the_ladders_keys_so_its_restored_cells_are_reused(tmp_path):
    """Every setting in a ladder cell's key is the ladder's default in the chain's evaluation (the ladder's
    committed cells.tgz is the zero-shot stage; chunk_tasks 24 against the ladder's 16 made them refused)."""
    import importlib.util
    import sys

    from experiments.method_plan import Plan
    from kernels_harness.tasks.schema import load_task
    bench = Path(__file__).resolve().parents[2] / "benchmarks"
    sys.path.insert(0, str(bench))
    spec = importlib.util.spec_from_file_location("zero_shot_for_keys", bench / "zero_shot.py")
    ladder = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ladder)
    (tmp_path / "manifest.json").write_text("{}")
    ev = Plan.of("qwen2.5-coder-1.5b").evals
    chain = ladder.parse(["--models=m", f"--tasks={tmp_path}", *ev.ladder_args()])
    own = ladder.parse(["--models=m", f"--tasks={tmp_path}", f"--suites={','.join(ev.suites)}",
                        f"--prompts={ev.prompt}"])
    tasks = [load_task(Path(__file__).resolve().parents[2] / "experiments/suites/smoke/smoke_saxpy.json")]
    assert ladder.cell_key(chain, "m", ev.prompt, "kernelbench", tasks) == \
        ladder.cell_key(own, "m", ev.prompt, "kernelbench", tasks)


def test_sft_early_stop_is_a_function_of_the_metric_rows():
    from cudaperf_jax.sft.train import early_stop_step
    rows = [{"step": 0, "val_loss_initial": 2.0}, {"step": 9, "val_loss": 1.0}, {"step": 19, "val_loss": 0.999},
            {"step": 29, "val_loss": 0.9}, {"step": 39, "val_loss": 0.95}, {"step": 49, "val_loss": 0.91}]
    assert early_stop_step(rows, 0) is None
    assert early_stop_step(rows, 2, 0.0) == 49                 # 0.95 and 0.91 do not beat 0.9
    assert early_stop_step(rows, 2, 0.01) == 49                # 0.999 is no gain of 0.01; 0.9 is
    assert early_stop_step(rows, 1, 0.01) == 19
    assert early_stop_step(rows[:4], 2, 0.0) is None


def test_combined_adapters_are_the_adapters_applied_one_after_the_other(tmp_path):
    """An RL adapter on the SFT policy, stored with the SFT adapter as one PEFT adapter on the base: the same logits."""
    import jax
    from flax import nnx

    from cudaperf_jax.models.loading import load_policy
    from cudaperf_jax.models.lora import ADAPTERS, LoRAConfig, add_adapters
    from cudaperf_jax.models.peft_io import (
        combine_peft_dirs,
        read_peft_dir,
        save_peft_dir,
    )
    from tests.cudaperf_jax.models import tiny
    base = tmp_path / "base"
    tiny.hf_model("qwen2", seed=1).save_pretrained(base)
    tiny.tokenizer().save_pretrained(base)
    for name, cfg, seed in (("a", LoRAConfig(rank=2, alpha=8.0, targets="q,v,down"), 1),
                            ("b", LoRAConfig(rank=1, alpha=32.0, targets="q,k,v,o,gate,up,down"), 2)):
        model, _ = load_policy(base)
        add_adapters(model, cfg, nnx.Rngs(0))
        leaves, tree = jax.tree.flatten(nnx.state(model, ADAPTERS))
        keys = jax.random.split(jax.random.key(seed), len(leaves))
        nnx.update(model, jax.tree.unflatten(tree, [0.05 * jax.random.normal(k, x.shape) for k, x in zip(keys, leaves)]))
        save_peft_dir(model, tmp_path / name)
    combine_peft_dirs([tmp_path / "a", tmp_path / "b"], tmp_path / "ab", base_model_name_or_path="Org/Base")
    cfg, _ = read_peft_dir(tmp_path / "ab")
    assert (cfg.rank, cfg.alpha, cfg.targets) == (3, 3.0, "q,k,v,o,gate,up,down")
    assert json.loads((tmp_path / "ab" / "adapter_config.json").read_text())["base_model_name_or_path"] == "Org/Base"
    toks = np.random.RandomState(0).randint(3, 320, (2, 10)).astype(np.int32)
    two, _ = load_policy(f"{base}+{tmp_path / 'a'}+{tmp_path / 'b'}")
    one, _ = load_policy(f"{base}+{tmp_path / 'ab'}")
    plain, _ = load_policy(base)
    np.testing.assert_allclose(np.asarray(one(toks)), np.asarray(two(toks)), rtol=2e-5, atol=2e-5)
    assert np.abs(np.asarray(one(toks)) - np.asarray(plain(toks))).max() > 1e-3     # the adapters do something


def _fake_run(root: Path, policy: str, step: int, nbytes: int, seed: int = 0):
    """A run directory with a checkpoint directory of `nbytes` of random bytes (what pack archives as it is)."""
    ck = root / "runs" / policy / "checkpoints" / str(step)
    ck.mkdir(parents=True)
    (ck / "data").write_bytes(np.random.RandomState(seed).bytes(nbytes))
    (root / "runs" / policy / "metrics.jsonl").write_text(json.dumps({"step": step}) + "\n")


def test_pack_keeps_to_the_limits_and_restore_never_goes_back(tmp_path):
    root = tmp_path / "root"
    (root / "stamps").mkdir(parents=True)
    (root / "plan.json").write_text(json.dumps({"policies": ["sft-x", "rl_full_s0-x", "rl_abl_s0-x"],
                                                "local_stages": ["tasks"]}))
    chain.write_stamp(root, "tasks", {})
    _fake_run(root, "sft-x", 7, 3_000_000)
    _fake_run(root, "rl_full_s0-x", 3, 2_000_000, seed=1)
    said = []
    kept = chain.pack(root, tmp_path / "p", chain.Limits(files=2, file_bytes=2_500_000, total_bytes=6_000_000),
                      echo=said.append)
    assert [p.name for p in kept] == ["rl_full_s0-x.tgz", "state.tgz"]
    assert any("left out sft-x.tgz" in s for s in said)               # over the per-file limit, named
    with tarfile.open(tmp_path / "p" / "state.tgz") as tar:
        assert "stamps/tasks.done" not in tar.getnames()              # machine-local stages are not carried
    # a root further along keeps its own run; an older one takes the chain file's
    other = tmp_path / "other"
    _fake_run(other, "rl_full_s0-x", 5, 10, seed=2)
    chain.restore(other, [tmp_path / "p"], echo=said.append)
    assert (other / "runs" / "rl_full_s0-x" / "checkpoints" / "5").is_dir()
    assert not (other / "runs" / "rl_full_s0-x" / "checkpoints" / "3").exists()
    fresh = tmp_path / "fresh"
    restored = chain.restore(fresh, [tmp_path / "p"], echo=said.append)
    assert restored == {"rl_full_s0-x": {"state": "in_progress", "step": 3}}
    assert (fresh / "runs" / "rl_full_s0-x" / "checkpoints" / "3" / "data").read_bytes() == (
        root / "runs" / "rl_full_s0-x" / "checkpoints" / "3" / "data").read_bytes()
    again = chain.pack(fresh, tmp_path / "q", echo=said.append)      # nothing moved on: only the state comes back
    assert [p.name for p in again] == ["state.tgz"]
    with pytest.raises(chain.ChainError, match="exceed"):
        chain.collect(tmp_path / "p", tmp_path / "tree", max_bytes=1000, echo=said.append)
    chain.collect(tmp_path / "p", tmp_path / "tree", echo=said.append)
    assert sorted(p.name for p in (tmp_path / "tree").iterdir()) == ["rl_full_s0-x.tgz", "state.tgz"]


def _cell(root: Path, plan: Plan, policy: str, suite: str, n: int, correct: set, fast: set, turn0: set | None = None):
    """A complete ladder cell of `policy`: task i correct (at the last turn) when i in `correct`, 2x faster than
    eager when also in `fast`; turn 0 correct on `turn0` (default: the same)."""
    d = root / "cells" / f"{plan.cell_label(policy)}__{plan.evals.prompt}__{suite}"
    d.mkdir(parents=True)
    tasks = [f"t{i}" for i in range(n)]
    (d / "key.json").write_text(json.dumps({"tasks": tasks}))
    recs = []
    for i, t in enumerate(tasks):
        for turn, ok_set in ((0, correct if turn0 is None else turn0), (1, correct)):
            ok = i in ok_set
            recs.append({"task": t, "turn": turn, "sample": 0, "status": "ok" if ok else "wrong", "correct": ok,
                         "speedup": (2.0 if i in fast else 0.5) if ok else None,
                         "speedup_compile": (1.5 if i in fast else 0.4) if ok else None, "abi": None})
    (d / "candidates.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    (d / "cell.json").write_text("{}")


def test_report_states_each_goal_met_or_missed_with_intervals(tmp_path):
    from experiments.method_report import collect_results
    plan = Plan.of("qwen2.5-coder-1.5b")
    root = tmp_path
    kb = "kernelbench"
    _cell(root, plan, "zero_shot-1.5b", kb, 100, set(range(5)), set())
    _cell(root, plan, "sft-1.5b", kb, 100, set(range(25)), set(range(5)))
    _cell(root, plan, "rl_full_s0-1.5b", kb, 100, set(range(45)), set(range(20)), turn0=set(range(35)))
    _cell(root, plan, "rl_abl_s0-1.5b", kb, 100, set(range(40)), set(range(10)))
    _cell(root, plan, "rl_full_s0-1.5b", "test", 96, set(range(10)), set(), turn0=set(range(12)))
    res = collect_results(root, plan)
    rl = next(c for c in res["cells"] if c["policy"] == "rl_full_s0-1.5b" and c["suite"] == kb)
    last = rl["per_turn"][-1]
    assert last["correct"]["value"] == 0.45 and last["fast_1"]["value"] == 0.20
    assert last["correct"]["low"] < 0.45 < last["correct"]["high"]
    assert last["geomean_speedup"]["value"] == pytest.approx(2 ** (-5 / 45))   # 20 at 2x, 25 at 0.5x
    assert rl["per_turn"][0]["correct"]["value"] == 0.35
    status = {g["goal"][:30]: g["status"] for g in res["goals"]}
    assert list(status.values()) == ["met", "met", "met", "met", "missed"], res["goals"]   # test: 10 < 12 at turn 0
    gap = next(g for g in res["gaps"] if g["what"] == "RL-full s0 - SFT" and g["suite"] == kb)
    assert gap["correct"]["value"] == pytest.approx(0.20) and gap["correct"]["low"] > 0
    assert rl["funnel"][-1]["fast"] == 0.20 and rl["funnel"][-1]["correctness"] == 0.55

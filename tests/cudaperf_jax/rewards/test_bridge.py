"""The bridge inside jit: token arrays -> host decode -> the real harness (cpu backend) -> reward rows."""
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from cudaperf_jax.prompts import task_prompt
from cudaperf_jax.rewards.bridge import HarnessClient
from cudaperf_jax.rewards.unified import RewardConfig, UnifiedReward

REPO = Path(__file__).resolve().parents[3]
BROKEN = "```cuda\nextern \"C\" int saxpy(int n, float a, const float* x, float* y, cudaStream_t s) { return oops; }\n```"
HACK = ("```cuda\n#include <cstdlib>\nextern \"C\" int saxpy(int n, float a, const float* x, float* y, "
        "cudaStream_t s) { system(\"true\"); return 0; }\n```")


@pytest.fixture(scope="module")
def setup():
    from kernels_harness.run.pool import HarnessPool
    from kernels_harness.tasks.schema import load_task
    from tests.cudaperf_jax.models import tiny
    task = load_task(REPO / "experiments/suites/smoke/smoke_saxpy.json")
    pool = HarnessPool("cpu", workers=1, compile_workers=1, seed=0)
    yield task, HarnessClient(pool, [task], tiny.tokenizer(), UnifiedReward(RewardConfig()))
    pool.close()


def test_bridge_inside_jit_rewards_real_verdicts(setup):
    task, client = setup
    good = "Here it is:\n```cuda\n" + task.implementations[0].source + "```"
    texts = [good, BROKEN, HACK]
    ids = [client.tokenizer.encode(t, add_special_tokens=False) for t in texts]
    n = max(map(len, ids)) + 5
    tokens = np.zeros((3, n), np.int32)
    for i, t in enumerate(ids):
        tokens[i, :len(t)] = t
    lengths = np.array([len(t) for t in ids], np.int32)

    @jax.jit
    def step(tokens, lengths, task_idx):
        r = client.jax_rewards(tokens, lengths, task_idx)
        return r, r[:, client.names.index("total")].mean()   # the rewards flow on into traced code

    rows, mean = step(jnp.asarray(tokens), jnp.asarray(lengths), jnp.zeros(3, jnp.int32))
    rows = np.asarray(rows)
    assert rows.shape == (3, len(client.names)) and rows.dtype == np.float32
    assert [r.status for r in client.last["results"]] == ["ok", "compile_error", "hack"]
    col = {k: rows[:, i] for i, k in enumerate(client.names)}
    assert col["correct"].tolist() == [1.0, 0.0, 0.0] and col["speed"].tolist() == [0.0, 0.0, 0.0]  # cpu: no time
    assert col["penalty"].tolist() == pytest.approx([0.0, -0.2, -1.0])
    assert col["total"][0] >= 1.0 > col["total"][1] > col["total"][2]
    assert float(mean) == pytest.approx(col["total"].mean(), rel=1e-6)
    # the same client serves a TRL-style caller (prompt text identifies the task)
    totals = client.reward_fn([task_prompt(task)] * 2, [good, BROKEN])
    assert totals == pytest.approx(col["total"][:2].tolist())
    with pytest.raises(KeyError, match="task_id"):
        client.reward_fn(["an unknown prompt"], [good])

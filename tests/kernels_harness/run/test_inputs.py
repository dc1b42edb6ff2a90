"""Trial inputs: unpredictable master seeds, distinct trials, reproducible from a recorded seed."""
import json

import numpy as np

from kernels_harness.run import inputs
from kernels_harness.tasks.schema import Task

SAXPY = json.loads(r'''{"id": "saxpy", "track": "c2cuda", "entry": "saxpy",
 "source": "void saxpy(int n, float a, const float* x, float* y) { for (int i = 0; i < n; i++) y[i] = a * x[i] + y[i]; }",
 "signature": [{"name": "n", "role": "scalar", "dtype": "int32", "value": "N"},
               {"name": "a", "role": "scalar", "dtype": "float32", "value": "2.5"},
               {"name": "x", "role": "in", "dtype": "float32", "shape": ["N"]},
               {"name": "y", "role": "inout", "dtype": "float32", "shape": ["N"], "init": "normal(0, 3)"}],
 "configs": [{"N": 1000}, {"N": 1000000}, {"N": 16777216}],
 "tolerance": {"atol": 1e-5, "rtol": 1e-5}, "flops": "2*N", "min_bytes": "12*N"}''')


def test_master_seeds_differ_and_trials_get_different_inputs():
    assert len({inputs.master_seed() for _ in range(8)}) == 8
    task = Task.from_dict(SAXPY)
    s = inputs.master_seed()
    a = inputs.host_inputs(task, task.configs[0], inputs.trial_seed(s, 0, 0))
    b = inputs.host_inputs(task, task.configs[0], inputs.trial_seed(s, 0, 1))
    again = inputs.host_inputs(task, task.configs[0], inputs.trial_seed(s, 0, 0))
    assert set(a) == {"x", "y"} and a["x"].shape == (1000,) and a["x"].dtype == np.float32
    assert not np.array_equal(a["x"], b["x"])
    assert np.array_equal(a["x"], again["x"]) and np.array_equal(a["y"], again["y"])
    assert -1 <= a["x"].min() and a["x"].max() < 1 and 2.0 < a["y"].std() < 4.0
    assert inputs.scalars(task, task.configs[1]) == {"n": 1000000, "a": 2.5}

"""SFT warm start: the policy learns verified implementations of the dataset's train split.

data (examples), packing (rows, schedule), step (the jitted Optax update), train (the loop: `train(config, workdir)`),
report (plot, summary), config (the typed config).
"""

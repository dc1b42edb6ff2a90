"""The pairwise ranker (experiments/train_ranker.py). `get_config("small")` is the CPU-sized variant;
choose one with `--config=experiments/configs/ranker.py:small`, override fields with --config.a.b=value.

model.encoder: "transformer" (hashed code tokens, from scratch), "backbone" (the policy decoder, top
`train_layers` layers fine-tuned) or "features" (the features-only MLP baseline).
"""
import ml_collections


def get_config(variant: str = "h200"):
    c = ml_collections.ConfigDict()
    c.seed = 0
    c.dataset_seed = 0
    c.times = "data/times/h200"                 # measured times (kernels_harness.datasets.times)
    c.features = "cache"                        # cache (features_cache file, static for rows it lacks) | static
    c.features_cache = "data/features/sm90.npz"
    c.families = ""                             # comma-separated subset of families ("" = all)
    c.limit_per_family = 0                      # programs per family (0 = all)
    c.margin = 1.1                              # speed pairs only where slow / fast time >= margin
    c.time_config = "largest"                   # largest | geomean (over configs)
    c.weighting = "none"                        # none | log_ratio (speed pairs weighted by log time ratio)
    c.steps = 3000
    c.batch_pairs = 64
    c.lr = 1e-3
    c.weight_decay = 0.01
    c.log_every = 50
    c.checkpoint_every = 1000
    c.eval_batch = 256
    c.best_of_n = 8
    c.compare_features_only = True              # also train the features-only model and report it
    c.features_only_steps = 3000
    c.model = ml_collections.ConfigDict()
    m = c.model
    m.encoder = "transformer"
    m.hidden = 128
    m.vocab = 8192
    m.max_len = 768
    m.dim = 192
    m.depth = 3
    m.heads = 6
    m.dropout = 0.0
    m.backbone = "default"
    m.train_layers = 2
    m.dtype = "float32"
    if variant == "small":                      # minutes on two CPU cores
        c.steps = 300
        c.features_only_steps = 1500
        c.batch_pairs = 16
        c.lr = 2e-3
        c.checkpoint_every = 100
        c.log_every = 20
        c.eval_batch = 128
        m.vocab = 2048
        m.max_len = 160
        m.dim = 32
        m.depth = 2
        m.heads = 2
        m.hidden = 64
    elif variant == "backbone":                 # the policy backbone on a GPU
        c.steps = 800
        c.batch_pairs = 16
        c.checkpoint_every = 400
        c.lr = 1e-4
        m.encoder = "backbone"
        m.max_len = 768
        m.dtype = "bfloat16"
    elif variant != "h200":
        raise ValueError(f"unknown ranker config variant {variant!r}; use h200, small or backbone")
    return c

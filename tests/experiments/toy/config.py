"""Config of the toy experiment used to test the launch machinery."""
import ml_collections


def get_config():
    c = ml_collections.ConfigDict()
    c.seed = 0
    c.steps = 6
    c.opt = ml_collections.ConfigDict({"lr": 0.1, "momentum": 0.5})
    return c

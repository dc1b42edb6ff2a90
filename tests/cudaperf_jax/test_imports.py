"""The import structure of cudaperf_jax: imports only go down the stack of layers below, never up or sideways into a
package of the same layer, the decode kernels never import the models, and no module imports itself back through
others - top-level and function-level imports alike (a lazy import inside a function is still a dependency)."""
import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "cudaperf_jax"

# Bottom to top. A package may import its own modules and any package of a lower layer.
LAYERS = [
    {"assets", "experiment", "prompts"},         # no model, no JAX-side policy code
    {"kernels"},                                 # decode kernels (never the models)
    {"models"},                                  # the decoder, weights in and out, LoRA
    {"generation", "training"},                  # the sampler; the training core (optimizer, step, checkpoints)
    {"ranker"},                                  # the pairwise ranker (its backbone encoder is a policy decoder)
    {"rewards"},                                 # the unified reward and the harness bridge
    {"sft", "rl"},                               # the training stages
    {"eval"},                                    # evaluation (its config holds the RL rollout's RolloutConfig)
]


def _layer_of(module: str) -> int | None:
    parts = module.split(".")
    if len(parts) < 2:
        return None
    for i, layer in enumerate(LAYERS):
        if parts[1] in layer:
            return i
    return None


def _modules() -> dict[str, Path]:
    return {".".join(p.relative_to(PKG.parent).with_suffix("").parts).removesuffix(".__init__"): p
            for p in PKG.rglob("*.py")}


def _graph() -> dict[str, set[str]]:
    """module -> the cudaperf_jax modules it imports (anywhere in its source)."""
    mods = _modules()
    graph = {}
    for name, path in mods.items():
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("cudaperf_jax"):
                for a in node.names:   # `from pkg import module` names a module; `from module import name` does not
                    deps.add(f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in mods else node.module)
            elif isinstance(node, ast.ImportFrom) and node.level and node.module is None:
                deps |= {f"{name.rsplit('.', 1)[0]}.{a.name}" for a in node.names}
            elif isinstance(node, ast.Import):
                deps |= {a.name for a in node.names if a.name.startswith("cudaperf_jax")}
        graph[name] = {d for d in deps if d in mods and d != name}
    return graph


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """'a -> b' for every import of a module in the same or a higher layer's other package."""
    bad = []
    for m, deps in sorted(graph.items()):
        lm = _layer_of(m)
        if lm is None:
            continue
        for d in sorted(deps):
            ld = _layer_of(d)
            if ld is None or d.split(".")[1] == m.split(".")[1]:
                continue
            if ld >= lm:
                bad.append(f"{m} -> {d}")
    return bad


def test_every_package_has_a_layer():
    pkgs = {p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    pkgs |= {p.stem for p in PKG.glob("*.py") if p.stem != "__init__"}
    placed = set().union(*LAYERS)
    assert pkgs <= placed, f"packages without a layer in this test: {sorted(pkgs - placed)}"


def test_imports_only_go_down_the_layers():
    assert upward_imports(_graph()) == []


def test_the_check_sees_an_upward_import():
    """The check itself: rewards importing rl (the import this test was written against) is reported."""
    graph = {"cudaperf_jax.rewards.bridge": {"cudaperf_jax.rl.prompts"}, "cudaperf_jax.rl.prompts": set(),
             "cudaperf_jax.models.decoder": {"cudaperf_jax.ranker.scorer"}, "cudaperf_jax.ranker.scorer": set(),
             "cudaperf_jax.sft.data": {"cudaperf_jax.sft.config", "cudaperf_jax.prompts.variants"}}
    assert upward_imports(graph) == ["cudaperf_jax.models.decoder -> cudaperf_jax.ranker.scorer",
                                     "cudaperf_jax.rewards.bridge -> cudaperf_jax.rl.prompts"]


def test_kernels_never_import_the_models():
    graph = _graph()
    bad = {m: sorted(d for d in deps if d.startswith("cudaperf_jax.models"))
           for m, deps in graph.items() if m.startswith("cudaperf_jax.kernels")}
    assert not any(bad.values()), bad
    assert any(d.startswith("cudaperf_jax.kernels") for d in graph["cudaperf_jax.models.decoder"])


def test_no_import_cycle_in_the_package():
    graph, state, cycles = _graph(), {}, []

    def visit(m, path):
        state[m] = 1
        for d in sorted(graph[m]):
            if state.get(d) == 1:
                cycles.append(path[path.index(d):] + [d] if d in path else [m, d])
            elif d not in state:
                visit(d, path + [d])
        state[m] = 2
    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    assert not cycles, cycles

"""The import structure of cudaperf_jax (issue 31): the decode kernels never import the models, and no module of the
package imports itself back through others - top-level and function-level imports alike."""
import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "cudaperf_jax"


def _graph() -> dict[str, set[str]]:
    """module -> the cudaperf_jax modules it imports (anywhere in its source)."""
    mods = {".".join(p.relative_to(PKG.parent).with_suffix("").parts).removesuffix(".__init__"): p
            for p in PKG.rglob("*.py")}
    graph = {}
    for name, path in mods.items():
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("cudaperf_jax"):
                for a in node.names:   # `from pkg import module` names a module; `from module import name` does not
                    deps.add(f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in mods else node.module)
            elif isinstance(node, ast.Import):
                deps |= {a.name for a in node.names if a.name.startswith("cudaperf_jax")}
        graph[name] = {d for d in deps if d in mods and d != name}
    return graph


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

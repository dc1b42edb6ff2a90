"""Index-expression forms and warp sector counts, against hand-computed values."""
from fractions import Fraction

import pytest

from kernels_harness.features import coalescing, indexing, parse
from kernels_harness.features.indexing import SYM

pytestmark = pytest.mark.skipif(parse.parser() is None, reason="tree-sitter CUDA is not installed")


def form(expr: str, macros=None, env=None):
    root = parse.parser().parse(f"void f() {{ x = {expr}; }}".encode()).root_node
    node = next(n for n in parse.walk(root) if n.type == "assignment_expression").child_by_field_name("right")
    return indexing.Evaluator(macros or {}, env)(node)


@pytest.mark.parametrize("expr, tx, ty", [
    ("blockIdx.x * blockDim.x + threadIdx.x", 1, 0),
    ("threadIdx.x * 4 + 1", 4, 0),
    ("(threadIdx.x << 3) + n", 8, 0),
    ("TILE * threadIdx.y + threadIdx.x", 1, 32),
    ("threadIdx.x % 32", 1, 0),
    ("threadIdx.x & 31", 1, 0),
    ("(blockIdx.x * blockDim.x + threadIdx.x) / 32", 0, 0),   # one value per warp
    ("threadIdx.x / 4", Fraction(1, 4), 0),
    ("idx / cols", 0, 0),                                        # runtime divisor: taken as >= 32
    ("(size_t)threadIdx.x * cols + 7", SYM, 0),
    ("n * 2 + blockIdx.y", 0, 0),
    ("static_cast<int>(threadIdx.x) - 1", 1, 0),
    ("(threadIdx.x / 16) * ld + threadIdx.x % 16", (Fraction(1), Fraction(1, 16)), 0),
    ("i < 0 ? 0 : (i >= n ? n - 1 : i)", 1, 0),                  # a clamp keeps the thread's stride
])
def test_forms(expr, tx, ty):
    one = indexing.Form((indexing.ONE, indexing.ZERO, indexing.ZERO))
    f = form(expr, macros={"TILE": "32"}, env={"idx": one, "i": one})
    assert f.tx == (tx if isinstance(tx, tuple) else (Fraction(tx), 0))
    assert f.t[1] == (Fraction(ty), 0)


def test_gathers_and_products_are_not_affine():
    g = form("idx[threadIdx.x]")
    assert g.tx is None and g.indirect
    assert coalescing.classify(g) == "indirect"
    p = form("threadIdx.x * threadIdx.y")
    assert p.tx is None and not p.indirect
    assert coalescing.classify(p) == "unknown"
    u = form("flags[blockIdx.x] + 3")
    assert u.uniform and u.indirect
    assert form("4 * 8 + 2").const == 34


def F(tx=0, ty=0):
    return indexing.Form(tuple(c if c == SYM else (Fraction(c), Fraction(0)) for c in (tx, ty, 0)))


@pytest.mark.parametrize("f, elem, block, sectors, ideal, kind", [
    (F(1), 4, (256, 1, 1), 4, 4, "unit"),           # 128 contiguous bytes
    (F(1), 8, (256, 1, 1), 8, 8, "unit"),
    (F(1), 16, (256, 1, 1), 16, 16, "unit"),         # float4
    (F(2), 4, (256, 1, 1), 8, 4, "strided_const"),   # every other float: half of each sector
    (F(8), 4, (256, 1, 1), 32, 4, "strided_const"),  # one float per sector
    (F(SYM), 4, (256, 1, 1), 32, 4, "strided_param"),
    (F(0), 4, (256, 1, 1), 1, 1, "uniform"),         # broadcast
    (F(1, SYM), 4, (16, 16, 1), 4, 4, "strided_param"),  # 16x16 block: two 64-byte row segments
    (F(SYM, 1), 4, (16, 16, 1), 16, 4, "strided_param"),  # lanes l and l+16 share a sector
    # cooperative tile load: row = tid / 16 (times the pitch), column = tid % 16 -> two full 64-byte rows
    (indexing.Form(((Fraction(1), Fraction(1, 16)), indexing.ZERO, indexing.ZERO)), 4, (256, 1, 1), 4, 4,
     "strided_param"),
])
def test_sectors(f, elem, block, sectors, ideal, kind):
    assert coalescing.sectors(f, elem, block) == (sectors, ideal)
    assert coalescing.efficiency(f, elem, block) == pytest.approx(ideal / sectors)
    assert coalescing.classify(f, block) == kind

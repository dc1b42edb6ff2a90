"""Static analysis of a CUDA translation unit on its tree-sitter parse.

`analyse_source(source)` walks every __global__ function in source order, keeping the abstract value
(indexing.Form) of each local variable, and records:
- every global load and store (and atomic), its index Form, element size, loop depth, coalescing class
  and estimated sectors per warp request (coalescing.py);
- shared arrays (size, padding) and their accesses, with the bank-conflict degree of each;
- barriers: inside thread-divergent branches or after a divergent early return (a hazard), in loops,
  with no shared-memory traffic since the previous barrier (redundant);
- warp-level primitives, shared-memory tree reductions, `#pragma unroll`, grid-stride loops, vector
  and read-only (`__ldg`, `const __restrict__`) loads;
- the launches in host code (`k<<<grid, block, smem>>>`) with their constant dimensions.
"""
from __future__ import annotations

import re
from fractions import Fraction

from kernels_harness.features import coalescing, parse
from kernels_harness.features.indexing import (
    NONLINEAR,
    UNIFORM,
    Evaluator,
    Form,
    add,
    c_scale,
)
from kernels_harness.features.parse import SIZEOF, VECTOR_TYPES, line, text, walk
from kernels_harness.features.records import (
    Access,
    Barrier,
    KernelStatic,
    SharedArray,
    StaticAnalysis,
    bank_degree,
)

BARRIERS = ("__syncthreads", "__syncthreads_count", "__syncthreads_and", "__syncthreads_or", "__barrier_sync")
WARP_PRIMITIVES = ("__shfl_sync", "__shfl_down_sync", "__shfl_up_sync", "__shfl_xor_sync", "__reduce_add_sync",
                   "__reduce_min_sync", "__reduce_max_sync", "__ballot_sync", "__any_sync", "__all_sync",
                   "__match_any_sync", "__shfl_down", "__shfl_xor", "__shfl", "__shfl_up", "shfl_down", "shfl_xor",
                   "reduce")
ATOMIC = re.compile(r"^atomic(Add|Sub|Exch|Min|Max|Inc|Dec|CAS|And|Or|Xor)(_block|_system)?$")
LDG = re.compile(r"^__ld(g|cs|ca|cg|lu|cv)$")


def analyse_source(source: str, entry: str | None = None, args: list | None = None) -> StaticAnalysis:
    """The static features of every kernel of a CUDA source (see the module docstring).

    entry/args: the solution's entry point and its scalar argument values by position (None for
    arrays), used to evaluate the grid and block of the launches it makes.
    """
    p = parse.parser()
    if p is None:
        return StaticAnalysis([], [], note=parse.PARSE_UNAVAILABLE)
    root = p.parse(source.encode("utf-8", "replace")).root_node
    macros = parse.macros_of(root)
    launches = parse.launches_of(root, macros, entry, args)
    kernels = []
    devfns = parse.device_functions_of(root)
    for kd in parse.kernels_of(root):
        block = next((tuple(la.block) for la in launches if la.kernel == kd.name and la.block), None)
        ks = _KernelWalker(kd, macros, block, devfns).run()
        kernels.append(ks)
    note = "" if kernels else "no __global__ kernel found in the source"
    if root.has_error and kernels:
        note = ""  # partial parses are normal for macro-heavy code; the kernels found are analysed
    return StaticAnalysis(kernels, launches, note, macros)


def _base_type(type_text: str) -> str:
    t = re.sub(r"\b(const|volatile|__restrict__|restrict|struct|__align__\(\d+\))\b", "", type_text)
    return " ".join(t.replace("*", " ").split())


class _KernelWalker:
    def __init__(self, kd: parse.KernelDef, macros: dict, block, devfns: dict | None = None):
        self.kd = kd
        self.devfns = devfns or {}
        self.inlining: list[str] = []   # __device__ functions being analysed at their call site
        self.fills_ctx = False          # the inlined function's value is stored to shared memory
        self.coop = 0                   # enclosing loops that distribute work over threads
        self.ev = Evaluator(macros)
        self.macros = macros
        self.k = KernelStatic(name=kd.name, line=line(kd.node), params=[p[0] for p in kd.params],
                              launch_bounds=kd.launch_bounds, block=block or (256, 1, 1), block_known=bool(block))
        # name -> (base pointer, offset Form, elem size, vector, readonly)
        self.globals = {}
        for name, ty, is_ptr, is_const, is_restrict in kd.params:
            if is_ptr:
                bt = _base_type(ty)
                self.globals[name] = (name, UNIFORM, SIZEOF.get(bt, 4), bt in VECTOR_TYPES, is_const and is_restrict)
        self.shared: dict[str, SharedArray] = {}
        self.events: list = []          # ("barrier", Barrier, depth) | ("smem", depth)
        self.divergent_exit = False

    def run(self) -> KernelStatic:
        body = self.kd.node.child_by_field_name("body")
        if body is not None:
            self.stmt(body, depth=0, divergent=False)
        self._redundant_barriers()
        return self.k

    # ---- statements ------------------------------------------------------------------------
    def stmt(self, n, depth: int, divergent: bool):
        t = n.type
        if t == "compound_statement":
            for c in n.named_children:
                self.stmt(c, depth, divergent)
        elif t == "declaration":
            self.declaration(n, depth, divergent)
        elif t == "if_statement":
            cond = n.child_by_field_name("condition")
            self.expr(cond, depth, divergent)
            div = divergent or not self.ev(cond).uniform
            for field in ("consequence", "alternative"):
                c = n.child_by_field_name(field)
                if c is not None:
                    self.stmt(c, depth, div)
                    if div and any(x.type == "return_statement" for x in walk(c)):
                        self.divergent_exit = True
        elif t in ("for_statement", "while_statement", "do_statement", "for_range_loop"):
            self.loop(n, depth, divergent)
        elif t == "return_statement":
            for c in n.named_children:
                self.expr(c, depth, divergent, fills=self.fills_ctx)
        elif t == "preproc_call":
            if re.search(r"#\s*pragma\s+unroll", text(n)):
                self.k.unroll_pragmas += 1
        elif t in ("expression_statement", "else_clause", "labeled_statement", "switch_statement",
                   "case_statement"):
            for c in n.named_children:
                self.stmt(c, depth, divergent) if c.type.endswith(("statement", "clause")) or c.type == "declaration" \
                    else self.expr(c, depth, divergent)
        elif t.endswith("expression") or t in ("comma_expression",):
            self.expr(n, depth, divergent)
        else:
            for c in n.named_children:
                self.stmt(c, depth, divergent)

    def loop(self, n, depth: int, divergent: bool):
        self.k.loops += 1
        init, cond, update = (n.child_by_field_name(f) for f in ("initializer", "condition", "update"))
        if init is not None:
            self.stmt(init, depth, divergent) if init.type == "declaration" else self.expr(init, depth, divergent)
        loop_vars = []
        if init is not None:
            for d in walk(init):
                if d.type in ("init_declarator", "assignment_expression"):
                    target = d.child_by_field_name("declarator") or d.child_by_field_name("left")
                    if target is not None and target.type == "identifier":
                        loop_vars.append(text(target))
        upd_text = text(update) if update is not None else ""
        upd_form = self.ev(update) if update is not None else UNIFORM
        coop = False
        for v in loop_vars:  # the counter: its start, plus uniform steps (or anything, if the step varies per thread)
            start = self.ev.env.get(v, UNIFORM)
            coop = coop or (not start.uniform and upd_form.uniform)
            self.ev.env[v] = add(start, Form()) if upd_form.uniform else NONLINEAR
        if "gridDim" in upd_text or ("gridDim" in text(n) and any(v in upd_text for v in loop_vars)):
            self.k.grid_stride = True
        halving = bool(re.search(r">>=\s*1\b|/=\s*2\b|=\s*\w+\s*(>>\s*1|/\s*2)\b", upd_text))
        div = divergent or (cond is not None and not self.ev(cond).uniform)
        if cond is not None:
            self.expr(cond, depth + 1, divergent)
        before = len(self.k.accesses), len(self.k.barriers)
        body = n.child_by_field_name("body")
        self.coop += coop
        if body is not None:
            self.stmt(body, depth + 1, div)
        self.coop -= coop
        if update is not None:
            self.expr(update, depth + 1, divergent)
        if halving and len(self.k.barriers) > before[1] and any(a.space == "shared" for a in self.k.accesses[before[0]:]):
            self.k.smem_tree_reduction = True

    def declaration(self, n, depth: int, divergent: bool):
        dtext = text(n)
        ty = n.child_by_field_name("type")
        base = _base_type(text(ty)) if ty is not None else ""
        if "__shared__" in dtext:
            for d in n.children_by_field_name("declarator"):
                self.shared_decl(d, base, "extern" in dtext.split("__shared__")[0] or "extern" in dtext)
            return
        for d in n.children_by_field_name("declarator"):
            if d.type != "init_declarator":
                continue
            target, value = d.child_by_field_name("declarator"), d.child_by_field_name("value")
            if value is None:
                continue
            self.expr(value, depth, divergent)
            is_ptr = target is not None and target.type == "pointer_declarator"
            while target is not None and target.type != "identifier":
                target = target.child_by_field_name("declarator")
            if target is None:
                continue
            name = text(target)
            if is_ptr:
                alias = self.pointer_of(value)
                if alias is not None:
                    base_ptr, off, es, vec, ro = alias
                    if base in SIZEOF and SIZEOF[base] != es:  # a reinterpreting alias: offsets in new units
                        off = Form(tuple(c_scale(c, Fraction(es, SIZEOF[base])) for c in off.t), None, off.indirect)
                        es, vec = SIZEOF[base], base in VECTOR_TYPES
                    self.globals[name] = (base_ptr, off, es, vec, ro)
                    continue
            self.ev.env[name] = self.ev(value)

    def shared_decl(self, d, base: str, extern: bool):
        dims, node = [], d
        if node.type == "init_declarator":
            node = node.child_by_field_name("declarator")
        while node is not None and node.type == "array_declarator":
            size = node.child_by_field_name("size")
            v = parse.const_eval(text(size), self.macros) if size is not None else None
            dims.insert(0, int(v) if v is not None else None)
            node = node.child_by_field_name("declarator")
        if node is None:
            return
        last_text = text(d).rsplit("[", 1)[-1] if dims else ""
        padded = len(dims) >= 2 and dims[-1] is not None and dims[-1] % 32 != 0 and (
            "+" in last_text or any((dims[-1] - p) % 16 == 0 for p in range(1, 9)))
        self.shared[text(node)] = SharedArray(text(node), dims, SIZEOF.get(base, 4), extern or not dims or dims[0] is None, padded)
        self.k.shared.append(self.shared[text(node)])

    # ---- expressions -----------------------------------------------------------------------
    def pointer_of(self, n):
        """(base, offset Form, elem size, vector, readonly) if n evaluates to a global pointer."""
        t = n.type
        if t == "identifier":
            return self.globals.get(text(n))
        if t == "parenthesized_expression" and n.named_children:
            return self.pointer_of(n.named_children[-1])
        if t == "cast_expression" or (t == "call_expression" and re.match(r"(reinterpret|static|const)_cast", text(n))):
            inner = n.child_by_field_name("value") if t == "cast_expression" else \
                (n.child_by_field_name("arguments").named_children or [None])[0]
            ptr = self.pointer_of(inner) if inner is not None else None
            m = re.search(r"(?:<|\()\s*(?:const\s+)?([\w ]+?)\s*(?:const\s*)?\*", text(n))
            if ptr is not None and m and m.group(1).strip() in SIZEOF:
                es = SIZEOF[m.group(1).strip()]
                off = ptr[1]
                off = Form(tuple(c_scale(c, Fraction(ptr[2], es)) for c in off.t), None, off.indirect)
                return ptr[0], off, es, m.group(1).strip() in VECTOR_TYPES, ptr[4]
            return ptr
        if t == "binary_expression" and text(n.child_by_field_name("operator")) in ("+", "-"):
            left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
            ptr = self.pointer_of(left)
            if ptr is not None:
                off = self.ev(right)
                if text(n.child_by_field_name("operator")) == "-":
                    off = Form(tuple(c_scale(c, Fraction(-1)) for c in off.t), None, off.indirect)
                return ptr[0], add(ptr[1], off), ptr[2], ptr[3], ptr[4]
            ptr = self.pointer_of(right)
            if ptr is not None:
                return ptr[0], add(ptr[1], self.ev(left)), ptr[2], ptr[3], ptr[4]
        if t == "pointer_expression" and text(n).startswith("&") and n.child_by_field_name("argument").type == "subscript_expression":
            return self.subscript_target(n.child_by_field_name("argument"))
        return None

    def subscript_target(self, n):
        """For `p[i]` on a global pointer: (base, index Form, elem size, vector, readonly)."""
        arg, idx = n.child_by_field_name("argument"), n.child_by_field_name("indices")
        ptr = self.pointer_of(arg) if arg is not None else None
        if ptr is None or idx is None:
            return None
        return ptr[0], add(ptr[1], self.ev(idx)), ptr[2], ptr[3], ptr[4]

    def shared_target(self, n):
        """For `s[i][j]` on a shared array: (array, [Form per index])."""
        idxs = []
        while n is not None and n.type == "subscript_expression":
            i = n.child_by_field_name("indices")
            idxs.insert(0, self.ev(i) if i is not None else NONLINEAR)
            n = n.child_by_field_name("argument")
        if n is not None and n.type == "identifier" and text(n) in self.shared:
            return self.shared[text(n)], idxs
        return None

    def record(self, n, kind: str, depth: int, readonly: bool = False, fills: bool = False):
        """Records the access of subscript/deref node n (global or shared); True if it was one."""
        if n.type == "subscript_expression":
            sh = self.shared_target(n)
            if sh is not None:
                arr, idxs = sh
                a = Access(kind, "shared", arr.name, line(n), text(n)[:80], idxs[-1] if idxs else UNIFORM,
                           arr.elem_size, depth, indices=tuple(idxs), coop_loops=self.coop)
                a.bank_degree = bank_degree(arr, idxs, self.k.block)
                self.k.accesses.append(a)
                self.events.append(("smem", depth))
                return True
            g = self.subscript_target(n)
        elif n.type == "pointer_expression" and not text(n).startswith("&"):
            arg = n.child_by_field_name("argument")
            g = self.pointer_of(arg) if arg is not None else None
        else:
            g = self.pointer_of(n)
        if g is None:
            return False
        base, form, es, vec, ro = g
        a = Access(kind, "global", base, line(n), text(n)[:80], form, es, depth, vector=vec,
                   readonly=readonly or (ro and kind == "load"), fills_shared=fills, coop_loops=self.coop)
        if kind != "atomic":
            a.pattern = coalescing.classify(form, self.k.block)
            a.sectors, a.ideal_sectors = coalescing.sectors(form, es, self.k.block)
            if a.pattern.startswith("strided") and a.sectors == a.ideal_sectors:
                a.pattern = "unit"  # e.g. 16x16 blocks: the warp reads two full 64-byte row segments
        self.k.accesses.append(a)
        return True

    def expr(self, n, depth: int, divergent: bool, fills: bool = False):
        if n is None:
            return
        t = n.type
        if t == "call_expression":
            fn = n.child_by_field_name("function")
            name = re.sub(r"<.*", "", text(fn) if fn is not None else "").split("::")[-1].split(".")[-1]
            args = n.child_by_field_name("arguments")
            arg_nodes = args.named_children if args is not None else []
            if name in BARRIERS or (name == "sync" and fn is not None and fn.type == "field_expression"):
                self.k.barriers.append(Barrier(line(n), depth, divergent or self.divergent_exit,
                                               reason="divergent branch" if divergent else
                                               ("after a divergent return" if self.divergent_exit else "")))
                self.events.append(("barrier", self.k.barriers[-1], depth))
            elif name == "__syncwarp":
                self.k.syncwarp += 1
            elif name in WARP_PRIMITIVES:
                self.k.warp_primitives.append(name)
            elif ATOMIC.match(name) and arg_nodes:
                target = arg_nodes[0]
                inner = target.child_by_field_name("argument") if target.type == "pointer_expression" else None
                if inner is not None and inner.type == "subscript_expression" and self.shared_target(inner):
                    self.record(inner, "atomic", depth)
                else:
                    self.record(target, "atomic", depth)
                for a in arg_nodes:
                    self.expr(a, depth, divergent)
                return
            elif name in self.devfns and name not in self.inlining and len(self.inlining) < 4:
                for a in arg_nodes:
                    self.expr(a, depth, divergent)
                self.inline(self.devfns[name], arg_nodes, depth, divergent, fills)
                return
            elif LDG.match(name) and arg_nodes and self.record(arg_nodes[0], "load", depth, readonly=name == "__ldg",
                                                               fills=fills):
                for sub in walk(arg_nodes[0]):
                    if sub.type == "subscript_argument_list":
                        self.expr(sub, depth, divergent)
                return
            for a in arg_nodes:
                self.expr(a, depth, divergent, fills)
            return
        if t == "assignment_expression":
            left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
            op = text(n.child_by_field_name("operator"))
            stores_shared = left is not None and left.type == "subscript_expression" and self.shared_target(left) is not None
            self.expr(right, depth, divergent, fills=stores_shared)
            if left is not None and left.type in ("subscript_expression", "pointer_expression"):
                if op != "=":
                    self.record(left, "load", depth)
                if self.record(left, "store", depth):
                    self._index_loads(left, depth, divergent)
                else:
                    self.expr(left, depth, divergent)
            elif left is not None and left.type == "identifier":
                name, val = text(left), self.ev(right)
                if op == "=":
                    self.ev.env[name] = val
                elif op in ("+=", "-="):
                    self.ev.env[name] = add(self.ev.env.get(name, UNIFORM), val, 1 if op == "+=" else -1)
                else:
                    cur = self.ev.env.get(name, UNIFORM)
                    self.ev.env[name] = Form(indirect=cur.indirect or val.indirect) if cur.uniform and val.uniform else NONLINEAR
            return
        if t == "update_expression":
            arg = n.child_by_field_name("argument")
            if arg is not None and arg.type == "identifier":
                cur = self.ev.env.get(text(arg), UNIFORM)
                self.ev.env[text(arg)] = Form(cur.t, None, cur.indirect)
            elif arg is not None and self.record(arg, "load", depth):
                self.record(arg, "store", depth)
            return
        if t == "pointer_expression" and text(n).startswith("&"):
            arg = n.child_by_field_name("argument")
            if arg is not None:
                self._index_loads(arg, depth, divergent)
            return
        if t in ("subscript_expression", "pointer_expression") and self.record(n, "load", depth, fills=fills):
            self._index_loads(n, depth, divergent)
            return
        for c in n.named_children:
            self.expr(c, depth, divergent, fills)

    def inline(self, fn: parse.KernelDef, args: list, depth: int, divergent: bool, fills: bool):
        """Analyses a __device__ function's body at its call site, its parameters bound to the arguments."""
        saved = (dict(self.ev.env), dict(self.globals), dict(self.shared), self.divergent_exit, self.fills_ctx)
        for (pname, _ty, is_ptr, _c, _r), arg in zip(fn.params, args):
            if is_ptr or text(arg) in self.shared:
                ptr = self.pointer_of(arg)
                self.globals.pop(pname, None)
                self.shared.pop(pname, None)
                if ptr is not None:
                    self.globals[pname] = ptr
                elif text(arg) in self.shared:
                    self.shared[pname] = self.shared[text(arg)]
            else:
                self.ev.env[pname] = self.ev(arg)
        self.inlining.append(fn.name)
        self.fills_ctx = fills
        body = fn.node.child_by_field_name("body")
        if body is not None:
            self.stmt(body, depth, divergent)
        self.inlining.pop()
        self.ev.env, self.globals, self.shared, self.divergent_exit, self.fills_ctx = saved

    def _index_loads(self, n, depth, divergent):
        """Loads inside the index expressions of an access (gathers: `x[idx[i]]`)."""
        while n is not None and n.type == "subscript_expression":
            self.expr(n.child_by_field_name("indices"), depth, divergent)
            n = n.child_by_field_name("argument")
        if n is not None and n.type == "pointer_expression":
            self.expr(n.child_by_field_name("argument"), depth, divergent)

    def _redundant_barriers(self):
        any_smem = any(e[0] == "smem" for e in self.events)
        prev_barrier_depth, since = None, True
        for e in self.events:
            if e[0] == "smem":
                since = True
                continue
            b = e[1]
            if not any_smem or not since and prev_barrier_depth == e[2]:
                b.redundant = True
            prev_barrier_depth, since = e[2], False

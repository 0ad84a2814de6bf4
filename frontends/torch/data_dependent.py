"""Data-dependent output sizes in a ``torch.export`` graph: found, named, and padded where
the program bounds them.

``nonzero``, boolean-mask indexing ``x[mask]``, ``masked_select``, ``unique``,
``repeat_interleave(repeats)``, ``.item()`` read as an int... have outputs whose size depends
on the input *values*. ``torch.export`` gives those sizes *unbacked* symbols (``u0``, ``u1``)
and follows them with ``sym_size``/``>=``/``<=``/``_assert_scalar`` nodes; a StableHLO module
has static shapes, so such a model cannot convert as written. :func:`resolve_data_dependent`
runs before the op check and

* rewrites a ``nonzero`` (``argwhere``) whose size the program bounds below the input's
  element count -- ``n = torch.nonzero(x); torch._check(n.shape[0] <= N)`` -- into
  ``nonzero_static(x, size=N, fill_value=-1)``: the padded form (``jnp.nonzero(size=N,
  fill_value=-1)`` semantics; ``torch.export``'s runtime checks on the size are dropped), and
  carries the padding through the ops that use it (:class:`_Padding`): ops computing row
  ``i`` from row ``i`` keep it, reductions over the padded rows mask them (``mean``
  divides by the true count), and a model output has ``N`` rows, the first ``n`` torch's
  (the padding ``-1`` for the indices, ``0`` for values computed from them). A use the
  padding would change (a size read, indexing into the padded rows, a product over them)
  is refused, naming the op and its line;
* raises one :class:`DataDependentShapeError` naming every other op that introduces an
  unbacked size, with its source line, the reason and the static-size fix.

``torch.nonzero_static(x, size=N, fill_value=...)`` itself has a static shape and converts
directly (``ops/indexing.py``).
"""

from __future__ import annotations

import operator

import torch
from torch.export import ExportedProgram

from converter._torch_internal import free_unbacked_symbols
from converter.errors import DataDependentOp, DataDependentShapeError

from .lowering import graphs, node_location, op_name

aten = torch.ops.aten

#: why the size depends on the values, and the static-size fix, per op
_WHY = {
    "aten.nonzero.default": (
        "its row count is the number of nonzero elements",
        "torch.nonzero_static(x, size=N, fill_value=-1), or torch._check(n <= N) on the nonzero "
        "result's size with N below x.numel() (JAX: jnp.nonzero(x, size=N, fill_value=-1))",
    ),
    "aten.index.Tensor": (
        "indexing with a boolean mask keeps as many elements as the mask has True values",
        "torch.where(mask, x, fill) to keep the shape, or index with "
        "torch.nonzero_static(mask, size=N) (JAX: jnp.where, or x[jnp.nonzero(mask, size=N)])",
    ),
    "aten.masked_select.default": (
        "it keeps as many elements as the mask has True values",
        "torch.where(mask, x, fill) to keep the shape, or x.flatten()[torch.nonzero_static("
        "mask.flatten(), size=N)[:, 0]] (JAX: jnp.where, or jnp.nonzero(mask, size=N))",
    ),
    "aten._unique2.default": (
        "its length is the number of distinct values",
        "a static size: torch.sort plus a mask of first occurrences "
        "(JAX: jnp.unique(x, size=N, fill_value=...))",
    ),
    "aten.unique_dim.default": (
        "its length is the number of distinct slices",
        "a static size: sort plus a mask of first occurrences (JAX: jnp.unique(x, axis=d, size=N))",
    ),
    "aten.unique_consecutive.default": (
        "its length is the number of runs of equal values",
        "a mask of run starts, x[1:] != x[:-1], on the full length (JAX: the same)",
    ),
    "aten.repeat_interleave.Tensor": (
        "its length is the sum of the repeat counts",
        "repeat counts known when exporting (a Python int or list), or "
        "jnp.repeat(x, repeats, total_repeat_length=N) in JAX",
    ),
    "aten.bincount.default": (
        "its length is max(x) + 1",
        "counts of static length: torch.zeros(N).scatter_add_(0, x, weights) "
        "(JAX: jnp.bincount(x, length=N))",
    ),
    "higher_order.while_loop": (
        "it carries a Python int, whose final value depends on the input values (an unbacked SymInt)",
        "carry a tensor instead, e.g. torch.tensor(0) for a counter",
    ),
    "aten._local_scalar_dense.default": (
        "a tensor value is read as a Python int (.item(), int(t), a tensor used as a size or index)",
        "keep the value a tensor (no .item()); sizes must be Python ints known when exporting",
    ),
}
_DEFAULT_WHY = (
    "its output size depends on the input values",
    "a form of the op with a static output size "
    "(a size=N argument, as in torch.nonzero_static or jnp.nonzero)",
)

#: ops that only check or compute unbacked sizes: dropped with the padded ``nonzero``
_SIZE_CHECKS = {
    "aten.sym_size.int",
    "aten._assert_scalar.default",
    "aten.sym_constrain_range_for_size.default",
    "aten.sym_constrain_range.default",
}


def _syms(val) -> set:
    try:
        return set(free_unbacked_symbols(val))
    except Exception:  # noqa: BLE001 - values that carry no shapes
        return set()


def _input_syms(node: torch.fx.Node) -> set:
    out: set = set()
    for a in node.all_input_nodes:
        out |= _syms(a.meta.get("val"))
    return out


def _is_size_check(node: torch.fx.Node) -> bool:
    if node.op != "call_function":
        return False
    return op_name(node) in _SIZE_CHECKS or getattr(node.target, "__module__", None) in (
        "_operator",
        "operator",
    )


def _size_check_users(node: torch.fx.Node) -> list[torch.fx.Node] | None:
    """Every node computing or checking ``node``'s sizes (``sym_size`` → ``<=`` →
    ``_assert_scalar``), or None when a size also feeds a real computation."""
    found: list[torch.fx.Node] = []
    todo = [u for u in node.users if u.op == "call_function" and op_name(u) == "aten.sym_size.int"]
    while todo:
        n = todo.pop()
        if n in found:
            continue
        if not _is_size_check(n) or n.target is operator.getitem:
            return None
        found.append(n)
        todo.extend(n.users)
    return found


def _bound(ep: ExportedProgram, sym) -> int | None:
    vr = ep.range_constraints.get(sym)
    if vr is None:
        return None
    try:
        return int(vr.upper)
    except (TypeError, ValueError, OverflowError):
        return None  # unbounded (int_oo)


def _pad_nonzero(ep: ExportedProgram, node: torch.fx.Node, sym) -> str | None:
    """Rewrite a bounded ``nonzero`` into ``nonzero_static`` and carry its padding through
    the ops that use it (:class:`_Padding`); returns None when done, else why it could not
    be (appended to the error's reason)."""
    x = node.args[0]
    xval = x.meta.get("val")
    bound = _bound(ep, sym)
    try:
        numel = int(xval.numel()) if xval is not None else None
    except Exception:  # noqa: BLE001 - a symbolic input size: any finite bound is the program's
        numel = bound + 1 if bound is not None else None
    if bound is None or numel is None or bound >= numel:
        return ""  # not bounded by the program
    checks = _size_check_users(node)
    if checks is None:
        return (
            f"; it is bounded (torch._check: at most {bound} rows) but its size feeds a computation "
            "(not only checks), which the padded form cannot give: pad explicitly with "
            "torch.nonzero_static and mask the padding"
        )
    refused = _Padding(node, sym, bound, checks).check()
    if refused is not None:
        user, why = refused
        return (
            f"; it is bounded (torch._check: at most {bound} rows) and converts padded, but here it "
            f"feeds {op_name(user) if user.op == 'call_function' else user.op}"
            f"{' at ' + node_location(user) if node_location(user) else ''}, {why}: pad explicitly "
            "with torch.nonzero_static and mask the padding"
        )
    _Padding(node, sym, bound, checks).rewrite()
    return None


#: ops whose result row ``i`` along the padded dimension depends only on row ``i`` of their
#: padded operands (besides the pointwise ops, found by torch's ``pointwise`` tag)
_ROW_LOCAL = {
    "aten.select.int", "aten.slice.Tensor", "aten.unsqueeze.default", "aten.squeeze.dim",
    "aten.squeeze.dims", "aten.permute.default", "aten.transpose.int", "aten.t.default",
    "aten.view.default", "aten.reshape.default", "aten._unsafe_view.default", "aten.clone.default",
    "aten._to_copy.default", "aten.to.dtype", "aten.to.dtype_layout", "aten.alias.default",
    "aten.detach.default", "aten.index.Tensor", "aten.mm.default", "aten.addmm.default",
    "aten.matmul.default", "aten.linear.default", "aten.contiguous.default", "aten.expand.default",
}  # fmt: skip
_PRODUCTS = {"aten.mm.default", "aten.addmm.default", "aten.matmul.default", "aten.linear.default"}
_RESHAPES = {"aten.view.default", "aten.reshape.default", "aten._unsafe_view.default"}
#: reductions over the padded dimension: the padding rows are replaced by the identity first
_REDUCTIONS = {
    "aten.sum.dim_IntList": 0, "aten.sum.default": 0, "aten.mean.dim": 0, "aten.mean.default": 0,
    "aten.amax.default": "min", "aten.amin.default": "max", "aten.prod.dim_int": 1,
    "aten.prod.default": 1, "aten.any.dim": False, "aten.any.dims": False, "aten.any.default": False,
    "aten.all.dim": True, "aten.all.dims": True, "aten.all.default": True,
}  # fmt: skip


class _Padding:
    """Carries a padded ``nonzero`` (``nonzero_static(x, size=bound, fill_value=-1)``, its
    first ``n`` rows torch's) through the graph: each value computed from it keeps the
    padded dimension (torch's unbacked size ``sym``, now ``bound``) when the op computes
    row ``i`` from row ``i`` only (pointwise ops, indexing *by* it, views that keep the
    dimension whole, matmuls over other dimensions); a reduction over that dimension gets
    the padding rows replaced by its identity first (``mean`` divides by ``n``); a model
    output keeps ``bound`` rows, the padding ones ``-1`` for the indices themselves and
    ``0`` for values computed from them. Any other use is refused (:meth:`check` names it)."""

    def __init__(self, node: torch.fx.Node, sym, bound: int, checks: list[torch.fx.Node]):
        self.node, self.sym, self.bound, self.checks = node, sym, bound, checks
        self.graph = node.graph
        self.fake_mode = node.args[0].meta["val"].fake_mode

    # ------------------------------------------------------------------ analysis

    def _axis(self, val) -> int | None | str:
        """The axis of ``val``'s shape that is exactly the padded size; None when none is;
        ``"mixed"`` when the size enters another dimension (``2 * u0``) or two do."""
        shape = getattr(val, "shape", None)
        if shape is None:
            return "mixed" if self.sym in _syms(val) else None
        found = []
        for i, d in enumerate(shape):
            if isinstance(d, torch.SymInt) and self.sym in d.node.expr.free_symbols:
                if d.node.expr != self.sym:
                    return "mixed"
                found.append(i)
        return found[0] if len(found) == 1 else ("mixed" if found else None)

    def _padded(self) -> dict[torch.fx.Node, int]:
        """Every node the padding reaches (``node`` included), with its padded axis."""
        out = {self.node: self._axis(self.node.meta["val"])}
        for n in self.graph.nodes:
            if n in out or n.op != "call_function" or n in self.checks:
                continue
            if any(a in out for a in n.all_input_nodes):
                out[n] = self._axis(n.meta.get("val"))
        return out

    def check(self) -> tuple[torch.fx.Node, str] | None:
        """The first use the padding cannot be carried through, and why; None when all can."""
        padded = self._padded()
        for n, axis in padded.items():
            if n is self.node:
                continue
            name = op_name(n)
            ins = [a for a in n.all_input_nodes if a in padded]
            if axis == "mixed":
                return n, "which merges the padded rows with others (a size computed from it)"
            if axis is None:
                if name not in _REDUCTIONS or len(ins) != 1 or n.args[0] is not ins[0]:
                    return n, "whose result the padding rows would change"
                if padded[ins[0]] not in self._reduced_axes(n, ins[0]):
                    return n, "a reduction that keeps the padded dimension apart from the others"
                continue
            if not (name in _ROW_LOCAL or _pointwise(n)):
                return n, "which mixes rows of the padded dimension"
            if name == "aten.index.Tensor" and n.args[0] in padded:
                return n, "indexing into the padded rows (which could pick padding rows)"
            if name in (
                "aten.mm.default",
                "aten.addmm.default",
                "aten.matmul.default",
                "aten.linear.default",
            ):
                lhs = n.args[1] if name == "aten.addmm.default" else n.args[0]
                rank = len(lhs.meta["val"].shape) if lhs in padded else 0
                if [a for a in ins if a is not lhs] or lhs not in padded or padded[lhs] >= rank - 1:
                    return n, "a product over the padded dimension"
            if name in _RESHAPES and not self._keeps_rows(ins[0], padded[ins[0]], n, axis):
                return n, "a view that moves the padded rows"
            # a pointwise op lines its padded operands' rows up with its own: broadcasting
            # aligns dims from the right, so an operand's padded dim lands on a padded dim of
            # the result (a second one would be "mixed"); operands without it (a reduction
            # over the padded rows) broadcast to every row
        return None  # every user of a padded node is in ``padded`` or a size check

    def _reduced_axes(self, n: torch.fx.Node, inp: torch.fx.Node) -> set[int]:
        rank = inp.meta["val"].dim()
        dims = n.args[1] if len(n.args) > 1 else n.kwargs.get("dim")
        if dims is None or (isinstance(dims, (list, tuple)) and not dims):
            return set(range(rank))
        dims = [dims] if isinstance(dims, int) else list(dims)
        return {d % rank for d in dims}

    @staticmethod
    def _keeps_rows(inp: torch.fx.Node, a_in: int, out: torch.fx.Node, a_out: int) -> bool:
        """A reshape keeps each padded row whole when the sizes before the padded axis have
        one product in the input and the output."""

        def before(val, axis):
            p = 1
            for d in val.shape[:axis]:
                if not isinstance(d, int):
                    return None
                p *= d
            return p

        b_in, b_out = before(inp.meta["val"], a_in), before(out.meta["val"], a_out)
        return b_in is not None and b_in == b_out

    # ------------------------------------------------------------------ rewrite

    def _call(self, target, args: tuple, kwargs: dict | None = None, like: torch.fx.Node | None = None):
        """A new node ``target(*args, **kwargs)`` before ``like`` with its ``val`` computed on
        the fake values, and ``like``'s stack trace (error messages name its line)."""
        kwargs = kwargs or {}
        with self.graph.inserting_before(like or self.node):
            n = self.graph.call_function(target, args, kwargs)

        def val(a):
            return a.meta["val"] if isinstance(a, torch.fx.Node) else a

        with self.fake_mode:
            n.meta["val"] = target(
                *torch.fx.node.map_aggregate(args, val), **torch.fx.node.map_aggregate(kwargs, val)
            )
        n.meta["stack_trace"] = (like or self.node).meta.get("stack_trace")
        return n

    def _fake(self, val):
        shape = [
            self.bound if isinstance(d, torch.SymInt) and d.node.expr == self.sym else d for d in val.shape
        ]
        with self.fake_mode:
            return torch.empty(shape, dtype=val.dtype, device=val.device)

    def rewrite(self) -> None:
        padded = self._padded()
        x = self.node.args[0]
        new = self._call(aten.nonzero_static.default, (x,), {"size": self.bound, "fill_value": -1})
        new.meta = {**self.node.meta, "val": self._fake(self.node.meta["val"])}
        nonzero = self._call(aten.ne.Scalar, (x, 0))
        count = self._call(aten.sum.default, (nonzero,))
        rows = self._call(
            aten.arange.default, (self.bound,), {"dtype": torch.int64, "device": x.meta["val"].device}
        )
        keep = self._call(aten.lt.Tensor, (rows, count))
        self.node.replace_all_uses_with(new)
        for n in reversed(_order(self.graph, self.checks)):
            self.graph.erase_node(n)
        self.graph.erase_node(self.node)
        padded = {(new if n is self.node else n): a for n, a in padded.items()}
        for n, axis in padded.items():
            if n is new:
                continue
            if axis is None:  # a reduction over the padded dimension
                self._mask_reduction(n, padded, keep, count)
            else:
                n.meta["val"] = self._fake(n.meta["val"])
        (output,) = [n for n in self.graph.nodes if n.op == "output"]
        outs = list(output.args[0]) if isinstance(output.args[0], (list, tuple)) else [output.args[0]]
        for i, o in enumerate(outs):
            if o in padded and o is not new and padded[o] is not None:
                outs[i] = self._masked(o, padded[o], keep, 0, output)
        output.args = (type(output.args[0])(outs) if isinstance(output.args[0], (list, tuple)) else outs[0],)

    def _masked(self, value, axis: int, keep, fill, before):
        """``value`` with its padding rows (along ``axis``) set to ``fill``."""
        rank = value.meta["val"].dim()
        shape = [1] * rank
        shape[axis] = self.bound
        mask = self._call(aten.view.default, (keep, shape), like=before)
        if isinstance(fill, str):  # the smallest / largest value of the dtype
            dtype = value.meta["val"].dtype
            info = torch.finfo(dtype) if dtype.is_floating_point else torch.iinfo(dtype)
            fill = (
                (-float("inf") if fill == "min" else float("inf"))
                if dtype.is_floating_point
                else (info.min if fill == "min" else info.max)
            )
        return self._call(aten.where.ScalarOther, (mask, value, fill), like=before)

    def _mask_reduction(self, n: torch.fx.Node, padded: dict, keep, count) -> None:
        inp = n.args[0]
        name = op_name(n)
        masked = self._masked(inp, padded[inp], keep, _REDUCTIONS[name], n)
        n.replace_input_with(inp, masked)
        if name not in ("aten.mean.dim", "aten.mean.default"):
            return
        # mean over the padded rows: the sum, divided by n (times the other reduced sizes)
        axes = self._reduced_axes(n, inp)
        other = 1
        for a in axes - {padded[inp]}:
            other *= int(inp.meta["val"].shape[a])
        keepdim = n.args[2] if len(n.args) > 2 else n.kwargs.get("keepdim", False)
        dims = sorted(axes)
        total = self._call(aten.sum.dim_IntList, (masked, dims, keepdim), like=n)
        divisor = self._call(aten.mul.Scalar, (count, other), like=n) if other != 1 else count
        mean = self._call(aten.div.Tensor, (total, divisor), like=n)
        n.replace_all_uses_with(mean)
        self.graph.erase_node(n)


def _pointwise(node: torch.fx.Node) -> bool:
    return torch.Tag.pointwise in getattr(node.target, "tags", ())


def _order(graph: torch.fx.Graph, nodes: list[torch.fx.Node]) -> list[torch.fx.Node]:
    keep = set(nodes)
    return [n for n in graph.nodes if n in keep]


def resolve_data_dependent(ep: ExportedProgram) -> None:
    """Pad bounded ``nonzero`` results in place (see the module docstring) and raise for the
    other data-dependent sizes of ``ep`` (its graph and every subgraph).

    Raises:
        DataDependentShapeError: one error naming every op whose output size depends on the
            input values, each with its source line, the reason and the fix.
    """
    sources = []  # (node, the unbacked sizes it introduces), found before any rewrite
    for graph in graphs(ep.graph):
        for node in graph.nodes:
            if node.op != "call_function" or node.target is operator.getitem:
                continue
            new = _syms(node.meta.get("val")) - _input_syms(node)
            new = {s for s in new if str(s).startswith("u")}  # unbacked ints (not zuf floats)
            if new:
                sources.append((node, new))
    found: list[DataDependentOp] = []
    changed = False
    for node, new in sources:
        name = op_name(node)
        why, fix = _WHY.get(name, _DEFAULT_WHY)
        extra = ""
        if name == "aten.nonzero.default":
            extra = _pad_nonzero(ep, node, next(iter(new)))
            if extra is None:
                changed = True
                continue
        if name == "aten.index.Tensor":
            name += " (boolean mask)"
        sizes = ", ".join(sorted(str(s) for s in new))
        found.append(DataDependentOp(name, node_location(node), sizes, why + extra, fix))
    if found:
        raise DataDependentShapeError(found)
    if changed:
        for module in ep.graph_module.modules():
            if isinstance(module, torch.fx.GraphModule):
                module.recompile()

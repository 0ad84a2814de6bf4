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
  fill_value=-1)`` semantics; ``torch.export``'s runtime checks on the size are dropped), when
  its result is a model output (the first ``n`` rows are torch's, the other ``N - n`` are
  ``-1``); used by other ops, its padding rows would enter their results, so it is refused;
* raises one :class:`DataDependentShapeError` naming every other op that introduces an
  unbacked size, with its source line, the reason and the static-size fix.

``torch.nonzero_static(x, size=N, fill_value=...)`` itself has a static shape and converts
directly (``ops/indexing.py``).
"""

from __future__ import annotations

import operator

import torch
from torch.export import ExportedProgram
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

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
    """Rewrite a bounded ``nonzero`` into ``nonzero_static``; returns None when done, else
    why it could not be (appended to the error's reason)."""
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
    others = [u for u in node.users if u.op != "output" and (checks is None or u not in checks)]
    if checks is None or others:
        used = sorted({op_name(u) for u in others} or {"a size computation"})
        return (
            f"; it is bounded (torch._check: at most {bound} rows) but its padded form is only "
            f"converted as a model output, and here it feeds {', '.join(used)}, whose results the "
            "padding rows would change: pad explicitly with torch.nonzero_static and mask the padding"
        )
    graph = node.graph
    with graph.inserting_before(node):
        new = graph.call_function(aten.nonzero_static.default, (x,), {"size": bound, "fill_value": -1})
    new.meta = dict(node.meta)
    with xval.fake_mode:
        new.meta["val"] = torch.empty((bound, xval.ndim), dtype=torch.int64, device=xval.device)
    node.replace_all_uses_with(new, delete_user_cb=lambda u: u.op == "output")
    for n in reversed(_order(graph, checks)):
        graph.erase_node(n)
    graph.erase_node(node)
    return None


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

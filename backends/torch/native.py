"""Clean-up passes on the traced FX graph, so it runs as hand-written torch would.

The rules emit StableHLO's explicit forms: every implicit broadcast is a ``broadcast_in_dim``
(a ``view`` + ``expand``), and a pattern rewritten by :mod:`converter.backends.torch.patterns` leaves its
original ops behind. :func:`simplify` removes what torch does implicitly or never needs:

- an ``expand`` (and the ``view`` before it that only adds leading 1s) feeding an elementwise
  op that broadcasts its operands: torch broadcasts exactly as the ``expand`` did (right-aligned
  size-1 dims), so the operand is used directly when the op's result shape is unchanged;
- nodes whose value nobody reads (dead code left by a pattern rewrite);
- view chains: a ``transpose`` is a ``permute``, permutes compose, reshapes of reshapes read
  the first input (:func:`collapse_views`); a bias added after a product is inside its
  ``addmm``/``convolution`` (:func:`fuse_bias`).

Once the input-free nodes are folded into constants (:func:`fold_constants`), their values
allow more: a sum pooling divided by the window size → the pooling with that divisor
(:func:`pool_divisors`); SDPA with a causal constant
mask → ``is_causal`` (:func:`causal_attention`) and with constant-scaled queries → that
``scale`` (:func:`attention_scale`); unread constants are dropped, and the remaining ones
(and the parameters, in :class:`converter.backends.torch.TorchModule`) are 64-byte aligned, since
inductor copies a misaligned parameter on every call (:func:`align_constants`). The graph
then is what the torch-written model traces to, and ``torch.compile`` gets one graph whose
inputs are the user inputs and the parameters.

:func:`native_calls` then makes each node call the public torch function (``torch.add``,
``Tensor.view``, ``F.gelu``'s ``nn_functions.gelu``) instead of the ATen ``OpOverload``
(``torch.ops.aten.add.Tensor``): both run the same kernel, but an ``OpOverload`` call goes
through the operator registry's boxed calling convention, about twice the per-call cost of
the generated Python binding, which is what dominates small eager models. The original
overload is kept in ``node.meta["aten"]`` (:func:`aten_target`).

Each change keeps the graph's values identical (not just within tolerance), except
:func:`attention_scale`, which rounds the scaling once differently (as the SDPA rewrite of
:mod:`converter.backends.torch.patterns` it completes).
"""

from __future__ import annotations

import torch
from torch.fx import GraphModule, Node

from converter._torch_internal import OpOverload, dce_impure_random, nn_functions

from ._util import aligned
from .recorder import fake_view

aten = torch.ops.aten

# elementwise ops whose tensor operands broadcast (torch's implicit broadcasting); all operands
# of a StableHLO elementwise op share a dtype, so no type promotion differs either
_BROADCASTING = {
    aten.add.Tensor, aten.sub.Tensor, aten.mul.Tensor, aten.div.Tensor, aten.div.Tensor_mode,
    aten.maximum.default, aten.minimum.default, aten.where.self, aten.pow.Tensor_Tensor,
    aten.atan2.default, aten.remainder.Tensor, aten.fmod.Tensor, aten.eq.Tensor, aten.ne.Tensor,
    aten.lt.Tensor, aten.le.Tensor, aten.gt.Tensor, aten.ge.Tensor, aten.bitwise_and.Tensor,
    aten.bitwise_or.Tensor, aten.bitwise_xor.Tensor, aten.logical_and.default,
    aten.logical_or.default, aten.logical_xor.default, aten.copysign.Tensor,
    aten.nextafter.default, aten.hypot.default,
}  # fmt: skip
_VIEWS = {aten.view.default, aten._unsafe_view.default, aten.reshape.default}


def _shape(node) -> tuple[int, ...] | None:
    val = node.meta.get("val") if isinstance(node, Node) else None
    return tuple(val.shape) if isinstance(val, torch.Tensor) else None


def _strip_leading_ones(shape: tuple[int, ...]) -> tuple[int, ...]:
    i = 0
    while i < len(shape) and shape[i] == 1:
        i += 1
    return shape[i:]


def _broadcast_source(node: Node) -> Node | None:
    """The tensor ``node`` (an ``expand``, or a ``view`` adding leading 1s) broadcasts,
    such that torch's implicit broadcasting of it gives the same values; else None."""
    if node.op != "call_function" or not node.args or not isinstance(node.args[0], Node):
        return None
    src = node.args[0]
    if node.target is aten.expand.default:
        return src if _shape(src) is not None else None
    if node.target in _VIEWS:
        a, b = _shape(src), _shape(node)
        if a is not None and b is not None and _strip_leading_ones(a) == _strip_leading_ones(b):
            return src
    return None


def _result_shape(node: Node, args: list) -> tuple[int, ...] | None:
    shapes = [_shape(a) for a in args if isinstance(a, Node)]
    if any(s is None for s in shapes):
        return None
    return broadcast_shapes(shapes)


def broadcast_shapes(shapes: list[tuple[int, ...]]) -> tuple[int, ...] | None:
    """The shape static ``shapes`` broadcast to (torch's rule, ``torch.broadcast_shapes``:
    right-aligned, a size-1 dimension stretches), None when they do not broadcast."""
    rank = max((len(s) for s in shapes), default=0)
    out = [1] * rank
    for shape in shapes:
        for i, d in enumerate(shape, rank - len(shape)):
            if d == 1 or d == out[i]:
                continue
            if out[i] != 1:
                return None
            out[i] = d
    return tuple(out)


def drop_broadcasts(gm: GraphModule) -> None:
    """Feed broadcasting elementwise ops the un-expanded operands (see the module doc)."""
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target not in _BROADCASTING:
            continue
        want = _shape(node)
        if want is None:
            continue
        args = list(node.args)
        for i, a in enumerate(args):
            while isinstance(a, Node):
                src = _broadcast_source(a)
                if src is None:
                    break
                trial = args[:i] + [src] + args[i + 1 :]
                if _result_shape(node, trial) != want:
                    break
                args[i] = a = src
        node.args = tuple(args)


# ATen op name -> the public binding of the same op (same schema, argument names and
# overload set: generated from the same native_functions.yaml entry)
_PUBLIC = {
    # a view recorded by the trace may no longer be possible once a pass changed the strides
    # of its input (implicit broadcasting, a fused bias, attention): reshape views or copies
    "view": torch.reshape, "expand": torch.Tensor.expand, "_unsafe_view": torch.reshape,
    **{
        name: getattr(torch, name)
        for name in (
            "add", "sub", "mul", "div", "maximum", "minimum", "where", "eq", "ne", "lt", "le", "gt",
            "ge", "neg", "exp", "expm1", "log", "log1p", "tanh", "sqrt", "rsqrt", "abs", "sin",
            "cos", "sigmoid", "floor", "ceil", "logical_not", "logical_and", "logical_or",
            "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "pow",
            "permute", "mm", "bmm", "amax", "amin", "sum", "prod", "full", "arange", "clone",
            "cat", "unsqueeze", "squeeze", "convolution", "constant_pad_nd", "_softmax",
            "native_layer_norm", "flip", "reshape", "addmm",
            "_scaled_dot_product_flash_attention_for_cpu", "isnan", "erf", "reciprocal", "relu",
            "_log_softmax",
        )
    },
    "scaled_dot_product_attention": nn_functions.scaled_dot_product_attention,
    "gelu": nn_functions.gelu, "avg_pool2d": nn_functions.avg_pool2d,
    "avg_pool3d": nn_functions.avg_pool3d,
    "max_pool2d_with_indices": nn_functions.max_pool2d_with_indices,
    "max_pool3d_with_indices": nn_functions.max_pool3d_with_indices,
}  # fmt: skip


def native_calls(gm: GraphModule) -> None:
    """Point each ATen node at the op's public torch binding (see the module doc)."""
    for node in gm.graph.nodes:
        target = node.target
        if node.op != "call_function" or not isinstance(target, OpOverload):
            continue
        public = _PUBLIC.get(target._opname) if target.namespace == "aten" else None
        if target is aten.view.dtype:  # a bitcast, not a reshape
            public = torch.Tensor.view
        if public is not None:
            node.meta["aten"] = target
            node.target = public


def aten_target(node: Node):
    """The ATen ``OpOverload`` a node computes (its target before :func:`native_calls`)."""
    return node.meta.get("aten", node.target)


def collapse_views(gm: GraphModule) -> None:
    """A ``view``/``reshape``/``expand`` to the shape its input has already is its input; a
    ``view``/``reshape`` of a ``view``/``reshape`` reads the first one's input (a reshape of
    a contiguous chain: the same elements in the same order); a ``transpose`` is the
    ``permute`` it is, and a ``permute`` of a ``permute`` one composed ``permute`` (none for
    the identity)."""
    for node in gm.graph.nodes:
        if node.op != "call_function" or not node.args or not isinstance(node.args[0], Node):
            continue
        src = node.args[0]
        if node.target is aten.transpose.int and _shape(src) is not None:
            rank = len(_shape(src))
            perm = list(range(rank))
            a, b = (d % rank for d in node.args[1:3])
            perm[a], perm[b] = perm[b], perm[a]
            node.target, node.args = aten.permute.default, (src, perm)
        if node.target in _VIEWS or node.target is aten.expand.default:
            if _shape(src) is not None and _shape(src) == _shape(node):
                node.replace_all_uses_with(src)
                continue
        if node.target in _VIEWS and src.op == "call_function" and src.target in _VIEWS:
            node.target = aten.reshape.default
            node.args = (src.args[0], *node.args[1:])
        if node.target is aten.permute.default and src.op == "call_function" and src.target is node.target:
            inner, outer = list(src.args[1]), list(node.args[1])
            composed = [inner[d] for d in outer]
            if composed == list(range(len(composed))):
                node.replace_all_uses_with(src.args[0])
            else:
                node.args = (src.args[0], composed)


def _bias_tail(node, out_shape: tuple[int, ...], n: int) -> Node | None:
    """``node`` when it is a float tensor broadcasting over the leading dims of ``out_shape``
    only, its other dims (after leading 1s) being trailing dims of ``out_shape`` with ``n``
    elements in all (a bias ``[heads, head_dim]`` added to a product reshaped from
    ``[tokens, heads * head_dim]``), else None."""
    shape = _shape(node)
    if shape is None or len(shape) > len(out_shape) or not node.meta["val"].is_floating_point():
        return None
    want = _strip_leading_ones(shape)
    for k in range(1, len(out_shape) + 1):
        tail = out_shape[-k:]
        if _numel(tail) == n and _strip_leading_ones(tail) == want:
            return node
        if _numel(tail) > n:
            break
    return None


def _numel(shape: tuple[int, ...]) -> int:
    out = 1
    for d in shape:
        out *= d
    return out


def _bias_vector(node, n: int) -> Node | None:
    """``node`` when it is a float tensor broadcasting along the last dim only (shape ``(n,)``
    after leading 1s), else None."""
    shape = _shape(node)
    if (
        shape is None
        or _strip_leading_ones(shape) != (n,)
        and not (n == 1 and not _strip_leading_ones(shape))
    ):
        return None
    return node if node.meta["val"].is_floating_point() else None


def fuse_bias(gm: GraphModule) -> None:
    """``mm(x, w) + b`` → ``addmm(b, x, w)`` (through a reshape of the product; ``b`` a
    vector, or shaped as the trailing dims the reshape splits the product's columns into:
    Flax's ``DenseGeneral`` bias ``[heads, head_dim]``), and
    ``permute(convolution(x, w, None, ...)) + b`` with the channels last → the convolution
    with bias ``b``: what ``nn.Linear``/``nn.Conv*d`` compute (float only; the bias is added
    inside the kernel, the same sum rounded once)."""
    graph = gm.graph
    order = {n: i for i, n in enumerate(graph.nodes)}
    for node in list(graph.nodes):
        if (
            node.op != "call_function"
            or node.target is not aten.add.Tensor
            or len(node.args) != 2
            or node.kwargs
        ):
            continue
        for prod, bias in (node.args, tuple(reversed(node.args))):
            if not isinstance(prod, Node) or not isinstance(bias, Node) or len(prod.users) != 1:
                continue
            out_shape = _shape(node)
            if out_shape is None or _shape(prod) != out_shape or not out_shape:
                continue
            inner = prod
            if inner.target in _VIEWS and len(inner.users) == 1 and isinstance(inner.args[0], Node):
                inner = inner.args[0]
            conv = inner.args[0] if inner.target is aten.permute.default else None
            first = conv if isinstance(conv, Node) else inner
            if order.get(bias, len(order)) >= order.get(first, -1):
                continue  # the bias is computed after the product: it cannot feed it
            if inner.target is aten.mm.default and len(inner.users) == 1:
                n = _shape(inner)[-1]
                b = _bias_tail(bias, out_shape, n)
                if b is None:
                    continue
                with graph.inserting_before(inner):
                    vec = graph.call_function(aten.reshape.default, (b, [n]))
                    vec.meta["val"] = fake_view(b.meta["val"], [n])
                inner.target = aten.addmm.default
                inner.args = (vec, *inner.args)
            elif (
                _bias_vector(bias, out_shape[-1]) is not None
                and prod.target is aten.permute.default
                and isinstance(prod.args[0], Node)
                and prod.args[0].target is aten.convolution.default
                and len(prod.args[0].users) == 1
                and prod.args[0].args[2] is None
                and list(prod.args[1])[-1] == 1
            ):
                conv = prod.args[0]
                with graph.inserting_before(conv):
                    vec = graph.call_function(aten.reshape.default, (bias, [out_shape[-1]]))
                    vec.meta["val"] = fake_view(bias.meta["val"], [out_shape[-1]])
                conv.args = (*conv.args[:2], vec, *conv.args[3:])
            else:
                continue
            node.replace_all_uses_with(prod)
            graph.erase_node(node)
            break


_FOLD_LIMIT = 1 << 16  # elements: larger constants are cheaper to compute than to store


def fold_constants(gm: GraphModule) -> None:
    """Compute once, at conversion, every node that reads no input (a causal mask built from
    ``iota``s and compares, ``sqrt`` of a literal): the ones read by computed nodes become
    buffers (``get_attr``) when they have at most 65536 elements. Run on real CPU tensors,
    with the same kernels; uninitialized (``empty*``) and mutated values are left alone."""
    values: dict[Node, torch.Tensor] = {}
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            value = getattr(gm, node.target, None)
            if isinstance(value, torch.Tensor):
                values[node] = value
            continue
        if node.op != "call_function" or not isinstance(node.target, OpOverload):
            continue
        flat = [*node.args, *node.kwargs.values()]
        if any(isinstance(a, Node) and a not in values for a in flat):
            continue  # reads a computed value (most nodes: tested first, it is the cheapest)
        nested = [b for a in flat if isinstance(a, (list, tuple)) for b in a]
        if any(isinstance(b, Node) for b in nested):
            continue
        if node.is_impure() or node.target._opname.startswith("empty"):
            continue
        if any(_mutates(u) for u in node.users):
            continue
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor) or val.device.type != "cpu" or val.numel() > _FOLD_LIMIT:
            continue
        args = torch.fx.node.map_arg(node.args, lambda a: values[a])
        kwargs = torch.fx.node.map_arg(node.kwargs, lambda a: values[a])
        with torch.no_grad():
            result = node.target(*args, **kwargs)
        if isinstance(result, torch.Tensor):
            values[node] = result
    count = 0
    for node, result in values.items():
        if node.op == "get_attr" or all(u in values for u in node.users):
            continue  # only folded nodes read it: nothing to store
        name = f"_folded_constant{count}"
        count += 1
        gm.register_buffer(name, result.clone())
        with gm.graph.inserting_before(node):
            const = gm.graph.get_attr(name)
        const.meta["val"] = node.meta["val"]
        node.replace_all_uses_with(const)


def _constant(gm: GraphModule, node: object) -> torch.Tensor | None:
    """The value of ``node`` when it reads a buffer of ``gm`` (a folded constant), else None."""
    if not isinstance(node, Node) or node.op != "get_attr":
        return None
    value = getattr(gm, node.target, None)
    return value if isinstance(value, torch.Tensor) else None


_CHECK_LIMIT = 1 << 24  # elements: computed at conversion to be recognized, never stored


def _computed_constant(gm: GraphModule, node: object) -> torch.Tensor | None:
    """The value of ``node`` when it is a folded constant or computed from folded constants
    only by pure ATen ops (the ones :func:`fold_constants` left in the graph because their
    result has more than 65536 elements, e.g. a causal mask broadcast to every batch and
    head), evaluated here to be inspected, not stored; else None (also above 2**24
    elements)."""
    value = _constant(gm, node)
    if value is not None or not isinstance(node, Node) or node.op != "call_function":
        return value
    if node.is_impure() or not isinstance(node.target, OpOverload):
        return None
    if node.target._opname.startswith("empty") or any(_mutates(u) for u in node.users):
        return None
    val = node.meta.get("val")
    if not isinstance(val, torch.Tensor) or val.device.type != "cpu" or val.numel() > _CHECK_LIMIT:
        return None
    flat = [*node.args, *node.kwargs.values()]
    if any(isinstance(b, Node) for a in flat if isinstance(a, (list, tuple)) for b in a):
        return None
    values = {}
    for a in flat:
        if isinstance(a, Node):
            values[a] = _computed_constant(gm, a)
            if values[a] is None:
                return None
    args = torch.fx.node.map_arg(node.args, values.__getitem__)
    kwargs = torch.fx.node.map_arg(node.kwargs, values.__getitem__)
    with torch.no_grad():
        result = node.target(*args, **kwargs)
    return result if isinstance(result, torch.Tensor) else None


def _scalar(gm: GraphModule, node: object) -> float | int | None:
    """The Python number a 0-d, non-NaN, non-bool folded constant ``node`` holds, else None."""
    value = _constant(gm, node)
    if value is None or value.dim() != 0 or value.dtype == torch.bool or value.is_complex():
        return None
    number = value.item()
    return None if number != number else number


_AVG_POOLS = {aten.avg_pool2d.default, aten.avg_pool3d.default}
_SDPA_CPU = aten._scaled_dot_product_flash_attention_for_cpu.default


def pool_divisors(gm: GraphModule) -> None:
    """A sum pooling (``avg_pool`` with ``divisor_override=1``, what a ``reduce_window`` add
    becomes) divided by a folded 0-d constant ``k`` (an integer, e.g. Flax's ``avg_pool``
    dividing by the window size), directly or through a ``permute``, → the pooling with
    ``divisor_override=k``: the kernel divides the same sum by ``k`` (identical values)."""
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target is not aten.div.Tensor or len(node.args) != 2:
            continue
        if node.kwargs:
            continue
        prod, c = node.args
        k = _scalar(gm, c)
        if not isinstance(prod, Node) or len(prod.users) != 1 or _shape(prod) != _shape(node):
            continue
        if not isinstance(k, float) or k != int(k) or not 1 <= k < 2**31:
            continue
        pool = prod.args[0] if prod.target is aten.permute.default else prod
        if not isinstance(pool, Node) or pool.target not in _AVG_POOLS or len(pool.users) != 1:
            continue
        if pool.meta["val"].dtype != node.meta["val"].dtype or pool.kwargs or len(pool.args) != 7:
            continue
        if pool.args[6] != 1:
            continue
        pool.args = (*pool.args[:6], int(k))
        node.replace_all_uses_with(prod)


def causal_attention(gm: GraphModule) -> None:
    """SDPA whose additive mask is a constant (folded, or computed from folded constants:
    :func:`_computed_constant`, e.g. ``where(expand(tril), 0, -inf)`` over every batch and
    head, too large to fold) equal to ``0`` on and below the diagonal and ``<= -1e30``
    above it (a causal mask, the same for every batch and head) → SDPA with
    ``is_causal=True``: torch's kernel skips what the mask would zero (``exp(s + c - max)``
    is 0 for such ``c``; no row is fully masked), and no mask is read or computed."""
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target is not _SDPA_CPU:
            continue
        mask = _computed_constant(gm, node.kwargs.get("attn_mask"))
        if mask is None or mask.dim() < 2 or not mask.is_floating_point() or len(node.args) > 4:
            continue
        if len(node.args) == 4 and node.args[3] != 0.0:
            continue
        q, k = (_shape(a) for a in node.args[:2])
        if q is None or k is None or tuple(mask.shape[-2:]) != (q[-2], k[-2]):
            continue
        below = torch.ones(q[-2], k[-2], dtype=torch.bool).tril()
        if not bool((mask[..., below] == 0).all()) or not bool((mask[..., ~below] <= -1e30).all()):
            continue
        kwargs = {key: v for key, v in node.kwargs.items() if key != "attn_mask"}
        node.args, node.kwargs = (*node.args[:3], 0.0, True), kwargs


def attention_scale(gm: GraphModule) -> None:
    """SDPA reading queries ``permute(x / c)`` or ``permute(x * c)`` with a folded 0-d
    constant ``c`` (the ``1/sqrt(d)`` scaling of the queries) → SDPA of ``permute(x)`` with
    the factor in its ``scale``: ``(x . k) * s`` for ``(x * s) . k``, the same product
    rounded once differently (the one change of this module that is not bit-identical; the
    attention rewrite itself is not either)."""
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target is not _SDPA_CPU:
            continue
        perm = node.args[0]
        if not isinstance(perm, Node) or perm.target is not aten.permute.default:
            continue
        op = perm.args[0]
        if not isinstance(op, Node) or len(op.users) != 1 or op.kwargs or len(op.args) != 2:
            continue
        if op.target is aten.div.Tensor:
            c = _scalar(gm, op.args[1])
            factor = 1.0 / c if isinstance(c, float) and c != 0.0 and abs(c) != float("inf") else None
            x = op.args[0]
        elif op.target is aten.mul.Tensor:
            x, c = op.args if _scalar(gm, op.args[1]) is not None else reversed(op.args)
            c = _scalar(gm, c)
            factor = c if isinstance(c, float) and abs(c) != float("inf") else None
        else:
            continue
        if factor is None or not isinstance(x, Node) or _shape(x) != _shape(op):
            continue
        scale = node.kwargs.get("scale")
        if scale is None:
            scale = 1.0 / _shape(node.args[0])[-1] ** 0.5
        if len(perm.users) == 1:
            perm.args = (x, *perm.args[1:])
        else:  # the scaled queries are read elsewhere too (patterns._propagate_nan): keep them
            with gm.graph.inserting_before(node):
                unscaled = gm.graph.call_function(aten.permute.default, (x, *perm.args[1:]))
            unscaled.meta = dict(perm.meta)
            node.args = (unscaled, *node.args[1:])
        node.kwargs = {**node.kwargs, "scale": scale * factor}


def drop_unread_constants(gm: GraphModule) -> None:
    """Delete the folded-constant buffers no node reads any more."""
    read = {n.target for n in gm.graph.nodes if n.op == "get_attr"}
    for name in [n for n, _ in gm.named_buffers(recurse=False) if n.startswith("_folded_constant")]:
        if name not in read:
            delattr(gm, name)


def align_constants(gm: GraphModule) -> None:
    """Tensor constants the graph reads (``get_attr``) in 64-byte aligned memory
    (:func:`converter.backends.torch._util.aligned`: the trace keeps NumPy-backed constants)."""
    for node in gm.graph.nodes:
        value = _constant(gm, node)
        if value is not None and "." not in node.target and aligned(value) is not value:
            setattr(gm, node.target, aligned(value))


def _mutates(node: Node) -> bool:
    """``node`` may write to its operands (a mutable schema, or an impure non-ATen call)."""
    if isinstance(node.target, OpOverload):
        return node.target._schema.is_mutable
    return node.op != "output" and node.is_impure()


def eliminate_dead_code(gm: GraphModule) -> None:
    """``gm.graph.eliminate_dead_code()``, asking ``Node.is_impure`` only of the nodes
    nobody reads (the others stay whatever it answers; it costs more than the rest of the
    pass). Its loop is run here (the same nodes erased, last first), without the
    ``Graph.lint`` torch's starts with (a quarter of the pass on BERT, twice per conversion:
    the trace and these passes keep the graph in topological order); torch's own runs when
    ``gm`` holds subgraph modules (``while``/``cond`` bodies), which it cleans too."""
    impure_random = dce_impure_random()
    graph = gm.graph
    if any(isinstance(m, GraphModule) for m in gm.children()):
        graph.eliminate_dead_code(lambda n: len(n.users) > 0 or n.is_impure(impure_random))
        return
    for node in reversed(graph.nodes):
        if not node.users and not node.is_impure(impure_random):
            graph.erase_node(node)


def simplify(gm: GraphModule) -> GraphModule:
    """Apply the passes of this module to ``gm`` in place and regenerate its code."""
    drop_broadcasts(gm)
    collapse_views(gm)
    fuse_bias(gm)
    collapse_views(gm)
    eliminate_dead_code(gm)
    if all(
        n.meta["val"].device.type == "cpu"
        for n in gm.graph.nodes
        if isinstance(n.meta.get("val"), torch.Tensor)
    ):
        fold_constants(gm)
        pool_divisors(gm)
        causal_attention(gm)
        attention_scale(gm)
        eliminate_dead_code(gm)
        drop_unread_constants(gm)
    align_constants(gm)
    native_calls(gm)
    gm.recompile()
    return gm

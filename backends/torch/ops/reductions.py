"""Region reductions: reduce, reduce_window, select_and_scatter, sort, chlo.top_k (StableHLO
spec sections of those names; ``top_k`` from the CHLO spec).

Bodies recognized by :mod:`converter.regions` map to the direct torch op (``sum``, ``amax``,
``amin``, ``prod``, ``any``, ``all``, ``sort``); any other body is evaluated as a region: a
``reduce`` combines halves pairwise (log2(n) body evaluations, valid because the spec requires
the body to be associative and commutative), a ``sort`` ranks every element against every
other with the comparator (O(n^2), exact and stable for any strict weak order).
"""

from __future__ import annotations

import itertools
import math

import torch
import torch.nn.functional as F

from converter.regions import classify_combiner, classify_sort_keys

from .._util import operand_name
from ..registry import register
from .elementwise import total_order_key
from .shape import pad

_COMBINE = {
    "add": lambda a, b: a | b if a.dtype == torch.bool else a + b,
    "max": lambda a, b: a | b if a.dtype == torch.bool else torch.maximum(a, b),
    "min": lambda a, b: a & b if a.dtype == torch.bool else torch.minimum(a, b),
    "mul": lambda a, b: a & b if a.dtype == torch.bool else a * b,
    "and": lambda a, b: a & b,
    "or": lambda a, b: a | b,
}


def _reduce_last(kind: str, x: torch.Tensor, ndims: int) -> torch.Tensor | None:
    """Reduce the trailing ``ndims`` axes of ``x`` with a direct torch op, or None."""
    dims = list(range(x.dim() - ndims, x.dim()))
    if not dims:
        return x
    if x.dtype == torch.bool:
        if kind in ("add", "max", "or"):
            return torch.any(x.flatten(-ndims), dim=-1)
        return torch.all(x.flatten(-ndims), dim=-1)  # min, mul, and: the other kinds of _COMBINE
    if kind == "add":
        return torch.sum(x, dim=dims, dtype=x.dtype)
    if kind == "max":
        return torch.amax(x, dim=dims)
    if kind == "min":
        return torch.amin(x, dim=dims)
    if kind == "mul":
        return torch.prod(x.flatten(-ndims), dim=-1, dtype=x.dtype)
    return None


def tree_reduce(body, xs: list[torch.Tensor], inits: list[torch.Tensor]) -> list[torch.Tensor]:
    """Reduce the last axis of every tensor in ``xs`` with the region ``body``
    (``body(*accs, *values) -> accs``), seeded with ``inits``."""
    n = xs[0].shape[-1]
    if n == 0:
        shape = xs[0].shape[:-1]
        return [i.to(x.dtype).expand(shape).clone() for x, i in zip(xs, inits, strict=False)]
    while n > 1:
        if n % 2:
            xs = [
                torch.cat([x, i.to(x.dtype).expand(*x.shape[:-1], 1)], dim=-1)
                for x, i in zip(xs, inits, strict=False)
            ]
            n += 1
        half = n // 2
        xs = body(*[x[..., :half] for x in xs], *[x[..., half:] for x in xs])
        n = half
    firsts = [x[..., 0] for x in xs]
    return body(*[i.to(f.dtype).expand(f.shape) for i, f in zip(inits, firsts, strict=False)], *firsts)


def _kind(op, n: int, names: list[str]) -> str | None:
    if n != 1 or names[0] == "uint64":
        return None
    return classify_combiner(op.regions[0])


@register("stablehlo.reduce")
def _reduce(interp, op, *args):
    n = len(args) // 2
    xs, inits = list(args[:n]), list(args[n:])
    dims = list(op.attr("dimensions"))
    keep = [i for i in range(xs[0].dim()) if i not in dims]
    moved = [x if keep + dims == list(range(x.dim())) else x.permute(keep + dims) for x in xs]
    kind = _kind(op, n, [operand_name(op, i) for i in range(n)])
    if kind in _COMBINE and all(xs[0].shape[d] > 0 for d in dims):
        red = _reduce_last(kind, moved[0], len(dims))
        if red is not None:
            return _COMBINE[kind](red, inits[0].to(red.dtype))
    body = interp.region_fn(op.regions[0])
    # the reduced size explicitly: -1 is ambiguous when a kept dim is 0
    flat = [m.reshape(*m.shape[: len(keep)], math.prod(m.shape[len(keep) :])) for m in moved]
    return tree_reduce(body, flat, inits)


def _windows(x: torch.Tensor, sizes, strides, dilations) -> torch.Tensor:
    """All windows of ``x``: shape ``out_shape + sizes`` (``Tensor.unfold`` per dim; none
    along a dim shorter than its dilated window)."""
    for d, (w, s, dil) in enumerate(zip(sizes, strides, dilations, strict=False)):
        span = (w - 1) * dil + 1
        if span > x.shape[d]:  # no window fits (the spec's result dimension is 0)
            x = x.new_empty((*x.shape[:d], 0, *x.shape[d + 1 :], span))
        else:
            x = x.unfold(d, span, s)
        if dil > 1:
            x = x[..., ::dil]
    return x


def _window_attrs(op, rank: int):
    padding = op.attr("padding")
    padding = [(0, 0)] * rank if padding is None else [tuple(int(v) for v in p) for p in padding]
    return (
        list(op.attr("window_dimensions")),
        list(op.attr("window_strides") or [1] * rank),
        list(op.attr("base_dilations") or [1] * rank),
        list(op.attr("window_dilations") or [1] * rank),
        padding,
    )


_MAX_POOL = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}
_AVG_POOL = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}
_POOL_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def _pool(interp, op, x: torch.Tensor, sizes, strides, base_dil, win_dil, padding) -> torch.Tensor | None:
    """A float ``reduce_window`` max with init ``-inf`` (max pooling) or add with init ``0``
    (sum pooling: ``avg_pool`` with ``divisor_override=1``) over 1–3 window dims as one torch
    pooling call, or None when it is not one. The dims with a trivial window (size 1, stride 1,
    no padding) are the batch/channel dims; asymmetric or wide padding becomes one ``F.pad``
    with the init value. torch's max pooling propagates NaN as StableHLO's ``max`` does."""
    if x.dtype not in _POOL_DTYPES or x.numel() == 0 or any(b != 1 for b in base_dil):
        return None
    kind = classify_combiner(op.regions[0])
    init = interp.static_operand(op, 1)
    if init is None:  # computed (spec: a 0-d tensor), not a constant
        return None
    init = float(init)
    if not ((kind == "max" and init == -math.inf) or (kind == "add" and init == 0.0)):
        return None
    trivial = [w == 1 and s == 1 and p == (0, 0) for w, s, p in zip(sizes, strides, padding, strict=True)]
    passive = [d for d in range(x.dim()) if trivial[d]]
    active = [d for d in range(x.dim()) if not trivial[d]]
    if not 1 <= len(active) <= 3 or (
        kind == "add" and (len(active) == 1 or any(win_dil[d] != 1 for d in active))
    ):
        return None  # torch's avg_pool has no dilation, avg_pool1d no divisor_override
    pads = [padding[d] for d in active]
    span = [(sizes[d] - 1) * win_dil[d] + 1 for d in active]
    if any(lo + hi + x.shape[d] < sp for (lo, hi), d, sp in zip(pads, active, span, strict=True)):
        return None  # an empty result: the generic path gives its shape
    y = x if passive + active == list(range(x.dim())) else x.permute(passive + active)
    lead = [x.shape[d] for d in passive]
    if len(passive) > 2:
        y = y.reshape(math.prod(lead[:-1]), *y.shape[len(passive) - 1 :])
    elif not passive:
        y = y.unsqueeze(0)
    if all(lo == hi and 0 <= lo and 2 * lo <= w for (lo, hi), w in zip(pads, span, strict=True)):
        pool_pad = [lo for lo, _ in pads]
    else:
        y = F.pad(y, [v for lo, hi in reversed(pads) for v in (lo, hi)], value=init)
        pool_pad = [0] * len(active)
    nsp = len(active)
    window = [sizes[d] for d in active]
    stride = [strides[d] for d in active]
    if kind == "max":
        y = _MAX_POOL[nsp](y, window, stride, pool_pad, [win_dil[d] for d in active])
    else:
        y = _AVG_POOL[nsp](y, window, stride, pool_pad, divisor_override=1)
    shape = [*lead, *y.shape[-nsp:]]
    y = y if list(y.shape) == shape else y.reshape(shape)
    order = passive + active
    inverse = [order.index(i) for i in range(len(order))]
    return y if inverse == list(range(len(order))) else y.permute(inverse)


@register("stablehlo.reduce_window")
def _reduce_window(interp, op, *args):
    n = len(args) // 2
    xs, inits = list(args[:n]), list(args[n:])
    rank = xs[0].dim()
    sizes, strides, base_dil, win_dil, padding = _window_attrs(op, rank)
    if n == 1:
        pooled = _pool(interp, op, xs[0], sizes, strides, base_dil, win_dil, padding)
        if pooled is not None:
            return pooled
    padded = [
        pad(x, i, [p[0] for p in padding], [p[1] for p in padding], [b - 1 for b in base_dil])
        for x, i in zip(xs, inits, strict=False)
    ]
    wins = [_windows(p, sizes, strides, win_dil) for p in padded]
    kind = _kind(op, n, [operand_name(op, i) for i in range(n)])
    if kind in _COMBINE and math.prod(sizes) > 0:
        red = _reduce_last(kind, wins[0], rank)
        if red is not None:
            return _COMBINE[kind](red, inits[0].to(red.dtype))
    body = interp.region_fn(op.regions[0])
    flat = [w.reshape(*w.shape[:rank], -1) for w in wins]
    return tree_reduce(body, flat, inits)


# scatter bodies as ``scatter_reduce`` reductions; bools go through uint8, where add/max/or
# are "or" (amax) and mul/min/and are "and" (amin)
_SCATTER_REDUCE = {"add": "sum", "mul": "prod", "max": "amax", "min": "amin"}
_BOOL_REDUCE = {"add": "amax", "max": "amax", "or": "amax", "mul": "amin", "min": "amin", "and": "amin"}


@register("stablehlo.select_and_scatter")
def _select_and_scatter(interp, op, operand, source, init):
    """StableHLO spec: select_and_scatter, as XLA evaluates it, for any elementwise
    ``select`` body and any operand type: per window position in row-major order, every
    window's candidate is one strided slice of the padded operand; the current choice stays
    where ``select(current, candidate)`` is true. Padding is never a candidate (a window of
    padding alone selects nothing: its source value is dropped). The sources are combined
    into ``init`` at the chosen positions by ``scatter_reduce`` with the scatter body's
    reduction.

    Raises:
        NotImplementedError: a scatter body other than add/mul/max/min (and/or on bools), or
            negative padding.
    """
    kind = classify_combiner(op.regions[1])
    is_bool = source.dtype == torch.bool
    reduce = (_BOOL_REDUCE if is_bool else _SCATTER_REDUCE).get(kind)
    if reduce is None:
        raise NotImplementedError(f"select_and_scatter with a {kind or 'general'} scatter body")
    if reduce in ("amax", "amin") and operand_name(op, 1) in ("uint16", "uint32", "uint64"):
        raise NotImplementedError(f"select_and_scatter with a {kind} scatter body on {operand_name(op, 1)}")
    rank, shape, out_shape = operand.dim(), tuple(operand.shape), tuple(source.shape)
    padding = op.attr("padding")
    pads = [(0, 0)] * rank if padding is None else [(int(p[0]), int(p[1])) for p in padding]
    if min((v for p in pads for v in p), default=0) < 0:
        raise NotImplementedError("select_and_scatter with negative padding")
    window = list(op.attr("window_dimensions"))
    strides = list(op.attr("window_strides") or [1] * rank)
    size = math.prod(shape)
    lows, highs = [p[0] for p in pads], [p[1] for p in pads]
    padded = pad(operand, torch.zeros((), dtype=operand.dtype), lows, highs, [0] * rank)
    widths = [v for p in reversed(pads) for v in p]  # F.pad pads the last dimension first
    valid = torch.nn.functional.pad(torch.ones(shape, dtype=torch.bool), widths, value=False)
    positions = torch.nn.functional.pad(torch.arange(size).reshape(shape), widths, value=size)
    select = interp.region_fn(op.regions[0])
    cur = cur_valid = cur_pos = None
    for offset in itertools.product(*(range(w) for w in window)):
        spans = zip(offset, out_shape, strides, strict=True)
        index = tuple(slice(k, k + (m - 1) * s + 1, s) for k, m, s in spans)
        cand, ok, pos = padded[index], valid[index], positions[index]
        if cur is None:
            cur, cur_valid, cur_pos = cand, ok, pos
            continue
        (keep,) = select(cur, cand)
        take = ok & (~keep | ~cur_valid)
        cur = torch.where(take, cand, cur)
        cur_pos = torch.where(take, pos, cur_pos)
        cur_valid = cur_valid | ok
    work = torch.uint8 if is_bool else source.dtype
    data = init.to(work).reshape(1).expand(size + 1).clone()
    if cur_pos is not None:
        updates = source.reshape(-1).to(work)
        data = data.scatter_reduce(0, cur_pos.reshape(-1), updates, reduce, include_self=True)
    return data[:size].reshape(shape).to(source.dtype)


def _sortable(x: torch.Tensor, name: str, compare_type: str | None = None) -> torch.Tensor:
    """A key torch's sort orders as the comparator does: floats compared ``TOTALORDER`` as
    IEEE totalOrder integers (-NaN first, -0.0 before +0.0), other floats with -0.0 made
    +0.0 (they tie); bools as uint8, uint64 with the sign bit flipped."""
    if x.is_floating_point():
        return total_order_key(x) if compare_type == "TOTALORDER" else x + 0.0
    if x.dtype == torch.bool:
        return x.to(torch.uint8)
    if name == "uint64":
        return x ^ torch.iinfo(torch.int64).min
    return x


@register("stablehlo.sort")
def _sort(interp, op, *operands):
    """StableHLO spec: sort. A comparator ordering by one key (:func:`converter.regions.
    classify_sort_keys`) is a stable ``torch.sort`` of that key: its compared value evaluated
    on the whole operand (so a canonicalizing comparator's -0.0/NaN handling applies), in
    totalOrder for ``TOTALORDER`` floats. Other comparators rank every element against every
    other (:func:`sort_general`)."""
    dim = op.attr("dimension", -1) % operands[0].dim()
    keys = classify_sort_keys(op.regions[0])
    if keys is not None and len(keys) == 1 and not operands[keys[0].operand].is_complex():
        key = keys[0]
        pairs = [v for x in operands for v in (x, x)]  # both elements of a pair: the whole operand
        (value,) = interp.region_values(op.regions[0], pairs, [key.value])
        sortable = _sortable(value, operand_name(op, key.operand), key.compare_type)
        _, idx = torch.sort(sortable, dim=dim, descending=key.direction == "descending", stable=True)
        return [torch.gather(x, dim, idx) for x in operands]
    return sort_general(interp.region_fn(op.regions[0]), list(operands), dim)


def sort_general(less, operands: list[torch.Tensor], dim: int) -> list[torch.Tensor]:
    """Stable sort with any comparator ``less(l0, r0, l1, r1, ...)``: element ``i``'s rank
    is how many elements must precede it; each element is scattered to its rank."""
    moved = [x.movedim(dim, -1) for x in operands]
    n = moved[0].shape[-1]
    lhs = [m.unsqueeze(-1) for m in moved]  # x_j along axis -2
    rhs = [m.unsqueeze(-2) for m in moved]  # x_i along axis -1
    before = less(*[v for pair in zip(lhs, rhs, strict=False) for v in pair])[0]
    after = less(*[v for pair in zip(rhs, lhs, strict=False) for v in pair])[0]
    shape = torch.broadcast_shapes(before.shape, (*moved[0].shape[:-1], n, n))
    before, after = before.expand(shape), after.expand(shape)
    j = torch.arange(n)
    ties = ~before & ~after & (j[:, None] < j[None, :])
    rank = torch.sum((before | ties).to(torch.int64), dim=-2)
    out = [torch.zeros_like(m).scatter(-1, rank, m) for m in moved]
    return [o.movedim(-1, dim) for o in out]


@register("chlo.top_k")
def _top_k(interp, op, x):
    """CHLO spec: top_k, in XLA's order: descending by IEEE totalOrder for floats (NaN
    first, -NaN last, +0.0 before -0.0), ties by lower index."""
    k = op.attr("k")
    key = _sortable(x, operand_name(op), "TOTALORDER")
    _, idx = torch.sort(key, dim=-1, descending=True, stable=True)
    idx = idx[..., :k]
    return [torch.gather(x, -1, idx), idx.to(torch.int32)]

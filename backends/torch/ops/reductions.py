"""Region reductions: reduce, reduce_window, select_and_scatter, sort, chlo.top_k (StableHLO
spec sections of those names; ``top_k`` from the CHLO spec).

Bodies recognized by :mod:`converter.regions` map to the direct torch op (``sum``, ``amax``,
``amin``, ``prod``, ``any``, ``all``, ``sort``); any other body is evaluated as a region: a
``reduce`` combines halves pairwise (log2(n) body evaluations, valid because the spec requires
the body to be associative and commutative), a ``sort`` ranks every element against every
other with the comparator (O(n^2), exact and stable for any strict weak order).
"""

from __future__ import annotations

import math

import torch

from converter.regions import classify_combiner, classify_comparator

from .._util import operand_name
from ..registry import register
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
        if kind in ("min", "mul", "and"):
            return torch.all(x.flatten(-ndims), dim=-1)
        return None
    if kind == "add":
        return torch.sum(x, dim=dims, dtype=x.dtype)
    if kind == "max":
        return torch.amax(x, dim=dims)
    if kind == "min":
        return torch.amin(x, dim=dims)
    if kind == "mul":
        return torch.prod(x.flatten(-ndims), dim=-1, dtype=x.dtype)
    return None


def _append(x: torch.Tensor, init: torch.Tensor) -> torch.Tensor:
    return torch.cat([x, init.to(x.dtype).expand(*x.shape[:-1], 1)], dim=-1)


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
    moved = [x.permute(keep + dims) for x in xs]
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
    """All windows of ``x``: shape ``out_shape + sizes`` (``Tensor.unfold`` per dim)."""
    for d, (w, s, dil) in enumerate(zip(sizes, strides, dilations, strict=False)):
        span = (w - 1) * dil + 1
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


@register("stablehlo.reduce_window")
def _reduce_window(interp, op, *args):
    n = len(args) // 2
    xs, inits = list(args[:n]), list(args[n:])
    rank = xs[0].dim()
    sizes, strides, base_dil, win_dil, padding = _window_attrs(op, rank)
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


_WORST = {"GE": -math.inf, "GT": -math.inf, "LE": math.inf, "LT": math.inf}


def _select_direction(region) -> str | None:
    block = region.blocks[0]
    ops = [o.operation for o in block.operations]
    if len(ops) == 2 and ops[0].name == "stablehlo.compare":
        args = list(block.arguments)
        if list(ops[0].operands) == args:
            return str(ops[0].attributes["comparison_direction"]).split()[-1].rstrip(">")
    return None


@register("stablehlo.select_and_scatter")
def _select_and_scatter(interp, op, operand, source, init):
    rank = operand.dim()
    padding = op.attr("padding")
    padding = [(0, 0)] * rank if padding is None else [tuple(int(v) for v in p) for p in padding]
    sizes = list(op.attr("window_dimensions"))
    strides = list(op.attr("window_strides") or [1] * rank)
    direction = _select_direction(op.regions[0])
    if direction not in _WORST or not operand.dtype.is_floating_point:
        raise NotImplementedError("select_and_scatter with a general select body")
    if classify_combiner(op.regions[1]) != "add":
        raise NotImplementedError("select_and_scatter with a non-add scatter body")
    select = interp.region_fn(op.regions[0])
    worst = torch.full((), _WORST[direction], dtype=operand.dtype)
    lows, highs = [p[0] for p in padding], [p[1] for p in padding]
    padded = pad(operand, worst, lows, highs, [0] * rank)
    positions = torch.arange(padded.numel()).reshape(padded.shape)
    wins = _windows(padded, sizes, strides, [1] * rank).flatten(rank)
    pos = _windows(positions, sizes, strides, [1] * rank).flatten(rank)
    best, best_k = wins[..., 0], torch.zeros(wins.shape[:rank], dtype=torch.int64)
    for k in range(1, wins.shape[-1]):
        keep = select(best, wins[..., k])[0]
        best = torch.where(keep, best, wins[..., k])
        best_k = torch.where(keep, best_k, torch.full_like(best_k, k))
    chosen = torch.gather(pos, -1, best_k.unsqueeze(-1)).reshape(-1)
    out = torch.zeros(padded.numel(), dtype=source.dtype).index_put(
        (chosen,), source.reshape(-1), accumulate=True
    )
    out = out.reshape(padded.shape) + init.to(source.dtype)
    index = tuple(slice(lo, lo + s) for lo, s in zip(lows, operand.shape, strict=False))
    return out[index]


def _sortable(x: torch.Tensor, name: str) -> torch.Tensor:
    if x.dtype == torch.bool:
        return x.to(torch.uint8)
    if name == "uint64":
        return x ^ torch.iinfo(torch.int64).min
    return x


@register("stablehlo.sort")
def _sort(interp, op, *operands):
    dim = op.attr("dimension", -1) % operands[0].dim()
    direction = classify_comparator(op.regions[0])
    if direction is not None and not operands[0].is_complex():
        key = _sortable(operands[0], operand_name(op, 0))
        _, idx = torch.sort(key, dim=dim, descending=direction == "descending", stable=True)
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
    k = op.attr("k")
    key = x.to(torch.uint8) if x.dtype == torch.bool else x
    _, idx = torch.sort(key, dim=-1, descending=True, stable=True)
    idx = idx[..., :k]
    return [torch.gather(x, -1, idx), idx.to(torch.int32)]

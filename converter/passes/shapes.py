"""Shape refinement: a shape-polymorphic module specialized to concrete argument shapes.

A module converted with symbolic dimensions (``jax.export`` symbolic shapes, ONNX
``dim_param``) has ``tensor<?x...>`` arguments and computes its shapes at run time
(``get_dimension_size``, ``dynamic_broadcast_in_dim``, ``dynamic_reshape``...), checking the
dimension constraints with ``custom_call @shape_assertion``. Backends interpret static
modules: :func:`refine` rewrites such a module for given argument shapes with StableHLO's
own passes (``stablehlo-refine-arguments``, ``stablehlo-refine-shapes``,
``stablehlo-canonicalize-dynamism``; the StableHLO dynamism RFC), checks the shape
assertions and drops them, and verifies that no dynamic shape is left.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from jaxlib.mlir import ir, passmanager
from jaxlib.mlir.dialects import stablehlo

from converter import mlir
from converter.dims import dim_names, eval_dim, parse_dim
from converter.errors import ConversionError, SignatureMismatchError
from converter.signature import LeafSpec

from ._ir import arg_attrs, function_type

if TYPE_CHECKING:
    from converter.module import Module

#: Ops that only compute shapes; :func:`refine` turns them into static ops.
SHAPE_OPS = frozenset(
    {
        "stablehlo.get_dimension_size",
        "stablehlo.dynamic_broadcast_in_dim",
        "stablehlo.dynamic_reshape",
        "stablehlo.dynamic_iota",
        "stablehlo.dynamic_pad",
        "stablehlo.dynamic_gather",
        "stablehlo.dynamic_conv",
        "stablehlo.real_dynamic_slice",
        "stablehlo.custom_call@shape_assertion",
        # the dynamic forms of ops without one in the StableHLO opset (jax.export writes
        # them for cumsum, top_k, random bits on symbolic shapes)
        "stablehlo.custom_call@stablehlo.dynamic_reduce_window",
        "stablehlo.custom_call@stablehlo.dynamic_top_k",
        "stablehlo.custom_call@stablehlo.dynamic_rng_bit_generator",
    }
)


def is_dynamic(shape: Sequence) -> bool:
    """True when a signature shape has a dynamic (non-int) dimension."""
    return any(not isinstance(d, int) for d in shape)


def module_is_dynamic(module: Module) -> bool:
    """True when any argument or output of ``module``'s signature has a dynamic dimension."""
    sig = module.signature
    return any(is_dynamic(s.shape) for s in (*sig.all_args, *sig.outputs))


def bind_dims(
    specs: Sequence[LeafSpec],
    shapes: Sequence[Sequence[int]],
    ranges: Mapping[str, Sequence] | None = None,
) -> dict[str, int]:
    """The size of each named dynamic dimension of ``specs`` given concrete ``shapes`` (one
    per spec): one name is one size.

    A dimension that is a ``jax.export`` expression of names (``2*seq``, ``seq + 1``: a
    torch derived ``Dim``, an output of ``from_jax``) is checked against the sizes of its
    names (a single unknown name of a linear expression is solved for). ``ranges`` (a
    signature's ``dim_ranges``, ``{"batch": [2, 64]}``, a None bound is open) are
    checked too.

    Raises:
        SignatureMismatchError: a name gets two sizes (names both arguments), an expression
            does not hold, or a size is outside its range (names the dimension and range).
    """
    sizes: dict[str, tuple[int, str]] = {}
    derived: list[tuple[str, int, str]] = []
    for spec, shape in zip(specs, shapes, strict=True):
        for d, n in zip(spec.shape, shape, strict=False):
            if not isinstance(d, str):
                continue
            if not d.isidentifier() and parse_dim(d) is not None:
                derived.append((d, int(n), spec.name))
                continue
            if d in sizes and sizes[d][0] != n:
                raise SignatureMismatchError(
                    f"dimension {d!r} is {sizes[d][0]} in {sizes[d][1]} but {n} in {spec.name}"
                )
            sizes.setdefault(d, (int(n), spec.name))
    for d, n, where in sorted(derived, key=lambda t: len(dim_names(parse_dim(t[0])))):
        tree = parse_dim(d)
        unknown = sorted(dim_names(tree) - set(sizes))
        env = {k: v for k, (v, _) in sizes.items()}
        if len(unknown) == 1:  # solve a linear a*x + b = n for the one unknown name
            b = eval_dim(tree, {**env, unknown[0]: 0})
            a = eval_dim(tree, {**env, unknown[0]: 1}) - b
            if a and (n - b) % a == 0 and eval_dim(tree, {**env, unknown[0]: (n - b) // a}) == n:
                sizes[unknown[0]] = ((n - b) // a, where)
                continue
        if unknown or eval_dim(tree, env) != n:
            known = ", ".join(f"{k}={v}" for k, v in sorted(env.items()) if k in dim_names(tree))
            raise SignatureMismatchError(
                f"dimension {d!r} of {where} is {n}, which no sizes of its dimensions make"
                + (f" ({known})" if known else "")
            )
    for name, bounds in (ranges or {}).items():
        if name not in sizes:
            continue
        n, where = sizes[name]
        lo, hi = (list(bounds) + [None, None])[:2]
        if (lo is not None and n < lo) or (hi is not None and n > hi):
            raise SignatureMismatchError(
                f"dimension {name!r} is {n} in {where}, outside its range "
                f"[{lo if lo is not None else '-inf'}, {hi if hi is not None else 'inf'}]"
            )
    return {d: n for d, (n, _) in sizes.items()}


#: Ops that carry a dimension size computation through (``jax.export``'s dimension variables:
#: ``get_dimension_size`` → ``convert`` → arithmetic → ``shape_assertion`` / the shape
#: operands of ``dynamic_*`` ops).
_DIM_ARITHMETIC = frozenset(
    {
        "stablehlo.convert", "stablehlo.add", "stablehlo.subtract", "stablehlo.multiply",
        "stablehlo.divide", "stablehlo.remainder", "stablehlo.maximum", "stablehlo.minimum",
        "stablehlo.negate", "stablehlo.compare", "stablehlo.select", "stablehlo.reshape",
        "stablehlo.concatenate", "stablehlo.sign", "stablehlo.abs", "stablehlo.and", "stablehlo.or",
        "stablehlo.not",
    }
)  # fmt: skip


def dimension_values(fn: ir.Operation) -> set:
    """The values of function ``fn`` that only compute dimension sizes: results of
    ``get_dimension_size``, arguments marked ``jax.global_constant`` (a dimension variable
    passed to an inner function), scalar-ish integer constants feeding them, and the results
    of :data:`_DIM_ARITHMETIC` ops on such values. Their integer width does not matter (a
    size fits 32 bits), unlike that of the data."""
    block = fn.regions[0].blocks[0]
    dims: set = set()
    for i, attrs in enumerate(arg_attrs(fn) or []):
        if "jax.global_constant" in ir.DictAttr(attrs):
            dims.add(block.arguments[i])
    constants = set()
    for op in mlir.walk_ops(fn):
        name = op.name
        if name == "stablehlo.get_dimension_size":
            dims.update(op.results)
        elif name == "stablehlo.constant":
            constants.update(op.results)
        elif (
            name in _DIM_ARITHMETIC and op.operands and all(v in dims or v in constants for v in op.operands)
        ):
            if any(v in dims for v in op.operands):
                dims.update(op.results)
    # a constant counts when every use is a dimension computation
    for c in constants:
        if all(any(r in dims for r in u.owner.results) for u in c.uses):
            dims.add(c)
    return dims


def symbolic_shapes(shapes: Sequence[Sequence], ranges: Mapping[str, Sequence] | None = None) -> list[tuple]:
    """Signature shapes as ``jax.export`` symbolic shapes, in one ``SymbolicScope`` whose
    constraints are ``ranges`` (``{"batch": [2, 64]}``): a named dimension is one variable
    (a name that is no identifier, an ONNX ``dim_param`` such as ``batch-size``, with its
    other characters as ``_``), an expression (``2*seq``) is parsed as one, an unnamed
    dynamic dimension (None) gets its own ``d<i>_<axis>``."""
    import re

    import jax

    def text(d, i: int, axis: int) -> str:
        if isinstance(d, int):
            return str(d)
        if d is None:
            return f"d{i}_{axis}"
        if d.isidentifier() or parse_dim(d) is None:
            ident = re.sub(r"\W", "_", d)
            return ident if ident and not ident[0].isdigit() else f"d_{ident}"
        return d

    texts = [[text(d, i, a) for a, d in enumerate(shape)] for i, shape in enumerate(shapes)]
    constraints = []
    for name, (lo, hi) in (ranges or {}).items():
        constraints += [f"{name} >= {lo}"] if lo is not None and lo > 1 else []
        constraints += [f"{name} <= {hi}"] if hi is not None else []
    scope = jax.export.SymbolicScope(constraints)
    return [
        tuple(shape)
        if all(isinstance(d, int) for d in shape)
        else jax.export.symbolic_shape(", ".join(t), scope=scope)
        if t
        else ()
        for shape, t in zip(shapes, texts, strict=True)
    ]


def check_dims(module: Module, arg_shapes: Sequence[Sequence[int]]) -> dict[str, int]:
    """:func:`bind_dims` for the kept ``@main`` arguments of ``module`` (params, inputs, key
    as ``signature.kept_var_idx`` keeps them) and ``arg_shapes``, with the signature's
    ``signature.dim_ranges``.

    Raises:
        SignatureMismatchError: as :func:`bind_dims`.
    """
    sig = module.signature
    kept = range(len(sig.all_args)) if sig.kept_var_idx is None else sig.kept_var_idx
    return bind_dims([sig.all_args[i] for i in kept], arg_shapes, sig.dim_ranges)


def refine(module: ir.Module, arg_shapes: Sequence[Sequence[int]]) -> ir.Module:
    """A copy of ``module`` whose ``@main`` takes arguments of ``arg_shapes`` (one per
    argument; element types unchanged) with every shape made static.

    Raises:
        ConversionError: a shape assertion fails for these shapes (JAX's message: which
            dimension constraint), or some shape cannot be made static (names the op).
    """
    m = mlir.clone_module(module)
    with m.context, ir.Location.unknown():
        main = mlir.main_function(m)
        inputs = function_type(main).inputs
        if len(inputs) != len(arg_shapes):
            raise ConversionError(f"@main takes {len(inputs)} arguments, got {len(arg_shapes)} shapes")
        types = ",".join(str(_static_type(t, shape)) for t, shape in zip(inputs, arg_shapes, strict=True))
        stablehlo.register_stablehlo_passes()
        _run_pipeline(m, f"builtin.module(stablehlo-refine-arguments{{types='{types}'}})", arg_shapes)
        with_args = mlir.clone_module(m)
        try:
            _run_pipeline(
                m,
                "builtin.module(stablehlo-refine-shapes,func.func(stablehlo-canonicalize-dynamism))",
                arg_shapes,
            )
        except ConversionError:
            m = None  # e.g. a stablehlo.composite (chlo.erf) whose decomposition keeps ?
        if m is not None and not _check_assertions(m):
            m = None  # an assertion left unfolded (in a called function): JAX's refinement
    if m is None or not _is_static(m):  # dynamic_* custom calls, composites: JAX's refinement knows them
        from converter import _jax_internal

        try:
            m = mlir.clone_module(_jax_internal.refine_polymorphic_shapes(with_args if m is None else m))
        except ValueError as e:
            why = e.__cause__ or e
            failed = [msg for msg in _assertion_messages(with_args) if msg and msg in str(why)]
            if failed:  # a dimension constraint of the module does not hold for these shapes
                raise SignatureMismatchError(
                    f"input shapes {list(arg_shapes)} break the module's constraint: {failed[0]}"
                ) from None
            raise ConversionError(
                f"cannot specialize the module to shapes {list(arg_shapes)}: {why}"
            ) from None
    with m.context, ir.Location.unknown():
        _check_static(m)
    return m


def _run_pipeline(m: ir.Module, pipeline: str, arg_shapes: Sequence[Sequence[int]]) -> None:
    try:
        passmanager.PassManager.parse(pipeline).run(m.operation)
    except ir.MLIRError as e:
        why = "; ".join(d.message for d in getattr(e, "error_diagnostics", None) or []) or str(e)
        raise ConversionError(f"cannot specialize the module to shapes {list(arg_shapes)}: {why}") from None


def _is_static(m: ir.Module) -> bool:
    try:
        _check_static(m)
    except ConversionError:
        return False
    return True


def _static_type(t: ir.Type, shape: Sequence[int]) -> ir.Type:
    if not isinstance(t, ir.RankedTensorType):
        return t
    if t.rank != len(shape) or any(t.is_static_dim(i) and t.shape[i] != have for i, have in enumerate(shape)):
        raise ConversionError(f"argument of type {t} cannot take shape {list(shape)}")
    return ir.RankedTensorType.get([int(d) for d in shape], t.element_type)


def _check_assertions(m: ir.Module) -> bool:
    """Evaluate every ``shape_assertion`` that folded to constants and erase it; returns
    whether all did.

    Raises:
        SignatureMismatchError: with the assertion's message when it does not hold.
    """
    folded = True
    for op, view in _shape_assertions(m):
        values = [_constant(v) for v in op.operands]
        if any(v is None for v in values):
            folded = False
            continue
        if not bool(values[0]):
            message = str(view.attr("error_message") or "shape assertion failed")
            raise SignatureMismatchError(message.format(*(int(v) for v in values[1:])))
        op.erase()
    return folded


def _shape_assertions(m: ir.Module) -> list[tuple[ir.Operation, mlir.Op]]:
    """Every ``custom_call @shape_assertion`` of ``m``'s functions, with its attribute view
    (a list: callers may erase them)."""
    out = []
    for fn in mlir.functions(m).values():
        for op in mlir.walk_ops(fn):
            if op.name == "stablehlo.custom_call":
                view = mlir.Op(op)
                if view.attr("call_target_name") == "shape_assertion":
                    out.append((op, view))
    return out


def _assertion_messages(m: ir.Module) -> list[str]:
    """The constant part (up to the first ``{``) of each ``shape_assertion``'s message."""
    return [str(view.attr("error_message") or "").split("{")[0].strip() for _, view in _shape_assertions(m)]


def _constant(value: ir.Value):
    owner = value.owner
    owner = owner if isinstance(owner, ir.Operation) else getattr(owner, "operation", None)
    if owner is None or owner.name != "stablehlo.constant":
        return None
    return mlir.Op(owner).attr("value")


def _check_static(m: ir.Module) -> None:
    for fn in mlir.functions(m).values():
        for op in mlir.walk_ops(fn):
            for r in op.results:
                t = r.type
                if isinstance(t, ir.RankedTensorType) and not t.has_static_shape:
                    raise ConversionError(
                        f"{op.name} at {mlir.format_location(op.location)} keeps the dynamic shape "
                        f"{t} after shape refinement"
                    )


def specialize(module: Module, input_shapes: Mapping[str, Sequence[int]] | Sequence[Sequence[int]]) -> Module:
    """``module`` with its dynamic input dimensions fixed: a static module of the same
    signature (shapes concrete), for backends that need static shapes.

    Args:
        module: a module whose signature has dynamic dimensions (others are returned as is).
        input_shapes: the concrete shape of each user input, by name (``signature.inputs``
            names) or as a sequence in input order.

    Raises:
        ConversionError: a name is unknown or missing, a shape contradicts the static
            dimensions or the module's shape constraints.
    """
    from converter.module import Module

    sig = module.signature
    if not module_is_dynamic(module):
        return module
    if isinstance(input_shapes, Mapping):
        unknown = sorted(set(input_shapes) - {s.name for s in sig.inputs})
        missing = [s.name for s in sig.inputs if s.name not in input_shapes and is_dynamic(s.shape)]
        if unknown or missing:
            raise ConversionError(
                f"input_shapes: unknown inputs {unknown}, missing shapes for {missing} "
                f"(inputs: {[s.name for s in sig.inputs]})"
            )
        shapes = [tuple(input_shapes.get(s.name, s.shape)) for s in sig.inputs]
    else:
        shapes = [tuple(s) for s in input_shapes]
        if len(shapes) != len(sig.inputs):
            raise ConversionError(f"input_shapes: {len(sig.inputs)} inputs, got {len(shapes)} shapes")
    args = [*sig.params, *(replace(s, shape=shp) for s, shp in zip(sig.inputs, shapes, strict=True))]
    if sig.rng is not None:
        args.append(sig.rng)
    bind_dims(sig.inputs, shapes, sig.dim_ranges)
    bad = [a.name for a in args if is_dynamic(a.shape)]
    if bad:
        raise ConversionError(f"no concrete shape for {bad}")
    kept = range(len(args)) if sig.kept_var_idx is None else sig.kept_var_idx
    refined = refine(module.mlir, [args[i].shape for i in kept])
    results = function_type(mlir.main_function(refined)).results
    outputs = tuple(
        replace(o, shape=tuple(mlir.tensor_type(t).shape)) for o, t in zip(sig.outputs, results, strict=True)
    )
    new_sig = sig.with_all_args(args).replace(outputs=outputs)
    meta = {
        **module.meta,
        "specialized_shapes": {s.name: list(shp) for s, shp in zip(sig.inputs, shapes, strict=True)},
    }
    return Module(refined, new_sig, module.params, source=module.source, meta=meta)


__all__ = [
    "SHAPE_OPS",
    "bind_dims",
    "check_dims",
    "is_dynamic",
    "module_is_dynamic",
    "refine",
    "specialize",
    "symbolic_shapes",
]

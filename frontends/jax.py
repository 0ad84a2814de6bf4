"""JAX → StableHLO: ``jax.export`` of any traceable function, jitted function or ``Exported``.

Lowering goes through :func:`jax.export.export`, so the module keeps what ``jax.jit`` records
about placement (``mhlo.memory_kind`` argument/result attributes, ``compute_on`` host calls)
and :attr:`jax.export.Exported.module_kept_var_idx`, the arguments JAX dropped as unused.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.extend.core
import numpy as np
from jaxlib.mlir import ir

from converter import _jax_internal, dtypes, mlir, sharding
from converter.errors import SignatureMismatchError
from converter.lowering import export as export_flat
from converter.module import Module
from converter.passes import run_passes
from converter.signature import (
    LeafSpec,
    Signature,
    TreeSpec,
    input_path,
    is_array,
    leaf_paths,
    tree_spec,
)


def _is_output_leaf(x: Any) -> bool:
    """``jax.jit`` returns Python scalars as arrays: they are output leaves, not statics."""
    return isinstance(x, (jax.core.Tracer, bool, int, float, complex)) or is_array(x)


def _aval_spec(
    name: str, aval: Any, kind: str, memory_kind: str | None, spec: tuple | None = None
) -> LeafSpec:
    aval = physical_aval(aval)
    shape = tuple(d if isinstance(d, int) else str(d) for d in aval.shape)  # symbolic dims by name
    return LeafSpec(name, shape, dtypes.name_of(np.dtype(aval.dtype)), kind, memory_kind, spec)


def is_key(x: Any) -> bool:
    """A typed PRNG key array (``jax.random.key``), or its abstract value."""
    dtype = getattr(x, "dtype", None)
    return dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)


def physical_aval(aval: Any) -> Any:
    """``aval``, or for a typed PRNG key the shape and dtype of its key data
    (``jax.random.key_data``: ``key<fry>[n]`` is ``uint32[n, 2]``), which is what StableHLO
    holds: the module takes and returns keys as their data."""
    if not is_key(aval):
        return aval
    return jax.eval_shape(jax.random.key_data, jax.ShapeDtypeStruct(aval.shape, aval.dtype))


def _dim_ranges(avals: Any) -> dict[str, list]:
    """``{name: [lower, upper or None]}`` of each symbolic dimension of ``avals`` that its
    ``jax.export`` constraints bound tighter than JAX's implicit ``>= 1``."""
    ranges = {}
    for aval in avals:
        for d in aval.shape:
            if not isinstance(d, int) and str(d).isidentifier() and str(d) not in ranges:
                lo, hi = _jax_internal.dim_bounds(d)
                if lo > 1 or hi is not None:
                    ranges[str(d)] = [lo, hi]
    return ranges


def _abstract(x: Any) -> jax.ShapeDtypeStruct:
    """Shape, dtype and the sharding of a leaf when it has one that matters: a
    ``NamedSharding`` over a ``Mesh`` (the module is partitioned as the source is; a
    ``shard_map`` checks its inputs' specs), any sharding over several devices, or a
    non-default memory kind."""
    sharding = getattr(x, "sharding", None)
    spread = isinstance(sharding, jax.sharding.NamedSharding) or (
        sharding is not None and len(getattr(sharding, "device_set", ())) > 1
    )
    if not spread and sharding is not None and getattr(sharding, "memory_kind", None) in (None, "device"):
        sharding = None
    dtype = x.dtype if is_key(x) else jax.dtypes.canonicalize_dtype(x.dtype)
    return jax.ShapeDtypeStruct(tuple(x.shape), dtype, sharding=sharding)


def _param_names(params: Any) -> list[str]:
    if params is None:
        return []
    flat, _ = jax.tree_util.tree_flatten_with_path(params)
    for kp, v in flat:
        if not is_array(v):
            raise TypeError(
                f"params{jax.tree_util.keystr(kp)}: parameters must be arrays, got {type(v).__name__}"
            )
    return ["params" + jax.tree_util.keystr(kp) for kp, _ in flat]


def _flax_state(params: Any, names: list[str]) -> set[str]:
    """The leaves of Flax variable collections other than ``params`` (``batch_stats``,
    ``cache``...) when ``params`` is a Flax variables dict (``{'params': ..., 'batch_stats':
    ...}``): state, not trained (kind ``buffer`` in the signature). Flax's convention: an
    optimizer updates the ``params`` collection only."""
    if not isinstance(params, Mapping) or "params" not in params or len(params) < 2:
        return set()
    if not all(isinstance(v, Mapping) for v in params.values()):  # collections are dicts
        return set()
    return {n for n in names if not n.startswith("params['params']")}


def _func_attr(fn: ir.Operation, key: str, i: int, name: str) -> Any:
    if key not in fn.attributes:
        return None
    attrs = ir.DictAttr(ir.ArrayAttr(fn.attributes[key])[i])
    return mlir.decode_attribute(attrs[name]) if name in attrs else None


def _memory_kinds(module: ir.Module, n_args: int, kept: tuple[int, ...]) -> tuple[list, list]:
    """``mhlo.memory_kind`` of every (full-signature) argument and of every result."""
    main = mlir.main_function(module)
    args: list[str | None] = [None] * n_args
    for j, i in enumerate(kept):
        args[i] = _func_attr(main, "arg_attrs", j, "mhlo.memory_kind")
    n_res = len(ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value).results)
    return args, [_func_attr(main, "res_attrs", j, "mhlo.memory_kind") for j in range(n_res)]


def _shardings(module: ir.Module, n_args: int, kept: tuple[int, ...]) -> tuple[Any, list, list]:
    """The module's mesh (``{axis: size}`` or None) and the partition spec of every
    (full-signature) argument and of every result, from its Shardy attributes; specs are
    None without a mesh."""
    mesh = sharding.module_mesh(module)
    main = mlir.main_function(module)
    n_res = len(ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value).results)
    if mesh is None:
        return None, [None] * n_args, [None] * n_res
    args: list[tuple | None] = [None] * n_args
    for j, spec in zip(kept, sharding.func_shardings(main, "arg_attrs", len(kept)), strict=True):
        args[j] = spec
    return mesh, args, sharding.func_shardings(main, "res_attrs", n_res)


def _export(
    fn: Callable, params: Any, args: tuple, kwargs: dict
) -> tuple[jax.export.Exported, TreeSpec, TreeSpec, list[str]]:
    """Export ``fn`` specialised to the static leaves of ``(args, kwargs)``; returns the
    Exported, the input and output tree specs and the ``custom_vjp`` functions it calls."""
    in_tree = tree_spec((args, kwargs))
    leaves, treedef = jax.tree_util.tree_flatten((args, kwargs))
    arrays = [i for i, v in enumerate(leaves) if is_array(v)]
    p_leaves, p_def = jax.tree_util.tree_flatten(params)
    n_p = len(p_leaves)
    out_spec: list[TreeSpec] = []

    def flat_fn(*flat):
        full = list(leaves)
        for i, v in zip(arrays, flat[n_p:], strict=True):
            full[i] = v
        a, kw = jax.tree_util.tree_unflatten(treedef, full)
        out = (
            fn(*a, **kw) if params is None else fn(jax.tree_util.tree_unflatten(p_def, flat[:n_p]), *a, **kw)
        )
        out_spec.append(tree_spec(out, leaf=_is_output_leaf))
        return out

    avals = [_abstract(v) for v in p_leaves] + [_abstract(leaves[i]) for i in arrays]
    exp = export_flat(jax.jit(flat_fn), *avals)
    out_tree = out_spec[-1]
    return exp, in_tree, out_tree, custom_vjps(jax.make_jaxpr(flat_fn)(*avals).jaxpr)


def _custom_vjp_name(params: dict) -> str:
    if "name" in params:
        return str(params["name"])
    debug = getattr(getattr(params.get("call_jaxpr"), "jaxpr", None), "debug_info", None)
    src = getattr(debug, "func_src_info", None) or "?"
    return src.split(" at ")[0]


def custom_vjps(jaxpr: Any) -> list[str]:
    """Names of the ``jax.custom_vjp`` functions called anywhere in ``jaxpr`` (nested
    jaxprs included). Their backward rules do not survive lowering to StableHLO."""
    names: list[str] = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "custom_vjp_call":
            names.append(_custom_vjp_name(eqn.params))
        for sub in jax.extend.core.jaxprs_in_params(eqn.params):
            names += custom_vjps(sub)
    return sorted(set(names))


def _exportable_as_is(fn: Any, tree: Any) -> bool:
    """A ``jax.jit``-ed function whose arguments have no static leaves."""
    jitted = callable(getattr(fn, "lower", None)) and callable(getattr(fn, "trace", None))
    return jitted and all(is_array(x) for x in jax.tree_util.tree_leaves(tree))


def _exported_specs(exp: jax.export.Exported, with_params: bool) -> tuple[TreeSpec, TreeSpec]:
    marker = object()
    is_marker = lambda x: x is marker  # noqa: E731
    ins = jax.tree_util.tree_unflatten(exp.in_tree, [marker] * exp.in_tree.num_leaves)
    outs = jax.tree_util.tree_unflatten(exp.out_tree, [marker] * exp.out_tree.num_leaves)
    if with_params:
        args, kwargs = ins
        ins = (tuple(args[1:]), kwargs)
    return tree_spec(ins, leaf=is_marker), tree_spec(outs, leaf=is_marker)


def from_jax(
    fn: Callable | jax.export.Exported, *example_args: Any, params: Any = None, **example_kwargs: Any
) -> Module:
    """Convert a JAX function to a :class:`converter.Module`.

    Args:
        fn: any JAX-traceable function, a ``jax.jit``-ed one, or a ``jax.export.Exported``
            (then the example arguments are not needed: its own avals are used).
        example_args, example_kwargs: pytrees (tuple, list, dict, None, JAX pytree nodes) of
            arrays (or ``jax.ShapeDtypeStruct``); non-array leaves (bool, int, float, str)
            are static: the module is specialised to them and records them as ``static``.
            An array's non-default memory kind (``pinned_host``) is kept, and so is its
            ``NamedSharding``: the module is then partitioned as the source program is
            (see ``docs/sharding.md``). A typed PRNG key (``jax.random.key``) is held as
            its key data (``uint32[..., 2]``), as StableHLO holds it, in inputs, outputs and
            parameters.
        params: a pytree of arrays that become the module's parameters, named by their key
            path (``params['dense']['kernel']``); ``fn`` is then called as
            ``fn(params, *args, **kwargs)`` (the Flax ``apply`` convention). With an
            Exported, the first positional argument of the Exported is the parameters. A
            Flax variables dict (``{'params': ..., 'batch_stats': ...}``): the leaves of
            collections other than ``params`` are state (kind ``buffer``: torch buffers,
            not trained by an optimizer over ``parameters()``), as Flax trains ``params``
            only.

    Returns:
        A Module whose ``@main`` takes the parameter leaves then the input leaves, in JAX's
        flattening order (dict keys sorted). ``signature.kept_var_idx`` records the
        arguments JAX dropped as unused (``Exported.module_kept_var_idx``) and each leaf's
        ``memory_kind`` its ``mhlo.memory_kind`` attribute. A partitioned program (Shardy
        ``sdy.mesh``: sharded arguments, ``with_sharding_constraint``, ``shard_map``) keeps
        its Shardy ops and collectives; ``signature.mesh`` records the mesh
        (``{axis: size}``) and each leaf's ``sharding`` its partition spec. Each
        ``lax.stop_gradient`` is kept as ``custom_call @converter.stop_gradient`` (StableHLO
        has no such op), which the backends read as ``stop_gradient``/``detach``/``Identity``.

    Raises:
        TypeError: an argument leaf of an unsupported type, naming its path.
        SignatureMismatchError: ``params`` does not match an Exported's first argument.

    Warns:
        UserWarning: ``fn`` calls ``jax.custom_vjp`` functions, whose backward rules do not
            survive lowering (also recorded in ``meta["warnings"]``).
    """
    names = _param_names(params)
    if isinstance(fn, jax.export.Exported):
        exp, vjps = fn, []
        in_tree, out_tree = _exported_specs(exp, params is not None)
        if params is not None and len(exp.in_avals) - len(leaf_paths(in_tree)) != len(names):
            raise SignatureMismatchError(
                f"params has {len(names)} leaves but the Exported's first argument has "
                f"{len(exp.in_avals) - len(leaf_paths(in_tree))}"
            )
    elif _exportable_as_is(fn, (params, example_args, example_kwargs)):
        # a jitted function without static leaves keeps its own in/out shardings and
        # memory kinds when exported directly
        lead = () if params is None else (jax.tree_util.tree_map(_abstract, params),)
        a, kw = jax.tree_util.tree_map(_abstract, (example_args, example_kwargs))
        exp = export_flat(fn, *lead, *a, **kw)
        in_tree, out_tree = _exported_specs(exp, params is not None)
        vjps = custom_vjps(jax.make_jaxpr(fn)(*lead, *a, **kw).jaxpr)
    else:
        exp, in_tree, out_tree, vjps = _export(fn, params, example_args, example_kwargs)
    module = mlir.parse_module(  # JAX verified it when serializing
        exp.mlir_module_serialized, filename=getattr(exp, "fun_name", "<jax>"), verified=True
    )
    n_args = len(exp.in_avals)
    kept = tuple(int(i) for i in exp.module_kept_var_idx)
    arg_mk, res_mk = _memory_kinds(module, n_args, kept)
    mesh, arg_sh, res_sh = _shardings(module, n_args, kept)
    n_p = len(names)
    p_values = jax.tree_util.tree_leaves(params)
    state = _flax_state(params, names)
    param_specs = tuple(
        _aval_spec(nm, a, "buffer" if nm in state else "parameter", mk, sh)
        for nm, a, mk, sh in zip(names, exp.in_avals[:n_p], arg_mk[:n_p], arg_sh[:n_p], strict=True)
    )
    input_names = [input_path(p) for p in leaf_paths(in_tree)]
    input_specs = tuple(
        _aval_spec(nm, a, "input", mk, sh)
        for nm, a, mk, sh in zip(input_names, exp.in_avals[n_p:], arg_mk[n_p:], arg_sh[n_p:], strict=True)
    )
    out_names = [f"outputs{p}" for p in leaf_paths(out_tree)]
    output_specs = tuple(
        _aval_spec(nm, a, "output", mk, sh)
        for nm, a, mk, sh in zip(out_names, exp.out_avals, res_mk, res_sh, strict=True)
    )
    signature = Signature(
        params=param_specs,
        inputs=input_specs,
        outputs=output_specs,
        in_tree=in_tree,
        out_tree=out_tree,
        kept_var_idx=None if len(kept) == n_args else kept,
        mesh=mesh,
        dim_ranges=_dim_ranges(exp.in_avals),
    )
    values = {
        s.name: np.asarray(jax.device_get(jax.random.key_data(v) if is_key(v) else v))
        for s, v in zip(param_specs, p_values, strict=True)
    }
    meta = {"jax_version": jax.__version__, "function": getattr(exp, "fun_name", "")}
    if vjps:
        msg = (
            f"custom_vjp rule(s) of {vjps} are not part of StableHLO: gradients of the converted "
            "module differentiate the primal computation instead (docs/embedding.md)"
        )
        warnings.warn(msg, UserWarning, stacklevel=2)
        meta["warnings"] = [msg]
    return run_passes(Module(module, signature, values, source="jax", meta=meta))


__all__ = ["from_jax", "is_array", "tree_spec"]

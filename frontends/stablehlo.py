"""StableHLO written by any tool → :class:`converter.Module`."""

from __future__ import annotations

import re
from dataclasses import replace

from jaxlib.mlir import ir

from converter import mlir, sharding
from converter.module import Module
from converter.passes import PLACEMENT, run_passes
from converter.passes.quant import lower_quantized
from converter.signature import LEAF, LeafSpec, Signature, args_tree

_NAME = re.compile(r'^loc\("([^"]+)"[)(]')  # a NameLoc, not a "file":line:col location


def _arg_attr(fn: ir.Operation, i: int, key: str):
    if "arg_attrs" not in fn.attributes:
        return None
    attrs = ir.DictAttr(ir.ArrayAttr(fn.attributes["arg_attrs"])[i])
    return mlir.decode_attribute(attrs[key]) if key in attrs else None


def _res_attr(fn: ir.Operation, i: int, key: str):
    if "res_attrs" not in fn.attributes:
        return None
    attrs = ir.DictAttr(ir.ArrayAttr(fn.attributes["res_attrs"])[i])
    return mlir.decode_attribute(attrs[key]) if key in attrs else None


def signature_of_main(module: ir.Module) -> Signature:
    """A flat signature read from ``@main``: every argument is a user input ``args[i]``
    (named after its ``loc("name")`` when JAX recorded one), every result an output;
    memory kinds come from the ``mhlo.memory_kind`` argument/result attributes, the mesh
    and each leaf's partition spec from the Shardy ``sdy.mesh``/``sdy.sharding`` ones
    (:mod:`converter.sharding`)."""
    fn = mlir.main_function(module)
    mesh = sharding.module_mesh(module)
    block = fn.regions[0].blocks[0]
    inputs, seen = [], set()
    for i, arg in enumerate(block.arguments):
        t = mlir.tensor_type(arg.type)
        m = _NAME.match(str(arg.location))
        name = m.group(1) if m and m.group(1) not in seen else f"args[{i}]"
        seen.add(name)
        inputs.append(LeafSpec(name, t.shape, t.dtype, "input", _arg_attr(fn, i, "mhlo.memory_kind")))
    ftype = ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value)
    if mesh is not None:
        specs = sharding.func_shardings(fn, "arg_attrs", len(inputs))
        inputs = [replace(s, sharding=sp) for s, sp in zip(inputs, specs, strict=True)]
    outputs = []
    for i, rt in enumerate(ftype.results):
        t = mlir.tensor_type(rt)
        name = _res_attr(fn, i, "jax.result_info") or f"outputs[{i}]"
        outputs.append(LeafSpec(name, t.shape, t.dtype, "output", _res_attr(fn, i, "mhlo.memory_kind")))
    in_tree = args_tree(
        {"kind": "tuple", "children": [LEAF] * len(inputs)}, {"kind": "dict", "keys": [], "children": []}
    )
    out_tree = LEAF if len(outputs) == 1 else {"kind": "tuple", "children": [LEAF] * len(outputs)}
    if mesh is not None:
        specs = sharding.func_shardings(fn, "res_attrs", len(outputs))
        outputs = [replace(s, sharding=sp) for s, sp in zip(outputs, specs, strict=True)]
    return Signature(
        params=(), inputs=tuple(inputs), outputs=tuple(outputs), in_tree=in_tree, out_tree=out_tree, mesh=mesh
    )


def from_stablehlo(source: str | bytes, *, filename: str = "<input>", normalize: bool = True) -> Module:
    """A Module from StableHLO text, MLIR bytecode or a portable artifact.

    The signature is read from the public ``@main`` (see :func:`signature_of_main`); the
    module has no parameters: every argument is a user input.

    Args:
        source: StableHLO text, MLIR bytecode or a VHLO portable artifact.
        filename: named in error messages.
        normalize: run the placement pass (:func:`converter.passes.placement.normalize_placement`):
            host-marked ops loose in a function (``compute_on`` without an inner ``jit``,
            also inside ``while``/``if``/``case`` regions) are outlined into host calls,
            memory kinds of ``@main`` and of ``annotate_device_placement`` results go on the
            signature, ``signature.host_functions`` names the host functions.
            ``False`` keeps the module exactly as read.

    A module may hold any number of functions: ``func.call`` and ``stablehlo.composite``
    (whose ``decomposition`` function every backend runs) are evaluated as calls. Uniform
    quantized types (``!quant.uniform``: ``uniform_quantize``, ``uniform_dequantize``,
    quantized ``add``, ``dot_general``...) are lowered to integer and float arithmetic per
    the spec's quantization semantics (:func:`converter.passes.quant.lower_quantized`);
    quantized arguments and results become their storage type (``i8``...).

    Raises:
        ParseError: malformed text (with the parser's line and column) or bytes.
        UnsupportedOpError: a uniform quantized op that StableHLO's lowering cannot
            rewrite, or quantized types when jaxlib cannot load the ``quant`` dialect; names
            every such op, its count and first location.
        PassError: the placement pass produced an invalid module.
    """
    module = lower_quantized(mlir.parse_module(source, filename=filename), filename)
    out = Module(module, signature_of_main(module), {}, source="stablehlo")
    return run_passes(out, [PLACEMENT]) if normalize else out

"""StableHLO → native PyTorch: interpret a :class:`converter.Module` op by op into torch ops.

:func:`to_torch` traces :class:`TorchInterpreter` over fake tensors into a
``torch.fx.GraphModule`` of ATen ops (``while``/``if``/``case`` become the ``while_loop`` and
``cond`` higher-order ops), and wraps it in :class:`TorchModule`, an ``nn.Module`` owning the
parameters. Running it needs neither JAX nor this project's MLIR code; ``torch.export.export``
and ``torch.compile`` accept it; autograd flows through it.

Tracing (:func:`build_graph`): by default the lean recorder of :mod:`converter.backends.torch.recorder`
(one ``TorchDispatchMode`` over a ``FakeTensorMode``: one node per ATen call, the graph
``make_fx`` records, at less than half its cost). ``make_fx(tracing_mode="fake")`` traces
instead (i) a module whose trace builds a ``while_loop`` or ``cond`` higher-order op (an
``if`` or a ``case`` of two or more branches, found before tracing; a ``while`` without a
static trip count, found while tracing: the recorder stops there and ``make_fx`` traces the
module again; counted loops are unrolled and recorded), (ii) one rank's graph of
a partitioned module (collectives), (iii) a module traced for a device other than CPU, and
(iv) a trace started under another dispatch mode (an outer ``FakeTensorMode``).
"""

from __future__ import annotations

import inspect
import itertools
import math
import operator
import re
import types
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from converter import _threads, dtypes, mlir
from converter._torch_internal import make_fx
from converter.errors import ConversionError, DistributedError, DynamicDimensionError, SignatureMismatchError
from converter.interpreter import Interpreter
from converter.module import Module
from converter.passes import CANONICAL_PLACEMENT, Pass, prepare
from converter.placement import is_host
from converter.signature import LeafSpec, Signature, check_leaf, flatten, input_path, unflatten

from . import (
    compiled,
    ops,  # noqa: F401 - registers the rules
    patterns,
    recorder,
    symbolic,
)
from ._util import (
    CARRIED,
    ROUNDED,
    STORAGE,
    WIDENED,
    numpy_to_torch,
    storage_dtype,
    weight_to_torch,
    wrap_carried,
    wrap_unsigned,
)
from .native import simplify
from .ops.collectives import Communicator
from .ops.control_flow import exact_control_flow_gradients
from .placement import (
    CPU,
    Placer,
    check_device,
    check_parameter,
    fold_constant_transfers,
    home,
    place_parameter,
    resolve_device,
)
from .registry import TORCH_RULES

#: the passes this backend runs on the module it is given, at :func:`to_torch`
#: (:func:`converter.passes.prepare`): host computation outlined into the canonical form its
#: placement reads (a no-op on what the frontends produce)
PREPARE: list[Pass] = [CANONICAL_PLACEMENT]

# ops whose result may leave the range of an emulated (widened) unsigned type
_WRAPPING = {
    "stablehlo.add", "stablehlo.subtract", "stablehlo.multiply", "stablehlo.negate", "stablehlo.not",
    "stablehlo.shift_left", "stablehlo.power", "stablehlo.reduce", "stablehlo.reduce_window",
    "stablehlo.scatter", "stablehlo.dot_general", "stablehlo.dot", "stablehlo.xor",
    "stablehlo.all_reduce", "stablehlo.reduce_scatter",
}  # fmt: skip

# ops whose rules take shape values (SymArray operands) as they are, on symbolic sizes:
# the operand positions that are shapes (None: all)
_SHAPE_CONSUMERS: dict[str, frozenset[int] | None] = {
    "func.call": None, "stablehlo.tuple": None, "stablehlo.get_tuple_element": None,
    "stablehlo.custom_call@shape_assertion": None,
    "stablehlo.dynamic_broadcast_in_dim": frozenset({1}), "stablehlo.dynamic_reshape": frozenset({1}),
    "stablehlo.dynamic_iota": frozenset({0}), "stablehlo.real_dynamic_slice": frozenset({1, 2, 3}),
    "stablehlo.dynamic_pad": frozenset({2, 3, 4}), "stablehlo.dynamic_gather": frozenset({2}),
}  # fmt: skip


class TorchInterpreter(Interpreter):
    """Evaluates StableHLO ops with :data:`converter.backends.torch.registry.TORCH_RULES` on torch
    tensors (real or fake). Values of ``ui16``/``ui32``/``ui64`` are held in the emulated
    storage of :mod:`converter.backends.torch._util`; results of wrapping ops are masked into range.
    With a :attr:`placer` (see :mod:`converter.backends.torch.placement`), host-placed calls (and
    host-marked ops left in a region) compute on CPU and constants are put on the device being
    computed on. :attr:`comm` is the rank's communicator while a partitioned module is traced
    for one rank (:mod:`converter.backends.torch.distributed`), else ``None``."""

    registry = TORCH_RULES
    direction = "torch backend"
    placer: Placer | None = None
    comm: Communicator | None = None
    #: shape computations on ``SymInt`` sizes (:mod:`converter.backends.torch.symbolic`): set when a
    #: shape-polymorphic module runs on symbolic sizes (``torch.export`` of a TorchModule)
    symbolic: bool = False
    #: sympy symbol name of an input size → the module's dimension name (error messages)
    dim_names: dict[str, str] = {}

    def run_op(self, op: mlir.Op, operands: list[Any], env: dict) -> list[Any]:
        if op.name == "stablehlo.constant" and op.results[0] in env:
            return [env[op.results[0]]]  # hoisted out of a while/cond branch
        if self.symbolic:
            out = self._shape_op(op, operands)
            if out is not None:
                return out
            keep = _SHAPE_CONSUMERS.get(self.dispatch_key(op), frozenset())
            if keep is not None:
                operands = [v if i in keep else symbolic.materialize(self, v) for i, v in enumerate(operands)]
        if self.placer is not None and self.placer.current != CPU and is_host(op.mlir):
            return self.placer.host_call(lambda xs: self.run_op(op, xs, env), operands)  # on CPU
        if op.name in patterns.ROOTS:
            native = patterns.rewrite(self, op, env)  # a softmax, gelu, layer norm ... as one call
            if native is not None:
                return [native]
        tracer = recorder.current() if op.name in recorder.REPLAYED_OPS and not self.symbolic else None
        if tracer is not None:  # the rule's calls recorded once, replayed for the same metadata
            run = lambda: super(TorchInterpreter, self).run_op(op, operands, env)  # noqa: E731
            out = tracer.run_op(op, operands, run, self.registry.get(op.name))
        else:
            out = super().run_op(op, operands, env)
        if self.placer is not None and op.name == "stablehlo.constant":
            out = [self.placer.to(v, self.placer.current) for v in out]
        names = self._result_dtypes(op)
        if op.name in _WRAPPING:
            out = [wrap_unsigned(v, n) if n in WIDENED else v for v, n in zip(out, names, strict=False)]
        if op.name != "stablehlo.constant" and any(
            n in ROUNDED for n in names
        ):  # sub-byte integers and narrow floats: back into their type
            out = [wrap_carried(v, n) if n in ROUNDED else v for v, n in zip(out, names, strict=False)]
        return out

    _dtype_of: dict | None = None  # MLIR type -> its dtype name (None: a token or tuple)

    def _result_dtypes(self, op: mlir.Op) -> list[str | None]:
        """The dtype name of each result of ``op`` (None for a token or a tuple), decoded
        once per distinct type of the module (types are uniqued in its context)."""
        if self._dtype_of is None:
            self._dtype_of = {}
        cache = self._dtype_of
        names = []
        for r in op.mlir.results:
            t = r.type
            if t in cache:
                names.append(cache[t])
                continue
            try:
                name = mlir.tensor_type(t).dtype
            except TypeError:  # tokens, tuples
                name = None
            cache[t] = name
            names.append(name)
        return names

    def _shape_op(self, op: mlir.Op, operands: list[Any]) -> list[Any] | None:
        """``op`` computed on :class:`~converter.backends.torch.symbolic.SymArray` shape values, or
        None when it is not a shape computation.

        Raises:
            DynamicDimensionError: the shape computation has no symbolic form (names the
                dimensions, the op and its location).
        """
        if op.name == "stablehlo.constant":
            value = symbolic.constant(op)
            return None if value is None else [value]
        if op.name == "stablehlo.get_dimension_size":
            x = operands[0]
            size = (x.values if isinstance(x, symbolic.SymArray) else x).shape[op.attr("dimension")]
            return [symbolic.SymArray(size, op.result_type.dtype)]
        if not any(isinstance(v, symbolic.SymArray) for v in operands):
            return None
        try:
            value = symbolic.eval_shape_op(op, operands)
        except symbolic.SymbolicSizeError as e:
            raise self.dimension_error(op, e, e.values) from e
        return None if value is None else [value]

    def dimension_error(
        self, op: mlir.Op, cause: BaseException, values: Sequence[Any]
    ) -> DynamicDimensionError:
        """:class:`DynamicDimensionError` for ``op``, naming the module's dimensions behind
        the sizes ``values`` (ints and ``SymInt``s)."""
        names: list[str] = []
        for v in values:
            if isinstance(v, torch.SymInt):
                for s in sorted(map(str, v.node.expr.free_symbols)):
                    name = self.dim_names.get(s, s)
                    if name not in names:
                        names.append(name)
        return DynamicDimensionError(op.name, op.location, cause, names)


# attributes TorchModule sets on its instances (parameter attributes must not take them)
_INSTANCE_ATTRS = frozenset(
    {
        "signature",
        "device",
        "graph_module",
        "param_names",
        "forward",
        "_dynamic_module",
        "_traceable",
        "_graphs",
        "_attr_of",
        "_attrs",
        "_fast",
        "_mode_error",
        "_checked",
    }
)


def param_attr_names(names: list[str]) -> dict[str, str]:
    """Attribute name for each parameter name: its runs of word characters joined by ``_``
    (``layer.0.weight`` → ``layer_0_weight``, ``params['Dense_0']['kernel']`` →
    ``params_Dense_0_kernel``), ``p_`` before a leading digit, a numeric suffix on collision,
    also with an attribute or method of the module (an ONNX initializer named ``half``,
    ``float`` or ``eval``: registering it raised "attribute 'half' already exists")."""
    out: dict[str, str] = {}
    used: set[str] = set(dir(TorchModule)) | set(vars(torch.nn.Module())) | _INSTANCE_ATTRS
    for name in names:
        base = "_".join(re.findall(r"\w+", name)) or "param"
        if base[0].isdigit():
            base = "p_" + base
        cand, k = base, 1
        while cand in used:
            cand, k = f"{base}_{k}", k + 1
        used.add(cand)
        out[name] = cand
    return out


def _example(spec: LeafSpec, device: torch.device = CPU) -> torch.Tensor:
    if any(not isinstance(d, int) for d in spec.shape):
        raise ConversionError(
            f"{spec.name}: dynamic shape {list(spec.shape)} is not supported by the torch backend"
        )
    # only its metadata is read (tracing makes a fake tensor of it): empty, not zeroed
    return torch.empty(spec.shape, dtype=storage_dtype(spec.dtype), device=home(spec, device))


def build_graph(
    module: Module, device: torch.device | str | None = None, *, comm: Communicator | None = None
) -> torch.fx.GraphModule:
    """Trace the module's ``@main`` into a GraphModule taking the (kept) ``@main`` arguments in
    their storage dtypes and returning a tuple of results, computing on ``device`` (default
    CPU) with host placement honoured (:mod:`converter.backends.torch.placement`). With ``comm``, one
    rank's graph of a partitioned module (its collectives over ``torch.distributed``).

    Traced by :func:`converter.backends.torch.recorder.record`, or by ``make_fx`` for the modules the
    module doc lists (higher-order ops, ``comm``, a device other than CPU, an outer dispatch
    mode); both give the same graph for the same calls."""
    sig = module.signature
    specs = list(sig.all_args)
    if sig.kept_var_idx is not None:
        specs = [specs[i] for i in sig.kept_var_idx]
    placer = Placer(resolve_device(device))

    def main(*args):
        interp = TorchInterpreter(module.mlir)
        interp.placer = placer
        interp.comm = comm
        return placer.main(interp.run, args, specs, sig.outputs)

    examples = [_example(s, placer.device) for s in specs]
    gm = None
    # make_fx's tracer globals and the recorder's fake-result memo: one thread at a time
    with _threads.TORCH_TRACE:
        if comm is None and placer.device == CPU and recorder.can_record() and not _has_branches(module):
            try:
                with torch.no_grad():
                    gm = recorder.record(main, examples, recompile=False)  # simplify() recompiles
            except Exception as e:  # noqa: BLE001 - a higher-order op: traced by make_fx below
                if _error_behind(e, recorder.NeedsMakeFx) is None:
                    raise
        if gm is None:
            gm = _make_fx_graph(main, examples)
        gm = exact_control_flow_gradients(gm)  # while/cond: exact autograd (see ops/control_flow.py)
        gm = gm if placer.device == CPU else fold_constant_transfers(gm)
        return simplify(gm)  # implicit broadcasts, dead code (native.py)


def _has_branches(module: Module) -> bool:
    """``module`` has an ``if``, or a ``case`` of two or more branches, with results: a
    ``cond`` higher-order op, which only ``make_fx`` traces (decided before tracing; a
    ``while`` becomes a higher-order op only without a static trip count, found while
    tracing)."""
    for op in mlir.walk_ops(module.mlir.operation):
        if op.name in ("stablehlo.if", "stablehlo.case") and len(op.results) and len(op.regions) > 1:
            return True
    return False


def _error_behind(error: BaseException, kind: type[BaseException]) -> BaseException | None:
    """The exception of type ``kind`` that is ``error`` or that it was raised from or while
    handling (its cause or context chain), if any."""
    seen: BaseException | None = error
    while seen is not None and not isinstance(seen, kind):
        seen = seen.__cause__ or seen.__context__
    return seen


def _make_fx_graph(main: Any, examples: list[torch.Tensor]) -> torch.fx.GraphModule:
    """``main`` traced over fake ``examples`` by ``make_fx``."""
    with torch.no_grad():
        try:
            return make_fx(main, tracing_mode="fake")(*examples)
        except ConversionError:
            raise
        except Exception as e:  # noqa: BLE001 - re-raised: the rule's error when one is behind it
            # with torch's structured trace logging on (some earlier code may have enabled
            # it), make_fx prints the partial graph while a rule's error unwinds, and that
            # printing can fail (a sub-byte dtype has no name in fx codegen), hiding the
            # rule's error: raise the rule's error
            behind = _error_behind(e, ConversionError)
            if behind is None:
                raise
            raise behind from e


def input_tensor(path: str, value: Any, spec: LeafSpec, device: torch.device | None) -> torch.Tensor:
    """A checked input leaf as the graph takes it: NumPy and JAX arrays copied into torch on
    the leaf's device, a tensor checked to be there (``SignatureMismatchError`` naming
    ``path``), dtypes torch lacks in their storage dtype."""
    if not isinstance(value, torch.Tensor):
        value = numpy_to_torch(np.asarray(value), spec.dtype).to(home(spec, device))
    else:
        check_device(path, value, spec, device)
    return value.to(STORAGE[spec.dtype]) if spec.dtype in STORAGE else value


class TorchModule(torch.nn.Module):
    """A converted :class:`converter.Module` as a native ``torch.nn.Module``.

    ``forward(*args, **kwargs)`` takes the user inputs (torch tensors; NumPy/JAX arrays are
    copied) with the structure, shapes and dtypes of ``signature.inputs`` and returns the
    outputs with the structure of ``signature.out_tree`` (custom output classes come back as
    dicts).

    Parameters: floating/complex entries of ``signature.params`` of kind ``parameter`` are
    ``nn.Parameter``s (``requires_grad=False`` for those the source froze,
    ``signature.frozen``), others (buffers, lifted constants, integers) buffers,
    non-persistent (left out of ``state_dict()``) for the source's non-persistent ones
    (``signature.non_persistent``). Their attribute names are the original names
    with ``.``/brackets mangled to ``_``
    (see :func:`param_attr_names`); :attr:`param_names` maps attribute name → original name, and
    :meth:`source_state_dict` returns the values under their original names. The traced graph
    is the submodule ``graph_module`` (its ``_tensor_constant*`` buffers are the module's large
    constants).

    State the source updates in place (``signature.mutations``) is updated here too: each
    call copies the new values into the module's buffers (registered as buffers, not
    parameters, even when floating) and into the user input tensors the source mutates.

    A module with random ops (``signature.rng``) takes its key as ``rng=`` (an int seed, the
    same as ``jax.random.PRNGKey(seed)``, or two integers such as a JAX key's data); without
    it each call draws a key from torch's default generator.

    Device: the module computes on :attr:`device`, the one its graph was traced for
    (``to_torch(device=...)``); parameters live there, except host-memory ones (CPU). Inputs
    are never moved: a tensor input must be on :attr:`device` (on CPU for a host memory kind);
    NumPy/JAX inputs are copied there.

    ``torch.compile``: each instance's ``forward`` has a code object of its own (as each
    ``fx.GraphModule`` class has), so Dynamo's per-code-object cache limit
    (``torch._dynamo.config.recompile_limit``, 8) counts compilations of one module, not of
    every converted module of the process.

    Raises:
        SignatureMismatchError: on call, for inputs of the wrong structure, shape, dtype or
            device (names the argument path, e.g. ``args[1]['mask']``).
        ConversionError: on call, when the parameters were moved off the traced device.
    """

    def __init__(
        self, module: Module, graph_module: torch.fx.GraphModule, device: torch.device | str | None = None
    ):
        super().__init__()
        self.signature: Signature = module.signature
        self._own_forward()  # after the signature: forward's lists its keyword inputs
        self.device = resolve_device(device)
        self.graph_module = graph_module
        # a shape-polymorphic module (graph_module None): one graph per argument shapes
        self._dynamic_module = module if graph_module is None else None
        self._traceable = compiled.traceable(self) if graph_module is None else None  # under Dynamo
        self._graphs: dict[tuple, torch.fx.GraphModule] = {}
        attrs = param_attr_names([p.name for p in self.signature.params])
        self.param_names = {a: n for n, a in attrs.items()}
        self._attr_of = attrs
        self._attrs = [attrs[p.name] for p in self.signature.params]
        self._fast = None  # set below, once the parameters are registered
        self._mode_error: str | None = None  # see train()
        self._checked: tuple | None = None  # see _fast_params
        state = {m.target for m in self.signature.mutations if m.kind == "buffer"}
        frozen = set(self.signature.frozen)
        transient = set(self.signature.non_persistent)  # not in state_dict()
        for spec in self.signature.params:
            value = place_parameter(
                weight_to_torch(np.asarray(module.params[spec.name]), spec.dtype), spec, self.device
            )
            floating = dtypes.is_floating(spec.dtype) or dtypes.is_complex(spec.dtype)
            # buffers (updated in place or not) and constants stay buffers, as in the source:
            # an optimizer over parameters() must not train BatchNorm statistics
            if floating and spec.kind == "parameter" and spec.name not in state:
                param = torch.nn.Parameter(value, requires_grad=spec.name not in frozen)
                self.register_parameter(attrs[spec.name], param)
            else:
                self.register_buffer(attrs[spec.name], value, persistent=spec.name not in transient)
        self._fast = self._fast_call_plan()
        if self.signature.training is not None:  # the mode the source computes in
            super().train(self.signature.training)

    def source_state_dict(self) -> dict[str, torch.Tensor]:
        """Parameter and buffer values keyed by their names in ``signature.params``, a tied
        weight under each of its names (``signature.tied``), for the source
        model's ``load_state_dict``."""
        out = {self.param_names[a]: getattr(self, a) for a in self._attrs}
        for alias, name in self.signature.tied.items():
            if name in out:
                out[alias] = out[name]
        return out

    def _fast_call_plan(self) -> tuple | None:
        """For a module called with positional tensors only (no keyword inputs, random key,
        in-place updates, emulated unsigned dtypes or dynamic shapes): per input its
        ``(shape, dtype, device)``, per parameter ``(attribute, device)``; else None."""
        sig = self.signature
        tree = sig.in_tree
        plain = (
            tree.get("kind") == "tuple"
            and len(tree["children"]) == 2
            and tree["children"][0]["kind"] == "tuple"
            and all(c["kind"] == "leaf" for c in tree["children"][0]["children"])
            and tree["children"][1]["kind"] == "dict"
            and not tree["children"][1].get("keys")
            and "type" not in tree["children"][1]
        )
        if not plain or sig.mutations or sig.rng is not None or self._dynamic_module is not None:
            return None
        if any(s.dtype in STORAGE for s in (*sig.inputs, *sig.outputs)):
            return None
        inputs = tuple(
            (tuple(s.shape), dtypes.torch_dtype(s.dtype), home(s, self.device)) for s in sig.inputs
        )
        params = tuple((a, home(s, self.device)) for a, s in zip(self._attrs, sig.params, strict=True))
        return inputs, params

    def _fast_forward(self, args: tuple) -> Any:
        """:meth:`forward` without its general checks when every input is a tensor of the
        expected shape, dtype and device and every parameter is where it was traced, else
        None (the general path then checks and raises). Calls the graph's ``forward``
        directly (no ``nn.Module`` call machinery for the internal ``graph_module``)."""
        inputs, _ = self._fast
        if len(args) != len(inputs):
            return None
        for value, (shape, dtype, device) in zip(args, inputs, strict=True):
            if not isinstance(value, torch.Tensor) or value.shape != shape or value.dtype != dtype:
                return None
            if value.device != device:
                return None
        flat = self._fast_params()
        if flat is None:
            return None
        flat = [*flat, *args]
        kept = self.signature.kept_var_idx
        if kept is not None:
            flat = [flat[i] for i in kept]
        graph = self._modules["graph_module"]  # the dict: nn.Module.__getattr__ costs ~1 us
        return unflatten(self.signature.out_tree, list(graph.forward(*flat)))

    def _fast_params(self) -> tuple[torch.Tensor, ...] | None:
        """The parameters and buffers in graph order when each is on the device it was traced
        for, else None. Outside ``torch.compile`` the checked tuple is kept and reused while
        the module holds the same tensor objects (compared by identity: re-registering or
        ``load_state_dict(assign=True)`` replaces them, and :meth:`_apply` — ``.to()``,
        ``.cuda()``, ``.half()`` — drops the tuple), so that a call does not compare devices."""
        tensors, buffers = self._parameters, self._buffers
        compiling = torch.compiler.is_compiling()
        cached = None if compiling else self._checked
        if cached is not None:
            flat, p_attrs, p_values, b_attrs, b_values = cached
            if all(map(operator.is_, map(tensors.get, p_attrs), p_values)) and all(
                map(operator.is_, map(buffers.get, b_attrs), b_values)
            ):
                return flat
        flat, held = [], ({}, {})  # attribute -> tensor, for _parameters and for _buffers
        for attr, device in self._fast[1]:
            value = tensors.get(attr)
            where = held[value is None]
            if value is None:
                value = buffers.get(attr)
            if value is None or value.device != device:
                return None
            flat.append(value)
            where[attr] = value
        flat = tuple(flat)
        if not compiling:
            p, b = held
            self._checked = (flat, tuple(p), tuple(p.values()), tuple(b), tuple(b.values()))
        return flat

    def _own_forward(self) -> None:
        """Bind :meth:`forward` to this instance through a copy of its code object: Dynamo
        caches compilations per code object, up to ``recompile_limit`` (8); sharing one
        ``forward`` code, the ninth converted module compiled in a process ran eagerly."""
        impl = type(self).forward  # a subclass's own forward (DistributedTorchModule)
        code = impl.__code__.replace()  # a new code object, same bytecode
        fn = types.FunctionType(code, impl.__globals__, impl.__name__, impl.__defaults__, impl.__closure__)
        fn.__kwdefaults__, fn.__doc__, fn.__qualname__ = impl.__kwdefaults__, impl.__doc__, impl.__qualname__
        keywords = _keyword_signature(impl, self.signature)
        if keywords is not None:
            fn.__signature__ = keywords
        self.__dict__["forward"] = types.MethodType(fn, self)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(super().__getstate__())
        state.pop("forward", None)  # per-instance functions: rebuilt by __setstate__
        state.pop("_traceable", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self._own_forward()
        self._traceable = compiled.traceable(self) if self._dynamic_module is not None else None

    def train(self, mode: bool = True) -> TorchModule:
        """``nn.Module.train``. The computation is the source's in the mode it was converted
        in: a torch source whose result depends on the mode (dropout, BatchNorm:
        ``signature.training`` records its mode) cannot switch. The mode is set
        (a parent's ``.eval()`` reaches this module too), and calling the module in the
        other mode raises instead of silently computing in the converted one."""
        fixed = self.signature.training
        self._mode_error = None
        if fixed is not None and bool(mode) != fixed:
            was, asked = ("training", "eval") if fixed else ("eval", "training")
            self._mode_error = (
                f"this module was converted from a model in {was} mode, and its dropout or "
                f"BatchNorm computes as in {was} mode whatever .train()/.eval() says; it is in {asked} "
                f"mode now: call .{'train' if fixed else 'eval'}() first, or to run it in {asked} mode, "
                f"convert the model in {asked} mode (model.{'eval' if fixed else 'train'}()) and call that "
                "conversion"
            )
        return super().train(mode)

    def _apply(self, fn: Any, recurse: bool = True) -> TorchModule:
        """``nn.Module._apply`` (behind ``.to()``, ``.cuda()``, ``.half()``...), which may move
        or convert the parameters in place: the fast path checks them again."""
        self._checked = None
        return super()._apply(fn, recurse)

    def forward(self, *args: Any, rng: torch.Tensor | int | None = None, **kwargs: Any) -> Any:
        """The module on the source's inputs (see the class docstring).

        Raises:
            ConversionError: the module is in the other mode than the one a mode-dependent
                source was converted in (:meth:`train`).
        """
        if self._mode_error is not None:
            raise ConversionError(self._mode_error)
        if self._fast is not None and not kwargs and rng is None:
            out = self._fast_forward(args)
            if out is not None:
                return out
        sig = self.signature
        leaves = flatten((args, kwargs), sig.in_tree)
        if len(leaves) != len(sig.inputs):
            raise ConversionError(f"expected {len(sig.inputs)} input leaves, got {len(leaves)}")
        flat = [getattr(self, a) for a in self._attrs]
        for a, value, spec in zip(self._attrs, flat, sig.params, strict=True):
            check_parameter(a, value, spec, self.device)
        written = _mutated_inputs(sig, leaves)
        for (path, value), spec in zip(leaves, sig.inputs, strict=False):
            check_leaf(input_path(path), value, spec)
            flat.append(input_tensor(input_path(path), value, spec, self.device))
        if sig.rng is not None:
            flat.append(self._key(rng))
        if sig.kept_var_idx is not None:
            flat = [flat[i] for i in sig.kept_var_idx]
        if self._traceable is not None and torch.compiler.is_dynamo_compiling():
            outs = list(self._traceable(*flat))  # traced by AOTAutograd (backends/torch/compiled.py)
        elif self._dynamic_module is not None and _symbolic_sizes(flat):
            outs = self._run_symbolic(flat)  # torch.export / torch.compile tracing this module
        else:
            outs = list(self._graph(flat)(*flat))
        for i, spec in enumerate(sig.outputs):
            if spec.dtype in STORAGE and spec.dtype not in CARRIED:  # carried types stay in storage
                outs[i] = outs[i].to(dtypes.torch_dtype(spec.dtype))
        user, new = sig.split_outputs(outs)
        for m, value in zip(sig.mutations, new, strict=True):
            if m.kind == "buffer":
                with torch.no_grad():
                    getattr(self, self._attr_of[m.target]).copy_(value)
            elif isinstance(written[m.target], torch.Tensor):
                written[m.target].copy_(value)  # as torch's in-place op: autograd sees it
            else:
                np.copyto(written[m.target], value.detach().cpu().numpy())
        return unflatten(sig.out_tree, user)

    def _graph(self, flat: list[torch.Tensor]) -> torch.fx.GraphModule:
        """The graph to run on ``flat``: :attr:`graph_module`, or for a shape-polymorphic
        module the graph of the module specialized to ``flat``'s shapes (built once per
        shape, as ``jax.jit`` compiles once per shape).

        Raises:
            SignatureMismatchError: the shapes break the module's dimension names or ranges.
        """
        module = self._dynamic_module
        if module is None:
            return self.graph_module
        from converter.passes.shapes import check_dims, refine

        key = tuple(tuple(int(d) for d in v.shape) for v in flat)
        graph = self._graphs.get(key)
        if graph is not None:
            return graph
        with _threads.TORCH_TRACE:  # threads calling with a new shape: one traces it
            if key in self._graphs:
                return self._graphs[key]
            check_dims(module, key)
            refined = refine(module.mlir, key)
            sig = _static_signature(module.signature, key, refined)
            static = Module(refined, sig, module.params, source=module.source, meta=module.meta)
            TorchInterpreter(static.mlir).check_supported()
            self._graphs[key] = build_graph(static, self.device)
            return self._graphs[key]

    def _run_symbolic(self, flat: list[torch.Tensor]) -> list[Any]:
        """Run the shape-polymorphic module on inputs with symbolic sizes (``torch.export``
        or ``torch.compile`` tracing this module): the interpreter runs in the trace, its
        shape computations on the ``SymInt`` sizes (:mod:`converter.backends.torch.symbolic`), so the
        traced graph keeps the dimensions symbolic and the module's constraints as
        ``torch._check``s.

        Raises:
            DynamicDimensionError: a size the module computes has no symbolic form.
        """
        module = self._dynamic_module
        sig = module.signature
        specs = list(sig.all_args)
        if sig.kept_var_idx is not None:
            specs = [specs[i] for i in sig.kept_var_idx]
        names: dict[str, str] = {}
        for value, spec in zip(flat, specs, strict=True):
            for d, size in zip(spec.shape, value.shape, strict=False):
                if isinstance(d, str) and isinstance(size, torch.SymInt) and d.isidentifier():
                    names.setdefault(str(size.node.expr), d)
        placer = Placer(self.device)
        interp = TorchInterpreter(module.mlir)
        interp.placer, interp.symbolic, interp.dim_names = placer, True, names

        def run(*args):
            return [symbolic.materialize(interp, v) for v in interp.run(*args)]

        return list(placer.main(run, flat, specs, sig.outputs))

    def export_dynamic_shapes(self) -> dict[str, Any]:
        """``dynamic_shapes`` for ``torch.export.export(self, args, kwargs, dynamic_shapes=...)``
        keeping the module's dimensions symbolic: ``torch.export.Dim``s named as the module's
        dimensions with their ranges (``signature.dim_ranges``), derived dimensions
        (``2*seq``) as expressions of them, keyed by the parameters of :meth:`forward` the
        inputs bind: ``{"args": (...), "input_ids": ..., "attention_mask": ...}`` (each keyword
        input by its name, as :meth:`forward`'s signature lists them; no ``"args"`` for a module
        of keyword inputs only, such as a Hugging Face model called ``model(input_ids=...)``;
        ``None`` for a static input).

        Raises:
            ConversionError: a dimension expression torch's ``Dim`` cannot express.
        """
        return export_dynamic_shapes(self.signature)

    def _key(self, rng: torch.Tensor | int | None) -> torch.Tensor:
        """The PRNG key argument (``uint32[2]``, held as int64): from ``rng`` (an int seed or a
        2-element integer tensor, e.g. a JAX key's data), else drawn from torch's default
        generator, so ``torch.manual_seed`` makes runs repeatable as it does for the source."""
        if rng is None:
            return torch.randint(0, 2**32, (2,), dtype=torch.int64, device=self._device())
        if isinstance(rng, int):  # as jax.random.PRNGKey(seed): high word, low word
            words = [(rng >> 32) & 0xFFFFFFFF, rng & 0xFFFFFFFF]
            return torch.tensor(words, dtype=torch.int64, device=self._device())
        key = torch.as_tensor(np.asarray(rng) if not isinstance(rng, torch.Tensor) else rng)
        if key.shape != (2,) or key.is_floating_point():
            raise SignatureMismatchError(
                f"rng: expected an int seed or 2 integers, got {key.dtype}{list(key.shape)}"
            )
        return key.to(torch.int64) & 0xFFFFFFFF

    def _device(self) -> torch.device:
        return self.device


def _symbolic_sizes(flat: list[Any]) -> bool:
    """True when a value in ``flat`` has a ``torch.SymInt`` size (traced symbolically)."""
    return any(isinstance(d, torch.SymInt) for v in flat for d in getattr(v, "shape", ()))


def _dim_ident(d: Any, where: tuple[int, int]) -> str:
    """A dimension's name as a Python identifier (a ``torch.export.Dim`` name): ONNX
    ``dim_param``s such as ``batch-size`` with ``_`` for other characters, an unnamed
    dynamic dimension (None) ``d<input>_<axis>`` (as :func:`converter.passes.shapes.symbolic_shapes`)."""
    if d is None:
        return f"d{where[0]}_{where[1]}"
    ident = re.sub(r"\W", "_", d)
    return ident if ident and not ident[0].isdigit() else f"d_{ident}"


def _dims_of(sig: Signature) -> list[list[tuple[int, Any, Any]]]:
    """Per input: ``(axis, name or None, parsed expression or None)`` of each dynamic
    dimension (a derived one has an expression)."""
    from converter.dims import parse_dim

    out = []
    for i, spec in enumerate(sig.inputs):
        dims = []
        for a, d in enumerate(spec.shape):
            if isinstance(d, int):
                continue
            tree = None if d is None or d.isidentifier() else parse_dim(d)
            dims.append((a, _dim_ident(d, (i, a)) if tree is None else None, tree))
        out.append(dims)
    return out


def _keyword_names(sig: Signature) -> list[str]:
    """The top-level keyword inputs of ``sig`` (``model(input_ids=..., attention_mask=...)``)."""
    kwargs = sig.in_tree["children"][1]  # in_tree: (args, kwargs)
    return [str(k) for k in kwargs.get("keys", ())]


def _keyword_signature(impl: Any, sig: Signature) -> inspect.Signature | None:
    """``impl``'s signature with its ``**kwargs`` replaced by the module's keyword inputs
    (keyword-only), or None when it takes none (or one is named as another parameter).

    ``torch.export`` binds the inputs to ``inspect.signature(forward)``; through ``**kwargs``
    torch 2.13 keys them ``{"kwargs": {...}}`` in one place and by name in another, so a
    keyword-called module (every Hugging Face model) could not be exported with
    ``dynamic_shapes`` ("Node arity mismatch"). Named, the keys agree. Only metadata: the
    call still goes through ``**kwargs``.
    """
    names = _keyword_names(sig)
    params = list(inspect.signature(impl).parameters.values())
    if not names or params[-1].kind is not inspect.Parameter.VAR_KEYWORD:
        return None
    if set(names) & {p.name for p in params}:
        return None
    last_positional = max(
        i
        for i, p in enumerate(params)
        if p.kind is not inspect.Parameter.KEYWORD_ONLY and i < len(params) - 1
    )
    named = [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY) for n in names]
    return inspect.Signature(params[: last_positional + 1] + named + params[last_positional + 1 : -1])


def export_dynamic_shapes(sig: Signature) -> dict[str, Any]:
    """The ``torch.export`` ``dynamic_shapes`` of a module with signature ``sig`` (see
    :meth:`TorchModule.export_dynamic_shapes`)."""
    from torch.export import Dim

    ranges = sig.dim_ranges
    idents = {_dim_ident(k, (0, 0)): v for k, v in ranges.items()}
    made: dict[str, Any] = {}

    def dim(name: str) -> Any:
        if name not in made:
            lo, hi = (list(idents.get(name) or []) + [None, None])[:2]
            kwargs = {k: v for k, v in (("min", lo), ("max", hi)) if v is not None}
            made[name] = Dim(name, **kwargs)
        return made[name]

    leaves = []
    for spec, dims in zip(sig.inputs, _dims_of(sig), strict=True):
        leaves.append(
            {
                a: dim(name) if tree is None else _derived(tree, dim, spec.name, spec.shape[a])
                for a, name, tree in dims
            }
            or None
        )
    args, kwargs = unflatten(sig.in_tree, leaves)
    # torch.export keys a dict by the parameters the inputs bind in forward's signature: ``args``
    # unless the call has keyword inputs only, each keyword input by its name (_keyword_signature)
    out: dict[str, Any] = {"args": tuple(args)} if args or not kwargs else {}
    out.update(kwargs)
    return out


def export_example(sig: Signature) -> tuple[tuple, dict]:
    """Zero ``(args, kwargs)`` inputs of ``sig``'s structure, dtypes and shapes for
    ``torch.export``: each dynamic dimension gets a size in its range other than 0 and 1
    (which ``torch.export`` specializes), distinct names distinct sizes where the ranges
    allow (so the trace relates no two dimensions by their example sizes), derived
    dimensions the size of their expression."""
    from converter.dims import dim_names, eval_dim

    ranges = {_dim_ident(k, (0, 0)): v for k, v in (sig.dim_ranges).items()}
    per_input = _dims_of(sig)
    names: list[str] = []
    for dims in per_input:
        for _, name, tree in dims:
            for n in [name] if tree is None else sorted(dim_names(tree)):
                if n not in names:
                    names.append(n)
    bounds = {n: tuple((list(ranges.get(n) or []) + [None, None])[:2]) for n in names}
    sizes: dict[str, int] = {}

    def width(n: str) -> float:
        lo, hi = bounds[n]
        return math.inf if hi is None else hi - (lo or 0)

    # the narrowest ranges choose first, so a wide one never takes the only free size of another
    for k, name in enumerate(sorted(names, key=width)):
        lo, hi = bounds[name]
        sizes[name] = _example_size(max(lo or 1, 2), hi, k, set(sizes.values()))
    leaves = []
    for spec, dims in zip(sig.inputs, per_input, strict=True):
        shape = list(spec.shape)
        for a, name, tree in dims:
            shape[a] = sizes[name] if tree is None else eval_dim(tree, sizes)
        leaves.append(torch.zeros(shape, dtype=dtypes.torch_dtype(spec.dtype)))
    args, kwargs = unflatten(sig.in_tree, leaves)
    return tuple(args), dict(kwargs)


def _example_size(lo: int, hi: int | None, k: int, used: set[int]) -> int:
    """The example size of the ``k``-th dynamic dimension, of range ``[lo, hi]`` (``lo`` >= 2):
    ``lo + k`` (at most ``hi``), else the nearest size of the range that no earlier dimension
    took (upwards first), else ``lo + k`` capped (the range holds no free size)."""
    first = lo + k if hi is None else min(lo + k, hi)
    top = hi if hi is not None else first + len(used)
    for size in itertools.chain(range(first, top + 1), range(first - 1, lo - 1, -1)):
        if size not in used:
            return size
    return first


def _derived(tree: Any, dim: Any, where: str, text: str) -> Any:
    """A ``Dim`` expression (``2*seq + 1``) from a parsed dimension expression."""
    import ast

    def ev(node: Any) -> Any:
        if isinstance(node, ast.Name):
            return dim(node.id)
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult)):
            a, b = ev(node.left), ev(node.right)
            if isinstance(node.op, ast.Add):
                return a + b if not isinstance(a, int) else b + a
            if isinstance(node.op, ast.Sub):
                return a - b
            return a * b if not isinstance(a, int) else b * a
        raise ConversionError(f"{where}: dimension {text!r} has no torch.export Dim form")

    return ev(tree)


def _mutated_inputs(sig: Signature, leaves: list[tuple[str, Any]]) -> dict[str, Any]:
    """The user inputs the module updates in place (``signature.mutations`` of kind
    ``input``), by path; each must be a tensor or a writable NumPy array.

    Raises:
        SignatureMismatchError: an updated input cannot be written to (names its path).
    """
    by_path = {input_path(path): value for path, value in leaves}
    out = {}
    for m in sig.mutations:
        if m.kind != "input":
            continue
        value = by_path[m.target]
        if not isinstance(value, torch.Tensor) and not (
            isinstance(value, np.ndarray) and value.flags.writeable
        ):
            raise SignatureMismatchError(
                f"{m.target}: the model updates this input in place, but a {type(value).__name__} "
                "cannot be written to: pass a torch tensor or a writable NumPy array"
            )
        out[m.target] = value
    return out


def _static_signature(sig: Signature, shapes: tuple, refined: Any) -> Signature:
    """``sig`` with the kept arguments' shapes ``shapes`` and the refined module's result
    shapes (the signature :func:`build_graph` traces with)."""
    from dataclasses import replace

    from converter.passes._ir import function_type

    args = list(sig.all_args)
    kept = range(len(args)) if sig.kept_var_idx is None else sig.kept_var_idx
    for i, shape in zip(kept, shapes, strict=True):
        args[i] = replace(args[i], shape=shape)
    results = function_type(mlir.main_function(refined)).results
    outputs = tuple(
        replace(o, shape=tuple(mlir.tensor_type(t).shape)) for o, t in zip(sig.outputs, results, strict=True)
    )
    return sig.with_all_args(args).replace(outputs=outputs)


def to_torch(module: Module, *, device: torch.device | str | None = None) -> TorchModule:
    """Convert a :class:`converter.Module` to a native ``torch.nn.Module``.

    Args:
        module: the module (any source).
        device: where the module computes and its parameters live (default CPU). Host-placed
            calls compute on CPU and host memory kinds live on CPU whatever the device
            (:mod:`converter.backends.torch.placement`); nothing else moves between devices.

    Returns:
        a :class:`TorchModule`; its forward takes the user inputs as torch tensors.

    Raises:
        UnsupportedOpError: listing every StableHLO op (and custom_call target) without a
            rule, with counts and first locations, before anything is traced.
        OpConversionError: a rule failed on an op (names the op and its location).

    A shape-polymorphic module (dynamic dimensions: ``from_torch(dynamic_shapes=...)``, an
    ONNX ``dim_param``) runs inputs of any size its dimension names and ranges allow: each
    new shape specializes it (:func:`converter.passes.shapes.refine`) and traces its graph,
    once per shape; parameters are shared. ``torch.export`` (or ``torch.compile``) tracing
    such a module with symbolic sizes keeps them symbolic: the module is interpreted on the
    ``SymInt`` sizes (:mod:`converter.backends.torch.symbolic`); give ``dynamic_shapes=
    module.export_dynamic_shapes()`` for the module's dimension names and ranges.

    A partitioned module (``mhlo.num_partitions = N``: ``jax.jit(shard_map(...))`` on N
    devices) gives a :class:`converter.backends.torch.distributed.DistributedTorchModule`, run by each
    rank of ``torch.distributed``'s default process group (world size N) on its own shards,
    its collectives mapped to ``torch.distributed`` (docs/distributed.md). It raises
    :class:`converter.DistributedError` for programs it cannot run per rank.
    """
    from converter.passes.shapes import module_is_dynamic

    from .distributed import partition_plan, to_torch_distributed

    module = prepare(module, PREPARE)
    plan = partition_plan(module)
    if plan is not None:
        if module_is_dynamic(module):
            raise DistributedError(
                "a partitioned module with dynamic shapes is not supported: specialize it first"
            )
        TorchInterpreter(module.mlir).check_supported()
        return to_torch_distributed(module, plan, device)
    if module_is_dynamic(module):
        _check_supported_dynamic(module)
        return TorchModule(module, None, device)
    TorchInterpreter(module.mlir).check_supported()
    return TorchModule(module, build_graph(module, device), device)


def _check_supported_dynamic(module: Module) -> None:
    """:meth:`TorchInterpreter.check_supported`, leaving out the shape computations that
    shape refinement removes."""
    from converter.errors import UnsupportedOpError
    from converter.passes.shapes import SHAPE_OPS

    try:
        TorchInterpreter(module.mlir).check_supported()
    except UnsupportedOpError as e:
        missing = [m for m in e.missing if m.name not in SHAPE_OPS]
        if missing:
            raise UnsupportedOpError(missing, e.direction) from None


__all__ = ["PREPARE", "TorchInterpreter", "TorchModule", "build_graph", "param_attr_names", "to_torch"]

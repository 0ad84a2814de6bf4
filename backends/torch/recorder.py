"""A lean ATen graph recorder: ``make_fx(fn, tracing_mode="fake")`` without its per-op machinery.

:func:`record` runs ``fn`` on fake tensors under :class:`Recorder`, a ``TorchDispatchMode``
that appends one ``call_function`` node per ATen call to a ``torch.fx.Graph``: argument
tensors are mapped to their nodes through a dict keyed by the tensor's id, the result's
metadata comes from the ``FakeTensorMode`` underneath (``node.meta["val"]``, as make_fx
sets it), real tensors met for the first time become ``_tensor_constant<i>`` attributes
read by ``get_attr`` nodes, and ``aten.lift_fresh`` is recorded as ``lift_fresh_copy``, so
the graph is the one make_fx builds for the same calls (same ops, same order, same
constants). What make_fx does per op and this recorder does not: proxies, pytree flattening,
dynamo-disable wrappers, the fake-tensor dispatch cache, symbolic sizes. In place of that cache
the recorder remembers, for the process, the result metadata of ATen ops that return new
tensors or one view of their first argument, keyed by the op and its arguments' shapes,
strides, dtypes, devices and scalar values, and rebuilds such a result (``empty_strided`` or
``as_strided`` on the meta device, wrapped as a fake tensor) instead of dispatching it
(see ``_RESULTS``): the same metadata at a third of the cost of a hit in the mode's cache.

One level up, :meth:`Recorder.run_op` remembers the calls a whole StableHLO op's rule records,
for the rules of :data:`REPLAYED_OPS` (which compute from the op's attributes, types, bodies
and static operands and their operands' metadata only), and replays them when an op of the
same key meets operands of the same metadata again, in the same module or a later
conversion: the same nodes (names, targets, arguments, ``meta["val"]``), without running the
rule nor dispatching its calls through torch (see ``_TEMPLATES``). Placeholders of plain CPU
examples are fresh fake tensors of their metadata (``from_tensor`` costs ten times more).

It handles what the torch backend traces on one CPU device without higher-order ops:
``CompositeImplicitAutograd`` ops reaching it are decomposed (as make_fx does), small
constants (one element) are propagated so ``.item()``/``bool()`` of a constant works, and
data-dependent ops on constants compute for real. A higher-order op (``while_loop``,
``cond``) raises :class:`NeedsMakeFx` (see :func:`active`): the caller then traces with
``make_fx``.
"""

from __future__ import annotations

import operator
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import torch
from jaxlib.mlir import ir

from converter._torch_internal import (
    COMPOSITE_IMPLICIT,
    FakeTensor,
    FakeTensorMode,
    OpOverload,
    ShapeEnv,
    TorchDispatchMode,
    backend_dispatch_key,
    current_dispatch_mode,
    fake_from_meta,
    fake_or_proxy_mode_active,
    fast_detach,
    has_kernel,
    in_kernel_invocation_manager,
    meta_empty_strided,
    new_fake_tensor,
    unset_fake_temporarily,
)
from converter.interpreter import fold_constant

aten = torch.ops.aten

_DEVICE = torch.ops.prim.device.default
_SIZE_QUERIES = {aten.size.default, aten.stride.default, aten.storage_offset.default}
_CONSTANT_NUMEL_LIMIT = 1  # as make_fx: constants of at most one element are propagated

_STATE = threading.local()  # .active: the recorders tracing in this thread


def _active_list() -> list[Recorder]:
    stack = getattr(_STATE, "active", None)
    if stack is None:
        stack = _STATE.active = []
    return stack


class NeedsMakeFx(Exception):  # noqa: N818 - a signal to the caller, not an error
    """The traced function needs what only ``make_fx`` records (a higher-order op)."""


def active() -> bool:
    """True while :func:`record` is tracing in this thread (rules that build higher-order
    ops raise :class:`NeedsMakeFx` then)."""
    return bool(_active_list())


def can_record() -> bool:
    """No other dispatch mode (an outer ``FakeTensorMode``, a ``make_fx`` trace) is active:
    the recorder would not see the calls alone."""
    return not fake_or_proxy_mode_active() and current_dispatch_mode() is None


class Recorder(TorchDispatchMode):
    """Records each ATen call into :attr:`graph` (see the module doc); :attr:`root` holds the
    tensor constants the graph reads."""

    def __init__(self, fake_mode: FakeTensorMode, graph: torch.fx.Graph, root: torch.nn.Module):
        super().__init__()
        self.fake_mode = fake_mode
        self.graph = graph
        self.root = root
        #: id(tensor) -> (weak reference to it, node): the node computing each traced tensor
        self.nodes: dict[int, tuple[weakref.ref, torch.fx.Node]] = {}
        #: id(real constant) -> (constant, its fake tensor)
        self.fakes: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        #: id(fake tensor) -> (weak reference to it, real value): known small constants
        self.constants: dict[int, tuple[weakref.ref, torch.Tensor]] = {}
        self._n_constants = 0
        self._decomposes: dict[Any, bool] = {}
        self._names: dict[Any, str] = {}  # node name per op, as make_fx names them
        #: the text of each MLIR type and named attribute met in op keys (uniqued by the
        #: context: equal ones are one object for this module, and few differ)
        self._texts: dict[Any, str] = {}
        #: while an op's rule runs to be remembered (:meth:`run_op`): the calls it records,
        #: as ``(func, args, kwargs, out, name, entry, fresh)``; None otherwise
        self._log: list[tuple] | None = None
        self._replayable = True  # the logged calls can be replayed (see run_op)
        self._entry: tuple | None = None  # the _RESULTS entry of the last _fake_result

    def track(self, value: torch.Tensor, node: torch.fx.Node, fresh: bool = False) -> None:
        """Record that ``node`` computes ``value``, by a weak reference. A ``fresh`` value
        (a factory's result) gets a detached alias as ``node.meta["val"]``: torch's factory
        bindings detach a result something else holds, which would add an ``aten.detach``
        node."""
        self.nodes[id(value)] = (weakref.ref(value), node)
        node.meta["val"] = fast_detach(self.fake_mode, value) if fresh else value

    def node_of(self, value: torch.Tensor) -> torch.fx.Node:
        """The node computing ``value``; a real tensor seen for the first time becomes a
        ``get_attr`` of a new ``_tensor_constant<i>`` attribute."""
        hit = self.nodes.get(id(value))
        if hit is not None and hit[0]() is value:
            return hit[1]
        if isinstance(value, FakeTensor):
            raise NeedsMakeFx("a fake tensor not computed in this trace")
        fake = self.fake_of(value)
        return self.nodes[id(fake)][1]

    def fake_of(self, value: torch.Tensor) -> torch.Tensor:
        """The fake tensor standing for ``value`` in the trace (a real tensor: a constant)."""
        if isinstance(value, FakeTensor):
            return value
        hit = self.fakes.get(id(value))
        if hit is not None and hit[0] is value:
            return hit[1]
        self._replayable = False  # a constant: not a function of the op's operands' metadata
        name = f"_tensor_constant{self._n_constants}"
        self._n_constants += 1
        self.root.register_buffer(name, value, persistent=False)  # a get_attr of a plain attribute warns
        node = self.graph.get_attr(name)
        fake = self.fake_mode.from_tensor(value, static_shapes=True)
        self.fakes[id(value)] = (value, fake)
        self.track(fake, node)
        return fake

    def _decomposes_here(self, func, flat: Sequence[Any]) -> bool:
        device = next((a.device.type for a in flat if isinstance(a, torch.Tensor)), None)
        key = (func, device)
        hit = self._decomposes.get(key)
        if hit is None:
            implicit = COMPOSITE_IMPLICIT
            hit = func not in _SIZE_QUERIES and (
                implicit in func.py_kernels or has_kernel(func.name(), implicit)
            )
            if hit and device is not None:
                hit = not has_kernel(func.name(), backend_dispatch_key(device))
            self._decomposes[key] = hit
        return hit

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is _DEVICE:  # a tensor's device (fake tensors answer it): no node, as make_fx
            return func(*args, **kwargs)
        flat = _flat(args, kwargs)
        if self._decomposes_here(func, flat):
            with self:
                out = func.decompose(*args, **kwargs)
            if out is not NotImplemented:
                return out
        tensors = [a for a in flat if isinstance(a, torch.Tensor)]
        known = [self._constant(t) for t in tensors]
        all_constant = all(k is not None for k in known)
        if torch.Tag.data_dependent_output in func.tags and all_constant:
            self._replayable = False
            real_args, real_kwargs = _map((args, kwargs), self._constant)
            with unset_fake_temporarily():
                return func(*real_args, **real_kwargs)  # a constant's value (item(), bool())
        if func is aten.lift_fresh.default:
            func = aten.lift_fresh_copy.default
        node_args, node_kwargs = _map((args, kwargs), self.node_of)
        fake_args, fake_kwargs = _map((args, kwargs), self.fake_of)
        out = self._fake_result(func, fake_args, fake_kwargs)
        name = self._names.get(func)
        if name is None:
            name = self._names[func] = self.graph._target_to_str(func.overloadpacket.__name__)
        node = _call_node(self.graph, func, tuple(node_args), node_kwargs, name)
        constant = None
        if (
            func is aten.lift_fresh_copy.default
            and known[0] is not None
            and out.numel() <= _CONSTANT_NUMEL_LIMIT
        ):
            with unset_fake_temporarily():
                constant = known[0].clone()
        elif (
            tensors
            and all_constant
            and torch.Tag.nondeterministic_seeded not in func.tags
            and all(o.numel() <= _CONSTANT_NUMEL_LIMIT for o in _tensors_of(out))
            and any(id(t) in self.constants for t in tensors)
        ):
            real_args, real_kwargs = _map((args, kwargs), self._constant)
            with unset_fake_temporarily():
                constant = func(*real_args, **real_kwargs)
        if isinstance(out, torch.Tensor):
            fresh = not tensors or func.overloadpacket.__name__.endswith("_like")
            self.track(out, node, fresh)
            if isinstance(constant, torch.Tensor):
                self.constants[id(out)] = (weakref.ref(out), constant)
            if self._log is not None:
                if constant is not None or self._entry is None or self._entry[0] == "seq":
                    self._replayable = False  # (a sequence entry comes with a sequence result)
                else:
                    self._log.append((func, args, kwargs, out, name, self._entry, fresh))
        elif isinstance(out, (tuple, list)):
            node.meta["val"] = type(out)(
                fast_detach(self.fake_mode, o) if isinstance(o, FakeTensor) else o for o in out
            )
            for i, o in enumerate(out):
                if isinstance(o, torch.Tensor):
                    self.track(o, self.graph.call_function(operator.getitem, (node, i)))
            if self._log is not None:
                if constant is not None or self._entry is None or self._entry[0] != "seq":
                    self._replayable = False
                else:  # a tensor per element (see _entry)
                    self._log.append((func, args, kwargs, out, name, self._entry, None))
        else:
            self._replayable = False
            node.meta["val"] = out
        return out

    def _fake_result(self, func, args: list, kwargs: dict) -> Any:
        """``func`` of fake tensors as the ``FakeTensorMode`` computes it, remembered in
        :data:`_RESULTS` by the arguments' metadata (see :func:`_memo_kind`)."""
        self._entry = None
        kind = _KINDS.get(func)
        if kind is None:
            kind = _KINDS[func] = _memo_kind(func)
        if not kind or (kind == "indexed" and _has_mask_index(args)):
            return func(*args, **kwargs)
        mode = self.fake_mode
        key = _call_key(mode, func, args, kwargs)
        if key is None:
            return func(*args, **kwargs)
        hit = _RESULTS.get(key)
        if hit is not None:
            self._entry = hit
            return _rebuild(mode, hit, args)
        out = func(*args, **kwargs)
        entry = _entry(mode, kind, out, args)
        if entry is not None:
            if len(_RESULTS) >= _RESULTS_LIMIT:
                _RESULTS.clear()
            _RESULTS[key] = entry
            self._entry = entry
        return out

    # ------------------------------------------------------------------ op replay

    def run_op(self, op: Any, operands: Sequence[Any], run: Callable[[], list], rule: Any = None) -> list:
        """``run()``, the rule ``rule`` of the StableHLO ``op`` on ``operands`` (a rule that computes
        from the op's attributes and types and its operands' metadata only: see
        :data:`REPLAYED_OPS`), or the calls it records replayed.

        The first time an op of these attributes and types meets operands of this metadata
        (shape, strides, dtype, device, storage offset, which operands are the same tensor),
        its rule runs and the ATen calls it records are remembered for the process
        (:data:`_TEMPLATES`) when each is one :meth:`_fake_result` remembers and reads only
        operands and earlier results (no constant, no value); the next time the same nodes
        are created, with the same names, targets, arguments and ``meta["val"]`` metadata,
        without running the rule nor dispatching the calls through torch. The rule itself is
        part of the key: a rule registered in place of another (a test's, a user's) is run."""
        if self._log is not None:  # inside an op being remembered (a body): part of its calls
            return run()
        key = self._op_key(op, operands)
        if key is None:
            return run()
        key = (rule, *key)
        template = _TEMPLATES.get(key, _UNSEEN)
        if template is None:
            return run()
        if template is not _UNSEEN:
            return self._replay(template, operands)
        outer = self._log, self._replayable
        self._log, self._replayable = [], True
        try:
            out = run()
            log, replayable = self._log, self._replayable
        finally:
            self._log, self._replayable = outer
        if len(_TEMPLATES) >= _TEMPLATES_LIMIT:
            _TEMPLATES.clear()
        _TEMPLATES[key] = _template(log, operands, out) if replayable else None
        return out

    def _op_key(self, op: Any, operands: Sequence[Any]) -> tuple | None:
        """``op``'s name, attributes and types with its operands' metadata (None when an
        operand is not a tensor traced here, or a known constant)."""
        mode = self.fake_mode
        metas = []
        for t in operands:
            if type(t) is not FakeTensor or id(t) in self.constants:
                return None
            hit = self.nodes.get(id(t))
            if hit is None or hit[0]() is not t:
                return None
            meta = _value_key(mode, t)
            if meta is _NO_KEY:
                return None
            metas.append(meta)
        ids = [id(t) for t in operands]
        same = None if len(set(ids)) == len(ids) else tuple(ids.index(i) for i in ids)  # x + x
        operation = op.mlir
        named = operation.attributes
        if op.name == "stablehlo.constant" and not _splat(named):
            return None  # its rule makes a real tensor (never replayed): no key of its elements
        try:
            text = self._text
            attrs = tuple(text(named[i].name, named[i].attr) for i in range(len(named)))
            types = (
                tuple(text("", v.type) for v in operation.operands),
                tuple(text("", v.type) for v in operation.results),
            )
            body = ()
            if len(operation.regions):  # bodies (reduce, reduce_window), and what static_operand reads
                body = (
                    tuple(_region_key(r) for r in operation.regions),
                    tuple(map(_static_key, operation.operands)),
                )
                if None in body[0] or None in body[1]:
                    return None
        except (TypeError, ValueError):  # attributes the bindings cannot hand out (complex)
            return None
        return (op.name, attrs, types, tuple(metas), same, body)

    def _text(self, name: str, value: Any) -> str:
        """``name=value`` (an attribute) or ``value``'s text (a type), remembered."""
        key = (name, value)
        hit = self._texts.get(key)
        if hit is None:
            hit = self._texts[key] = f"{name}={value}" if name else str(value)
        return hit

    def _replay(self, template: tuple, operands: Sequence[Any]) -> list:
        calls, outputs = template
        mode = self.fake_mode
        values = list(operands)
        nodes: list[Any] = [self.node_of(t) for t in operands]
        for func, args, kwargs, name, entry, fresh in calls:
            fake_args = _fill(args, values)
            out = _rebuild(mode, entry, fake_args)
            node = _call_node(self.graph, func, tuple(_fill(args, nodes)), _fill(kwargs, nodes), name)
            if entry[0] == "seq":  # as __torch_dispatch__: detached values, a getitem per tensor
                node.meta["val"] = type(out)(fast_detach(mode, o) for o in out)
                for i, o in enumerate(out):
                    item = self.graph.call_function(operator.getitem, (node, i))
                    self.track(o, item)
                    values.append(o)
                    nodes.append(item)
                continue
            self.track(out, node, fresh)
            values.append(out)
            nodes.append(node)
        return [values[i] for i in outputs]

    def _constant(self, value: torch.Tensor) -> torch.Tensor | None:
        """The real value of ``value`` when known: a real tensor itself, a tracked constant."""
        if not isinstance(value, FakeTensor):
            return value
        hit = self.constants.get(id(value))
        return hit[1] if hit is not None and hit[0]() is value else None


# ----------------------------------------------------------------------------- op replay
#
# An op's rule, run on fake tensors, records ATen calls whose nodes depend only on the op
# (name, attributes, types) and its operands' metadata, for the rules of REPLAYED_OPS (they
# read nothing else: no other value, no defining op, no interpreter state). Recorder.run_op
# remembers those calls as a template: per call, its target, its arguments with each tensor
# replaced by ("operand" or earlier call) index, its node name, its result's _RESULTS entry
# and whether its meta["val"] is detached (a factory's result); and which values the rule
# returned. Replaying creates the same nodes with results rebuilt from the entries, as
# _fake_result rebuilds a remembered result.

#: StableHLO ops whose rules compute from their attributes, types and operands' metadata only
REPLAYED_OPS = frozenset(
    {
        "stablehlo.broadcast_in_dim", "stablehlo.reshape", "stablehlo.transpose",
        "stablehlo.convert", "stablehlo.add", "stablehlo.subtract", "stablehlo.multiply",
        "stablehlo.divide", "stablehlo.maximum", "stablehlo.minimum", "stablehlo.compare",
        "stablehlo.select", "stablehlo.negate", "stablehlo.dot_general", "stablehlo.sqrt",
        "stablehlo.rsqrt", "stablehlo.exponential", "stablehlo.log", "stablehlo.tanh",
        "stablehlo.logistic", "stablehlo.abs", "chlo.erf", "stablehlo.and", "stablehlo.or",
        "stablehlo.not", "stablehlo.clamp", "stablehlo.power", "stablehlo.iota",
        "stablehlo.constant",  # splats only (a torch.full): see Recorder._op_key
        "stablehlo.convolution", "stablehlo.reduce", "stablehlo.reduce_window",
        "stablehlo.gather", "stablehlo.slice", "stablehlo.concatenate", "stablehlo.pad",
        "stablehlo.reverse", "stablehlo.sign", "stablehlo.floor", "stablehlo.ceil",
        "stablehlo.round_nearest_even", "stablehlo.round_nearest_afz", "stablehlo.sine",
        "stablehlo.cosine", "stablehlo.exponential_minus_one", "stablehlo.log_plus_one",
        "stablehlo.is_finite", "stablehlo.remainder", "stablehlo.xor", "stablehlo.atan2",
    }
)  # fmt: skip

_TEMPLATES: dict[tuple, tuple | None] = {}  # op key -> (calls, outputs); None: not replayable
_TEMPLATES_LIMIT = 50_000
_UNSEEN = object()


class _Ref(int):
    """An index into the values of a template's replay (operands, then call results)."""


def _template(log: list[tuple], operands: Sequence[Any], out: Sequence[Any]) -> tuple | None:
    """The replayable form of the calls ``log`` an op's rule recorded on ``operands``,
    returning ``out``; None when a call reads a tensor that is neither an operand nor an
    earlier call's result, or the rule returns such a tensor."""
    index: dict[int, int] = {}
    for i, t in enumerate(operands):
        index.setdefault(id(t), i)
    count = len(operands)  # values so far: the operands, then each call's result tensors
    calls = []
    for func, args, kwargs, result, name, entry, fresh in log:
        try:
            args_t = tuple(_refs(a, index) for a in args)
            kwargs_t = {k: _refs(v, index) for k, v in kwargs.items()}
        except KeyError:
            return None
        if not any(_nested_ref(a) for a in (*args_t, *kwargs_t.values())):
            args_t = _Flat(args_t)  # refs at the top level only: filled without recursion
        calls.append((func, args_t, kwargs_t, name, entry, fresh))
        for r in result if entry[0] == "seq" else (result,):  # one value per tensor
            index[id(r)] = count
            count += 1
    outputs = []
    for t in out:
        if not isinstance(t, torch.Tensor) or id(t) not in index:
            return None
        outputs.append(index[id(t)])
    return tuple(calls), tuple(outputs)


def _refs(a: Any, index: dict[int, int]) -> Any:
    if isinstance(a, torch.Tensor):
        return _Ref(index[id(a)])  # KeyError: not an operand nor an earlier result
    if isinstance(a, (list, tuple)):
        return type(a)(_refs(b, index) for b in a)
    if isinstance(a, _SCALARS) or isinstance(a, OpOverload):
        return a
    raise KeyError(a)


class _Flat(tuple):
    """A template call's arguments whose only references are top-level ones (lists among
    them are literals, passed as they are)."""


def _nested_ref(a: Any) -> bool:
    """``a`` is a list, tuple or dict holding a reference (at any depth)."""
    if isinstance(a, (list, tuple)):
        return any(type(b) is _Ref or _nested_ref(b) for b in a)
    if isinstance(a, dict):
        return any(type(b) is _Ref or _nested_ref(b) for b in a.values())
    return False


def _fill(a: Any, values: list) -> Any:
    if type(a) is _Flat:
        return [values[b] if type(b) is _Ref else b for b in a]
    if type(a) is _Ref:
        return values[a]
    if isinstance(a, (list, tuple)):
        return type(a)(_fill(b, values) for b in a)
    if isinstance(a, dict):
        return {k: _fill(v, values) for k, v in a.items()}
    return a


def _region_key(region: Any) -> tuple | None:
    """The ops of ``region`` (names, attributes, types, nested bodies, and which block
    argument or earlier result each operand is), without SSA names; None when an op reads
    a value defined outside the region."""
    out = []
    for block in region.blocks:
        index = {a: ("arg", i) for i, a in enumerate(block.arguments)}
        ops: list[tuple] = [tuple(str(a.type) for a in block.arguments)]
        for k, o in enumerate(block.operations):
            o = o.operation
            named = o.attributes
            if any(v not in index for v in o.operands):
                return None
            inner = tuple(_region_key(r) for r in o.regions)
            if None in inner:
                return None
            ops.append(
                (
                    o.name,
                    tuple(str(named[i]) for i in range(len(named))),
                    tuple(index[v] for v in o.operands),
                    tuple(str(r.type) for r in o.results),
                    inner,
                )
            )
            index.update({r: ("op", k, j) for j, r in enumerate(o.results)})
        out.append(tuple(ops))
    return tuple(out)


_STATIC_LIMIT = 16  # elements: larger static operands are not part of a key (never replayed)


def _static_key(value: Any) -> tuple | None:
    """What :meth:`Interpreter.static_operand` gives for ``value``, as a key: ``()`` for a
    computed value, the dtype, shape and bytes of a constant; None for a large constant."""
    arr = fold_constant(value)
    if arr is None:
        return ()
    if arr.size > _STATIC_LIMIT:
        return None
    return (arr.dtype.str, arr.shape, arr.tobytes())


def _splat(named: Any) -> bool:
    """A constant's ``value`` attribute (in its attributes ``named``) holds one value
    repeated (or a single one); False also when the bindings cannot hand it out (complex
    element types: see :attr:`converter.mlir.Op.attrs`)."""
    try:
        return ir.DenseElementsAttr(named["value"]).is_splat
    except (TypeError, ValueError, KeyError):
        return False


def fake_view(value: FakeTensor, shape: list[int]) -> torch.Tensor:
    """``value.reshape(shape)`` of a fake tensor computed outside a trace (a pass editing the
    graph): for a contiguous ``value``, its ``view`` rebuilt from :data:`_RESULTS` as a trace
    does (the same metadata as reshape's view, without the fake mode's dispatch); otherwise
    the fake mode computes it."""
    mode = value.fake_mode if type(value) is FakeTensor else None
    if mode is None or not value.is_contiguous():
        return value.reshape(shape)
    args = [value, list(shape)]
    key = _call_key(mode, aten.view.default, args, {})
    hit = _RESULTS.get(key) if key is not None else None
    if hit is not None:
        return _rebuild(mode, hit, args)
    with mode:
        out = aten.view.default(*args)
    entry = _entry(mode, "view", out, args) if key is not None else None
    if entry is not None:
        if len(_RESULTS) >= _RESULTS_LIMIT:
            _RESULTS.clear()
        _RESULTS[key] = entry
    return out


def current() -> Recorder | None:
    """The recorder tracing in this thread, if any."""
    stack = _active_list()
    return stack[-1] if stack else None


# ----------------------------------------------------------------------------- fake results
#
# The FakeTensorMode's own dispatch cache keys a call by every metadata field of every
# argument and rebuilds its result through generic code: it costs more than most ops' meta
# kernels. The recorder remembers instead, per op and the arguments' shapes, strides,
# dtypes, devices and scalar values, the metadata of the result of two kinds of ops and
# rebuilds it directly: "fresh" ops (neither a view nor mutating their arguments) return
# new tensors of the remembered metadata; "view" ops (one tensor result aliasing their
# first argument, no mutation) return an ``as_strided`` view of that argument. Everything
# else, and any call with a constant fake tensor, a symbolic number or an unknown object
# among its arguments, goes through the mode.

_RESULTS: dict[tuple, tuple] = {}  # call key -> the result's metadata (see _entry)
_RESULTS_LIMIT = 200_000
_KINDS: dict[Any, str] = {}  # op -> "fresh", "view" or "" (not remembered)
_SCALARS = (
    int,
    float,
    bool,
    complex,
    str,
    type(None),
    torch.dtype,
    torch.device,
    torch.layout,
    torch.memory_format,
)


def _memo_kind(func: Any) -> str:
    """How :meth:`Recorder._fake_result` may remember ``func``'s results: ``"fresh"``,
    ``"view"``, ``"indexed"`` (``aten.index.Tensor``: fresh, unless an index is a mask) or
    ``""`` (never: not an ATen op, mutating, several aliasing results, a result shape that
    depends on values)."""
    if not isinstance(func, OpOverload) or func.namespace != "aten":
        return ""
    if func in FakeTensorMode.lift_fns or func is aten.as_strided.default:
        return ""
    if func is aten.index.Tensor:  # its result's shape depends on values only for mask indices
        return "indexed"
    if torch.Tag.dynamic_output_shape in func.tags or torch.Tag.data_dependent_output in func.tags:
        return ""
    schema = func._schema
    if schema.is_mutable or any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments):
        return ""
    if not func.is_view:
        return "fresh"
    first = schema.arguments[0] if schema.arguments else None
    if (
        len(schema.returns) == 1
        and first is not None
        and first.alias_info is not None
        and isinstance(first.type, torch.TensorType)
        and isinstance(schema.returns[0].type, torch.TensorType)
        and schema.returns[0].alias_info is not None
        and set(schema.returns[0].alias_info.before_set) == set(first.alias_info.before_set)
    ):
        return "view"
    return ""


def _has_mask_index(args: list) -> bool:
    """``aten.index.Tensor``'s ``indices`` hold a boolean or byte mask (a result shape that
    depends on the mask's values), or are not the list of tensors and Nones it takes."""
    indices = args[1] if len(args) > 1 else None
    if not isinstance(indices, (list, tuple)):
        return True
    masks = (torch.bool, torch.uint8)
    return any(not isinstance(i, torch.Tensor) or i.dtype in masks for i in indices if i is not None)


def _value_key(mode: FakeTensorMode, a: Any) -> Any:
    """``a``'s part of a call key (``_NO_KEY`` when the call is not to be remembered)."""
    if isinstance(a, torch.Tensor):
        if type(a) is not FakeTensor or a.fake_mode is not mode or a.constant is not None:
            return _NO_KEY
        return (
            a.shape,
            a.stride(),
            a.dtype,
            a.fake_device,
            a.storage_offset(),
            a.requires_grad,
            a.is_conj(),
            a.is_neg(),
        )
    if isinstance(a, (list, tuple)):
        parts = tuple(_value_key(mode, b) for b in a)
        return _NO_KEY if _NO_KEY in parts else (type(a), parts)
    if isinstance(a, _SCALARS) or isinstance(a, OpOverload):
        return (type(a), a)
    return _NO_KEY


_NO_KEY = object()


def _call_key(mode: FakeTensorMode, func: Any, args: list, kwargs: dict) -> tuple | None:
    """A key of ``func(*args, **kwargs)`` (lists keep their bounds), None when the call is not
    to be remembered."""
    key = _value_key(mode, (func, tuple(args), tuple(kwargs.items())))
    return None if key is _NO_KEY else key


def _tensor_entry(mode: FakeTensorMode, t: Any) -> tuple | None:
    if type(t) is not FakeTensor or t.fake_mode is not mode or t.constant is not None:
        return None
    if t.requires_grad or t.is_conj() or t.is_neg() or t.layout != torch.strided:
        return None
    if not all(type(d) is int for d in t.shape):
        return None
    return (tuple(t.shape), t.stride(), t.storage_offset(), t.dtype, t.fake_device)


def _entry(mode: FakeTensorMode, kind: str, out: Any, args: list) -> tuple | None:
    """What :func:`_rebuild` needs to make ``out`` again (None: not remembered)."""
    if kind == "view":
        base = args[0] if args else None
        meta = _tensor_entry(mode, out)
        if (
            meta is None
            or type(base) is not FakeTensor
            or meta[3] != base.dtype
            or meta[4] != base.fake_device
            or out.untyped_storage()._cdata != base.untyped_storage()._cdata
        ):
            return None
        return ("view", meta)
    if isinstance(out, torch.Tensor):
        meta = _tensor_entry(mode, out)
        return None if meta is None or meta[2] != 0 else ("tensor", meta)
    if isinstance(out, (tuple, list)) and out:
        metas = [_tensor_entry(mode, o) for o in out]
        if any(m is None or m[2] != 0 for m in metas):
            return None
        return ("seq", type(out), tuple(metas))
    return None


def _plain_meta(t: torch.Tensor) -> tuple | None:
    """A real CPU tensor's metadata as :func:`_fresh` takes it, when a fresh fake tensor of
    it is what ``FakeTensorMode.from_tensor`` makes of it (strided, dense, offset 0, no grad,
    not a view, no subclass); else None."""
    if (
        type(t) is not torch.Tensor
        or t.device.type != "cpu"
        or t.layout != torch.strided
        or t.requires_grad
        or t._is_view()
        or t.storage_offset() != 0
        or t.is_conj()
        or t.is_neg()
        or t.is_quantized
    ):
        return None
    return (tuple(t.shape), t.stride(), 0, t.dtype, t.device)


def _fresh(mode: FakeTensorMode, meta: tuple) -> FakeTensor:
    shape, stride, _, dtype, device = meta
    # a fresh meta tensor: nothing to find in the converter's memo
    return new_fake_tensor(mode, meta_empty_strided(shape, stride, dtype), device)


def _rebuild(mode: FakeTensorMode, entry: tuple, args: list) -> Any:
    what = entry[0]
    if what == "tensor":
        return _fresh(mode, entry[1])
    if what == "seq":
        return entry[1](_fresh(mode, m) for m in entry[2])
    shape, stride, offset, _, device = entry[1]
    with in_kernel_invocation_manager(mode):
        t = aten.as_strided.default(args[0], shape, stride, offset)
    return fake_from_meta(mode, t, device)


def _call_node(graph: torch.fx.Graph, func: Any, args: tuple, kwargs: dict, name: str) -> torch.fx.Node:
    """``graph.create_node("call_function", func, args, kwargs, name=name)``, its arguments
    set after: ``create_node`` walks every argument (a pytree walk, an eighth of a replayed
    op) for raw ``SymInt``s to warn about, which a trace on static shapes has none of."""
    node = graph.create_node("call_function", func, None, None, name=name)
    node.args = args
    if kwargs:
        node.kwargs = kwargs
    return node


def _flat(args: tuple, kwargs: dict) -> list[Any]:
    out: list[Any] = []
    for a in (*args, *kwargs.values()):
        if isinstance(a, (list, tuple)):
            out.extend(a)
        else:
            out.append(a)
    return out


def _map(tree: tuple[tuple, dict], fn: Callable[[torch.Tensor], Any]) -> tuple[list, dict]:
    """``(args, kwargs)`` with every tensor (also inside a list or tuple) replaced by ``fn``
    of it."""

    def one(a):
        if isinstance(a, torch.Tensor):
            return fn(a)
        if isinstance(a, (list, tuple)):
            return type(a)(one(b) for b in a)
        return a

    args, kwargs = tree
    return [one(a) for a in args], {k: one(v) for k, v in kwargs.items()}


def _tensors_of(out: Any) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [o for o in out if isinstance(o, torch.Tensor)]
    return []


def record(
    fn: Callable[..., Sequence[Any]], examples: Sequence[torch.Tensor], *, recompile: bool = True
) -> torch.fx.GraphModule:
    """Trace ``fn(*examples)`` (returning a sequence of tensors) into a GraphModule of ATen ops
    taking tensors of the examples' shapes, dtypes and devices and returning a tuple: the
    graph ``make_fx(fn, tracing_mode="fake")`` records (placeholders ``arg<i>_1``, constants
    ``_tensor_constant<i>``, ``node.meta["val"]`` fake tensors). With ``recompile=False`` the
    module's code is not generated: the caller edits the graph and calls ``recompile()``
    before running it (code generation is a tenth of a trace).

    Raises:
        NeedsMakeFx: ``fn`` builds a higher-order op (only ``make_fx`` traces those).
        Whatever ``fn`` raises.
    """
    root = torch.fx.GraphModule(torch.nn.Module(), torch.fx.Graph())
    graph = torch.fx.Graph(owning_module=root)
    fake_mode = FakeTensorMode(allow_fallback_kernels=True, shape_env=ShapeEnv(), static_shapes=True)
    fake_mode.cache_enabled = False  # the recorder remembers results itself (_RESULTS), at less cost
    recorder = Recorder(fake_mode, graph, root)
    fakes = []
    for i, example in enumerate(examples):
        meta = _plain_meta(example)
        if meta is not None:  # a fresh fake of its metadata: from_tensor's, at a tenth of its cost
            fake = _fresh(fake_mode, meta)
        else:
            fake = fake_mode.from_tensor(example, static_shapes=True)
        recorder.track(fake, graph.placeholder(f"arg{i}_1"))
        fakes.append(fake)
    _active_list().append(recorder)
    try:
        with fake_mode, recorder:
            outs = fn(*fakes)
            result = tuple(recorder.node_of(o) for o in outs)
    finally:
        _active_list().pop()
    fake_mode.cache_enabled = True  # the passes after the trace compute on these fake tensors
    graph.output(result)
    root._graph = graph  # the graph property's setter would generate the code
    if recompile:
        root.recompile()
    return root


__all__ = [
    "REPLAYED_OPS",
    "NeedsMakeFx",
    "Recorder",
    "active",
    "can_record",
    "current",
    "fake_view",
    "record",
]

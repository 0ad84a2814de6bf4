"""A Module's calling convention: pytree structure, one spec per leaf, parameters.

Pytree structure is stored as JSON (no pickle) with the leaf order of its source framework
(``torch.utils._pytree`` keeps dict insertion order; JAX sorts dict keys), so a signature
read on a machine without the source code still flattens and unflattens correctly.

A tree spec is one of::

    {"kind": "leaf"}
    {"kind": "none"}
    {"kind": "tuple" | "list", "children": [spec, ...]}
    {"kind": "dict", "keys": [k, ...], "children": [spec, ...]}
    {"kind": "dict", "keys": [...], "children": [...], "type": "CausalLMOutput"}  # a custom
        node (dataclass, ModelOutput, namedtuple) materialized as a dict
    {"kind": "static", "value": 3.0}  # a non-tensor leaf specialized at conversion time
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import jax
import numpy as np

from . import dtypes
from .errors import InputTypeError, SignatureMismatchError

TreeSpec = dict[str, Any]
LEAF: TreeSpec = {"kind": "leaf"}

#: :class:`Signature` fields that manifests written before they existed kept in ``extra``
_TYPED_EXTRA = ("dim_ranges", "narrowed", "tied", "frozen", "non_persistent", "training", "host_functions")


def _jsonable(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


@dataclass(frozen=True)
class LeafSpec:
    """One tensor of the signature.

    Attributes:
        name: the parameter's torch name, or the input's path (``args[0]``, ``kwargs['mask']``).
        shape: dimensions; ``None`` or a string for a dynamic dimension.
        dtype: canonical dtype name (:mod:`converter.dtypes`).
        kind: ``parameter``, ``buffer``, ``constant``, ``input`` (user input) or ``rng``
            (the PRNG key, :data:`RNG_KEY`).
        memory_kind: placement annotation (``device``, ``pinned_host``...) or None.
        sharding: the leaf's partition spec over :attr:`Signature.mesh`, one entry per
            dimension: None (not sharded), an axis name, or a tuple of axis names (sharded
            over their product, major to minor), as ``jax.sharding.PartitionSpec(*sharding)``;
            None for a leaf without a sharding (replicated, or a module without a mesh).
            See :mod:`converter.sharding`.
    """

    name: str
    shape: tuple
    dtype: str
    kind: str = "input"
    memory_kind: str | None = None
    sharding: tuple | None = None

    @property
    def size(self) -> int:
        """Element count (dynamic dimensions count as 1)."""
        return math.prod(d if isinstance(d, int) else 1 for d in self.shape)

    def to_json(self) -> dict:
        d = asdict(self)
        d["shape"] = list(self.shape)
        if self.sharding is None:  # files without shardings stay readable by older versions
            del d["sharding"]
        else:
            d["sharding"] = [list(e) if isinstance(e, tuple) else e for e in self.sharding]
        return d

    @staticmethod
    def from_json(d: dict) -> LeafSpec:
        sharding = d.get("sharding")
        if sharding is not None:
            sharding = tuple(tuple(e) if isinstance(e, list) else e for e in sharding)
        return LeafSpec(**{**d, "shape": tuple(d["shape"]), "sharding": sharding})


#: The PRNG key argument of a module with random ops: a raw threefry key, ``uint32[2]``.
RNG_KEY = LeafSpec("rng", (2,), "uint32", "rng")

#: Name prefix of the outputs carrying the new values of mutated state: the output for buffer
#: ``bn.running_mean`` is ``updated:bn.running_mean``, for user input ``args[1]``
#: ``updated:args[1]`` (the ONNX graph outputs have these names).
UPDATE_PREFIX = "updated:"


@dataclass(frozen=True)
class Mutation:
    """State the source model updates in place (torch.export's ``BUFFER_MUTATION`` and
    ``USER_INPUT_MUTATION`` outputs).

    Attributes:
        kind: ``buffer`` (an entry of ``signature.params``) or ``input`` (a user input leaf).
        target: the buffer's name in ``signature.params``, or the input's path
            (``args[1]``, ``kwargs['cache']``), as in ``signature.inputs``.
    """

    kind: str
    target: str

    def to_json(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_json(d: dict) -> Mutation:
        return Mutation(d["kind"], d["target"])


@dataclass(frozen=True)
class Signature:
    """The calling convention of a :class:`converter.Module`.

    ``@main`` takes ``params`` first, then the user inputs flattened by ``in_tree``, then the
    PRNG key ``rng`` when the module draws random numbers, unless ``kept_var_idx`` says some
    were removed by dead-argument elimination: then ``@main`` takes only the arguments at
    those indices (into :attr:`all_args`), in order.

    Attributes:
        params: parameters, buffers and lifted constants, in ``@main`` order.
        inputs: user input leaves, in flattening order of ``in_tree``.
        outputs: output leaves, in flattening order of ``out_tree``.
        in_tree: structure of the user inputs ``(args, kwargs)`` as a 2-tuple spec.
        out_tree: structure of the outputs.
        kept_var_idx: indices of the kept ``@main`` arguments, or None when all are kept.
        rng: the PRNG key argument (:data:`RNG_KEY`, a raw ``uint32[2]`` threefry key as
            ``jax.random.PRNGKey`` makes) of a module with random ops (dropout,
            ``torch.rand``...), or None. It is not part of ``in_tree``: backends supply it
            (the JAX callable takes ``rng=``, the torch module draws it from torch's
            generator).
        mutations: state updated in place by the source (:class:`Mutation`), one per
            output after the ``out_tree`` ones: ``outputs[len(outputs) - len(mutations) + i]``
            is the new value of ``mutations[i].target`` (named ``UPDATE_PREFIX + target``).
            Backends write it back (the JAX function into its ``params``, the torch module
            into its buffers) or return it (``apply(..., mutable=True)``, ONNX outputs).
        mesh: the device mesh a partitioned module runs on, ``{axis name: size}`` in mesh
            order (``{"x": 4, "y": 2}``: 8 devices, device ``k`` at position ``k`` of the
            row-major grid), read from its ``sdy.mesh``; None for a one-device module.
            Each leaf's :attr:`LeafSpec.sharding` is a partition spec over it.
        dim_ranges: ``{dimension name: [lower, upper or None]}``, the declared ranges of
            the symbolic dimensions (``torch.export.Dim(min=, max=)``, ``jax.export``
            constraints) tighter than the implicit ``>= 1``/unbounded; empty when none.
        narrowed: ``{leaf name: source dtype}`` of the leaves a 64-bit → 32-bit pass
            narrowed (:mod:`converter.passes.narrow`); the backends cast them back.
        tied: ``{alias: parameter name}``: a second name of one tensor (tied weights such as
            GPT-2's embedding and LM head), restored under each name in state dicts.
        frozen: parameters that take no gradient (``requires_grad=False`` in torch).
        non_persistent: buffers left out of a torch ``state_dict()`` (``persistent=False``).
        training: the train/eval mode a torch source's mode-dependent layers (BatchNorm,
            dropout) were traced in, or None when the computation does not depend on it.
        host_functions: the functions of the module that run on the host
            (:mod:`converter.passes.placement`).
        extra: other metadata, JSON-serializable; the typed fields above were keys of it
            before, and reading such a dict (:meth:`from_json`, or ``extra=`` given to the
            constructor) moves those keys into their fields.
    """

    params: tuple[LeafSpec, ...]
    inputs: tuple[LeafSpec, ...]
    outputs: tuple[LeafSpec, ...]
    in_tree: TreeSpec
    out_tree: TreeSpec
    kept_var_idx: tuple[int, ...] | None = None
    rng: LeafSpec | None = None
    extra: dict = field(default_factory=dict)
    mutations: tuple[Mutation, ...] = ()
    mesh: dict[str, int] | None = None
    dim_ranges: dict[str, list[int | None]] = field(default_factory=dict)
    narrowed: dict[str, str] = field(default_factory=dict)
    tied: dict[str, str] = field(default_factory=dict)
    frozen: tuple[str, ...] = ()
    non_persistent: tuple[str, ...] = ()
    training: bool | None = None
    host_functions: tuple[str, ...] = ()

    def __post_init__(self):
        # metadata that used to be ``extra`` keys (saved manifests, callers passing ``extra=``)
        extra = dict(self.extra or {})
        moved = {k: extra.pop(k) for k in _TYPED_EXTRA if k in extra}
        set_ = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731 (frozen)
        set_("extra", extra)
        for name, value in moved.items():
            if value is not None and not getattr(self, name):
                set_(name, value)
        set_("dim_ranges", {str(k): list(v) for k, v in (self.dim_ranges or {}).items()})
        set_("narrowed", {str(k): str(v) for k, v in (self.narrowed or {}).items()})
        set_("tied", {str(k): str(v) for k, v in (self.tied or {}).items()})
        for name in ("frozen", "non_persistent", "host_functions"):
            set_(name, tuple(getattr(self, name) or ()))
        if self.training is not None:
            set_("training", bool(self.training))

    @property
    def num_devices(self) -> int:
        """How many devices the module runs on: the product of :attr:`mesh`'s sizes (1 without)."""
        return math.prod(self.mesh.values()) if self.mesh else 1

    @property
    def user_outputs(self) -> tuple[LeafSpec, ...]:
        """The outputs of ``out_tree``: :attr:`outputs` without the mutation outputs."""
        return self.outputs[: len(self.outputs) - len(self.mutations)]

    def split_outputs(self, outs: list) -> tuple[list, list]:
        """``@main``'s results ``outs`` as (user output leaves, new values of
        :attr:`mutations` in order)."""
        n = len(self.outputs) - len(self.mutations)
        return list(outs[:n]), list(outs[n:])

    @property
    def all_args(self) -> tuple[LeafSpec, ...]:
        """Every argument of the full (un-pruned) signature: params, inputs, then the PRNG
        key if any."""
        return self.params + self.inputs + ((self.rng,) if self.rng is not None else ())

    def with_all_args(self, args: tuple[LeafSpec, ...] | list[LeafSpec]) -> Signature:
        """This signature with :attr:`all_args` replaced by ``args`` (same count and order)."""
        n_p, n_i = len(self.params), len(self.inputs)
        if len(args) != len(self.all_args):
            raise ValueError(f"expected {len(self.all_args)} argument specs, got {len(args)}")
        rng = args[n_p + n_i] if self.rng is not None else None
        return self.replace(params=tuple(args[:n_p]), inputs=tuple(args[n_p : n_p + n_i]), rng=rng)

    def to_json(self) -> dict:
        return {
            "params": [p.to_json() for p in self.params],
            "inputs": [p.to_json() for p in self.inputs],
            "outputs": [p.to_json() for p in self.outputs],
            "in_tree": self.in_tree,
            "out_tree": self.out_tree,
            "kept_var_idx": None if self.kept_var_idx is None else list(self.kept_var_idx),
            "rng": None if self.rng is None else self.rng.to_json(),
            "extra": self.extra,
            **({"mutations": [m.to_json() for m in self.mutations]} if self.mutations else {}),
            **({"mesh": dict(self.mesh)} if self.mesh else {}),
            **{k: v for k in _TYPED_EXTRA if (v := _jsonable(getattr(self, k))) not in (None, {}, [])},
        }

    @staticmethod
    def from_json(d: dict) -> Signature:
        kept = d.get("kept_var_idx")
        return Signature(
            params=tuple(LeafSpec.from_json(p) for p in d["params"]),
            inputs=tuple(LeafSpec.from_json(p) for p in d["inputs"]),
            outputs=tuple(LeafSpec.from_json(p) for p in d["outputs"]),
            in_tree=d["in_tree"],
            out_tree=d["out_tree"],
            kept_var_idx=None if kept is None else tuple(kept),
            rng=None if d.get("rng") is None else LeafSpec.from_json(d["rng"]),
            extra=d.get("extra", {}),
            mutations=tuple(Mutation.from_json(m) for m in d.get("mutations", ())),
            mesh={str(k): int(v) for k, v in d["mesh"].items()} if d.get("mesh") else None,
            **{k: d[k] for k in _TYPED_EXTRA if d.get(k) is not None},
        )

    def replace(self, **changes) -> Signature:
        return replace(self, **changes)


# --------------------------------------------------------------------------- pytrees


def flatten(obj: Any, spec: TreeSpec, path: str = "") -> list[tuple[str, Any]]:
    """Flatten ``obj`` following ``spec``; returns ``(path, leaf)`` pairs.

    Strict, as a call of the converted model must be: a tuple or list of another length
    (extra or missing positional arguments), a plain dict with keys ``spec`` lacks (unknown
    or misspelled keyword arguments such as ``maks=``) or without keys it has, and a
    non-tensor (``static``) leaf whose value differs from the one the conversion
    specialized on (a tensor in its place included) are all refused.

    Raises:
        SignatureMismatchError: ``obj`` does not have the structure of ``spec``; names the
            argument path where they differ (``args[1]['mask']``, ``kwargs``) and what
            was expected.
    """
    kind = spec["kind"]
    where = input_path(path) or "input"
    if kind == "leaf":
        return [(path, obj)]
    if kind == "static":
        if not _same_static(obj, spec["value"]):
            raise SignatureMismatchError(
                f"{where}: this input was specialized to {spec['value']!r} at conversion time, "
                f"got {_describe_value(obj)}; convert again with the new value"
            )
        return []
    if kind == "none":
        if obj is not None:
            raise SignatureMismatchError(f"{where}: expected None, got {type(obj).__name__}")
        return []
    if kind in ("tuple", "list"):
        if not isinstance(obj, (tuple, list)) or len(obj) != len(spec["children"]):
            what = " positional argument(s)" if path == "[0]" else ""
            raise SignatureMismatchError(
                f"{where}: expected a {kind} of {len(spec['children'])}{what}, got {_describe(obj)}"
            )
        out = []
        for i, (child, cspec) in enumerate(zip(obj, spec["children"], strict=True)):
            out += flatten(child, cspec, f"{path}[{i}]")
        return out
    if kind == "dict":
        if isinstance(obj, dict):
            getter = obj.__getitem__
            present = set(obj)
            extra = [k for k in obj if k not in spec["keys"]]
            if extra and "type" not in spec:  # custom nodes (ModelOutput) may hold more
                what = "keyword argument(s)" if path == "[1]" else "key(s)"
                raise SignatureMismatchError(
                    f"{where}: unexpected {what} {extra}; the conversion took {list(spec['keys'])}"
                )
        else:
            getter = lambda k: getattr(obj, k)  # noqa: E731 - dataclass / ModelOutput nodes
            present = {k for k in spec["keys"] if hasattr(obj, k)}
        missing = [k for k in spec["keys"] if k not in present]
        if missing:
            raise SignatureMismatchError(f"{where}: missing key(s) {missing}")
        out = []
        for k, cspec in zip(spec["keys"], spec["children"], strict=True):
            out += flatten(getter(k), cspec, f"{path}[{k!r}]")
        return out
    raise ValueError(f"unknown tree spec kind {kind!r}")


def _same_static(obj: Any, value: Any) -> bool:
    """Whether ``obj`` is the specialized value ``value``: equal, and of the same number kind
    (bool, integer, float, complex): ``True == 1 == 1.0`` in Python, but the model may
    compute with the type (``isinstance``, the dtype of ``x + s``), and torch.export
    specializes each differently; an array or tensor never is."""
    if hasattr(obj, "shape") or hasattr(obj, "__array__"):
        return False
    if _number_kind(obj) != _number_kind(value):
        return False
    if isinstance(obj, float) and isinstance(value, float) and math.isnan(obj) and math.isnan(value):
        return True
    try:
        return bool(obj == value)
    except Exception:  # noqa: BLE001 - an object without a truthy ==: not the value
        return False


def _number_kind(v: Any) -> str | None:
    """``bool``, ``int``, ``float`` or ``complex`` for a Python number, else None."""
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, numbers.Integral):
        return "int"
    if isinstance(v, numbers.Real):
        return "float"
    if isinstance(v, numbers.Complex):
        return "complex"
    return None


def _describe_value(obj: Any) -> str:
    if hasattr(obj, "shape") and hasattr(obj, "dtype"):
        return f"an array {getattr(obj.dtype, 'name', obj.dtype)}{list(obj.shape)}"
    return repr(obj)


def unflatten(spec: TreeSpec, leaves: list[Any]) -> Any:
    """Rebuild a structure of ``spec`` from its leaves (custom nodes come back as dicts)."""
    it = iter(leaves)
    out = _unflatten(spec, it)
    rest = list(it)
    if rest:
        raise ValueError(f"{len(rest)} leaves left over")
    return out


def _unflatten(spec: TreeSpec, it) -> Any:
    kind = spec["kind"]
    if kind == "leaf":
        return next(it)
    if kind == "none":
        return None
    if kind == "static":
        return spec["value"]
    children = [_unflatten(c, it) for c in spec["children"]]
    if kind == "tuple":
        return tuple(children)
    if kind == "list":
        return children
    return dict(zip(spec["keys"], children, strict=True))


def num_leaves(spec: TreeSpec) -> int:
    """How many leaves ``spec`` has."""
    kind = spec["kind"]
    if kind == "leaf":
        return 1
    if kind in ("none", "static"):
        return 0
    return sum(num_leaves(c) for c in spec["children"])


def leaf_paths(spec: TreeSpec, prefix: str = "") -> list[str]:
    """The path of every leaf, in flattening order (``args[0]``, ``kwargs['mask']``)."""
    kind = spec["kind"]
    if kind == "leaf":
        return [prefix]
    if kind in ("none", "static"):
        return []
    if kind in ("tuple", "list"):
        return [p for i, c in enumerate(spec["children"]) for p in leaf_paths(c, f"{prefix}[{i}]")]
    pairs = zip(spec["keys"], spec["children"], strict=True)
    return [p for k, c in pairs for p in leaf_paths(c, f"{prefix}[{k!r}]")]


def args_tree(args_spec: TreeSpec, kwargs_spec: TreeSpec) -> TreeSpec:
    """The ``(args, kwargs)`` input tree."""
    return {"kind": "tuple", "children": [args_spec, kwargs_spec]}


#: Python values a tree spec keeps as ``static`` leaves (specialized at conversion time)
STATIC_TYPES = (bool, int, float, complex, str)


def is_array(x: Any) -> bool:
    """True for the array-like leaves JAX traces (jax/NumPy arrays, ``ShapeDtypeStruct``,
    NumPy scalars, any object with ``shape`` and ``dtype``); Python scalars and strings are
    static."""
    return isinstance(x, (jax.Array, np.ndarray, np.generic, jax.ShapeDtypeStruct)) or (
        hasattr(x, "shape") and hasattr(x, "dtype") and not isinstance(x, STATIC_TYPES)
    )


def tree_spec(
    obj: Any,
    *,
    leaf: Callable[[Any], bool] = is_array,
    pytree_nodes: bool = True,
    path: str = "",
) -> TreeSpec:
    """The JSON tree spec of a pytree, in JAX's leaf order (dict keys sorted): the one
    builder for ``from_jax``'s inputs and outputs and ``call_jax``/``call_torch``'s trees.

    Objects ``leaf`` accepts (default :func:`is_array`) become ``leaf``; None becomes
    ``none``; bool, int, float, complex and str (:data:`STATIC_TYPES`) become ``static``
    with their value; tuples, lists and dicts their kinds. With ``pytree_nodes``, other
    JAX-registered pytree nodes (named tuples, dataclasses, flax structs) become dicts of
    their children keyed by JAX's key paths and tagged with their type name.

    Raises:
        InputTypeError: (a ``TypeError``) an object that is none of those, naming its path
            in the ``(args, kwargs)`` tree (``args[1]['mask']``).
    """
    if leaf(obj):
        return dict(LEAF)
    if obj is None:
        return {"kind": "none"}
    if isinstance(obj, STATIC_TYPES):
        return {"kind": "static", "value": obj}
    sub = lambda c, key: tree_spec(c, leaf=leaf, pytree_nodes=pytree_nodes, path=f"{path}[{key!r}]")  # noqa: E731
    if type(obj) in (tuple, list):
        return {"kind": type(obj).__name__, "children": [sub(c, i) for i, c in enumerate(obj)]}
    if type(obj) is dict:
        keys = sorted(obj)
        return {"kind": "dict", "keys": keys, "children": [sub(obj[k], k) for k in keys]}
    children = None
    if pytree_nodes:
        children, _ = jax.tree_util.tree_flatten_with_path(obj, is_leaf=lambda x: x is not obj)
        if len(children) == 1 and children[0][0] == ():  # not a registered pytree node
            children = None
    if children is None:
        nodes = ", dict or a JAX pytree node" if pytree_nodes else " or dict"
        raise InputTypeError(
            f"{input_path(path) or 'input'}: unsupported type {type(obj).__name__} "
            f"(expected an array, None, bool, int, float, complex, str, tuple, list{nodes})"
        )
    keys = [_key_name(kp[0]) for kp, _ in children]
    return {
        "kind": "dict",
        "keys": keys,
        "children": [sub(c, k) for k, (_, c) in zip(keys, children, strict=True)],
        "type": type(obj).__name__,
    }


def _key_name(key: Any) -> Any:
    """The name of one JAX key-path entry (``DictKey.key``, ``GetAttrKey.name``,
    ``SequenceKey.idx``)."""
    for attr in ("key", "name", "idx"):
        if hasattr(key, attr):
            return getattr(key, attr)
    return str(key)


def input_path(path: str) -> str:
    """Render a path into the ``(args, kwargs)`` tree the way a user writes it:
    ``[0][1]['mask']`` → ``args[1]['mask']``, ``[1]['mask']`` → ``kwargs['mask']``."""
    if path.startswith("[0]"):
        return "args" + path[3:]
    if path.startswith("[1]"):
        return "kwargs" + path[3:]
    return path


def check_leaf(path: str, value: Any, spec: LeafSpec) -> None:
    """Check one input's shape and dtype against its spec.

    Raises:
        SignatureMismatchError: naming ``path`` and the expected and actual shape and dtype.
    """
    shape = tuple(getattr(value, "shape", ()))
    dtype = getattr(value, "dtype", None)
    dname = dtypes.name_of(dtype) if dtype is not None else type(value).__name__
    ok_rank = len(shape) == len(spec.shape)
    ok_shape = ok_rank and all(
        not isinstance(e, int) or e == a for e, a in zip(spec.shape, shape, strict=True)
    )
    if not ok_shape or dname != spec.dtype:
        raise SignatureMismatchError(
            f"{path}: expected shape {list(spec.shape)} dtype {spec.dtype}, "
            f"got shape {list(shape)} dtype {dname}"
        )


def _describe(obj: Any) -> str:
    if isinstance(obj, (tuple, list)):
        return f"a {type(obj).__name__} of {len(obj)}"
    return type(obj).__name__

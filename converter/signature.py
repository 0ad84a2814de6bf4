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
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from . import dtypes
from .errors import SignatureMismatchError

TreeSpec = dict[str, Any]
LEAF: TreeSpec = {"kind": "leaf"}


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
    """

    name: str
    shape: tuple
    dtype: str
    kind: str = "input"
    memory_kind: str | None = None

    @property
    def size(self) -> int:
        """Element count (dynamic dimensions count as 1)."""
        return math.prod(d if isinstance(d, int) else 1 for d in self.shape)

    def to_json(self) -> dict:
        d = asdict(self)
        d["shape"] = list(self.shape)
        return d

    @staticmethod
    def from_json(d: dict) -> LeafSpec:
        return LeafSpec(**{**d, "shape": tuple(d["shape"])})


#: The PRNG key argument of a module with random ops: a raw threefry key, ``uint32[2]``.
RNG_KEY = LeafSpec("rng", (2,), "uint32", "rng")


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
    """

    params: tuple[LeafSpec, ...]
    inputs: tuple[LeafSpec, ...]
    outputs: tuple[LeafSpec, ...]
    in_tree: TreeSpec
    out_tree: TreeSpec
    kept_var_idx: tuple[int, ...] | None = None
    rng: LeafSpec | None = None
    extra: dict = field(default_factory=dict)

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
        )

    def replace(self, **changes) -> Signature:
        return replace(self, **changes)


# --------------------------------------------------------------------------- pytrees


def flatten(obj: Any, spec: TreeSpec, path: str = "") -> list[tuple[str, Any]]:
    """Flatten ``obj`` following ``spec``; returns ``(path, leaf)`` pairs.

    Raises:
        SignatureMismatchError: ``obj`` does not have the structure of ``spec``; names the
            path where they differ.
    """
    kind = spec["kind"]
    if kind == "leaf":
        return [(path, obj)]
    if kind == "static":
        if obj != spec["value"]:
            raise SignatureMismatchError(
                f"{input_path(path) or 'input'}: this input was specialized to {spec['value']!r} "
                f"at conversion time, got {obj!r}"
            )
        return []
    if kind == "none":
        if obj is not None:
            raise SignatureMismatchError(f"{path or 'input'}: expected None, got {type(obj).__name__}")
        return []
    if kind in ("tuple", "list"):
        if not isinstance(obj, (tuple, list)) or len(obj) != len(spec["children"]):
            raise SignatureMismatchError(
                f"{path or 'input'}: expected a {kind} of {len(spec['children'])}, got {_describe(obj)}"
            )
        out = []
        for i, (child, cspec) in enumerate(zip(obj, spec["children"], strict=True)):
            out += flatten(child, cspec, f"{path}[{i}]")
        return out
    if kind == "dict":
        if isinstance(obj, dict):
            getter = obj.__getitem__
            present = set(obj)
        else:
            getter = lambda k: getattr(obj, k)  # noqa: E731 - dataclass / ModelOutput nodes
            present = {k for k in spec["keys"] if hasattr(obj, k)}
        missing = [k for k in spec["keys"] if k not in present]
        if missing:
            raise SignatureMismatchError(f"{path or 'input'}: missing key(s) {missing}")
        out = []
        for k, cspec in zip(spec["keys"], spec["children"], strict=True):
            out += flatten(getter(k), cspec, f"{path}[{k!r}]")
        return out
    raise ValueError(f"unknown tree spec kind {kind!r}")


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

"""Run one ONNX backend node-test case through ``from_onnx`` and a backend, and compare at
the case's own rtol/atol (``onnx.backend.test.loader.load_model_tests(kind="node")``).

onnx makes its node cases by running every case module's ``export`` functions, reference
implementations included (~5 CPU s, most of it the pooling references), so a test
collection that only needs the cases' names and operators reads them from
``onnx_node_index.json`` (:func:`case_names`, :func:`case_ops`), and a test loads only its
own case's module (:func:`load_case`). The index is for one onnx version; with another, every
function here loads all cases as before. Regenerate it with
``python -m tests.frontends.onnx.onnx_node_cases`` (from the repository root);
``test_node_conformance.py`` checks it against the loader."""

from __future__ import annotations

import importlib
import json
import pkgutil
import re
from functools import cache, lru_cache
from pathlib import Path

import numpy as np
import onnx
from converter.frontends.onnx import StaticValueRequired, from_onnx
from onnx import numpy_helper
from onnx.backend.test.loader import load_model_tests

from tests.compare import assert_complex_close

#: ``{"onnx": version, "cases": {name: [module, [[domain, op_type, since_version], ...], [form, ...]]}}``,
#: each module named within :data:`PACKAGE`, each form as :func:`node_forms` writes it
INDEX = Path(__file__).with_name("onnx_node_index.json")
PACKAGE = "onnx.backend.test.case.node"


@cache
def node_cases() -> dict:
    """Every node test case by name."""
    return {c.name: c for c in load_model_tests(kind="node")}


def node_ops(case) -> list[tuple[str, str, int]]:
    """The ``(domain, op_type, since_version)`` of ``case``'s top-level nodes at the model's
    opset for the node's domain (``ai.onnx`` for ``""``), sorted, each once; nodes of an
    operator ``onnx.defs`` does not know are left out."""
    from converter.frontends.onnx.registry import canonical_domain

    model = case.model
    opsets = {canonical_domain(o.domain): o.version for o in model.opset_import}
    out = set()
    for node in model.graph.node:
        domain = canonical_domain(node.domain)
        try:
            schema = onnx.defs.get_schema(
                node.op_type, opsets.get(domain, 1), "" if domain == "ai.onnx" else domain
            )
        except Exception:  # noqa: BLE001 - unknown op: no rule to cover
            continue
        out.add((domain, node.op_type, schema.since_version))
    return sorted(out)


def node_forms(case) -> list[str]:
    """The forms of ``case``'s top-level nodes, sorted, each once: the op, its attributes (with
    the value of a string attribute and of a 0/1 integer one, a flag or mode, other than
    ``axis``; the name of any other) and which inputs are given, e.g.
    ``ai.onnx::GRU[hidden_size,linear_before_reset=1](111000)``. Cases of the same rule with
    different forms take different paths through it (a mode, a flag, an optional input)."""
    from converter.frontends.onnx.registry import canonical_domain

    out = set()
    for node in case.model.graph.node:
        attrs = []
        for a in sorted(node.attribute, key=lambda a: a.name):
            if a.type == onnx.AttributeProto.STRING:
                attrs.append(f"{a.name}={a.s.decode(errors='replace')}")
            elif a.type == onnx.AttributeProto.INT and a.i in (0, 1) and a.name != "axis":
                attrs.append(f"{a.name}={a.i}")
            else:
                attrs.append(a.name)
        given = "".join("1" if i else "0" for i in node.input)
        out.add(f"{canonical_domain(node.domain)}::{node.op_type}[{','.join(attrs)}]({given})")
    return sorted(out)


@cache
def _index() -> dict | None:
    """The index's cases when it was made for the installed onnx, else None."""
    try:
        data = json.loads(INDEX.read_text())
    except FileNotFoundError:
        return None
    return data["cases"] if data["onnx"] == onnx.__version__ else None


def case_names() -> list[str]:
    """Every node case's name, sorted."""
    index = _index()
    return sorted(index if index is not None else node_cases())


def case_ops(name: str) -> list[tuple[str, str, int]]:
    """:func:`node_ops` of case ``name``."""
    index = _index()
    if index is None:
        return node_ops(node_cases()[name])
    return [tuple(op) for op in index[name][1]]


def case_forms(name: str) -> list[str]:
    """:func:`node_forms` of case ``name``."""
    index = _index()
    if index is None:
        return node_forms(node_cases()[name])
    return index[name][2]


def load_case(name: str):
    """Case ``name``, made by importing only its module when the index is in use."""
    index = _index()
    if index is None:
        return node_cases()[name]
    module = f"{PACKAGE}.{index[name][0]}"
    importlib.import_module(module)
    from onnx.backend.test.case.node import _NodeTestCases

    for case in _NodeTestCases:
        if case.name == name:
            return case
    raise KeyError(f"{name}: importing {module} did not make it (regenerate {INDEX.name})")


def build_index() -> dict:
    """The index of the installed onnx's node cases: each case's module, the one whose import
    made it (run in a fresh process, before anything loaded the cases)."""
    import onnx.backend.test.case.node as package
    from onnx.backend.test.case.node import _NodeTestCases

    cases: dict[str, list] = {}

    def walk(pkg) -> None:  # onnx.backend.test.case.utils.import_recursive, attributing cases
        for _, name, ispkg in pkgutil.iter_modules(pkg.__path__):
            module = f"{pkg.__name__}.{name}"
            if not onnx.ONNX_ML and module.startswith(f"{PACKAGE}.ai_onnx_ml"):
                continue
            before = len(_NodeTestCases)
            imported = importlib.import_module(module)
            for case in _NodeTestCases[before:]:
                cases[case.name] = [
                    module.removeprefix(f"{PACKAGE}."),
                    [list(op) for op in node_ops(case)],
                    node_forms(case),
                ]
            if ispkg:
                walk(imported)

    walk(package)
    return {"onnx": onnx.__version__, "cases": dict(sorted(cases.items()))}


def _value(v):
    if isinstance(v, onnx.TensorProto):
        return numpy_helper.to_array(v)
    if isinstance(v, onnx.SequenceProto):
        return [numpy_helper.to_array(t) for t in v.tensor_values]
    if isinstance(v, onnx.OptionalProto):
        return _value(v.tensor_value) if v.HasField("tensor_value") else None
    return v


def convert_case(case):
    """Convert a case's model; graph inputs that are sequences/optionals, or whose values a
    rule needs at conversion time (shapes, axes), are passed as ``static_inputs``.
    Returns ``(module, runtime input names, inputs by name, expected outputs)``."""
    model = case.model
    inputs, expected = case.data_sets[0]
    inits = {t.name for t in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in inits]
    feed = dict(zip(names, (_value(v) for v in inputs), strict=False))
    static = {n: v for n, v in feed.items() if v is None or isinstance(v, list)}
    for _ in range(8):
        try:
            module = from_onnx(
                model,
                static_inputs=static,
                input_shapes={n: np.shape(v) for n, v in feed.items() if n not in static},
                values_at_call=False,
            )
            break
        except StaticValueRequired as e:
            wanted = [n for n in e.names if n in feed and n not in static]
            if not wanted:
                wanted = [n for n, v in feed.items() if n not in static and np.asarray(v).dtype.kind in "iub"]
            if not wanted:
                wanted = [n for n in feed if n not in static]
            if not wanted:
                raise
            static.update({n: feed[n] for n in wanted})
    else:
        raise RuntimeError("static inputs did not converge")
    runtime = [n for n in names if n not in static]
    return module, runtime, feed, [_value(v) for v in expected]


def check_outputs(actual, expected, rtol: float, atol: float, where: str = "output") -> None:
    """Outputs match in count, dtype, shape and value (NaNs equal); sequences element-wise,
    an empty optional is None."""
    assert len(actual) == len(expected), f"{where}: {len(actual)} values, expected {len(expected)}"
    for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
        if isinstance(e, list) or e is None:
            assert (a is None) == (e is None), f"{where} {i}: {a!r}, expected {e!r}"
            if e is not None:  # a sequence is a list: not one array whose rows match
                assert isinstance(a, (list, tuple)), f"{where} {i}: {type(a).__name__}, expected a sequence"
                check_outputs(list(a), e, rtol, atol, f"{where} {i} element")
            continue
        a = np.asarray(a)
        e = np.asarray(e)
        assert a.dtype == e.dtype, f"output {i}: dtype {a.dtype}, expected {e.dtype}"
        assert a.shape == e.shape, f"output {i}: shape {a.shape}, expected {e.shape}"
        if e.dtype.kind == "c":  # astype(float64) would drop the imaginary part
            assert_complex_close(a, e, rtol, atol, err_msg=f"output {i}")
        elif e.dtype.kind == "f" or e.dtype.name.startswith(("bfloat", "float8")):
            np.testing.assert_allclose(
                a.astype(np.float64),
                e.astype(np.float64),
                rtol=rtol,
                atol=atol,
                equal_nan=True,
                err_msg=f"output {i}",
            )
        else:
            np.testing.assert_array_equal(a, e, err_msg=f"output {i}")


_TORCH_VIEWS = {  # ml_dtypes arrays reach torch through a same-width integer view
    "bfloat16": ("bfloat16", np.uint16),
    "float8_e4m3fn": ("float8_e4m3fn", np.uint8),
    "float8_e5m2": ("float8_e5m2", np.uint8),
    "float8_e4m3fnuz": ("float8_e4m3fnuz", np.uint8),
    "float8_e5m2fnuz": ("float8_e5m2fnuz", np.uint8),
}


def _to_torch(a):
    import torch

    a = np.array(a, copy=True)  # C-contiguous, keeps 0-d (np.ascontiguousarray makes it 1-d)
    if a.dtype.name in _TORCH_VIEWS:
        tname, view = _TORCH_VIEWS[a.dtype.name]
        return torch.from_numpy(a.view(view)).view(getattr(torch, tname))
    return torch.from_numpy(a)


def _from_torch(t):
    import ml_dtypes
    import torch

    if isinstance(t, (list, tuple)):
        return [_from_torch(v) for v in t]
    if t is None or not isinstance(t, torch.Tensor):
        return t
    name = str(t.dtype).removeprefix("torch.")
    if name in _TORCH_VIEWS:
        view = _TORCH_VIEWS[name][1]
        return (
            t.detach()
            .contiguous()
            .view(getattr(torch, np.dtype(view).name))
            .numpy()
            .view(getattr(ml_dtypes, name))
        )
    return t.detach().numpy()


@lru_cache(maxsize=4)
def converted(name: str):
    """:func:`convert_case` of case ``name``, kept for the next backend: the conformance test
    runs each case's backends one after the other, so it converts each case once."""
    return convert_case(load_case(name))


def run_case(name: str, backend: str = "jax") -> None:
    """Convert (once per case, :func:`converted`) and run one case on ``backend`` (``jax``
    or ``torch``)."""
    case = load_case(name)
    module, runtime, feed, expected = converted(name)
    args = [feed[n] for n in runtime]
    if backend == "jax":
        out = list(module.to_jax()(*args))
    elif backend == "torch":
        from converter.backends.torch._util import CARRIED

        from converter import dtypes

        fn = module.to_torch()
        # types torch lacks (int4, float4_e2m1fn...) go in as NumPy and come out in their
        # storage dtype (int8, float32...): read back as the declared type
        out = fn(*[a if np.asarray(a).dtype.name in CARRIED else _to_torch(a) for a in args])
        out = [_from_torch(o) for o in (out if isinstance(out, (tuple, list)) else [out])]
        out = [
            o.astype(dtypes.to_numpy(s.dtype)) if s.dtype in CARRIED and isinstance(o, np.ndarray) else o
            for o, s in zip(out, module.signature.outputs, strict=False)
        ]
    else:
        raise ValueError(backend)
    check_outputs(_spec_defined(name, feed, out, expected), expected, case.rtol, case.atol)


#: Cast/CastLike from a floating type to a 4-/2-bit integer type (Cast-21 to Cast-25)
_FLOAT_TO_NARROW = re.compile(
    r"test_cast(?:like)?_(?:FLOAT|FLOAT16|BFLOAT16|DOUBLE)_to_(U?INT[24])(?:_expanded)?"
)
_NARROW_RANGE = {"INT4": (-8, 7), "UINT4": (0, 15), "INT2": (-2, 1), "UINT2": (0, 3)}


def _spec_defined(name: str, feed: dict, out: list, expected: list) -> list:
    """``out`` with the values the ONNX spec leaves undefined replaced by the expected ones,
    so that only what the spec defines is compared. Cast's "floating point to fixed point:
    undefined if OOR" (the same words in Cast-21 to Cast-25): the case's expected value for
    an out-of-range float is whatever the installed ml_dtypes' ``astype`` gives (0 with
    ml_dtypes 0.7; other versions wrap or saturate), not the spec's."""
    found = _FLOAT_TO_NARROW.fullmatch(name)
    if not found:
        return out
    lo, hi = _NARROW_RANGE[found.group(1)]
    x = np.trunc(np.asarray(feed["input"]).astype(np.float64))
    undefined = np.isnan(x) | (x < lo) | (x > hi)
    got, want = np.asarray(out[0]), np.asarray(expected[0])
    assert got.dtype == want.dtype and got.shape == want.shape == x.shape, (got.dtype, got.shape, x.shape)
    return [np.where(undefined, want, got).astype(want.dtype), *out[1:]]


if __name__ == "__main__":
    INDEX.write_text(json.dumps(build_index(), separators=(",", ":")) + "\n")
    print(f"wrote {INDEX}")

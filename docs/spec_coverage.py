"""The StableHLO op × backend and element type × backend tables of ``docs/coverage.md``
(imported by ``docs/generate.py``).

* Ops: every op class of jaxlib's ``stablehlo`` dialect bindings (the spec's ops plus the
  dialect's deprecated ones), with each backend's status read from its registry. Every
  unsupported cell carries a reason from :data:`GAPS`; a ✘ without one makes generation
  fail, so a registry change cannot leave an unexplained hole.
* Element types: ``add`` of an operand with itself (the spec's ``add`` on that type, logical
  OR for ``i1``) for every spec element type, converted and run on every backend; the cell
  is ✔ when the result equals the operand added to itself in NumPy (ml_dtypes for the
  narrow types), or names the error that a module of that type alone raises.
"""

from __future__ import annotations

import re
import warnings

import numpy as np

from converter import dtypes
from converter.interpreter import _BUILTIN_OPS

BACKENDS = [
    ("JAX", "converter.backends.jax.registry", "JAX_RULES"),
    ("torch", "converter.backends.torch.registry", "TORCH_RULES"),
    ("ONNX", "converter.backends.onnx.registry", "ONNX_RULES"),
]

#: Ops of the dialect that the spec does not define (deprecated, or XLA-internal).
NOT_IN_SPEC = {
    "async_done", "async_start", "broadcast", "create_token", "cross-replica-sum", "dot", "einsum",
    "real_dynamic_slice", "set_dimension_size", "torch_index_select", "unary_einsum",
}  # fmt: skip

_TOKENS = "tokens and host/peer I/O: a converted function of tensors has no channel to feed or drain"
_COLLECTIVE_ONNX = "ONNX has no collective ops (an ONNX model is one device's program)"
_DEPRECATED = "deprecated, outside the spec; JAX and torch.export never emit it (gap)"

#: Why a backend lacks an op: ``{op: reason}`` for every backend lacking it, or
#: ``{op: {backend: reason}}``. "gap" marks what a fix should add.
GAPS: dict[str, str | dict[str, str]] = {
    "after_all": _TOKENS,
    "create_token": _TOKENS,
    "infeed": _TOKENS,
    "outfeed": _TOKENS,
    "send": _TOKENS,
    "recv": _TOKENS,
    "async_start": "XLA's internal async wrapper, outside the spec; not in exported programs",
    "async_done": "XLA's internal async wrapper, outside the spec; not in exported programs",
    "all_gather": _COLLECTIVE_ONNX,
    "all_reduce": _COLLECTIVE_ONNX,
    "all_to_all": _COLLECTIVE_ONNX,
    "collective_permute": _COLLECTIVE_ONNX,
    "reduce_scatter": _COLLECTIVE_ONNX,
    "partition_id": _COLLECTIVE_ONNX,
    "collective_broadcast": {
        "JAX": "gap: no rule (JAX emits collective_permute/all_gather instead)",
        "torch": "gap: no rule (JAX emits collective_permute/all_gather instead)",
        "ONNX": _COLLECTIVE_ONNX,
    },
    "replica_id": {
        "JAX": "gap: cross-replica programs are not converted (partition_id is)",
        "torch": "gap: cross-replica programs are not converted (partition_id is)",
        "ONNX": _COLLECTIVE_ONNX,
    },
    "broadcast": _DEPRECATED,
    "cross-replica-sum": _DEPRECATED,
    "torch_index_select": _DEPRECATED,
    "set_dimension_size": _DEPRECATED,
    "cholesky": "gap: ONNX has no Cholesky op (JAX's LAPACK potrf custom call is supported)",
    "triangular_solve": "gap: ONNX has no triangular solve (JAX's LAPACK trsm custom call is supported)",
    "dynamic_conv": "gap: no rule (neither JAX nor torch.export emit it)",
    "rng": "gap: no rule (its distribution is implementation-defined; JAX emits rng_bit_generator)",
    "rng_bit_generator": "gap: ONNX's random ops cannot reproduce the spec's Threefry/Philox bits",
}


def spec_ops() -> list[str]:
    """The short names (``add``) of every op class of jaxlib's ``stablehlo`` dialect."""
    from jaxlib.mlir.dialects import stablehlo

    names = {
        cls.OPERATION_NAME
        for name in dir(stablehlo)
        if name.endswith("Op") and hasattr(cls := getattr(stablehlo, name), "OPERATION_NAME")
    }
    return sorted(n.removeprefix("stablehlo.") for n in names)


def _keys(rules) -> set[str]:
    return {re.sub(r"\[.*\]$", "", str(k)) for k in rules.keys()}


#: Ops ``from_stablehlo`` rewrites before any backend sees them (uniform quantized ops become
#: integer and float arithmetic: :mod:`converter.passes.quant`).
LOWERED_ON_READ = {"uniform_quantize", "uniform_dequantize"}


def _status(op: str, backend: str, keys: set[str]) -> tuple[str, str | None]:
    """``(cell, reason)``: the cell is ✔ (``✔ N targets`` for custom calls, ``✔ walker`` for
    what the interpreter's walker handles, ``✔ read`` for what ``from_stablehlo`` lowers)
    or ✘ with the reason from :data:`GAPS`."""
    full = f"stablehlo.{op}"
    if full in _BUILTIN_OPS:
        return "✔ walker", None
    if op in LOWERED_ON_READ:
        return "✔ read", None
    if full in keys:
        return "✔", None
    targets = [k for k in keys if k.startswith(full + "@")]
    if targets:
        return f"✔ {len(targets)} targets", None
    reason = GAPS.get(op)
    if isinstance(reason, dict):
        reason = reason.get(backend)
    if reason is None:
        raise KeyError(
            f"{backend} has no rule for stablehlo.{op} and docs/spec_coverage.py GAPS gives no reason"
        )
    return "✘", reason


def op_table(load_rules) -> str:
    """The op × backend table (``load_rules(module, attr)`` imports a registry).

    Raises:
        KeyError: a backend lacks an op that :data:`GAPS` gives no reason for, or
            :data:`GAPS` gives a reason for an op that has a rule.
    """
    keys = {title: _keys(load_rules(module, attr)) for title, module, attr in BACKENDS}
    out = [
        "## StableHLO ops by backend\n",
        "Every op of jaxlib's `stablehlo` dialect (\"spec: no\" marks the dialect's ops outside the",
        "spec). ✔ a rule in the backend's registry (custom calls: the number of `call_target_name`s",
        'with a rule; "walker": the interpreter itself handles it), ✘ no rule, for the reason in the',
        'last column ("gap": a rule is worth adding).\n',
        "| op | spec | " + " | ".join(t for t, _, _ in BACKENDS) + " | why ✘ |",
        "|---|---|" + "---|" * len(BACKENDS) + "---|",
    ]
    counts = dict.fromkeys(keys, 0)
    ops = spec_ops()
    for op in ops:
        cells, reasons = [], {}
        for title in keys:
            cell, reason = _status(op, title, keys[title])
            cells.append(cell)
            counts[title] += cell.startswith("✔")
            if reason is not None:
                reasons.setdefault(reason, []).append(title)
        why = "; ".join((r if len(b) == len(keys) else f"{', '.join(b)}: {r}") for r, b in reasons.items())
        spec = "no" if op in NOT_IN_SPEC else "yes"
        out.append(f"| `{op}` | {spec} | " + " | ".join(cells) + f" | {why} |")

    def unused(op: str, backends) -> bool:
        return all(_status(op, b, keys[b])[1] is None for b in backends)

    stale = sorted(
        f"{op} ({', '.join(reason) if isinstance(reason, dict) else 'every backend'})"
        for op, reason in GAPS.items()
        if op in ops and unused(op, reason if isinstance(reason, dict) else keys)
    ) + sorted(op for op in GAPS if op not in ops)
    if stale:
        raise KeyError(f"docs/spec_coverage.py GAPS explains ops that have a rule now: {', '.join(stale)}")
    out.append("")
    out.append("Ops supported: " + ", ".join(f"{t} {n} of {len(ops)}" for t, n in counts.items()) + ".\n")
    return "\n".join(out)


#: The spec's element types (its "Types" section), in its order.
ELEMENT_TYPES = [
    "i1", "i2", "i4", "i8", "i16", "i32", "i64", "ui2", "ui4", "ui8", "ui16", "ui32", "ui64",
    "f4E2M1FN", "f6E2M3FN", "f6E3M2FN", "f8E3M4", "f8E4M3", "f8E4M3FN", "f8E4M3FNUZ",
    "f8E4M3B11FNUZ", "f8E5M2", "f8E5M2FNUZ", "f8E8M0FNU", "bf16", "f16", "f32", "f64",
    "complex<f32>", "complex<f64>",
]  # fmt: skip


def _probe_text(types: list[str]) -> str:
    """One module adding each operand (one per type in ``types``) to itself."""
    tys = [f"tensor<2x{t}>" for t in types]
    args = ", ".join(f"%x{i}: {ty}" for i, ty in enumerate(tys))
    body = "".join(f"  %{i} = stablehlo.add %x{i}, %x{i} : {ty}\n" for i, ty in enumerate(tys))
    results = ", ".join(f"%{i}" for i in range(len(tys)))
    return (
        f"func.func @main({args}) -> ({', '.join(tys)}) {{\n{body}  return {results} : {', '.join(tys)}\n}}"
    )


def _torch_arg(x: np.ndarray, name: str):
    import torch

    try:
        return torch.from_numpy(x)
    except TypeError:  # a type NumPy hands torch only through float32
        return torch.from_numpy(x.astype(np.float32)).to(dtypes.torch_dtype(name))


def _torch_out(out, like: np.ndarray) -> np.ndarray:
    import torch

    try:
        return out.numpy()
    except TypeError:
        return out.to(torch.float32).numpy().astype(like.dtype)


def _run(module, backend: str, xs: list[np.ndarray], names: list[str]) -> list[np.ndarray]:
    def results(out):  # one result is returned bare
        return [out] if len(xs) == 1 else list(out)

    if backend == "JAX":
        return [np.asarray(o) for o in results(module.to_jax()(*xs))]
    if backend == "torch":
        outs = results(module.to_torch()(*[_torch_arg(x, n) for x, n in zip(xs, names, strict=True)]))
        return [_torch_out(o, x) for o, x in zip(outs, xs, strict=True)]
    import onnxruntime as ort

    from tests.backends.onnx.helpers import run_session

    sess = ort.InferenceSession(module.to_onnx().SerializeToString(), providers=["CPUExecutionProvider"])
    return run_session(sess, xs)


def _message(e: BaseException) -> str:
    text = str(e).splitlines()[0] if str(e) else ""
    text = re.sub(r"\s+", " ", text.replace("|", "/"))
    return f"{type(e).__name__}: {text[:90]}"


def _compare(got: np.ndarray, want: np.ndarray) -> str:
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"✘ wrong type: {got.dtype}{list(got.shape)}"
    if want.dtype.kind in "bc":
        same = np.array_equal(got, want, equal_nan=want.dtype.kind == "c")
    else:
        with np.errstate(all="ignore"):
            same = np.array_equal(got.astype(np.float64), want.astype(np.float64), equal_nan=True)
    return "✔" if same else f"✘ wrong value: {got.tolist()} for {want.tolist()}"


def _type_cells(types: list[str], backend: str) -> dict[str, str]:
    """The cell of each type of ``types`` on ``backend``: all of them in one module first (one
    conversion and compilation), split in halves while that raises, so each error is the one
    a module of that type alone raises."""
    import converter

    try:
        module = converter.from_stablehlo(_probe_text(types))
        names = [dtypes.from_mlir(t) for t in types]
        xs = [np.array([0, 1]).astype(dtypes.to_numpy(n)) for n in names]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = _run(module, backend, xs, names)
    except Exception as e:  # noqa: BLE001 - the cell names what was raised
        if len(types) == 1:
            return {types[0]: f"✘ {_message(e)}"}
        half = len(types) // 2
        return _type_cells(types[:half], backend) | _type_cells(types[half:], backend)
    return {t: _compare(g, x + x) for t, g, x in zip(types, got, xs, strict=True)}


def element_type_table() -> str:
    """The element type × backend table (runs a one-op module per cell, see the module doc)."""
    out = [
        "## Element types by backend\n",
        "`add` of `[0, 1]` with itself on each spec element type (logical OR for `i1`), converted",
        "by `from_stablehlo` and run on each backend: ✔ the spec's result, ✘ what happens instead.\n",
        "| element type | " + " | ".join(t for t, _, _ in BACKENDS) + " |",
        "|---|" + "---|" * len(BACKENDS),
    ]
    cells = {b: _type_cells(ELEMENT_TYPES, b) for b, _, _ in BACKENDS}
    for t in ELEMENT_TYPES:
        out.append(f"| `{t}` | " + " | ".join(cells[b][t] for b, _, _ in BACKENDS) + " |")
    out.append(f"| `{_QUANT_TYPE}` | " + " | ".join(_quant_cell(b) for b, _, _ in BACKENDS) + " |")
    return "\n".join(out) + "\n"


_QUANT_TYPE = "!quant.uniform<i8:f32, 0.5:1>"
_QUANT = f"""func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {{
  %0 = stablehlo.uniform_quantize %x : (tensor<2xf32>) -> tensor<2x{_QUANT_TYPE}>
  %1 = stablehlo.add %0, %0 : tensor<2x{_QUANT_TYPE}>
  %2 = stablehlo.uniform_dequantize %1 : (tensor<2x{_QUANT_TYPE}>) -> tensor<2xf32>
  return %2 : tensor<2xf32>
}}"""


def _quant_cell(backend: str) -> str:
    """The ``add`` probe on a uniform quantized type: ``[0, 1]`` quantized (scale 0.5, zero
    point 1), added to itself, dequantized; ``[0, 2]`` by the spec's semantics."""
    import converter

    x = np.array([0, 1], np.float32)
    try:
        got = _run(converter.from_stablehlo(_QUANT), backend, [x], ["float32"])[0]
    except Exception as e:  # noqa: BLE001 - the cell names what was raised
        return f"✘ {_message(e)}"
    return _compare(np.asarray(got), x + x)

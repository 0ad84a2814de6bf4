"""``convert inspect FILE``: what a file holds, for any file the CLI reads or writes.

Prints the source framework, the signature (inputs kept or dropped by dead-argument
elimination, their placements), parameters with sizes, the constants baked into the program
(a ``.jax`` artifact's weights), host-placed functions and an op histogram. Reads ``.shlo``
(``Module.save``), ``.mlir``/``.mlirbc``, ``.pt2`` and ``file.py:factory`` (torch),
``.onnx``, and ``--to jax`` artifacts (``.jax``/``.jaxexport``).
"""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

from ..errors import ConversionError
from ..module import Module

HELP = "Print a file's signature, placements, mesh and partition specs, parameters and op histogram."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``FILE`` plus ``--from`` (when the suffix does not tell), ``--json``, ``--top``."""
    parser.add_argument(
        "file", help="a file `convert` reads or writes (.shlo .mlir .mlirbc .pt2 .onnx .jax, x.py:f)"
    )
    parser.add_argument(
        "--from", dest="source", default=None, help="input format when the suffix does not tell"
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--top", type=int, default=20, help="how many ops/parameters to list (default 20)")


def load_any(path: str, source: str | None = None, options: argparse.Namespace | None = None) -> Module:
    """A Module from any input the CLI accepts, its ``--to jax`` artifacts included
    (:func:`converter.tools.cli.load_input`).

    Raises:
        ConversionError: the file is missing, corrupt, or of an unknown kind.
    """
    from . import loaders as cli

    return cli.load_input(path, source, options or argparse.Namespace(verbose=False))


def report(module: Module, top: int = 20) -> dict[str, Any]:
    """The inspection report as plain data (what ``--json`` prints).

    Raises:
        ConversionError: ``module`` is no :class:`Module` (an ONNX model whose shapes come from
            input values has no single StableHLO program to inspect).
    """
    from ..placement import host_functions

    if not isinstance(module, Module):
        raise ConversionError(
            f"{module!r} has no single StableHLO program to inspect: specialize it first "
            "(from_onnx(..., static_inputs={name: array}) or specialize_values)"
        )

    sig = module.signature
    kept = set(range(len(sig.all_args))) if sig.kept_var_idx is None else set(sig.kept_var_idx)
    n_params = len(sig.params)

    def leaf(spec, i=None):
        row = {"name": spec.name, "shape": list(spec.shape), "dtype": spec.dtype}
        if spec.memory_kind:
            row["memory_kind"] = spec.memory_kind
        if spec.sharding is not None:
            row["sharding"] = [list(e) if isinstance(e, tuple) else e for e in spec.sharding]
        if i is not None:
            row["kept"] = i in kept
        return row

    params = [
        {**leaf(p, i), "kind": p.kind, "bytes": p.size * _itemsize(p.dtype)} for i, p in enumerate(sig.params)
    ]
    hist = module.op_histogram()
    return {
        "source": module.source,
        "meta": module.meta,
        "mesh": sig.mesh,
        "inputs": [leaf(s, n_params + i) for i, s in enumerate(sig.inputs)],
        "outputs": [leaf(s) for s in sig.outputs],
        "dropped_inputs": [
            s["name"] for s in [leaf(x, i) for i, x in enumerate(sig.all_args)] if not s["kept"]
        ],
        "parameters": {
            "count": len(params),
            "elements": sum(p.size for p in sig.params),
            "bytes": sum(p["bytes"] for p in params),
            "largest": sorted(params, key=lambda p: -p["bytes"])[:top],
        },
        "constants": constants(module),
        "host_functions": host_functions(module.mlir),
        "ops": dict(hist.most_common()),
    }


def constants(module: Module) -> dict[str, int]:
    """The tensors baked into the program as ``stablehlo.constant`` ops (a ``.jax`` artifact
    holds its weights this way, not as parameters): ``count`` of non-scalar constants, their
    ``elements`` and the ``bytes`` they store (a splat stores one element)."""
    from jaxlib.mlir import ir

    from .. import mlir

    count = elements = stored = 0
    for fn in mlir.functions(module.mlir).values():
        for op in mlir.walk_ops(fn):
            if op.name != "stablehlo.constant":
                continue
            try:
                t = mlir.tensor_type(op.results[0].type)
            except TypeError:
                continue
            n = math.prod(d or 0 for d in t.shape)
            if not t.shape:
                continue
            value = op.attributes["value"]
            splat = isinstance(value, ir.DenseElementsAttr) and value.is_splat
            count += 1
            elements += n
            stored += (1 if splat else n) * _itemsize(t.dtype)
    return {"count": count, "elements": elements, "bytes": stored}


def _itemsize(dtype: str) -> int:
    from .. import dtypes

    return dtypes.to_numpy(dtype).itemsize


def _fmt_bytes(n: int) -> str:
    if n <= 0:
        return "0 B"
    units = ["B", "KiB", "MiB", "GiB", "TiB"]
    k = min(int(math.log(n, 1024)), len(units) - 1)
    return f"{n / 1024**k:.1f} {units[k]}"


def _spec_text(row: dict) -> str:
    """`` P('x', None)``: a leaf's partition spec over the mesh (nothing without one)."""
    if "sharding" not in row:
        return ""
    entries = [repr(tuple(e)) if isinstance(e, list) else repr(e) for e in row["sharding"]]
    return f" P({', '.join(entries)})"


def render(rep: dict[str, Any], top: int = 20) -> str:
    """The report as text for a terminal."""
    lines = [f"source: {rep['source']}" + (f"  ({rep['meta']})" if rep["meta"] else "")]
    if rep.get("mesh"):
        axes = ", ".join(f"{k}={v}" for k, v in rep["mesh"].items())
        lines.append(f"mesh: {axes} ({math.prod(rep['mesh'].values())} devices)")
    for title in ("inputs", "outputs"):
        lines.append(f"{title}:")
        for row in rep[title]:
            extra = "" if row.get("kept", True) else "  [dropped: unused]"
            place = f"  @{row['memory_kind']}" if row.get("memory_kind") else ""
            lines.append(f"  {row['name']}: {row['dtype']}{row['shape']}{_spec_text(row)}{place}{extra}")
    p = rep["parameters"]
    lines.append(f"parameters: {p['count']} tensors, {p['elements']:,} elements, {_fmt_bytes(p['bytes'])}")
    for row in p["largest"]:
        extra = "" if row["kept"] else "  [dropped: unused]"
        lines.append(
            f"  {row['name']}: {row['dtype']}{row['shape']}{_spec_text(row)} {_fmt_bytes(row['bytes'])} "
            f"({row['kind']}){extra}"
        )
    c = rep["constants"]
    lines.append(
        f"constants (baked into the program): {c['count']} tensors, {c['elements']:,} elements, "
        f"{_fmt_bytes(c['bytes'])}"
    )
    hosts = rep["host_functions"]
    lines.append(f"host-placed functions: {', '.join(hosts) if hosts else 'none'}")
    lines.append(f"ops ({sum(rep['ops'].values())} total):")
    for name, count in list(rep["ops"].items())[:top]:
        lines.append(f"  {count:6d}  {name}")
    if len(rep["ops"]) > top:
        lines.append(f"  ... {len(rep['ops']) - top} more op kinds")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Entry point of ``convert inspect``."""
    module = load_any(args.file, args.source, args)
    rep = report(module, args.top)
    print(json.dumps(rep, indent=1, default=str) if args.json else render(rep, args.top))
    return 0

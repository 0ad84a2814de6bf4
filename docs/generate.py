"""Regenerate the generated parts of ``docs/``: ``python docs/generate.py``.

Writes, atomically:

* ``docs/coverage.md`` — which ATen ops, StableHLO ops and ONNX ops each direction supports,
  read from the registries; the StableHLO op × backend table with the reason for every gap
  and the element type × backend table (``docs/spec_coverage.py``); and the conformance
  suites' case counts and xfail lists, read from the suites' own lists (a green test run
  proves every listed number: xfails are strict, and a mismatch outside the lists fails the
  suite).
* ``docs/api.md`` — the Python API reference, from the public docstrings.
* ``docs/cli_reference.md`` — ``convert --help`` and every subcommand's help.
* ``docs/onnx.md``, between its ``<!-- ops:begin -->`` and ``<!-- ops:end -->`` markers — the
  ONNX ops with a rule and their schema versions, then the ops lowered through their function
  body (the rest of the page is hand-written).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import io
import json
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from converter.fileio import atomic_write  # noqa: E402

REGISTRIES = [
    ("PyTorch → StableHLO (ATen overloads)", "converter.frontends.torch.registry", "ATEN_RULES"),
    ("ONNX → StableHLO (domain, op type, since version)", "converter.frontends.onnx.registry", "ONNX_RULES"),
    ("StableHLO → JAX", "converter.backends.jax.registry", "JAX_RULES"),
    ("StableHLO → PyTorch", "converter.backends.torch.registry", "TORCH_RULES"),
    ("StableHLO → ONNX", "converter.backends.onnx.registry", "ONNX_RULES"),
]


def _load_rules(module: str, attr: str):
    """Import the package that fills a registry (``converter.frontends.torch`` fills ``registry``)."""
    importlib.import_module(module.rsplit(".", 1)[0])
    return getattr(importlib.import_module(module), attr)


def _format_keys(keys) -> list[str]:
    keys = list(keys)
    if keys and isinstance(keys[0], tuple):  # ONNX: (domain, op_type, since)
        versions = defaultdict(list)
        for domain, op_type, since in keys:
            versions[(domain or "ai.onnx", op_type)].append(since)
        return [f"`{d}::{t}` ({', '.join(map(str, sorted(v)))})" for (d, t), v in sorted(versions.items())]
    return [f"`{k}`" for k in sorted(map(str, keys))]


def registry_tables() -> str:
    out = ["## Supported ops by direction\n"]
    for title, module, attr in REGISTRIES:
        try:
            rules = _load_rules(module, attr)
        except ImportError as e:
            out.append(f"### {title}\n\nnot available: {e}\n")
            continue
        keys = _format_keys(rules.keys())
        out.append(f"### {title}: {len(keys)} entries\n")
        out.append(", ".join(keys) + "\n")
    return "\n".join(out)


SUITES = [
    # (title, module holding the suite's one xfail list, its attribute, cases in a full run)
    ("ONNX node tests, ONNX → JAX", "tests.frontends.onnx.onnx_node_xfails", "XFAILS", 1884),
    ("JAX functions, JAX → torch (15 dtypes)", "tests.backends.test_conformance", "XFAIL_TORCH", 765),
    ("JAX functions, JAX → ONNX", "tests.backends.test_conformance", "XFAIL_ONNX", 765),
]

OPINFO_RUNS = ROOT / "tests/frontends/torch/opinfo_runs.json"


def _pass_suffix(run: str) -> str:
    """The xfail-key suffix of an OpInfo pass (``float32`` → ``""``, ``bfloat16>torch`` →
    ``"@bfloat16>torch"``)."""
    dtype, _, target = run.partition(">")
    return ("" if dtype == "float32" else f"@{dtype}") + (f">{target}" if target else "")


def _key_suffix(key: str) -> str:
    cut = min((i for i in (key.find("@"), key.find(">")) if i >= 0), default=len(key))
    return key[cut:]


def _row(title: str, cases: int, failing: int, path: str, note: str = "") -> str:
    rate = f"{100 * (cases - failing) / cases:.1f} %" if cases else "—"
    return f"| {title} | {cases}{note} | {cases - failing} | {failing} | {rate} | [`{path}`](../{path}) |"


def _onnx_node_rows() -> list[str]:
    mod = importlib.import_module("tests.frontends.onnx.onnx_node_xfails")
    path = "tests/frontends/onnx/onnx_node_xfails.py"
    torch_only = mod.BACKEND_XFAILS.get("torch", {})
    names = set(mod.XFAILS) | set(torch_only)
    failing = sum(1 for n in names if torch_only.get(n, mod.XFAILS.get(n)))
    return [_row("ONNX node tests, ONNX → torch", 1884, failing, path)]


def _opinfo_rows() -> list[str]:
    mod = importlib.import_module("tests.frontends.torch.opinfo_xfails")
    path = "tests/frontends/torch/opinfo_xfails.py"
    runs = json.loads(OPINFO_RUNS.read_text())
    rows = []
    for run, r in sorted(runs.items(), key=lambda kv: (kv[0].partition(">")[0] != "float32", kv[0])):
        failing = sum(1 for k in mod.XFAILS if _key_suffix(k) == _pass_suffix(run))
        dtype, _, target = run.partition(">")
        title = f"PyTorch OpInfo, torch → {'StableHLO → torch' if target else 'JAX'}, {dtype}"
        note = f" exportable of {r['entries']} ({r['shape_only']} by shape only)"
        rows.append(_row(title, r["exportable"], failing, path, note))
    return rows


def conformance_tables() -> str:
    out = [
        "## Conformance suites\n",
        "Pass counts are the cases of a full run minus the suite's listed xfails (strict: a listed",
        "case that passes fails the suite, so the lists hold exactly the failures). OpInfo counts",
        "exportable entries, recorded by each full run of `gen_opinfo_xfails.py` in",
        "`tests/frontends/torch/opinfo_runs.json`.\n",
        "| suite | cases | pass | xfail | pass rate | list |",
        "|---|---|---|---|---|---|",
    ]
    for title, module, attr, cases in SUITES:
        xfails = getattr(importlib.import_module(module), attr)
        out.append(_row(title, cases, len(xfails), module.replace(".", "/") + ".py"))
        if attr == "XFAILS":  # the ONNX node tests: their torch column next
            out += _onnx_node_rows()
    out += _opinfo_rows()
    out.append("\n`pytest -rx` lists every xfail of a suite with its reason.\n")
    return "\n".join(out)


def _spec_coverage():
    """``docs/spec_coverage.py`` (the StableHLO op and element type tables), by path: ``docs``
    is no package."""
    spec = importlib.util.spec_from_file_location("docs_spec_coverage", ROOT / "docs" / "spec_coverage.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def coverage_md() -> str:
    spec = _spec_coverage()
    return "# Coverage\n\n_Generated by `python docs/generate.py`; do not edit._\n\n" + "\n".join(
        [registry_tables(), spec.op_table(_load_rules), spec.element_type_table(), conformance_tables()]
    )


ONNX_OPS_BEGIN, ONNX_OPS_END = "<!-- ops:begin -->", "<!-- ops:end -->"


def onnx_ops_table() -> str:
    """Markdown: every ONNX op with a rule and its schema versions, then the default-domain ops
    without a rule that ``from_onnx`` lowers by expanding the function body ONNX defines them by."""
    import onnx.defs
    from converter.frontends.onnx import MAX_OPSET, supported_ops
    from converter.frontends.onnx.registry import schema_function

    ops = supported_ops()
    lines = [f"{len(ops)} ops have rules (schema versions with a rule in brackets):", ""]
    lines += ["| domain | op | versions |", "|---|---|---|"]
    lines += [f"| {d} | {op} | {', '.join(map(str, v))} |" for (d, op), v in ops.items()]
    have = {op for (d, op) in ops if d == "ai.onnx"}
    expanded = sorted(
        {
            s.name
            for s in onnx.defs.get_all_schemas_with_history()
            if s.domain == "" and s.name not in have and schema_function(s.name, "", MAX_OPSET) is not None
        }
    )
    lines += [
        "",
        f"{len(expanded)} more ops are lowered by expanding the function body ONNX defines them by:",
        "",
        ", ".join(expanded),
    ]
    return "\n".join(lines)


def onnx_md(text: str) -> str:
    """``text`` (docs/onnx.md) with the part between its ops markers replaced by
    :func:`onnx_ops_table`."""
    head, rest = text.split(ONNX_OPS_BEGIN, 1)
    _, tail = rest.split(ONNX_OPS_END, 1)
    return f"{head}{ONNX_OPS_BEGIN}\n{onnx_ops_table()}\n{ONNX_OPS_END}{tail}"


API = [
    "converter.from_torch",
    "converter.from_jax",
    "converter.from_onnx",
    "converter.from_stablehlo",
    "converter.load",
    "converter.load_pt2",
    "converter.call_jax",
    "converter.call_torch",
    "converter.sharding.shard_params",
    "converter.Module",
    "converter.Signature",
    "converter.LeafSpec",
    "converter.frontends.torch.from_torch",
    "converter.frontends.jax.from_jax",
    "converter.frontends.onnx.from_onnx",
    "converter.frontends.stablehlo.from_stablehlo",
    "converter.backends.jax.to_jax",
    "converter.backends.jax.JaxFunction",
    "converter.backends.torch.to_torch",
    "converter.backends.onnx.to_onnx",
    "converter.backends.onnx.save_onnx",
    "converter.passes.run_passes",
    "converter.errors.ConversionError",
    "converter.errors.UnsupportedOpError",
    "converter.errors.OpConversionError",
    "converter.errors.DynamicDimensionError",
    "converter.errors.SignatureMismatchError",
    "converter.errors.ParseError",
    "converter.errors.UntrustedInputError",
    "converter.errors.ExportError",
    "converter.errors.InputError",
    "converter.errors.OutputError",
    "converter.errors.InternalError",
    "converter.errors.ModuleFormatError",
    "converter.errors.ShardingError",
    "converter.errors.ClosedOverParamsWarning",
    "converter.errors.EmbeddedParamsWarning",
]


def _resolve(path: str):
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def _entry(path: str) -> str:
    try:
        obj = _resolve(path)
    except (ImportError, AttributeError) as e:
        return f"### `{path}`\n\nnot available: {e}\n"
    try:
        sig = str(inspect.signature(obj))
    except (TypeError, ValueError):
        sig = ""
    text = [f"### `{path}{sig}`\n", inspect.getdoc(obj) or "(no docstring)", ""]
    if inspect.isclass(obj):
        for name, member in inspect.getmembers(obj):
            if name.startswith("_") or not (inspect.isfunction(member) or isinstance(member, property)):
                continue
            doc = inspect.getdoc(member)
            if doc:
                text += [f"#### `{obj.__name__}.{name}`\n", doc, ""]
    return "\n".join(text)


def api_md() -> str:
    return (
        "# Python API reference\n\n_Generated by `python docs/generate.py` from docstrings._\n\n"
        + "\n".join(_entry(p) for p in API)
    )


def cli_md() -> str:
    from converter.tools import cli

    parts = ["# `convert` command reference\n", "_Generated by `python docs/generate.py`._\n"]
    for argv in [["--help"], *([name, "--help"] for name in cli.SUBCOMMANDS)]:
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf), contextlib.suppress(SystemExit):
            cli.main(argv)
        parts += [f"## `convert {' '.join(argv)}`\n", "```", buf.getvalue().rstrip(), "```\n"]
    return "\n".join(parts)


def main() -> int:
    docs = ROOT / "docs"
    for name, make in [("coverage.md", coverage_md), ("api.md", api_md), ("cli_reference.md", cli_md)]:
        atomic_write(docs / name, make())
        print(f"wrote docs/{name}")
    atomic_write(docs / "onnx.md", onnx_md((docs / "onnx.md").read_text()))
    print("wrote the ops table of docs/onnx.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

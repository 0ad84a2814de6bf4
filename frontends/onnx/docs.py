"""Write the supported-op table of ``docs/onnx.md`` from the registry:
``python -m converter.frontends.onnx.docs docs/onnx.md`` replaces the text between the
``<!-- ops:begin -->`` and ``<!-- ops:end -->`` markers."""

from __future__ import annotations

import sys

import onnx.defs

from converter.fileio import atomic_path

from .convert import MAX_OPSET, supported_ops
from .registry import schema_function

BEGIN, END = "<!-- ops:begin -->", "<!-- ops:end -->"


def ops_table() -> str:
    """Markdown: every op with a rule and its schema versions, then the ops lowered through
    the function body ONNX defines them by."""
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
    ]
    lines += [", ".join(expanded)]
    return "\n".join(lines)


def main(path: str) -> None:
    with open(path) as f:
        text = f.read()
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    with atomic_path(path) as tmp, open(tmp, "w") as f:
        f.write(f"{head}{BEGIN}\n{ops_table()}\n{END}{tail}")


if __name__ == "__main__":
    main(sys.argv[1])

"""Regenerate ``onnx_node_xfails.py`` from a run of every ONNX node test case.

    python tests/frontends/onnx/gen_onnx_node_xfails.py run 0 2 &   # two shards, in parallel
    python tests/frontends/onnx/gen_onnx_node_xfails.py run 1 2 &
    python tests/frontends/onnx/gen_onnx_node_xfails.py write       # merge shards → the list

Reasons are the first line of each failure, shortened; hand-written reasons in
``MANUAL_REASONS`` take precedence (numeric mismatches need a human explanation).
"""

from __future__ import annotations

import glob
import json
import os
import re
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
SHARD = "/tmp/onnx_node_shard_{}.json"
# Cases in XFAILS that pass on to_torch (torch's bf16 attention rounds closer to the reference).
TORCH_PASSES = {"test_attention_4d_attn_mask_causal_bf16", "test_attention_4d_attn_mask_causal_bf16_expanded"}
# to_torch results of the cases that pass on JAX (same JSON shape, written by a torch run)
TORCH_SHARD = "/tmp/torch_sweep_{}.json"

# Failures whose cause was investigated by hand.
MANUAL_REASONS = {
    "test_dft_inverse": "expected output carries float32 FFT noise 1.9e-7 > atol 1e-7; ours is 5e-15",
    "test_dft_inverse_opset19": "expected output carries float32 FFT noise 1.9e-7 > atol 1e-7; ours is 5e-15",
    "test_dft_irfft": "DFT inverse+onesided (complex-to-real irfft) is not implemented",
    "test_dft_irfft_opset19": "DFT inverse+onesided (complex-to-real irfft) is not implemented",
    "test_cast_e8m0_FLOAT_to_FLOAT8E8M0": (
        "Cast to float8e8m0 (round_mode=up, 0 → smallest power of two) unimplemented; XLA gives NaN for 0"
    ),
    "test_cast_e8m0_FLOAT16_to_FLOAT8E8M0": (
        "Cast to float8e8m0 (round_mode=up, 0 → smallest power of two) unimplemented; XLA gives NaN for 0"
    ),
    "test_scan_sum": "Scan-8 (batch-major Scan with sequence_lens) has no rule; Scan-9+ does",
}
_PATTERNS = [  # first match wins; matched against the message, then the case name
    (
        r"unknown dtype 'object'|dtype object, which StableHLO|value_strings|StringProto",
        "string tensors: StableHLO has no string type",
    ),
    (r"ai\.onnx::(String\w+|RegexFullMatch)", "string op: StableHLO has no string type"),
    (r"ImageDecoder", "ImageDecoder (decoding JPEG/PNG/... bytes) has no StableHLO lowering"),
    (r"Not at opset 1 ", "the model imports opset 1; the frontend supports default-domain opsets 7..28"),
    (
        r"RandomUniformLike|Bernoulli",
        "Bernoulli draws random numbers (RandomUniformLike); outputs cannot match",
    ),
    (r"Dropout in training mode", "Dropout training mode draws random numbers; outputs cannot match"),
    (r"antialias", "Resize with antialias=1 is not implemented"),
    (
        r"attention.*bf16|bf16.*attention",
        "bfloat16: ONNX's Attention function body computes in bfloat16, the reference in float32; "
        "outputs differ by 1 bf16 ulp (> the case's rtol 1e-3)",
    ),
    (r"ai\.onnx\.preview\.training::(\S+)", "no lowering for the training op {0} (preview domain)"),
    (r"have no lowering in the ONNX frontend:\s*\n\s*(\S+)", "no lowering for {0}"),
]


def without_paths(message: str) -> str:
    """``message`` with file paths cut to the file's name and line numbers dropped
    (``@ /x/y/frontends/onnx/ops/elementwise.py:200`` → ``@ elementwise.py``): a listed
    reason must not depend on the machine or on where a line moved."""
    return re.sub(r"(?:[A-Za-z]:)?(?:[\\/][^\s:\\/'\"]+)+[\\/]([^\s:\\/'\"]+\.py)(?::\d+)?", r"\1", message)


def _reason(name: str, message: str) -> str:
    if name in MANUAL_REASONS:
        return MANUAL_REASONS[name]
    message = without_paths(message)
    for pattern, fmt in _PATTERNS:
        m = re.search(pattern, message) or re.search(pattern, name)
        if m:
            return fmt.format(*m.groups())
    first = " ".join(message.split())
    return first[:160]


def failure_reason(name: str, error: BaseException) -> str:
    """The reason the list gives for ``name`` failing with ``error`` (as :func:`run` and
    :func:`write` derive it)."""
    return _reason(name, f"{type(error).__name__}: {error}"[:2000])


_ERROR_TYPE = re.compile(r"\b([A-Z]\w*(?:Error|Exception|Failure))\b")


def same_failure(listed: str, actual: str) -> bool:
    """Whether a listed reason describes the failure ``actual`` (:func:`failure_reason`):
    equal, one a prefix of the other (a listed reason was cut at 160 characters), or both
    name the same innermost exception type (a rule's error wrapped in ``OpConversionError``
    or not: the torch backend wraps it on a module's first conversion only)."""
    if not listed:
        return False
    if actual.startswith(listed) or listed.startswith(actual):
        return True
    inner = [_ERROR_TYPE.findall(r) for r in (listed, actual)]
    return all(inner) and inner[0][-1] == inner[1][-1]


def run(part: int, nparts: int, name_filter: str = "", only: set | None = None) -> dict:
    """Run every ``nparts``-th case starting at ``part`` (or the names in ``only``); write a
    JSON shard."""
    warnings.filterwarnings("ignore")
    sys.path.insert(0, HERE)
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(HERE))))
    import jax

    jax.config.update("jax_enable_x64", True)
    from onnx_node_cases import node_cases, run_case

    results = {}
    for i, name in enumerate(sorted(node_cases())):
        if (
            (only is None and i % nparts != part)
            or (only is not None and name not in only)
            or name_filter not in name
        ):
            continue
        t = time.time()
        try:
            run_case(name)
            status = "PASS"
        except Exception as e:  # noqa: BLE001 - recorded as the failure reason
            status = f"{type(e).__name__}: {e}"
        results[name] = [status[:2000], round(time.time() - t, 2)]
    if only is None:
        with open(SHARD.format(part), "w") as f:
            json.dump(results, f, indent=0)
    return results


def rerun_failed() -> None:
    """Re-run the cases the shards record as failing and update the shards."""
    for path in sorted(glob.glob(SHARD.format("*"))):
        with open(path) as f:
            shard = json.load(f)
        failed = {n for n, r in shard.items() if r[0] != "PASS"}
        shard.update(run(0, 1, only=failed))
        with open(path, "w") as f:
            json.dump(shard, f, indent=0)


def write() -> None:
    """Merge the shards into ``onnx_node_xfails.py``."""
    results = {}
    for path in sorted(glob.glob(SHARD.format("*"))):
        with open(path) as f:
            results.update(json.load(f))
    fails = {n: _reason(n, r[0]) for n, r in sorted(results.items()) if r[0] != "PASS"}
    passed = sum(r[0] == "PASS" for r in results.values())
    lines = [
        "# ruff: noqa: E501",
        '"""ONNX node-test cases that fail through from_onnx → to_jax, with the reason.',
        "",
        "Generated by gen_onnx_node_xfails.py (hand-written reasons in its MANUAL_REASONS).",
        f"{passed} of {len(results)} cases pass; {len(fails)} are listed here.",
        '"""',
        "",
        "XFAILS: dict[str, str] = {",
    ]
    lines += [f"    {n!r}: {r!r}," for n, r in fails.items()]
    torch_results: dict = {}
    for path in sorted(glob.glob(TORCH_SHARD.format("*"))):
        with open(path) as f:
            torch_results.update(json.load(f))
    torch_fails = {n: _reason(n, r) for n, r in sorted(torch_results.items()) if r != "PASS"}
    torch_fails.update(dict.fromkeys(TORCH_PASSES, ""))  # "" = passes on this backend
    lines += [
        "}",
        "",
        "# Per-backend overrides: {backend: {case: reason}}; an empty reason means it passes there.",
    ]
    lines += ["BACKEND_XFAILS: dict[str, dict[str, str]] = {", '    "torch": {']
    lines += [f"        {n!r}: {r!r}," for n, r in torch_fails.items()]
    lines += ["    },", "}", ""]
    if torch_results:
        print(
            f"torch: {len(torch_results) - len(torch_fails)} of {len(torch_results)} JAX-passing cases pass"
        )
    with open(os.path.join(HERE, "onnx_node_xfails.py"), "w") as f:
        f.write("\n".join(lines))
    print(f"{passed} passed, {len(fails)} xfailed of {len(results)}")


if __name__ == "__main__":
    if sys.argv[1] == "rerun-failed":
        rerun_failed()
    elif sys.argv[1] == "run":
        run(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] if len(sys.argv) > 4 else "")
    else:
        write()

"""Differential fuzzer (issue 16): random well-typed JAX programs and random small torch
modules through every conversion path, compared with their source.

* JAX programs (:mod:`tests.fuzz.programs`) go through ``from_jax(fn, *args)`` then
  ``to_torch``, ``to_onnx`` (onnxruntime), ``to_jax`` and the round trips
  ``from_onnx(m.to_onnx()).to_jax()`` and ``.to_torch()``; the reference is ``jax.jit(fn)``.
* Torch modules (:mod:`tests.fuzz.modules`) go through ``from_torch(model, args)`` then
  ``to_jax``, ``to_torch``, ``to_onnx`` and the round trip ``jax>torch``; the reference is
  eager torch.

A *case* is one (program, path) comparison. The default run is fixed (``@seed``, no
hypothesis database): 18 programs × 5 paths and 5 modules × 4 paths, 110 cases, about half a minute of CPU.
``FUZZ_CASES=N`` runs a campaign of about ``N`` cases (85% from JAX programs),
``FUZZ_SEED`` changes the seed, ``FUZZ_REPORT=findings.jsonl`` appends each finding. In the
default run a finding fails at once (hypothesis then shrinks the program and prints it); a
campaign records every finding and fails at the end with a summary.

Known defects (each with its regression test in ``test_regressions.py``) are matched by
:data:`KNOWN` and counted apart, so the run stays green until they are fixed; a refusal
(``ConversionError``) is allowed by the project's rules and counted apart too.
"""

from __future__ import annotations

import os
import re
import time
import warnings

import jax
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

import converter
from tests.fuzz import harness
from tests.fuzz.modules import TorchCase, torch_cases
from tests.fuzz.programs import GeneratorBug, programs

CAMPAIGN = int(os.environ.get("FUZZ_CASES", "0"))
SEED = int(os.environ.get("FUZZ_SEED", "0"))
N_JAX = (CAMPAIGN * 85 // 100 // len(harness.JAX_PATHS)) if CAMPAIGN else 18
N_TORCH = (CAMPAIGN * 15 // 100 // len(harness.TORCH_PATHS)) if CAMPAIGN else 5

#: Known defects: (path regex, finding regex, program source regex, regression test in
#: test_regressions.py). A finding matching one is counted as ``known``, not as a failure.
KNOWN: list[tuple[str, str, str, str]] = [
    (
        "^onnx$",
        "MLFloat16 data type is not supported with ScatterND",
        "",
        "test_onnx_float16_scatter_with_reduction",
    ),
    ("^onnx>torch$", "UncapturedHigherOrderOpError", "", "test_onnx_torch_argmax_loop_strides"),
    ("^onnx$", "Pad should be smaller than kernel", "", "test_onnx_pool_padding_not_smaller_than_window"),
]


def _settings(n: int):
    return settings(
        max_examples=max(n, 1),
        database=None,
        deadline=None,
        derandomize=False,
        suppress_health_check=list(HealthCheck),
        print_blob=False,
    )


class Tally:
    """Outcome counts of one test function, printed (``-s``) at the end."""

    def __init__(self, kind: str):
        self.kind = kind
        self.rec = harness.Recorder()
        self.failures: list[str] = []
        self.start = time.process_time()

    def add(self, source: str, outcomes: list[harness.Outcome]) -> None:
        for o in outcomes:
            if o.status in ("error", "mismatch") and _known(o, source):
                o.status = "known"
        self.rec.record(self.kind, source, outcomes)
        if self.rec.report:  # progress of a long campaign, rewritten after every program
            with open(f"{self.rec.report}.{self.kind}.counts", "w") as f:
                f.write(f"{self.rec.counts} {time.process_time() - self.start:.0f} s CPU\n")
        bad = [o for o in outcomes if o.status in ("error", "mismatch")]
        if not bad:
            return
        msg = "\n".join(f"{o.path}: {o.status}: {o.detail}" for o in bad) + "\n" + source
        if not CAMPAIGN:
            raise AssertionError(msg)
        self.failures.append(msg)

    def skip(self, source: str, e: Exception) -> None:
        """A case the reference itself refuses (eager torch raising for a module it was
        generated to run, ``jax.jit`` failing): counted as ``skipped``, never a failure."""
        detail = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
        self.rec.record(self.kind, source, [harness.Outcome("reference", "skipped", detail[:300])])

    def finish(self) -> None:
        counts = self.rec.counts
        total = sum(counts.values())
        print(
            f"\nfuzz {self.kind}: {total} cases, {counts} (seed {SEED}, "
            f"{time.process_time() - self.start:.0f} s CPU)"
        )
        if self.failures:
            pytest.fail(f"{len(self.failures)} failing programs; first:\n" + self.failures[0], pytrace=False)


def _known(o: harness.Outcome, source: str) -> bool:
    return any(
        re.search(p, o.path) and re.search(d, o.detail) and re.search(s, source) for p, d, s, _ in KNOWN
    )


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def test_jax_programs():
    """Random JAX programs through to_torch, to_onnx, to_jax and onnx>jax, against jax.jit."""
    tally = Tally("jax")

    @seed(SEED)
    @_settings(N_JAX)
    @given(st.data())
    def run(data):
        try:
            prog = data.draw(programs(), label="program")
        except GeneratorBug as e:  # a defect of the fuzzer itself: fail the default run
            if not CAMPAIGN:
                raise
            tally.add(str(e), [harness.Outcome("generator", "error", str(e))])
            return
        try:
            fn, args = prog.fn(), prog.args()
            want = harness._leaves(jax.jit(fn)(*args))
        except Exception as e:  # noqa: BLE001 - the reference refuses the program: nothing to compare
            tally.skip(repr(prog), e)
            return
        try:
            module = converter.from_jax(fn, *args)
        except converter.ConversionError as e:
            tally.add(repr(prog), [harness.Outcome("from_jax", "refused", str(e)[:300])])
            return
        slacks = [4 * v.err for v in prog.outputs]
        outcomes = [
            harness.run_path(name, path, module, args, want, slacks, [1.0] * len(want))
            for name, path in harness.JAX_PATHS.items()
        ]
        tally.add(repr(prog), outcomes)

    run()
    tally.finish()


def check_torch_case(tally: Tally, case) -> None:
    """One generated torch module through :data:`harness.TORCH_PATHS`, against eager torch;
    a module eager torch itself refuses is skipped (counted, not failed)."""
    try:
        model, args = case.build(), case.args()
        with torch.no_grad():
            want = [harness.as_numpy(model(*args))]
    except Exception as e:  # noqa: BLE001 - eager torch refuses the module: nothing to compare
        tally.skip(repr(case), e)
        return
    try:
        module = converter.from_torch(model, args)
    except converter.ConversionError as e:
        tally.add(repr(case), [harness.Outcome("from_torch", "refused", str(e)[:300])])
        return
    # float32/64 layers accumulate rounding over a few reductions: the dtype's rtol
    # times the output's scale per layer
    scale = 1.0 + float(np.max(np.abs(want[0]), initial=0.0))
    slack = harness.tolerance(want[0].dtype).rtol * scale * max(len(case.layers), 1)
    outcomes = [
        harness.run_path(name, path, module, [a.numpy() for a in args], want, [slack], [1.0])
        for name, path in harness.TORCH_PATHS.items()
    ]
    tally.add(repr(case), outcomes)


def test_torch_modules():
    """Random small torch modules through to_jax, to_torch, to_onnx and jax>torch, against
    eager torch."""
    tally = Tally("torch")

    @seed(SEED)
    @_settings(N_TORCH)
    @given(st.data())
    def run(data):
        check_torch_case(tally, data.draw(torch_cases(), label="module"))

    run()
    tally.finish()


# --------------------------------------------------------------------------- the fuzzer's own checks


def test_comparator():
    """The comparator: infinities exactly (sign included), NaN only against NaN, floats
    within the dtype's tolerance plus the slack, integers and bools exactly, shapes and dtypes."""
    f32 = np.array([1.0, -np.inf, np.nan, 0.0], np.float32)
    assert harness.compare(f32, f32.copy()) is None
    assert "infinity" in harness.compare(f32, np.array([1.0, np.inf, np.nan, 0.0], np.float32))
    assert "infinity" in harness.compare(f32, np.array([1.0, -3e38, np.nan, 0.0], np.float32))
    assert "NaN" in harness.compare(f32, np.array([1.0, -np.inf, 0.0, 0.0], np.float32))
    assert "off by" in harness.compare(f32, f32 + np.float32(1e-3))
    assert harness.compare(f32, f32 + np.float32(1e-3), slack=2e-3) is None
    assert harness.compare(f32.astype(np.float16), f32.astype(np.float16) + np.float16(5e-4)) is None
    assert "differ" in harness.compare(np.arange(3), np.array([0, 1, 3]))
    assert "differ" in harness.compare(np.array([True, False]), np.array([True, True]))
    assert "dtype" in harness.compare(f32, f32.astype(np.float64))
    assert "shape" in harness.compare(f32, f32[:2])


def test_programs_are_well_typed_and_catch_wrong_results():
    """Generated programs run under ``jax.jit`` with the recorded output types, and a path
    that returns a float output off by a tenth of its bound is flagged (the slack that
    rounding differences are allowed stays below the size of a wrong rule's error) for
    at least 90% of the outputs."""
    caught, total = [], []

    @seed(SEED)
    @_settings(40)
    @given(programs())
    def run(prog):
        fn, args = prog.fn(), prog.args()
        out = jax.jit(fn)(*args)
        assert [(o.shape, np.dtype(o.dtype)) for o in out] == [(v.shape, v.dtype) for v in prog.outputs]
        for v, w in zip(prog.outputs, harness._leaves(out), strict=True):
            w64 = w.astype(np.float64)
            if v.size and v.dtype.kind == "f" or v.dtype.name == "bfloat16":
                if v.size and np.isfinite(w64).any():
                    wrong = (w64 + 0.1 * v.bound + 0.1).astype(w.dtype)
                    total.append(1)
                    caught.append(harness.compare(w, wrong, 4 * v.err) is not None)

    run()
    assert len(total) >= 20 and sum(caught) >= 0.9 * len(total), (sum(caught), len(total))


def test_known_defects_have_regression_tests():
    """Every entry of :data:`KNOWN` names a test in test_regressions.py."""
    from tests.fuzz import test_regressions

    for *_, name in KNOWN:
        assert callable(getattr(test_regressions, name, None)), name


def test_reference_failures_are_skipped_and_counted():
    """The module ``FUZZ_SEED=104729`` generates that eager torch itself refuses (GroupNorm
    over one value per channel): skipped and counted, never a failure of the campaign."""
    case = TorchCase(
        layers=[("l0", "nn.Embedding(2, 1)"), ("l1", "nn.GroupNorm(1, 1)")],
        body=["h = self.l0(h)", "h = self.l1(h)"],
        inputs=[((1, 1), "int2")],
    )
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        case.build()(*case.args())  # the reference refuses it
    tally = Tally("torch")
    check_torch_case(tally, case)
    assert tally.rec.counts == {"skipped": 1} and not tally.failures
    tally.finish()  # does not fail

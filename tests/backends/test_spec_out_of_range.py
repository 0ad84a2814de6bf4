# ruff: noqa: E501 - one StableHLO op per line
"""Ops whose StableHLO spec defines out-of-range behaviour, on every backend (one small module
per case from the spec's examples): ``case`` runs its last branch for an index outside
``[0, N)``; ``dynamic_slice``/``dynamic_update_slice`` clamp start indices into
``[0, dim - size]`` (negative and past-the-end starts too); ``gather`` clamps its start
indices; ``scatter`` skips each update element outside the operand and applies the rest of
its window."""

from __future__ import annotations

import numpy as np
import pytest

from converter.errors import OpConversionError
from tests.backends.spec_helpers import backends, expect_eq, run

_CASE = """func.func @main(%i: tensor<i32>) -> (tensor<2xi64>, tensor<2xi64>) {
  %r0, %r1 = "stablehlo.case"(%i) ({
    %a = stablehlo.constant dense<0> : tensor<2xi64>
    stablehlo.return %a, %a : tensor<2xi64>, tensor<2xi64>
  }, {
    %b = stablehlo.constant dense<1> : tensor<2xi64>
    stablehlo.return %b, %b : tensor<2xi64>, tensor<2xi64>
  }, {
    %c = stablehlo.constant dense<2> : tensor<2xi64>
    stablehlo.return %c, %c : tensor<2xi64>, tensor<2xi64>
  }) : (tensor<i32>) -> (tensor<2xi64>, tensor<2xi64>)
  return %r0, %r1 : tensor<2xi64>, tensor<2xi64>
}"""


@backends
@pytest.mark.parametrize("index,branch", [(-1, 2), (-7, 2), (3, 2), (100, 2), (0, 0), (1, 1), (2, 2)])
def test_case_out_of_range_runs_last_branch(backend, index, branch):
    r0, r1 = run(_CASE, backend, np.array(index, np.int32))
    expect_eq(r0, [branch, branch], np.int64)
    expect_eq(r1, [branch, branch], np.int64)


_CASE_CONST = _CASE.replace("func.func @main(%i: tensor<i32>)", "func.func @main()").replace(
    '%r0, %r1 = "stablehlo.case"',
    '%i = stablehlo.constant dense<-1> : tensor<i32>\n  %r0, %r1 = "stablehlo.case"',
)


@backends
def test_case_constant_negative_index(backend):
    r0, _ = run(_CASE_CONST, backend)
    expect_eq(r0, [2, 2], np.int64)


_OPERAND = np.arange(16, dtype=np.int64).reshape(4, 4)

_DYNAMIC_SLICE = """func.func @main(%operand: tensor<4x4xi64>, %a: tensor<i64>, %b: tensor<i64>) -> tensor<2x3xi64> {
  %r = stablehlo.dynamic_slice %operand, %a, %b, sizes = [2, 3] : (tensor<4x4xi64>, tensor<i64>, tensor<i64>) -> tensor<2x3xi64>
  return %r : tensor<2x3xi64>
}"""

_STARTS = [(-1, -5), (-100, 100), (3, 3), (1, 1), (2, -4), (2**62, -(2**62))]


def _clamped(a, b, sizes):
    return min(max(a, 0), 4 - sizes[0]), min(max(b, 0), 4 - sizes[1])


@backends
@pytest.mark.parametrize("start", _STARTS)
def test_dynamic_slice_clamps_start(backend, start):
    """Spec: ``start_indices = clamp(0, start_indices, shape(operand) - slice_sizes)``."""
    (got,) = run(_DYNAMIC_SLICE, backend, _OPERAND, np.array(start[0]), np.array(start[1]))
    a, b = _clamped(*start, (2, 3))
    expect_eq(got, _OPERAND[a : a + 2, b : b + 3])


_DUS = """func.func @main(%operand: tensor<4x4xi64>, %a: tensor<i32>, %b: tensor<i32>) -> tensor<4x4xi64> {
  %update = stablehlo.constant dense<[[-1, -2], [-3, -4]]> : tensor<2x2xi64>
  %r = stablehlo.dynamic_update_slice %operand, %update, %a, %b : (tensor<4x4xi64>, tensor<2x2xi64>, tensor<i32>, tensor<i32>) -> tensor<4x4xi64>
  return %r : tensor<4x4xi64>
}"""


@backends
@pytest.mark.parametrize("start", [(-1, -5), (-100, 100), (3, 3), (1, 1), (4, 0)])
def test_dynamic_update_slice_clamps_start(backend, start):
    (got,) = run(_DUS, backend, _OPERAND, np.array(start[0], np.int32), np.array(start[1], np.int32))
    a, b = _clamped(*start, (2, 2))
    want = _OPERAND.copy()
    want[a : a + 2, b : b + 2] = [[-1, -2], [-3, -4]]
    expect_eq(got, want)


_GATHER = """func.func @main(%operand: tensor<4x4xi64>, %idx: tensor<3x2xi32>) -> tensor<3x2x2xi64> {
  %r = "stablehlo.gather"(%operand, %idx) {
    dimension_numbers = #stablehlo.gather<offset_dims = [1, 2], collapsed_slice_dims = [], start_index_map = [0, 1], index_vector_dim = 1>,
    slice_sizes = array<i64: 2, 2>, indices_are_sorted = false
  } : (tensor<4x4xi64>, tensor<3x2xi32>) -> tensor<3x2x2xi64>
  return %r : tensor<3x2x2xi64>
}"""


@pytest.mark.parametrize("backend", ["jax", "torch"])  # ONNX: windows along indexed dims refused (below)
def test_gather_clamps_start_indices(backend):
    """Spec ``gather``: each start index is clamped to ``[0, dim - slice_size]``."""
    idx = np.array([[-3, 1], [3, 9], [1, 2]], np.int32)
    (got,) = run(_GATHER, backend, _OPERAND, idx)
    want = np.stack([_OPERAND[a : a + 2, b : b + 2] for a, b in [(0, 1), (2, 2), (1, 2)]])
    expect_eq(got, want)


_SCATTER = """func.func @main(%operand: tensor<4x4xi64>, %idx: tensor<6x2xi32>, %upd: tensor<6x2x2xi64>) -> tensor<4x4xi64> {
  %r = "stablehlo.scatter"(%operand, %idx, %upd) ({
  ^bb0(%x: tensor<i64>, %y: tensor<i64>):
    %s = stablehlo.add %x, %y : tensor<i64>
    stablehlo.return %s : tensor<i64>
  }) {
    scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1, 2], inserted_window_dims = [], scatter_dims_to_operand_dims = [0, 1], index_vector_dim = 1>,
    indices_are_sorted = false, unique_indices = false
  } : (tensor<4x4xi64>, tensor<6x2xi32>, tensor<6x2x2xi64>) -> tensor<4x4xi64>
  return %r : tensor<4x4xi64>
}"""


@backends
def test_scatter_skips_out_of_bounds_elements(backend):
    """Spec ``scatter``: each update element whose result index is outside the operand is
    skipped, the start indices are not clamped, and the in-bounds elements of a window that
    starts before or runs past the operand are applied (XLA would drop such a window whole)."""
    idx = np.array([[0, 0], [-1, 0], [3, 3], [2, 1], [-2, 5], [40, -9]], np.int32)
    upd = (np.arange(6 * 4, dtype=np.int64) * 100 + 100).reshape(6, 2, 2)
    (got,) = run(_SCATTER, backend, _OPERAND, idx, upd)
    want = _OPERAND.copy()
    want[0:2, 0:2] += upd[0]
    want[0, 0:2] += upd[1][1]  # window rows -1..0: only row 0 lands
    want[3, 3] += upd[2][0, 0]  # window at (3, 3): only its first element lands
    want[2:4, 1:3] += upd[3]
    expect_eq(got, want)


_GATHER_ROWS = """func.func @main(%operand: tensor<4x4xi64>, %idx: tensor<3x1xi32>) -> tensor<3x4xi64> {
  %r = "stablehlo.gather"(%operand, %idx) {
    dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>,
    slice_sizes = array<i64: 1, 4>, indices_are_sorted = false
  } : (tensor<4x4xi64>, tensor<3x1xi32>) -> tensor<3x4xi64>
  return %r : tensor<3x4xi64>
}"""


@backends
def test_gather_rows_clamps_start_indices(backend):
    (got,) = run(_GATHER_ROWS, backend, _OPERAND, np.array([[-3], [9], [1]], np.int32))
    expect_eq(got, _OPERAND[[0, 3, 1]])


_SCATTER_ROWS = """func.func @main(%operand: tensor<4x4xi64>, %idx: tensor<4x1xi32>, %upd: tensor<4x4xi64>) -> tensor<4x4xi64> {
  %r = "stablehlo.scatter"(%operand, %idx, %upd) ({
  ^bb0(%x: tensor<i64>, %y: tensor<i64>):
    stablehlo.return %y : tensor<i64>
  }) {
    scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>,
    indices_are_sorted = false, unique_indices = false
  } : (tensor<4x4xi64>, tensor<4x1xi32>, tensor<4x4xi64>) -> tensor<4x4xi64>
  return %r : tensor<4x4xi64>
}"""


@backends
def test_scatter_rows_skips_out_of_bounds(backend):
    idx = np.array([[0], [-1], [4], [2]], np.int32)
    upd = -np.arange(1, 17, dtype=np.int64).reshape(4, 4)
    (got,) = run(_SCATTER_ROWS, backend, _OPERAND, idx, upd)
    want = _OPERAND.copy()
    want[0], want[2] = upd[0], upd[3]
    expect_eq(got, want)


def test_onnx_refuses_gather_windows_along_indexed_dims():
    """The ONNX backend has no lowering for gather slices wider than 1 along an indexed
    dimension: it raises naming the op, never computes other values."""
    with pytest.raises(OpConversionError, match=r"stablehlo\.gather"):
        run(_GATHER, "onnx", _OPERAND, np.zeros((3, 2), np.int32))


_SELECT_AND_SCATTER = """func.func @main() -> tensor<4x2xi64> {
  %operand = stablehlo.constant dense<[[1, 5], [2, 5], [3, 6], [4, 4]]> : tensor<4x2xi64>
  %source = stablehlo.constant dense<[[5, 6], [7, 8]]> : tensor<2x2xi64>
  %init_value = stablehlo.constant dense<0> : tensor<i64>
  %result = "stablehlo.select_and_scatter"(%operand, %source, %init_value) ({
    ^bb0(%arg0: tensor<i64>, %arg1: tensor<i64>):
      %0 = stablehlo.compare GE, %arg0, %arg1 : (tensor<i64>, tensor<i64>) -> tensor<i1>
      stablehlo.return %0 : tensor<i1>
  }, {
    ^bb0(%arg0: tensor<i64>, %arg1: tensor<i64>):
      %0 = stablehlo.add %arg0, %arg1 : tensor<i64>
      stablehlo.return %0 : tensor<i64>
  }) {
    window_dimensions = array<i64: 3, 1>,
    window_strides = array<i64: 2, 1>,
    padding = dense<[[0, 1], [0, 0]]> : tensor<2x2xi64>
  } : (tensor<4x2xi64>, tensor<2x2xi64>, tensor<i64>) -> tensor<4x2xi64>
  return %result : tensor<4x2xi64>
}"""


@backends
def test_select_and_scatter_window_past_the_end(backend):
    """The spec's example: the second window runs into the padding past the operand; padding
    is never selected, its source value lands on the window's in-bounds maximum."""
    (got,) = run(_SELECT_AND_SCATTER, backend)
    expect_eq(got, [[0, 0], [0, 0], [5, 14], [7, 0]], np.int64)

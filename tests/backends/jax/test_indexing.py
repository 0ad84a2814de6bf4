"""gather, scatter and dynamic slicing through the JAX backend."""

import jax.numpy as jnp
import numpy as np
import pytest

import converter
from tests.compare import run_xla

from .helpers import assert_same

A = np.arange(30, dtype=np.float32).reshape(5, 6)
IDX = np.array([4, 0, 2, 2, 9, -1], np.int32)


def test_take_and_fancy_indexing():
    assert_same(lambda a, i: (a[i % 5], a[:, i % 6], jnp.take(a, i, axis=0, mode="clip")), A, IDX)


@pytest.mark.parametrize("mode", ["add", "mul", "min", "max", "set"])
def test_scatter_bodies(mode):
    def f(a, i):
        ref = a.at[i % 5, 1:3]
        upd = jnp.full((6, 2), 2.0, a.dtype)
        return getattr(ref, mode)(upd)

    assert_same(f, A, IDX)


def test_scatter_drops_out_of_bounds():
    assert_same(lambda a, i: a.at[i].add(1.0, mode="drop"), A[0], IDX)


def test_batched_gather_from_take_along_axis():
    order = np.argsort(A, axis=1)[:, ::-1].copy()
    assert_same(lambda a, o: jnp.take_along_axis(a, o, axis=1), A, order)


_GATHER_INDEX_VECTOR_FIRST = """
func.func public @main(%a: tensor<5x6xf32>, %i: tensor<2x3x2xi32>) -> tensor<3x2x2xf32> {
  %0 = "stablehlo.gather"(%a, %i) <{dimension_numbers = #stablehlo.gather<offset_dims = [2],
      collapsed_slice_dims = [0], start_index_map = [0, 1], index_vector_dim = 0>,
      indices_are_sorted = false, slice_sizes = array<i64: 1, 2>}>
      : (tensor<5x6xf32>, tensor<2x3x2xi32>) -> tensor<3x2x2xf32>
  return %0 : tensor<3x2x2xf32>
}"""


def test_gather_with_the_index_vector_in_a_leading_dim():
    """StableHLO allows ``index_vector_dim`` anywhere (jax.jit puts it last): here the first of
    three index dims, moved last with the batch dims kept in order; against XLA."""
    i = np.array([[[4, 0], [2, 9], [-1, 3]], [[1, 5], [0, 2], [3, -2]]], np.int32)
    got = converter.from_stablehlo(_GATHER_INDEX_VECTOR_FIRST).to_jax()(A, i)
    np.testing.assert_array_equal(np.asarray(got), run_xla(_GATHER_INDEX_VECTOR_FIRST, A, i)[0])


_GATHER_I64 = _GATHER_INDEX_VECTOR_FIRST.replace("xi32>", "xi64>")


def test_int64_gather_indices_clamp_as_xla():
    """64-bit indices are clamped and narrowed to int32 (for the gradient, below): the same
    values as XLA, out-of-range and large indices included."""
    i = np.array([[[4, 0], [2, 2**40], [-1, 3]], [[1, 5], [-(2**35), 2], [3, -2]]], np.int64)
    got = converter.from_stablehlo(_GATHER_I64).to_jax()(A, i)
    np.testing.assert_array_equal(np.asarray(got), run_xla(_GATHER_I64, A, i)[0])


_EMBEDDING_I64 = """
func.func public @main(%w: tensor<7x3xf32>, %i: tensor<2x3xi64>) -> tensor<2x3x3xf32> {
  %0 = stablehlo.broadcast_in_dim %i, dims = [0, 1] : (tensor<2x3xi64>) -> tensor<2x3x1xi64>
  %1 = "stablehlo.gather"(%w, %0) <{dimension_numbers = #stablehlo.gather<offset_dims = [2],
      collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 2>,
      indices_are_sorted = false, slice_sizes = array<i64: 1, 3>}>
      : (tensor<7x3xf32>, tensor<2x3x1xi64>) -> tensor<2x3x3xf32>
  return %1 : tensor<2x3x3xf32>
}"""


def test_grad_through_int64_gather_without_x64():
    """``jax.grad`` transposes a gather into a scatter outside the module's scoped x64, where
    JAX failed to clamp int64 indices (token ids into an embedding, as ``from_torch`` emits
    it): with the process's x64 off the gradient is now the scatter-add of the cotangents."""
    import jax

    w = np.arange(21, dtype=np.float32).reshape(7, 3) / 7
    ids = np.array([[1, 5, 1], [6, 0, 5]], np.int64)
    f = converter.from_stablehlo(_EMBEDDING_I64).to_jax()
    jax.config.update("jax_enable_x64", False)
    try:
        grad = jax.grad(lambda w: jnp.sum(f(w, ids) ** 2))(w)
    finally:
        jax.config.update("jax_enable_x64", True)
    want = np.zeros_like(w)
    np.add.at(want, ids, 2 * w[ids])
    np.testing.assert_allclose(np.asarray(grad), want, rtol=1e-6)


def test_partial_window_scatter_indices_widen_past_int32():
    """A scatter window padded on both sides of a dimension whose padded size passes int32's
    largest value (2**31 - 3 + 2 * 2) has its start indices computed in int64 (shapes only:
    ``jax.eval_shape`` allocates nothing); one that fits stays int32."""
    import jax
    from converter.backends.jax.ops.indexing import _pad_for_partial_windows
    from jax import lax

    dn = lax.ScatterDimensionNumbers(
        update_window_dims=(1,), inserted_window_dims=(), scatter_dims_to_operand_dims=(0,)
    )
    idx = jax.ShapeDtypeStruct((1, 1), np.int32)
    for n, want in ((2**31 - 3, np.int64), (2**31 - 5, np.int32)):
        operand = jax.ShapeDtypeStruct((n,), np.float32)
        padded, out = jax.eval_shape(
            lambda o, i: _pad_for_partial_windows(o, i, (1, 2), dn)[:2], operand, idx
        )
        assert padded.shape == (n + 4,) and out.dtype == want, (n, out.dtype)


_SCATTER_BODY = """
func.func public @main(%a: tensor<5xf32>, %i: tensor<2x1xi32>, %u: tensor<2xf32>) -> tensor<5xf32> {
  %0 = "stablehlo.scatter"(%a, %i, %u) <{scatter_dimension_numbers = #stablehlo.scatter<
      update_window_dims = [], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0],
      index_vector_dim = 1>, indices_are_sorted = false, unique_indices = false}> ({
  ^bb0(%x: tensor<f32>, %y: tensor<f32>):
    %s = BODY
    stablehlo.return %s : tensor<f32>
  }) : (tensor<5xf32>, tensor<2x1xi32>, tensor<2xf32>) -> tensor<5xf32>
  return %0 : tensor<5xf32>
}"""


def test_scatter_bodies_by_kind_and_a_general_body_refused():
    """A scatter's body picks its update (spec: ``result = body(old, update)``); a body that
    is no add/mul/min/max/replace is refused by name, never computed as another one."""
    a = np.array([1, 2, 3, 4, 5], np.float32)
    i = np.array([[3], [0]], np.int32)
    u = np.array([10, -1], np.float32)
    for body, want in [
        ("stablehlo.add %x, %y : tensor<f32>", [0, 2, 3, 14, 5]),
        ("stablehlo.multiply %x, %y : tensor<f32>", [-1, 2, 3, 40, 5]),
        ("stablehlo.minimum %x, %y : tensor<f32>", [-1, 2, 3, 4, 5]),
        ("stablehlo.maximum %x, %y : tensor<f32>", [1, 2, 3, 10, 5]),
    ]:
        got = converter.from_stablehlo(_SCATTER_BODY.replace("BODY", body)).to_jax()(a, i, u)
        np.testing.assert_array_equal(np.asarray(got), np.array(want, np.float32), err_msg=body)
    general = converter.from_stablehlo(
        _SCATTER_BODY.replace("BODY", "stablehlo.subtract %x, %y : tensor<f32>")
    )
    with pytest.raises(converter.OpConversionError) as e:
        general.to_jax()(a, i, u)
    assert "NotImplementedError: scatter with 1 operands and a general body" in str(e.value)


_SCATTER_WINDOWS = """
func.func public @main(%a: tensor<5x2xf32>, %i: tensor<5x1xi32>, %u: tensor<5x2x2xf32>) -> tensor<5x2xf32> {
  %0 = "stablehlo.scatter"(%a, %i, %u) <{scatter_dimension_numbers = #stablehlo.scatter<
      update_window_dims = [1, 2], inserted_window_dims = [], scatter_dims_to_operand_dims = [0],
      index_vector_dim = 1>, indices_are_sorted = false, unique_indices = false}> ({
  ^bb0(%x: tensor<f32>, %y: tensor<f32>):
    %s = stablehlo.add %x, %y : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) : (tensor<5x2xf32>, tensor<5x1xi32>, tensor<5x2x2xf32>) -> tensor<5x2xf32>
  return %0 : tensor<5x2xf32>
}"""


def test_scatter_applies_the_in_bounds_part_of_a_partial_window():
    """Spec ``scatter`` skips each update element whose result index is out of bounds, not
    the whole window (XLA's FILL_OR_DROP does): windows of 2 rows starting at -1 and 4 add
    their in-bounds row, ones at 5, 9 and -5 add nothing, one at 2 both rows (by hand)."""
    a = np.arange(10, dtype=np.float32).reshape(5, 2) * 100
    i = np.array([[-1], [4], [9], [-5], [2]], np.int32)
    u = np.arange(1, 21, dtype=np.float32).reshape(5, 2, 2)
    want = a + np.array([[3, 4], [0, 0], [17, 18], [19, 20], [5, 6]], np.float32)
    f = converter.from_stablehlo(_SCATTER_WINDOWS).to_jax()
    np.testing.assert_array_equal(np.asarray(f(a, i, u)), want)
    i[2] = 5  # the first row past the end: the whole window out
    np.testing.assert_array_equal(np.asarray(f(a, i, u)), want)


def test_int64_gather_indices_narrow_only_when_their_bound_fits_int32():
    """64-bit gather start indices become int32 when every clamp bound ``dim - slice size``
    is at most 2**31 - 1 (exactly the limit included); past it, or with no mapped dimension,
    they stay as given (shapes only: ``jax.eval_shape`` allocates nothing)."""
    import jax
    from converter.backends.jax.ops.indexing import _narrow_indices

    idx = jax.ShapeDtypeStruct((3, 1), np.int64)
    for dim, want in ((2**31, np.int32), (2**31 + 1, np.int64)):
        out = jax.eval_shape(lambda i, d=dim: _narrow_indices(i, (d, 4), (1, 4), (0,)), idx)
        assert out.dtype == want, (dim, out.dtype)
    none = jax.ShapeDtypeStruct((3, 0), np.int64)
    assert jax.eval_shape(lambda i: _narrow_indices(i, (5,), (1,), ()), none).dtype == np.int64
    i32 = jax.ShapeDtypeStruct((3, 1), np.int32)
    assert jax.eval_shape(lambda i: _narrow_indices(i, (5,), (1,), (0,)), i32).dtype == np.int32
    clamped = _narrow_indices(np.array([[-3], [2], [9]], np.int64), (5,), (2,), (0,))
    np.testing.assert_array_equal(np.asarray(clamped), np.array([[0], [2], [3]], np.int32))

"""gather / scatter / dynamic slices through the torch backend (clamping and dropping)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from .helpers import assert_same, numpy_of, to_torch_module, torch_of

A = np.arange(24, dtype=np.float32).reshape(4, 6)
IDX = np.array([0, 3, -1, 7, 2], dtype=np.int32)


def test_take_and_fancy_indexing():
    assert_same(lambda a, i: (a[i % 4], a[:, i % 6], jnp.take(a, i, axis=1, mode="clip")), A, IDX)


def test_take_along_axis_and_batched_gather():
    idx = np.array([[0, 5], [1, 1], [2, 0], [5, 3]], dtype=np.int32)
    assert_same(lambda a, i: jnp.take_along_axis(a, i, axis=1), A, idx)
    assert_same(lambda a, i: jax.vmap(lambda r, j: r[j])(a, i), A, idx)


def test_scatter_kinds_and_out_of_bounds_drop():
    upd = np.arange(5, dtype=np.float32) + 1

    def f(a, i, u):
        return (
            a.at[0, i].set(u, mode="drop"),
            a.at[1, i].add(u, mode="drop"),
            a.at[2, i].max(u * 10, mode="drop"),
            a.at[3, i].min(-u, mode="drop"),
            a.at[0, i].multiply(u, mode="drop"),
        )

    assert_same(f, A, np.array([0, 3, 1, 7, 2], dtype=np.int32), upd)


def test_scatter_drops_elements_just_past_the_end():
    """A scatter update element is dropped when it lands outside the operand (StableHLO
    spec ``scatter``): a start index equal to the dim's size (one element); a two-element
    window starting at 5 of 6 keeps its first element (XLA would drop the window whole)."""
    dn = lax.ScatterDimensionNumbers(
        update_window_dims=(1,), inserted_window_dims=(), scatter_dims_to_operand_dims=(0,)
    )

    def f(a, i, w, u):
        one = a[0].at[i].add(1.0, mode="drop")
        window = lax.scatter_add(a[1], w, u, dn, mode=lax.GatherScatterMode.FILL_OR_DROP)
        return one, window

    i = np.array([6, 5, 0], dtype=np.int32)
    w = np.array([[4], [5], [0]], dtype=np.int32)
    u = np.arange(6, dtype=np.float32).reshape(3, 2) + 1
    got = to_torch_module(f, A, i, w, u)(*[torch_of(x) for x in (A, i, w, u)])
    one = A[0].copy()
    one[[5, 0]] += 1.0
    window = A[1].copy()
    window[4:6] += u[0]
    window[5] += u[1][0]  # the window at 5: its element at 6 is outside, the one at 5 lands
    window[0:2] += u[2]
    np.testing.assert_array_equal(numpy_of(got[0]), one)
    np.testing.assert_array_equal(numpy_of(got[1]), window)


def test_dynamic_slice_clamps():
    def f(a, i):
        return lax.dynamic_slice(a, (i, i + 1), (2, 3)), lax.dynamic_update_slice(
            a, jnp.ones((2, 2), jnp.float32), (i, i)
        )

    for i in (0, 3, -5, 10):
        assert_same(f, A, np.int32(i))


def test_dynamic_update_slice_of_rank_0_is_the_update():
    """StableHLO spec, dynamic_update_slice: with no dimensions the result is the update
    (there is no start to index by)."""
    assert_same(lambda a, u: lax.dynamic_update_slice(a, u, ()), np.float32(1.5), np.float32(-2.0))


def test_bool_scatter_combines_repeated_positions():
    """``.at[i].max``/``.min`` of bools (or / and) with a repeated index: every update of the
    position counts (only the last write's did: ``[F, T]`` at one position gave F)."""
    a = np.array([False, False, True, True])
    i = np.array([1, 1, 2, 1], np.int32)
    u, w = np.array([True, False, False, False]), np.array([False, True, True, True])
    assert_same(
        lambda a, i, u, w: (a.at[i].max(u), a.at[i].min(u), a.at[i].max(w), a.at[i].min(w)), a, i, u, w
    )


_SCATTERS = """
func.func public @main(%a: tensor<4xi1>, %i: tensor<3x1xi32>, %u: tensor<3xi1>,
                       %x: tensor<4xf32>, %n: tensor<4xi32>, %v: tensor<3xf32>, %m: tensor<3xi32>)
    -> (tensor<4xi1>, tensor<4xf32>, tensor<4xi32>) {
  %r = "stablehlo.scatter"(%a, %i, %u) ({
    ^bb0(%p: tensor<i1>, %q: tensor<i1>):
      %s = stablehlo.add %p, %q : tensor<i1>
      stablehlo.return %s : tensor<i1>
  }) {scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0],
      scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}
    : (tensor<4xi1>, tensor<3x1xi32>, tensor<3xi1>) -> tensor<4xi1>
  %w:2 = "stablehlo.scatter"(%x, %n, %i, %v, %m) ({
    ^bb0(%x0: tensor<f32>, %n0: tensor<i32>, %x1: tensor<f32>, %n1: tensor<i32>):
      stablehlo.return BODY : tensor<f32>, tensor<i32>
  }) {scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0],
      scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}
    : (tensor<4xf32>, tensor<4xi32>, tensor<3x1xi32>, tensor<3xf32>, tensor<3xi32>)
      -> (tensor<4xf32>, tensor<4xi32>)
  return %r, %w#0, %w#1 : tensor<4xi1>, tensor<4xf32>, tensor<4xi32>
}
"""


def test_i1_add_scatter_and_variadic_replace_scatter():
    """Spec: i1 ``add`` is or (a repeated position gets every update); a two-operand scatter
    whose body returns its updates writes both operands; one whose body returns anything
    else is refused rather than computed with repeated indices in some order."""
    import converter

    t = converter.from_stablehlo(_SCATTERS.replace("BODY", "%x1, %n1")).to_torch()
    a = np.array([False, False, False, True])
    i = np.array([[1], [1], [5]], np.int32)  # 5: out of bounds, dropped
    x, n = np.arange(4, dtype=np.float32), np.arange(4, dtype=np.int32) * 10
    v, m = np.array([7.5, 7.5, 9.0], np.float32), np.array([-1, -1, -2], np.int32)
    got = [numpy_of(o) for o in t(*(torch_of(z) for z in (a, i, np.array([True, False, True]), x, n, v, m)))]
    np.testing.assert_array_equal(got[0], [False, True, False, True])
    np.testing.assert_array_equal(got[1], [0.0, 7.5, 2.0, 3.0])
    np.testing.assert_array_equal(got[2], [0, -1, 20, 30])
    with pytest.raises(converter.ConversionError, match="scatter with a general body and possibly repeated"):
        converter.from_stablehlo(_SCATTERS.replace("BODY", "%x0, %n1")).to_torch()


_GATHER_SCALAR_STARTS = """
func.func public @main(%a: tensor<4x6xf32>, %i: tensor<3xi32>) -> tensor<3x6xf32> {
  %g = "stablehlo.gather"(%a, %i) {dimension_numbers = #stablehlo.gather<offset_dims = [1],
      collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>,
      slice_sizes = array<i64: 1, 6>} : (tensor<4x6xf32>, tensor<3xi32>) -> tensor<3x6xf32>
  return %g : tensor<3x6xf32>
}
"""


def test_gather_with_index_vector_dim_past_the_last():
    """``index_vector_dim`` equal to the indices' rank (spec: a trailing index vector of
    size 1): each index is a row's start, clamped into range."""
    import converter

    t = converter.from_stablehlo(_GATHER_SCALAR_STARTS).to_torch()
    idx = np.array([3, 0, 9], np.int32)
    np.testing.assert_array_equal(numpy_of(t(torch_of(A), torch_of(idx))), A[[3, 0, 3]])


def test_batched_scatter_with_batching_dims():
    """``jax.vmap`` of a scatter: ``input_batching_dims``/``scatter_indices_batching_dims``
    (each batch row scatters into its own operand row), repeated and dropped indices."""
    idx = np.array([[0, 5], [1, 1], [2, 9], [5, 3]], dtype=np.int32)
    upd = np.arange(8, dtype=np.float32).reshape(4, 2) + 1
    assert_same(
        lambda a, i, u: (
            jax.vmap(lambda r, j, v: r.at[j].add(v, mode="drop"))(a, i, u),
            jax.vmap(lambda r, j, v: r.at[j].set(v, mode="drop"), in_axes=(1, 0, 0), out_axes=1)(
                a[:, :4], i[:, :1] % 4, u[:, :1]
            ),
        ),
        A,
        idx,
        upd,
    )


_GATHER_SCALAR = """
func.func public @main(%a: tensor<4x6xf32>, %i: tensor<2xi32>) -> tensor<f32> {
  %g = "stablehlo.gather"(%a, %i) {dimension_numbers = #stablehlo.gather<
      collapsed_slice_dims = [0, 1], start_index_map = [0, 1], index_vector_dim = 0>,
      slice_sizes = array<i64: 1, 1>} : (tensor<4x6xf32>, tensor<2xi32>) -> tensor<f32>
  return %g : tensor<f32>
}
"""


def test_gather_of_one_element_to_a_scalar():
    """A gather whose result has rank 0 (one index vector, every dim collapsed): the
    element at the clamped start."""
    import converter

    t = converter.from_stablehlo(_GATHER_SCALAR).to_torch()
    for i, want in (([2, 5], A[2, 5]), ([7, -1], A[3, 0]), ([0, 1], A[0, 1])):
        got = numpy_of(t(torch_of(A), torch_of(np.array(i, np.int32))))
        assert got.shape == () and got.dtype == np.float32
        assert got == want

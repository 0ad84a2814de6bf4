"""Output comparison shared by the backend test helpers."""

import numpy as np


def assert_outputs_close(got, want, rtol, atol):
    """Same count, dtypes and shapes; bit-exact for integers and bools, within
    ``rtol``/``atol`` for finite floats. Non-finite values match exactly (NaN only with NaN,
    an infinity only with the same infinity; ``numpy.testing.assert_allclose`` checks both),
    complex values per real component, so a NaN or infinity cannot move between the real
    and imaginary parts."""
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        if np.iscomplexobj(w):
            assert_complex_close(g, w, rtol, atol)
        elif np.issubdtype(w.dtype, np.inexact):
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
        else:
            np.testing.assert_array_equal(g, w)


def run_xla(text: str, *args: np.ndarray) -> list[np.ndarray]:
    """Compile StableHLO ``text`` with XLA CPU and run it on ``args``: the reference for forms
    ``jax.jit`` does not emit (integer select_and_scatter, raw comparators)."""
    import jax
    from jax.extend import backend as jax_backend
    from jaxlib import xla_client

    backend = jax_backend.get_backend("cpu")
    devices = xla_client.DeviceList(tuple(backend.devices()[:1]))
    exe = backend.compile_and_load(text, devices, xla_client.CompileOptions())
    return [np.asarray(o) for o in exe.execute([jax.device_put(a) for a in args])]


def select_and_scatter_text(ety: str, select: str, compare_type: str, scatter: str, init: str) -> str:
    """A ``select_and_scatter`` module on a ``2x5x6`` operand of element type ``ety``: window
    ``1x2x3``, strides ``1x2x2``, padding ``[[0,0],[1,0],[1,1]]`` (so some windows start in
    the padding), select ``compare <select>, <compare_type>``, scatter body
    ``stablehlo.<scatter>`` and init value ``init``. The source is ``2x3x3``."""
    x, s, e = f"tensor<2x5x6x{ety}>", f"tensor<2x3x3x{ety}>", f"tensor<{ety}>"
    return f"""
func.func public @main(%x: {x}, %s: {s}) -> {x} {{
  %init = stablehlo.constant dense<{init}> : {e}
  %0 = "stablehlo.select_and_scatter"(%x, %s, %init) <{{
      padding = dense<[[0, 0], [1, 0], [1, 1]]> : tensor<3x2xi64>,
      window_dimensions = array<i64: 1, 2, 3>, window_strides = array<i64: 1, 2, 2>}}> ({{
  ^bb0(%a: {e}, %b: {e}):
    %c = stablehlo.compare {select}, %a, %b, {compare_type} : ({e}, {e}) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }}, {{
  ^bb0(%a: {e}, %b: {e}):
    %c = stablehlo.{scatter} %a, %b : {e}
    stablehlo.return %c : {e}
  }}) : ({x}, {s}, {e}) -> {x}
  return %0 : {x}
}}"""


#: (element type, NumPy dtype, select, compare type, scatter body, init) of integer and bool
#: select_and_scatter cases the backends are checked on against XLA
SELECT_AND_SCATTER_CASES = [
    ("i32", np.int32, "GE", "SIGNED", "add", "3"),
    ("i32", np.int32, "GT", "SIGNED", "add", "-1"),
    ("i8", np.int8, "LE", "SIGNED", "add", "0"),
    ("ui8", np.uint8, "GE", "UNSIGNED", "add", "1"),
    ("i64", np.int64, "LT", "SIGNED", "maximum", "0"),
    ("i1", np.bool_, "GE", "UNSIGNED", "or", "false"),
    ("i1", np.bool_, "LT", "UNSIGNED", "or", "false"),
]


def select_and_scatter_inputs(dtype, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(operand, source) for :func:`select_and_scatter_text`, with many ties."""
    rng = np.random.default_rng(seed)
    if dtype == np.bool_:
        return rng.integers(0, 2, (2, 5, 6)).astype(bool), rng.integers(0, 2, (2, 3, 3)).astype(bool)
    return rng.integers(0, 4, (2, 5, 6)).astype(dtype), rng.integers(0, 50, (2, 3, 3)).astype(dtype)


def sort_text(direction: str, compare_type: str, ety: str, n: int) -> str:
    """A ``stablehlo.sort`` of a ``n``-vector of ``ety`` carrying an ``i32`` iota along, with
    a raw comparator ``compare <direction>, a, b, <compare_type>`` (no canonicalization, as
    ``chlo.top_k``'s decomposition and non-JAX producers emit)."""
    t, e = f"tensor<{n}x{ety}>", f"tensor<{ety}>"
    return f"""
func.func public @main(%x: {t}, %i: tensor<{n}xi32>) -> ({t}, tensor<{n}xi32>) {{
  %0:2 = "stablehlo.sort"(%x, %i) <{{dimension = 0 : i64, is_stable = true}}> ({{
  ^bb0(%a: {e}, %b: {e}, %c: tensor<i32>, %d: tensor<i32>):
    %r = stablehlo.compare {direction}, %a, %b, {compare_type} : ({e}, {e}) -> tensor<i1>
    stablehlo.return %r : tensor<i1>
  }}) : ({t}, tensor<{n}xi32>) -> ({t}, tensor<{n}xi32>)
  return %0#0, %0#1 : {t}, tensor<{n}xi32>
}}"""


#: floats whose IEEE totalOrder differs from their numeric order: -NaN first, -0.0 before +0.0
TOTAL_ORDER_SPECIALS = [1.0, -np.nan, np.nan, -np.inf, np.inf, -0.0, 0.0, -1.0, 0.0, -0.0]


def assert_bits_equal(got, want) -> None:
    """Same dtype, shape and bits (NaN signs and -0.0 included)."""
    for g, w in zip(got, want, strict=True):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        bits = f"u{g.dtype.itemsize}" if g.dtype.kind not in "biu" else g.dtype
        np.testing.assert_array_equal(g.view(bits), w.view(bits))


def assert_complex_close(got, want, rtol, atol, err_msg: str = ""):
    """Complex ``got`` within ``|got - want| <= atol + rtol * |want|`` where both are finite;
    each non-finite real or imaginary part equal to ``want``'s (NaN to NaN, inf to the same
    inf), and the finite part beside it within the tolerance."""
    got, want = np.asarray(got), np.asarray(want)
    finite = np.isfinite(got) & np.isfinite(want)
    for part in (np.real, np.imag):
        np.testing.assert_allclose(
            part(got)[~finite], part(want)[~finite], rtol=rtol, atol=atol, equal_nan=True, err_msg=err_msg
        )
    np.testing.assert_allclose(got[finite], want[finite], rtol=rtol, atol=atol, err_msg=err_msg)

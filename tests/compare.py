"""Output comparison shared by the backend test helpers."""

import numpy as np


def assert_outputs_close(got, want, rtol, atol):
    """Same count, dtypes and shapes; bit-exact for integers and bools, within
    ``rtol``/``atol`` for floats (NaN == NaN)."""
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        if np.issubdtype(w.dtype, np.inexact):
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
        else:
            np.testing.assert_array_equal(g, w)

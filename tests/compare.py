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

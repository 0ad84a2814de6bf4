"""``aten.linalg_matrix_exp``: ATen's own algorithm (``mexp`` in
``aten/src/ATen/native/LinearAlgebra.cpp``), after Bader, Blanes & Casas, "Computing the
Matrix Exponential with an Optimized Taylor Polynomial Approximation", Mathematics 7 (2019)
1174: each matrix's 1-norm picks a Taylor polynomial of degree 1, 2, 4, 8, 12 or 18,
evaluated with 0 to 5 matrix products; above the last threshold the matrix is scaled by
``2^-s`` and the degree-18 result squared ``s`` times.

Following torch's choice of polynomial, coefficients and evaluation order (rather than
``jax.scipy.linalg.expm``'s Padé approximant) keeps ill-conditioned inputs, where the two
methods differ by far more than rounding, on torch's numbers.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax

from ..registry import register

aten = __import__("torch").ops.aten

#: Norm thresholds of the degrees 1, 2, 4, 8, 12, 18 (single / double precision).
_THETAS = {
    np.float32: (1.192092800768788e-07, 5.978858893805233e-04, 5.116619363445086e-02,
                 5.800524627688768e-01, 1.461661507209034e00, 3.010066362817634e00),
    np.float64: (2.220446049250313e-16, 2.580956802971767e-08, 3.397168839976962e-04,
                 4.991228871115323e-02, 2.996158913811580e-01, 1.090863719290036e00),
}  # fmt: skip

#: Degree 12 and 18 coefficients ``b[i][j]``: ``B_i = sum_j b[i][j] A^p_j`` over the
#: powers ``I, A, A^2, A^3`` (degree 12) and ``I, A, A^2, A^3, A^6`` (degree 18).
_B12 = (
    (9.0198e-16, 0.46932117595418237389, -0.20099424927047284052, -0.04623946134063071740),
    (5.31597895759871264183, 1.19926790417132231573, 0.01179296240992997031, 0.01108844528519167989),
    (0.18188869982170434744, 0.05502798439925399070, 0.09351590770535414968, 0.00610700528898058230),
    (-2.0861320e-13, -0.13181061013830184015, -0.02027855540589259079, -0.00675951846863086359),
)
_B18 = (
    (0.0, -1.00365581030144618291e-01, -8.02924648241156932449e-03, -8.92138498045729985177e-04, 0.0),
    (
        0.0,
        3.97849749499645077844e-01,
        1.36783778460411720168e00,
        4.98289622525382669416e-01,
        -6.37898194594723280150e-04,
    ),
    (
        -1.09676396052962061844e01,
        1.68015813878906206114e00,
        5.71779846478865511061e-02,
        -6.98210122488052056106e-03,
        3.34975017086070470649e-05,
    ),
    (
        -9.04316832390810593223e-02,
        -6.76404519071381882256e-02,
        6.75961301770459654925e-02,
        2.95552570429315521194e-02,
        -1.39180257516060693404e-05,
    ),
    (0.0, 0.0, -9.23364619367118555360e-02, -1.69364939002081722752e-02, -1.40086798182036094347e-05),
)


def _combine(mats, coeffs, real):
    """``sum_k coeffs[k] * mats[k]`` accumulated in order, each coefficient rounded to the
    ``real`` dtype first (ATen's ``_compute_linear_combination``)."""
    out = None
    for m, c in zip(mats, coeffs, strict=True):
        term = m * np.asarray(c, real)
        out = term if out is None else out + term
    return out


def _t8_coefficients(real):
    """Degree 8's constants as ATen computes them: ``sqrt(177)`` and ``2/3`` rounded to
    ``real``, each expression evaluated in double, then rounded to ``real``; ``x7``'s
    denominator is ``5040 x3^2`` as in the paper and torch 2.13 (``5040 x3``, in older
    releases, made the degree-8 polynomial wrong from its ``A^5`` term)."""
    r = np.dtype(real).type
    s, x3 = float(r(0.1330413469565007072504e2)), float(r(2.0 / 3.0))
    return tuple(
        r(v)
        for v in (
            x3 * ((1.0 + s) / 88.0),
            x3 * ((1.0 + s) / 352.0),
            x3,
            (-271.0 + 29.0 * s) / (315.0 * x3),
            (-11.0 + 11.0 * s) / (1260.0 * x3),
            (-99.0 + 11.0 * s) / (5040.0 * x3),
            (89.0 - s) / (5040.0 * x3 * x3),
            (857.0 - 58.0 * s) / 630.0,
        )
    )


def _taylor(a, eye, real):
    """The five unscaled approximations ``T1, T2, T4, T8, T12`` of ``exp(a)``."""
    a2 = a @ a
    t1 = eye + a
    t2 = (eye + a) + a2 / np.asarray(2.0, real)
    t4 = _combine(
        [eye, a, a2, a2 @ _combine([eye, a, a2], (1 / 2.0, 1 / 6.0, 1 / 24.0), real)], (1, 1, 0, 1), real
    )
    x1, x2, x3, x4, x5, x6, x7, y2 = _t8_coefficients(real)
    a4 = a2 @ _combine([a, a2], (x1, x2), real)
    a8 = _combine([a2, a4], (x3, 1.0), real) @ _combine([eye, a, a2, a4], (x4, x5, x6, x7), real)
    t8 = _combine([eye, a, a2, a4, a8], (1.0, 1.0, y2, 0.0, 1.0), real)
    powers = [eye, a, a2, a2 @ a]
    b = [_combine(powers, row, real) for row in _B12]
    b2 = b[2] + b[3] @ b[3]
    t12 = b[0] + (b[1] + b2) @ b2
    return t1, t2, t4, t8, t12


def _t18(a, eye, real):
    a2 = a @ a
    a3 = a2 @ a
    b = [_combine([eye, a, a2, a3, a3 @ a3], row, real) for row in _B18]
    b3 = b[3] + b[0] @ b[4]
    return b[1] + (b[2] + b3) @ b3


def _scaled_t18(a, norm, eye, real, theta):
    """``T18(a / 2^s)`` squared ``s = max(0, ceil(log2(norm / theta)))`` times, per matrix."""
    s = jnp.maximum(jnp.ceil(jnp.log2(norm / np.asarray(theta, real))), 0)
    s = jnp.where(jnp.isfinite(s), s, 0).astype(np.int32)
    m = _t18(a / jnp.exp2(s.astype(real))[..., None, None].astype(a.dtype), eye, real)

    def square(state):
        i, m = state
        return i + 1, jnp.where((i < s)[..., None, None], m @ m, m)

    return lax.while_loop(lambda st: st[0] < jnp.max(s, initial=0), square, (jnp.int32(0), m))[1]


def matrix_exp_taylor(a):
    """``exp(a)`` for ``a`` ``(..., n, n)`` float32/float64/complex64/complex128, as ATen's
    ``mexp``: the polynomial whose norm bucket ``(theta[i-1], theta[i]]`` holds the matrix's
    1-norm (max column sum of ``|a|``), ``T18`` with scaling and squaring from ``theta[4]``
    on; a non-finite norm gives NaN (torch: NaN for NaN or inf entries)."""
    real = np.dtype(jnp.finfo(a.dtype).dtype).type
    thetas = _THETAS[real]
    eye = jnp.eye(a.shape[-1], dtype=a.dtype)
    norm = jnp.max(jnp.sum(jnp.abs(a), axis=-2), axis=-1)
    result = _scaled_t18(a, norm, eye, real, thetas[5])
    lower = -1.0
    for t, theta in zip(_taylor(a, eye, real), thetas[:5], strict=True):
        if theta == thetas[4]:
            pick = (norm > lower) & (norm < theta)  # the last bucket's bound goes to T18
        else:
            pick = (norm > lower) & (norm <= theta)
        result = jnp.where(pick[..., None, None], t, result)
        lower = theta
    return jnp.where(jnp.isfinite(norm)[..., None, None], result, jnp.asarray(jnp.nan, a.dtype))


@register(aten.linalg_matrix_exp.default)
def linalg_matrix_exp(a):
    """``exp(a)`` for ``a`` ``(..., n, n)``: ATen's Taylor scheme (:func:`matrix_exp_taylor`);
    ``1 x 1`` matrices are ``exp``, as in torch. bfloat16/float16 (for which torch's CPU
    kernel runs the scheme in the 16-bit type with double thresholds, and overflows) are
    computed in float32 and rounded once."""
    if a.shape[-1] == 1:
        return jnp.exp(a)
    if a.dtype in (jnp.bfloat16, np.float16):
        return matrix_exp_taylor(a.astype(np.float32)).astype(a.dtype)
    return matrix_exp_taylor(a)

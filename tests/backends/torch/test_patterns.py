"""Native torch emitted by the torch backend (issue 15, point 4): single-op mappings in the
rules (dot_general → mm/bmm, convolution, reduce_window → pooling, no-op reshapes dropped),
multi-op patterns (backends/torch/patterns.py: softmax, tanh gelu, layer norm) and the FX
clean-up (backends/torch/native.py). Each test checks that the native op is in the graph
and that the numbers match ``jax.jit`` and the graph built without the rewrite."""

from __future__ import annotations

import itertools

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from converter.backends.torch import patterns
from converter.backends.torch.native import aten_target, broadcast_shapes
from jax import lax

import converter
from examples import flax_models

aten = torch.ops.aten
RNG = np.random.default_rng(0)


def _convert(fn, *args, params=None):
    m = converter.from_jax(fn, *args, params=params) if params is not None else converter.from_jax(fn, *args)
    return m.to_torch()


def _targets(tm) -> set:
    return {aten_target(n) for n in tm.graph_module.graph.nodes if n.op == "call_function"}


def _counts(tm) -> dict:
    out: dict = {}
    for n in tm.graph_module.graph.nodes:
        if n.op == "call_function":
            out[aten_target(n)] = out.get(aten_target(n), 0) + 1
    return out


def _sdpa(tm):
    """The one SDPA node of ``tm``'s graph."""
    sdpa = aten._scaled_dot_product_flash_attention_for_cpu.default
    (node,) = [n for n in tm.graph_module.graph.nodes if aten_target(n) is sdpa]
    return node


def _check(fn, *args, params=None, present=(), absent=(), rtol=1e-5, atol=1e-5, monkeypatch=None):
    """Convert ``fn``; the graph holds every op of ``present`` and none of ``absent``; the
    module matches ``jax.jit`` and the module converted without pattern rewrites."""
    tm = _convert(fn, *args, params=params)
    targets = _targets(tm)
    for op in present:
        assert op in targets, (op, sorted(map(str, targets)))
    for op in absent:
        assert op not in targets, op
    targs = [torch.from_numpy(np.asarray(a)) for a in args]
    with torch.no_grad():
        got = tm(*targs).numpy()
    call = (lambda *a: fn(params, *a)) if params is not None else fn
    want = np.asarray(jax.jit(call)(*args))
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    if monkeypatch is not None:
        with monkeypatch.context() as mp:
            mp.setattr(patterns, "rewrite", lambda *a: None)
            plain = _convert(fn, *args, params=params)
        with torch.no_grad():
            np.testing.assert_allclose(got, plain(*targs).numpy(), rtol=rtol, atol=atol)
    return tm


def _x(*shape, scale=1.0):
    return (RNG.normal(size=shape) * scale).astype(np.float32)


# --------------------------------------------------------------------------- patterns


@pytest.mark.parametrize("axis", [-1, 1])
def test_softmax(axis, monkeypatch):
    x = _x(2, 5, 7, scale=4.0)
    _check(
        lambda x: jax.nn.softmax(x, axis=axis), x, present=[aten._softmax.default], monkeypatch=monkeypatch
    )


def test_softmax_with_infinities_and_masks():
    x = _x(3, 6)
    x[0, :] = -np.inf  # a fully masked row: NaN in both
    x[1, 2] = -np.inf
    tm = _convert(lambda x: jax.nn.softmax(x), x)
    assert aten._softmax.default in _targets(tm)
    want = np.asarray(jax.jit(jax.nn.softmax)(x))
    np.testing.assert_allclose(tm(torch.from_numpy(x)).numpy(), want, rtol=1e-6, equal_nan=True)


def test_softmax_over_two_axes_is_not_a_one_dim_softmax():
    """A softmax normalized over two axes at once has no ``F.softmax`` (one dim): no rewrite,
    the program's numbers."""
    _check(lambda x: jax.nn.softmax(x, axis=(0, 2)), _x(3, 2, 4), absent=[aten._softmax.default])


def test_softmax_without_max_subtraction_is_not_rewritten():
    """exp(x)/sum(exp(x)) overflows where softmax does not: not the same function."""

    def naive(x):
        e = jnp.exp(x)
        return e / e.sum(-1, keepdims=True)

    _check(naive, _x(4, 5), absent=[aten._softmax.default])


def test_gelu_tanh(monkeypatch):
    x = _x(3, 16, scale=3.0)
    _check(
        lambda x: jax.nn.gelu(x, approximate=True), x, present=[aten.gelu.default], monkeypatch=monkeypatch
    )


def test_gelu_erf_is_not_the_tanh_form():
    x = _x(3, 16, scale=3.0)
    _check(lambda x: jax.nn.gelu(x, approximate=False), x, absent=[aten.gelu.default])


def test_gelu_with_another_constant_is_not_rewritten():
    def almost(x):
        return x * (0.5 * (1 + jnp.tanh(0.8 * (x + 0.044715 * x * x * x))))

    _check(almost, _x(3, 16), absent=[aten.gelu.default])


def test_gelu_form_with_another_factor_in_the_cube_is_not_rewritten():
    """``(x * x) * y`` in place of the cube ``(x * x) * x``: not gelu of ``x``."""
    c = float(np.sqrt(2 / np.pi))

    def almost(x, y):
        return x * (0.5 * (1 + jnp.tanh(c * (x + 0.044715 * ((x * x) * y)))))

    x = _x(3, 16, scale=3.0)
    _check(lambda x: almost(x, x), x, present=[aten.gelu.default])  # y = x: the tanh gelu
    _check(almost, x, _x(3, 16, scale=3.0), absent=[aten.gelu.default])


@pytest.mark.parametrize("shape", [(2, 7, 32), (4, 16)])
def test_flax_layer_norm(shape, monkeypatch):
    ln = nn.LayerNorm()
    x = _x(*shape, scale=2.0) + 1.0
    params = ln.init(jax.random.PRNGKey(0), x)
    params = jax.tree_util.tree_map(lambda p: p + jnp.asarray(RNG.normal(size=p.shape), p.dtype), params)
    _check(ln.apply, x, params=params, present=[aten.native_layer_norm.default], monkeypatch=monkeypatch)


def test_layer_norm_over_two_trailing_dims():
    """A layer norm over the last two dims (scale and bias of that shape) is one
    ``F.layer_norm`` with a two-dim normalized shape."""
    ln = nn.LayerNorm(reduction_axes=(-2, -1), feature_axes=(-2, -1))
    x = _x(2, 3, 4, scale=2.0) + 1.0
    params = ln.init(jax.random.PRNGKey(0), x)
    params = jax.tree_util.tree_map(lambda p: p + jnp.asarray(RNG.normal(size=p.shape), p.dtype), params)
    tm = _check(ln.apply, x, params=params, present=[aten.native_layer_norm.default])
    (node,) = [n for n in tm.graph_module.graph.nodes if aten_target(n) is aten.native_layer_norm.default]
    assert list(node.args[1]) == [3, 4]


def test_layer_norm_over_a_leading_dim_is_not_rewritten():
    ln = nn.LayerNorm(reduction_axes=0, feature_axes=-1)
    x = _x(6, 5)
    params = ln.init(jax.random.PRNGKey(0), x)
    _check(ln.apply, x, params=params, absent=[aten.native_layer_norm.default])


def test_bias_only_layer_norm_over_a_leading_dim_is_not_rewritten():
    # no scale to reject it: only the trailing-dims check keeps it from a last-dim layer_norm
    ln = nn.LayerNorm(reduction_axes=0, feature_axes=-1, use_scale=False)
    x = _x(6, 5)
    params = ln.init(jax.random.PRNGKey(0), x)
    params = jax.tree_util.tree_map(lambda p: p + jnp.asarray(RNG.normal(size=p.shape), p.dtype), params)
    _check(ln.apply, x, params=params, absent=[aten.native_layer_norm.default])


def test_two_pass_layer_norm_numbers():
    ln = nn.LayerNorm(use_fast_variance=False)
    x = _x(3, 8)
    _check(ln.apply, x, params=ln.init(jax.random.PRNGKey(0), x))


def test_decoder_block_is_native(monkeypatch):
    apply, params, (x,) = flax_models.decoder_block()
    tm = _check(
        apply,
        x,
        params=params,
        present=[
            aten.native_layer_norm.default,
            aten._scaled_dot_product_flash_attention_for_cpu.default,
            aten.gelu.default,
            aten.addmm.default,
        ],
        absent=[aten.expand.default, aten._softmax.default, aten.amax.default, aten.tanh.default],
        monkeypatch=monkeypatch,
    )
    # the causal mask reads no input: folded at conversion, then recognized as is_causal;
    # the 1/sqrt(d) scaling of the queries is SDPA's scale; the [heads, head_dim] biases of
    # the projections are inside their addmm: the graph is the torch-written one
    sdpa = _sdpa(tm)
    assert sdpa.args[4] is True and "attn_mask" not in sdpa.kwargs
    assert sdpa.kwargs["scale"] == pytest.approx(1 / np.sqrt(8))
    assert not list(tm.graph_module.named_buffers())
    counts = _counts(tm)
    assert counts[aten.addmm.default] == 6 and aten.mm.default not in counts
    assert counts.get(aten.add.Tensor) == 2  # the two residual connections
    assert not {aten.arange.default, aten.div.Tensor, aten.transpose.int} & set(counts)


# --------------------------------------------------------------------------- single ops


def test_broadcast_shapes_is_torchs_rule():
    """``broadcast_shapes`` (what decides which ``expand`` torch's implicit broadcasting
    replaces) agrees with ``torch.broadcast_shapes``, None where torch raises."""
    cases = [
        [(3, 1), (1, 4)], [(2, 1, 4), (3, 1)], [(4,), (2, 3, 4)], [(1,), ()], [(0, 1), (1, 5)],
        [(2, 3), (3, 2)], [(3,), (4,)], [(2, 1), (1, 3), (2, 3)], [(5, 1, 1), (1, 2, 1), (3,)],
        [(2, 0), (2, 1)], [(0,), (2,)], [(1, 1), (1, 1, 1)], [(3, 2), (1, 2), (4, 1, 1)],
    ]  # fmt: skip
    for shapes in cases:
        try:
            want = tuple(torch.broadcast_shapes(*shapes))
        except RuntimeError:
            want = None
        assert broadcast_shapes(shapes) == want, shapes
    assert broadcast_shapes([]) == ()


def test_dense_is_addmm_and_einsum_is_bmm():
    w = _x(8, 6)
    b = _x(6)
    _check(lambda x: x @ w + b, _x(3, 5, 8), present=[aten.addmm.default], absent=[aten.expand.default])
    _check(
        lambda q, k: jnp.einsum("bqhd,bkhd->bhqk", q, k),
        _x(2, 3, 4, 5),
        _x(2, 6, 4, 5),
        present=[aten.bmm.default],
    )
    _check(lambda a, c: jnp.einsum("i,i->", a, c), _x(5), _x(5))  # a dot of vectors
    _check(lambda a, c: jnp.einsum("i,j->ij", a, c), _x(5), _x(3))  # an outer product


def test_dense_with_zero_rows_or_zero_features():
    """Zero-size dims through the broadcast and bias clean-ups: a dense layer on 0 rows, one
    with 0 output features (its bias of shape ``(0,)``), and a view adding a size-0 leading
    dim before a broadcasting add (no size-0 dim is stripped as a leading 1)."""
    w, b = _x(3, 4), _x(4)
    _check(lambda x: x @ w + b, _x(0, 3), present=[aten.addmm.default])
    w0, b0 = _x(3, 0), _x(0)
    _check(lambda x: x @ w0 + b0, _x(2, 3))
    _check(lambda x: x @ jnp.zeros((3, 0), x.dtype) + jnp.zeros((0,), x.dtype), _x(2, 3))  # a splat bias
    _check(lambda x, y: x.reshape(0, 1, 3) + y, _x(0, 3), _x(0, 0, 3))


def test_integer_dot_general():
    a = RNG.integers(-5, 5, size=(3, 4)).astype(np.int32)
    c = RNG.integers(-5, 5, size=(4, 2)).astype(np.int32)
    tm = _convert(lambda a, c: a @ c, a, c)
    np.testing.assert_array_equal(tm(torch.from_numpy(a), torch.from_numpy(c)).numpy(), a @ c)


def test_cnn_is_convolution_and_pooling():
    apply, params, (x,) = flax_models.cnn()
    tm = _check(
        apply,
        x,
        params=params,
        present=[aten.convolution.default, aten.max_pool2d_with_indices.default, aten.avg_pool2d.default],
        absent=[aten.unfold.default, aten.cat.default, aten.expand.default],
    )
    # Flax's avg_pool divides the window sum by 4: the pooling's divisor; the constants left
    # are the ReLUs' 0-d zeros
    assert aten.div.Tensor not in _targets(tm)
    (pool,) = [n for n in tm.graph_module.graph.nodes if aten_target(n) is aten.avg_pool2d.default]
    assert pool.args[6] == 4
    # each convolution's bias (added after its channels-last permute) is the convolution's own
    convs = [n for n in tm.graph_module.graph.nodes if aten_target(n) is aten.convolution.default]
    assert len(convs) == 2 and all(c.args[2] is not None for c in convs)
    assert aten.add.Tensor not in _targets(tm)
    assert {float(b) for _, b in tm.graph_module.named_buffers() if b.dim() == 0} == {0.0}
    assert all(b.dim() == 0 for _, b in tm.graph_module.named_buffers())


def test_max_with_a_constant_keeps_jax_gradient_at_ties():
    """max(x, 0) stays torch.maximum, whose gradient at a tie is 1/2 as lax.max's (a
    clamp_min would give 1, relu 0)."""
    x = np.array([-1.0, 0.0, 2.0, 0.0], np.float32)
    fn = lambda x: jnp.maximum(x, 0.0) * jnp.arange(1.0, 5.0)  # noqa: E731
    tm = _convert(fn, x)
    assert aten.maximum.default in _targets(tm)
    tx = torch.tensor(x, requires_grad=True)
    tm(tx).sum().backward()
    want = jax.grad(lambda x: fn(x).sum())(x)
    np.testing.assert_array_equal(tx.grad.numpy(), np.asarray(want))
    assert tx.grad[1] == 1.0  # 2 * 1/2


def test_avg_pool_without_padding_in_the_count_keeps_its_division():
    """count_include_pad=False divides by a per-position count (not one constant)."""
    x = _x(2, 7, 9, 3)
    tm = _check(lambda x: nn.avg_pool(x, (3, 3), padding="SAME", count_include_pad=False), x)
    (pool,) = [n for n in tm.graph_module.graph.nodes if aten_target(n) is aten.avg_pool2d.default]
    assert pool.args[6] == 1
    tm = _check(lambda x: nn.avg_pool(x, (2, 2, 2), padding="SAME"), _x(2, 5, 6, 4, 3))
    (pool,) = [n for n in tm.graph_module.graph.nodes if aten_target(n) is aten.avg_pool3d.default]
    assert pool.args[6] == 8 and aten.div.Tensor not in _targets(tm)


def test_sum_pooling_keeps_a_division_that_is_not_its_divisor():
    """A window sum divided by a constant that is not a positive integer (2.5, 0.5, NaN),
    or whose undivided sum is read too, keeps its division: ``divisor_override`` is an
    integer >= 1, and the other read must see the sum. One divided by 4 after them (and
    after a division of another op) takes the divisor."""

    def window_sum(x):
        return lax.reduce_window(x, 0.0, lax.add, (1, 2, 2, 1), (1, 1, 1, 1), "VALID")

    def fn(x):
        s = window_sum(x)
        return (
            jnp.tanh(x) / 3.0,
            window_sum(x) / 2.5,
            window_sum(x) / 0.5,
            window_sum(x) / jnp.nan,
            s / 4.0,
            s,
            window_sum(x) / 4.0,
        )

    x = _x(1, 4, 5, 2)
    tm = _convert(fn, x)
    pools = [n for n in tm.graph_module.graph.nodes if aten_target(n) is aten.avg_pool2d.default]
    assert [p.args[6] for p in pools] == [1, 1, 1, 1, 4]
    assert _counts(tm)[aten.div.Tensor] == 5
    with torch.no_grad():
        got = tm(torch.from_numpy(x))
    for g, want in zip(got, jax.jit(fn)(x), strict=True):
        np.testing.assert_allclose(g.numpy(), np.asarray(want), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(
    ("window", "strides", "padding"),
    [((3, 3), (1, 1), "SAME"), ((2, 3), (2, 1), ((1, 1), (0, 2))), ((3, 3), (2, 2), "VALID")],
)
def test_pooling_padding(window, strides, padding):
    x = _x(2, 7, 9, 3)
    x[0, 0, 0, 0] = np.nan  # max pooling propagates NaN as StableHLO's max does
    got = _check(
        lambda x: nn.max_pool(x, window, strides=strides, padding=padding),
        x,
        present=[aten.max_pool2d_with_indices.default],
        absent=[aten.unfold.default],
    )
    assert got is not None
    _check(
        lambda x: nn.avg_pool(x, window, strides=strides, padding=padding),
        np.nan_to_num(x),
        present=[aten.avg_pool2d.default],
    )


def test_pooling_with_dilation_and_3d():
    x = _x(2, 9, 8, 7, 2)
    _check(
        lambda x: jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 2, 2, 2, 1), (1, 1, 2, 1, 1), "VALID"),
        x,
        present=[aten.max_pool3d_with_indices.default],
    )
    _check(
        lambda x: jax.lax.reduce_window(
            x, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 1, 1, 1), "VALID", window_dilation=(1, 2, 3, 1)
        ),
        _x(2, 9, 8, 3),
        present=[aten.max_pool2d_with_indices.default],
    )


def test_no_op_transpose_reshape_convert_emit_nothing():
    tm = _check(
        lambda x: jnp.transpose(x.reshape(3, 4), (0, 1)).astype(jnp.float32) + 1.0,
        _x(3, 4),
        absent=[aten.permute.default, aten.view.default, aten._to_copy.default],
    )
    assert len([n for n in tm.graph_module.graph.nodes if n.op == "call_function"]) == 1


def test_view_chains_collapse():
    """Two reshapes in a row are one reshape of the first one's input; two transposes one
    permute, none when they cancel; a broadcasting op's operands lose the views that only
    add leading 1s, unless the result would lose them too (two ``(3,)`` vectors viewed as
    ``(1, 3)``: one keeps its view)."""

    def fn(x, y, a, b):
        return (
            jnp.tanh(x).reshape(4, 6).reshape(2, 12) + 1.0,
            jnp.transpose(jnp.tanh(y), (1, 0, 2)).transpose(2, 1, 0),
            jnp.transpose(jnp.tanh(y), (1, 2, 0)).transpose(2, 0, 1),
            a.reshape(1, 3) * b.reshape(1, 3),
        )

    args = (_x(3, 8), _x(2, 3, 4), _x(3), _x(3))
    tm = _convert(fn, *args)
    counts = _counts(tm)
    assert counts[aten.reshape.default] == 1 and counts[aten.view.default] == 1
    assert counts[aten.permute.default] == 1
    with torch.no_grad():
        got = tm(*(torch.from_numpy(a) for a in args))
    for g, want in zip(got, jax.jit(fn)(*args), strict=True):
        assert g.shape == want.shape
        np.testing.assert_allclose(g.numpy(), np.asarray(want), rtol=1e-6, atol=1e-6)


def test_forward_fast_path_keeps_the_checks():
    tm = _convert(lambda x: x * 2.0, _x(3))
    with pytest.raises(converter.SignatureMismatchError, match="args\\[0\\]"):
        tm(torch.zeros(4))
    with pytest.raises(converter.SignatureMismatchError):
        tm(torch.zeros(3, dtype=torch.float64))
    np.testing.assert_allclose(tm(np.ones(3, np.float32)).numpy(), 2.0)  # NumPy: the general path


def test_fast_path_sees_replaced_and_moved_parameters():
    """The fast path reuses the parameters it checked while the module holds the same
    tensors: a replaced parameter is used, one moved by ``.to()`` raises, as on the first call."""
    tm = _convert(lambda p, x: x @ p["w"], _x(2, 3), params={"w": _x(3, 4)})
    x = torch.from_numpy(_x(2, 3))
    tm(x)  # checked and kept
    w = RNG.normal(size=(3, 4)).astype(np.float32)
    tm.load_state_dict({"params_w": torch.from_numpy(w)}, assign=True)
    np.testing.assert_allclose(tm(x).detach().numpy(), x.numpy() @ w, rtol=1e-5, atol=1e-6)
    assert tm._checked is not None
    tm.to(torch.float32)  # nn.Module._apply swaps .data in place where it can (CPU -> CUDA)
    assert tm._checked is None  # so the parameters are checked again
    tm.to("meta")
    with pytest.raises(converter.ConversionError, match="parameter params_w is on meta"):
        tm(x)


def test_attention_is_sdpa(monkeypatch):
    def attend(q, k, v, mask):
        w = jnp.einsum("bqhd,bkhd->bhqk", q / jnp.sqrt(8.0), k)
        w = jnp.where(mask, w, jnp.finfo(jnp.float32).min)
        return jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(w), v)

    q, k, v = _x(2, 5, 3, 8), _x(2, 6, 3, 8), _x(2, 6, 3, 8)
    mask = RNG.random((2, 1, 5, 6)) > 0.3
    mask[0, 0, 1, :] = False  # a fully masked row: uniform weights in both
    _check(
        attend,
        q,
        k,
        v,
        mask,
        present=[aten._scaled_dot_product_flash_attention_for_cpu.default],
        absent=[aten._softmax.default],
        monkeypatch=monkeypatch,
    )


@pytest.mark.parametrize("c", [-2.0, 0.0])
def test_queries_divided_by_a_constant(c):
    """``q / c`` before attention: a negative ``c`` goes into SDPA's scale like any other
    (``scale * (1 / c)``, here ``1 / c``: the program has no ``1/sqrt(d)``); ``c = 0`` stays a
    division (``1 / 0`` cannot be folded): ``q / 0`` is infinite, rows of NaN in both."""

    def attend(q, k, v):
        w = jnp.einsum("bqhd,bkhd->bhqk", q / c, k)
        return jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(w), v)

    q, k, v = _x(1, 3, 2, 4), _x(1, 4, 2, 4), _x(1, 4, 2, 4)
    tm = _convert(attend, q, k, v)
    if c:
        assert _sdpa(tm).kwargs["scale"] == 1 / c
    with torch.no_grad():
        got = tm(*(torch.from_numpy(a) for a in (q, k, v))).numpy()
    want = np.asarray(jax.jit(attend)(q, k, v))
    assert bool(np.isnan(want).any()) == (c == 0.0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_attention_with_non_finite_inputs():
    """NaN and ``±inf`` in ``q``, ``k``, ``v``: the program's numbers (torch's fused kernel alone
    gives 0 for a row whose scores are all NaN or ``-inf``, the program NaN)."""

    def attend(q, k, v):
        w = jnp.einsum("bqhd,bkhd->bhqk", q, k)
        return jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(w), v)

    q, k, v = _x(1, 3, 2, 4), _x(1, 4, 2, 4), _x(1, 4, 2, 4)
    tm = _convert(attend, q, k, v)
    assert aten._softmax.default not in _targets(tm)
    cases = []
    for i, value in itertools.product(range(3), (np.nan, np.inf, -np.inf)):
        args = [a.copy() for a in (q, k, v)]
        args[i][0, 1, 0, 2] = value
        cases.append(args)
    args = [a.copy() for a in (q, k, v)]
    args[1][0, :, 1, 0] = -np.inf  # every key of head 1: every row NaN
    cases.append(args)
    args = [a.copy() for a in (q, k, v)]
    args[0][0, 2, 0, :], args[1][0, :, 0, :] = [-np.inf, 0, 0, 0], 1.0  # scores of a row all -inf
    cases.append(args)
    for args in cases:
        with torch.no_grad():
            got = tm(*(torch.from_numpy(a) for a in args)).numpy()
        want = np.asarray(jax.jit(attend)(*args))
        assert not np.isfinite(want).all()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("diagonal", "causal"), [(0, True), (-1, False), (1, False)])
def test_constant_causal_mask_is_is_causal(diagonal, causal, monkeypatch):
    """A constant tril mask (top-left aligned, 5 queries x 6 keys) is torch's is_causal; a
    mask shifted off the diagonal is not (diagonal -1 masks the whole first row: uniform)."""

    def attend(q, k, v):
        mask = jnp.tril(jnp.ones((5, 6), bool), diagonal)
        w = jnp.einsum("bqhd,bkhd->bhqk", q * 0.25, k)
        w = jnp.where(mask, w, jnp.finfo(jnp.float32).min)
        return jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(w), v)

    q, k, v = _x(2, 5, 3, 8), _x(2, 6, 3, 8), _x(2, 6, 3, 8)
    tm = _check(attend, q, k, v, absent=[aten._softmax.default, aten.mul.Tensor], monkeypatch=monkeypatch)
    node = _sdpa(tm)
    assert (len(node.args) > 4 and node.args[4] is True) is causal
    assert ("attn_mask" in node.kwargs) is not causal
    assert node.kwargs["scale"] == 0.25  # q * 0.25: SDPA's scale


def test_causal_mask_too_large_to_fold_is_is_causal(monkeypatch):
    """A causal mask broadcast to 5 batches x 4 heads x 64 x 64 (81920 elements: above the
    folding limit, so ``where(expand(tril), ...)`` stays in the graph) is still is_causal:
    no mask is computed on each call."""

    def attend(q, k, v):
        mask = jnp.broadcast_to(jnp.tril(jnp.ones((64, 64), bool)), (5, 4, 64, 64))
        w = jnp.einsum("bqhd,bkhd->bhqk", q * 0.25, k)
        w = jnp.where(mask, w, jnp.finfo(jnp.float32).min)
        return jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(w), v)

    q, k, v = _x(5, 64, 4, 8), _x(5, 64, 4, 8), _x(5, 64, 4, 8)
    tm = _check(attend, q, k, v, absent=[aten.where.self, aten.expand.default], monkeypatch=monkeypatch)
    node = _sdpa(tm)
    assert len(node.args) > 4 and node.args[4] is True and "attn_mask" not in node.kwargs


def test_attention_with_a_small_mask_fill_is_not_sdpa():
    """where(mask, s, -1e4) is not s + (-1e4) for a fully masked row: no rewrite."""

    def attend(q, k, v, mask):
        w = jnp.where(mask, jnp.einsum("bqd,bkd->bqk", q, k), -1e4)
        return jnp.einsum("bqk,bkd->bqd", jax.nn.softmax(w), v)

    q, k, v = _x(2, 5, 8), _x(2, 6, 8), _x(2, 6, 8)
    mask = RNG.random((2, 5, 6)) > 0.3
    mask[0, 1, :] = False
    _check(attend, q, k, v, mask, absent=[aten._scaled_dot_product_flash_attention_for_cpu.default])


def test_vector_added_along_a_convolutions_batch_dim_is_not_its_bias():
    """A convolution whose output layout puts the channels first and the batch last
    (``CWN``: the permute of torch's ``(N, C, W)`` is ``[1, 2, 0]``) plus a vector along that
    last dim: one value per batch element, not a per-channel bias (3 of each, so fusing it
    as the convolution's bias would run and be wrong)."""
    w, b = _x(3, 2, 2), _x(3)

    def fn(x):
        return lax.conv_general_dilated(x, w, (1,), "VALID", dimension_numbers=("NCW", "OIW", "CWN")) + b

    tm = _check(fn, _x(3, 2, 5))
    (conv,) = [n for n in tm.graph_module.graph.nodes if aten_target(n) is aten.convolution.default]
    assert conv.args[2] is None


def test_convolution_read_twice_keeps_its_bias_out():
    """A channels-last convolution plus a bias, whose bias-free result is also an output
    (channels-last: the permute is read twice; transposed: the convolution is, by the two
    permutes composed): the bias is not fused into the convolution (the other read would
    get it too)."""
    w, b = _x(3, 3, 2, 4), _x(4)

    def fn(x):
        y = lax.conv_general_dilated(x, w, (1, 1), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return y + b, y

    def transposed(x):
        y = fn(x)[1]
        return y + b, jnp.transpose(y, (0, 3, 2, 1))

    x = _x(1, 4, 4, 2)
    for f in (fn, transposed):
        tm = _convert(f, x)
        with torch.no_grad():
            got = [t.numpy() for t in tm(torch.from_numpy(x))]
        for g, want in zip(got, jax.jit(f)(x), strict=True):
            np.testing.assert_allclose(g, np.asarray(want), rtol=1e-5, atol=1e-5)


def test_bias_computed_after_the_product_is_not_fused():
    w, b = _x(4, 5), _x(5)
    _check(lambda x, s: x @ w + b * s, _x(3, 4), np.float32(3.0))


def test_parameters_and_constants_are_aligned():
    """Parameters and graph constants live in 64-byte aligned memory: inductor copies a
    misaligned parameter on every call of a compiled module (NumPy's arrays are 16-aligned)."""
    w, b = _x(7, 5), _x(5)
    tm = _convert(lambda p, x: x @ p["w"] + p["b"] + jnp.arange(5.0), _x(3, 7), params={"w": w, "b": b})
    tensors = [*tm.parameters(), *tm.buffers()]
    tensors += [getattr(tm.graph_module, n.target) for n in tm.graph_module.graph.nodes if n.op == "get_attr"]
    assert len(tensors) >= 3
    assert all(t.data_ptr() % 64 == 0 for t in tensors)
    # constants above the folding limit stay the trace's own (NumPy-backed, 16-aligned) tensors
    big = [_x(1 << 16 | 1) for _ in range(2)]
    tm = _convert(lambda x: x * big[0] + big[1], _x(1 << 16 | 1))
    gm = tm.graph_module
    constants = [getattr(gm, n.target) for n in gm.graph.nodes if n.op == "get_attr"]
    assert len(constants) == 2 and all(t.data_ptr() % 64 == 0 for t in constants)
    assert sorted(tuple(t[:2].tolist()) for t in constants) == sorted(tuple(b[:2].tolist()) for b in big)


def test_compile_fullgraph_without_recompiling_on_new_weights():
    """torch.compile(fullgraph=True) traces forward in one graph; parameters are graph
    inputs, not constants: new values (in place or loaded) reuse the compiled graph."""
    from torch._dynamo.testing import CompileCounter

    apply, params, (x,) = flax_models.decoder_block()
    tm = _convert(apply, x, params=params)
    counter = CompileCounter()
    compiled = torch.compile(tm, backend=counter, fullgraph=True)
    tx = torch.from_numpy(x)
    with torch.no_grad():
        np.testing.assert_allclose(compiled(tx).numpy(), tm(tx).numpy(), rtol=1e-6, atol=1e-6)
        state = {k: v * 1.5 for k, v in tm.state_dict().items()}
        tm.load_state_dict(state)
        got = compiled(tx).numpy()
        next(tm.parameters()).add_(0.25)
        got2 = compiled(tx).numpy()
    scaled = jax.tree_util.tree_map(lambda a: a * 1.5, params)
    np.testing.assert_allclose(got, np.asarray(jax.jit(apply)(scaled, x)), rtol=1e-5, atol=1e-5)
    with torch.no_grad():
        np.testing.assert_allclose(got2, tm(tx).numpy(), rtol=1e-6, atol=1e-6)
    assert counter.frame_count == 1


@pytest.mark.parametrize(
    "name",
    ["float32", "float16", "bfloat16", "complex64", "bool", "int8", "uint8", "uint16", "uint32", "uint64"],
)
def test_weights_are_copied_once_aligned_and_exact(name):
    """A weight becomes a tensor holding the same values as ``numpy_to_torch`` gives (storage
    dtype included), in its own 64-byte aligned memory, from a read-only array (as
    ``from_onnx``'s parameters are) without a warning."""
    import warnings

    import ml_dtypes
    from converter.backends.torch._util import numpy_to_torch, weight_to_torch

    dtype = ml_dtypes.bfloat16 if name == "bfloat16" else np.dtype(name)
    arr = (np.arange(-6, 6) % 5).astype(dtype).reshape(3, 4)
    arr.flags.writeable = False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = weight_to_torch(arr, name)
    want = numpy_to_torch(arr, name)
    assert got.dtype == want.dtype and got.shape == want.shape and torch.equal(got, want)
    assert got.data_ptr() % 64 == 0
    assert not np.shares_memory(got.view(torch.int16).numpy() if name == "bfloat16" else got.numpy(), arr)


@pytest.mark.parametrize("fill", [-np.inf, "tensor"])
def test_attention_with_an_infinite_or_computed_mask_fill_is_not_sdpa(fill):
    """``where(mask, s, -inf)`` is not ``s + (-inf)`` as SDPA's additive bias reads it (a fully
    masked row is NaN in the program); a fill that is no constant cannot be a bias either: no
    rewrite, the program's numbers."""

    def attend(q, k, v, mask, c):
        w = jnp.where(mask, jnp.einsum("bqd,bkd->bqk", q, k), np.float32(-np.inf) if fill != "tensor" else c)
        return jnp.einsum("bqk,bkd->bqd", jax.nn.softmax(w), v)

    q, k, v = _x(1, 3, 4), _x(1, 5, 4), _x(1, 5, 4)
    mask = RNG.random((1, 3, 5)) > 0.3
    mask[0, 1, :] = False
    c = _x(1, 3, 5, scale=10.0)
    tm = _check(attend, q, k, v, mask, c, absent=[aten._scaled_dot_product_flash_attention_for_cpu.default])
    assert aten._softmax.default in _targets(tm)


@pytest.mark.parametrize("n", [1 << 16, (1 << 16) + 1])
def test_input_free_values_are_folded_up_to_the_limit(n):
    """A value that reads no input is computed once at conversion and stored when it has at
    most 65536 elements (exactly 65536 included); a larger one stays computed on each call."""
    tm = _check(lambda x: x * lax.iota(jnp.float32, n), _x(n))
    folded = aten.arange.default not in _targets(tm)
    assert folded == (n <= 1 << 16)
    assert len(list(tm.graph_module.named_buffers())) == (1 if folded else 0)


def _fx(fn, *args):
    """``fn`` (ATen calls) traced to an FX graph whose nodes carry their ``val``s."""
    from torch.fx.experimental.proxy_tensor import make_fx

    return make_fx(fn)(*args)


def test_product_read_beside_its_biased_reshape_keeps_the_bias_out():
    """``mm`` read by a reshape + bias and by another node: only the one-reader product
    takes the bias into an ``addmm`` (the other reader must see the bare product)."""
    from converter.backends.torch.native import fuse_bias

    def shared(x, w, b):
        p = aten.mm.default(x, w)
        return aten.add.Tensor(aten.view.default(p, [2, 3]), b), p

    def single(x, w, b):
        return aten.add.Tensor(aten.view.default(aten.mm.default(x, w), [2, 3]), b)

    args = (torch.randn(2, 4), torch.randn(4, 3), torch.randn(3))
    for fn, fused in ((shared, False), (single, True)):
        gm = _fx(fn, *args)
        fuse_bias(gm)
        gm.recompile()
        targets = {n.target for n in gm.graph.nodes}
        assert (aten.addmm.default in targets) is fused and (aten.add.Tensor in targets) is not fused
        for got, want in zip(
            torch.utils._pytree.tree_leaves(gm(*args)),
            torch.utils._pytree.tree_leaves(fn(*args)),
            strict=True,
        ):
            torch.testing.assert_close(got, want)


_SOFTMAX_TEXT = """
func.func public @main(%x: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %ninf = stablehlo.constant dense<MAXINIT> : tensor<f32>
  %m = stablehlo.reduce(%x init: %ninf) applies stablehlo.maximum across dimensions = [MAXDIM]
      : (tensor<2x2xf32>, tensor<f32>) -> tensor<2xf32>
  %mb = stablehlo.broadcast_in_dim %m, dims = [0] : (tensor<2xf32>) -> tensor<2x2xf32>
  %s = stablehlo.subtract %x, %mb : tensor<2x2xf32>
  %e = stablehlo.exponential %s : tensor<2x2xf32>
  %zero = stablehlo.constant dense<SUMINIT> : tensor<f32>
  %t = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [1]
      : (tensor<2x2xf32>, tensor<f32>) -> tensor<2xf32>
  %tb = stablehlo.broadcast_in_dim %t, dims = [0] : (tensor<2xf32>) -> tensor<2x2xf32>
  %r = stablehlo.divide %e, %tb : tensor<2x2xf32>
  return %r : tensor<2x2xf32>
}
"""


@pytest.mark.parametrize(
    ("max_dim", "max_init", "sum_init"),
    [(1, -np.inf, 0.0), (0, -np.inf, 0.0), (1, 0.0, 0.0), (1, -np.inf, 1.0)],
    ids=["softmax", "max-over-dim-0", "max-init-0", "sum-init-1"],
)
def test_softmax_pattern_needs_its_max_dims_and_inits(max_dim, max_init, sum_init):
    """``exp(x - max) / sum`` over dim 1 is ``F.softmax`` only with the max over dim 1 too
    (a square operand's max over dim 0 broadcasts the same way) and the inits ``-inf`` and
    ``0``: otherwise another row's max, or 0, shifts a row of large negatives into ``exp``
    underflow (0 / 0: NaN, as NumPy computes it), or the sum is off by its init."""
    x = np.array([[1000, 999], [-1000, -1001]], np.float32)
    text = _SOFTMAX_TEXT.replace("MAXDIM", str(max_dim)).replace("SUMINIT", repr(sum_init))
    text = text.replace("MAXINIT", "0xFF800000" if max_init == -np.inf else repr(max_init))
    tm = converter.from_stablehlo(text).to_torch()
    assert (aten._softmax.default in _targets(tm)) is ((max_dim, max_init, sum_init) == (1, -np.inf, 0.0))
    peak = np.maximum(x.max(axis=max_dim), np.float32(max_init))
    shifted = x - peak[:, None]
    with np.errstate(invalid="ignore"):
        want = np.exp(shifted) / (np.exp(shifted).sum(axis=1, keepdims=True) + np.float32(sum_init))
    np.testing.assert_allclose(tm(torch.from_numpy(x)).numpy(), want, rtol=1e-6)


def test_view_chain_passes_on_an_fx_graph():
    """``collapse_views``: a ``transpose`` with negative dims is the ``permute`` swapping
    them, two permutes that cancel are none, a reshape of a reshape reads the first input,
    an ``expand`` to the shape it has is its input; the values stay eager's."""
    from converter.backends.torch.native import collapse_views, eliminate_dead_code

    def fn(x):
        t = aten.transpose.int(x, -1, 0)  # (4, 3, 2)
        back = aten.permute.default(aten.permute.default(x, [1, 2, 0]), [2, 0, 1])
        flat = aten.view.default(aten.view.default(x, [6, 4]), [3, 8])
        same = aten.expand.default(x, [2, 3, 4])
        return (
            aten.mul.Tensor(t, 2.0),
            aten.mul.Tensor(back, 3.0),
            aten.neg.default(flat),
            aten.neg.default(same),
        )

    x = torch.randn(2, 3, 4)
    gm = _fx(fn, x)
    collapse_views(gm)
    eliminate_dead_code(gm)
    gm.recompile()
    nodes = [n for n in gm.graph.nodes if n.op == "call_function"]
    assert [n.args[1] for n in nodes if n.target is aten.permute.default] == [[2, 1, 0]]
    assert [n.target for n in nodes].count(aten.reshape.default) == 1
    assert not any(n.target in (aten.transpose.int, aten.expand.default, aten.view.default) for n in nodes)
    for got, want in zip(gm(x), fn(x), strict=True):
        assert torch.equal(got, want)


def _with_buffers(fn, args, constants):
    """``fn(*args, *constants)`` traced, the ``constants`` read from buffers (as folded)."""
    gm = _fx(fn, *args, *constants)
    extra = [n for n in gm.graph.nodes if n.op == "placeholder"][len(args) :]
    for i, (node, value) in enumerate(zip(extra, constants, strict=True)):
        gm.register_buffer(f"_folded_constant{i}", value)
        with gm.graph.inserting_before(node):
            const = gm.graph.get_attr(f"_folded_constant{i}")
        const.meta["val"] = node.meta["val"]
        node.replace_all_uses_with(const)
        gm.graph.erase_node(node)
    gm.recompile()
    return gm


@pytest.mark.parametrize(("k", "divisor"), [(1.0, 1), (2.0**31 - 1, 2**31 - 1), (2.0**31, None)])
def test_sum_pool_divided_by_a_boundary_constant(k, divisor):
    """``divisor_override`` takes a divisor ``k`` in ``1 <= k < 2**31`` (an int32 of the
    kernel), 1 and ``2**31 - 1`` included, the division then gone; ``2**31`` keeps it."""
    from converter.backends.torch.native import pool_divisors

    def fn(x, c):
        return aten.div.Tensor(aten.avg_pool2d.default(x, [2, 2], [2, 2], [0, 0], False, True, 1), c)

    x = torch.arange(32.0).reshape(1, 2, 4, 4)
    gm = _with_buffers(fn, (x,), (torch.tensor(k, dtype=torch.float64),))
    pool_divisors(gm)
    gm.graph.eliminate_dead_code()
    gm.recompile()
    (pool,) = [n for n in gm.graph.nodes if n.target is aten.avg_pool2d.default]
    assert pool.args[6] == (1 if divisor is None else divisor)
    assert any(n.target is aten.div.Tensor for n in gm.graph.nodes) is (divisor is None)
    want = torch.nn.functional.avg_pool2d(x, 2, 2, divisor_override=1) / k
    torch.testing.assert_close(gm(x), want)


def test_fold_constants_leaves_uninitialized_and_mutated_values():
    """``fold_constants`` turns an input-free value into a buffer, but not an ``empty``
    (uninitialized) one nor one a later node writes in place (a folded buffer would keep
    the writes of earlier calls): calling twice gives eager's values both times."""
    from converter.backends.torch.native import fold_constants

    def fn(x):
        ramp = aten.mul.Tensor(aten.arange.default(4, dtype=torch.float32), 2.0)
        acc = aten.zeros.default([4], dtype=torch.float32)
        aten.add_.Tensor(acc, x)
        scratch = aten.empty.memory_format([4], dtype=torch.float32)
        return aten.add.Tensor(x, ramp), acc, aten.fill_.Scalar(scratch, 1.0)

    x = torch.tensor([1.0, -1.0, 0.5, 2.0])
    gm = _fx(fn, x)
    fold_constants(gm)
    gm.graph.eliminate_dead_code()
    gm.recompile()
    assert len([n for n in gm.graph.nodes if n.op == "get_attr"]) == 1
    assert len(dict(gm.named_buffers())) == 1  # the ramp read only by a folded node: not stored
    targets = {n.target for n in gm.graph.nodes}
    assert aten.zeros.default in targets and aten.empty.memory_format in targets
    for _ in range(2):
        for got, want in zip(gm(x), fn(x), strict=True):
            assert torch.equal(got, want)


def test_bias_of_the_split_columns_is_inside_addmm():
    """A product ``(4, 6)`` viewed as ``(4, 2, 3)`` plus a bias ``(2, 3)`` (Flax's
    ``DenseGeneral``) is ``addmm`` with the bias flattened; a ``(3,)`` bias (repeated per
    head: not one value per column) stays an ``add``. Values as eager."""
    from converter.backends.torch.native import fuse_bias

    x, w = torch.randn(4, 5), torch.randn(5, 6)
    cases = [([4, 2, 3], (2, 3), True), ([4, 2, 3], (3,), False), ([4, 2, 3], (1, 2, 3), True)]
    for shape, bias, fused in [*cases, ([2, 2, 6], (6,), True)]:  # rows split, columns kept
        b = torch.randn(bias)

        def fn(x, w, b):
            return aten.add.Tensor(aten.view.default(aten.mm.default(x, w), shape), b)  # noqa: B023

        gm = _fx(fn, x, w, b)
        fuse_bias(gm)
        gm.recompile()
        assert (aten.addmm.default in {n.target for n in gm.graph.nodes}) is fused, (shape, bias)
        torch.testing.assert_close(gm(x, w, b), fn(x, w, b))

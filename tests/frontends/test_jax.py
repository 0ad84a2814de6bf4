"""from_jax → to_jax round trips: pytrees, statics, params, Exported inputs, dropped args."""

import warnings
from collections import namedtuple

import jax
import jax.numpy as jnp
import numpy as np
import onnxruntime as ort
import pytest
import torch
from converter.frontends.jax import tree_spec

import converter
from converter import SignatureMismatchError


def _close(a, b):
    jax.tree_util.tree_map(
        lambda x, y: np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-6), a, b
    )


def test_pytree_round_trip(rng):
    def f(x, ys, *, scale):
        return {"out": x["a"] @ x["b"] * scale, "pair": (ys[0] + 1, ys[1].sum())}

    x = {
        "b": rng.standard_normal((3, 2)).astype(np.float32),
        "a": rng.standard_normal((4, 3)).astype(np.float32),
    }
    ys = [np.ones(2, np.float32), rng.standard_normal((5,)).astype(np.float32)]
    m = converter.from_jax(f, x, ys, scale=jnp.float32(2))
    assert [s.name for s in m.signature.inputs] == [
        "args[0]['a']",
        "args[0]['b']",
        "args[1][0]",
        "args[1][1]",
        "kwargs['scale']",
    ]
    assert [s.name for s in m.signature.outputs] == [
        "outputs['out']",
        "outputs['pair'][0]",
        "outputs['pair'][1]",
    ]
    got = m.to_jax()(x, ys, scale=jnp.float32(2))
    _close(got, f(x, ys, scale=jnp.float32(2)))
    assert isinstance(got["pair"], tuple)


def test_statics_are_specialised():
    def f(x, cfg):
        y = x * cfg["scale"]
        return jnp.tanh(y) if cfg["act"] == "tanh" else y

    x = np.linspace(-1, 1, 6, dtype=np.float32)
    cfg = {"scale": 3.0, "act": "tanh", "bias": None, "flag": True}
    m = converter.from_jax(f, x, cfg)
    statics = m.signature.in_tree["children"][0]["children"][1]
    assert statics == {
        "kind": "dict",
        "keys": ["act", "bias", "flag", "scale"],
        "children": [
            {"kind": "static", "value": "tanh"},
            {"kind": "none"},
            {"kind": "static", "value": True},
            {"kind": "static", "value": 3.0},
        ],
    }
    g = m.to_jax()
    _close(g(x, cfg), f(x, cfg))
    with pytest.raises(SignatureMismatchError, match=r"args\[1\]\['scale'\]"):
        g(x, {**cfg, "scale": 4.0})


def test_params_named_by_key_path(rng):
    def apply(p, x):
        return jnp.tanh(x @ p["dense"]["kernel"] + p["dense"]["bias"]) @ p["out"]

    p = {
        "dense": {"kernel": rng.standard_normal((3, 4)).astype(np.float32), "bias": np.zeros(4, np.float32)},
        "out": rng.standard_normal((4, 2)).astype(np.float32),
    }
    x = rng.standard_normal((5, 3)).astype(np.float32)
    m = converter.from_jax(apply, x, params=p)
    names = [s.name for s in m.signature.params]
    assert names == ["params['dense']['bias']", "params['dense']['kernel']", "params['out']"]
    assert all(s.kind == "parameter" for s in m.signature.params)
    np.testing.assert_array_equal(m.params["params['out']"], p["out"])
    g = m.to_jax()
    _close(g(x), apply(p, x))
    # gradients in the parameters match jax.grad of the source
    flat = {f"params['dense']['{k}']": v for k, v in p["dense"].items()} | {"params['out']": p["out"]}
    got = jax.grad(lambda q: g.apply(q, x).sum())(flat)
    want = jax.grad(lambda q: apply(q, x).sum())(p)
    np.testing.assert_allclose(got["params['dense']['kernel']"], want["dense"]["kernel"], rtol=1e-5)


def test_jitted_function_and_namedtuple():
    Pair = namedtuple("Pair", ["lo", "hi"])

    @jax.jit
    def f(pair):
        return pair.hi - pair.lo

    pair = Pair(np.zeros(3, np.float32), np.arange(3, dtype=np.float32))
    m = converter.from_jax(f, pair)
    assert m.signature.in_tree["children"][0]["children"][0]["type"] == "Pair"
    _close(m.to_jax()(pair), f(pair))
    _close(m.to_jax()({"lo": pair.lo, "hi": pair.hi}), f(pair))


def test_exported_input(rng):
    def f(p, x):
        return {"y": x @ p["w"]}

    p = {"w": rng.standard_normal((3, 2)).astype(np.float32)}
    x = rng.standard_normal((4, 3)).astype(np.float32)
    exp = jax.export.export(jax.jit(f))(p, x)
    m = converter.from_jax(exp)
    assert m.signature.params == ()
    _close(m.to_jax()(p, x), f(p, x))
    m = converter.from_jax(exp, params=p)
    assert [s.name for s in m.signature.params] == ["params['w']"]
    _close(m.to_jax()(x), f(p, x))
    # a serialized Exported round trips too
    m = converter.from_jax(jax.export.deserialize(exp.serialize()))
    _close(m.to_jax()(p, x), f(p, x))


def test_dropped_args_recorded_and_accepted():
    def f(a, b, c):
        return a * 2 + c

    a, b, c = (np.full(3, v, np.float32) for v in (1, 2, 3))
    m = converter.from_jax(f, a, b, c)
    assert m.signature.kept_var_idx == (0, 2)
    assert len(m.signature.inputs) == 3
    main_args = converter.mlir.main_function(m.mlir).regions[0].blocks[0].arguments
    assert len(main_args) == 2
    _close(m.to_jax()(a, b, c), f(a, b, c))


def test_save_load_keeps_tree_and_kept_idx(tmp_path):
    def f(x, unused, cfg):
        return x + cfg["k"]

    x = np.ones(2, np.float32)
    m = converter.from_jax(f, x, x, {"k": 2})
    m.save(tmp_path / "m.shlo")
    m2 = converter.load(tmp_path / "m.shlo")
    assert m2.signature == m.signature
    _close(m2.to_jax()(x, x, {"k": 2}), f(x, x, {"k": 2}))


def test_unsupported_leaf_names_path():
    with pytest.raises(TypeError, match=r"args\[1\]\['mask'\]"):
        converter.from_jax(lambda x, y: x, np.ones(2), {"mask": object()})


def test_tree_spec_sorts_dict_keys_like_jax():
    tree = {"b": 1.0, "a": np.ones(1), "c": [np.ones(1), None]}
    spec = tree_spec(tree)
    assert spec["keys"] == ["a", "b", "c"]
    assert [type(v).__name__ for v in jax.tree_util.tree_leaves(tree)][0] == "ndarray"


def test_python_scalar_and_none_outputs():
    def f(x):
        return {"y": x + 1, "n": 3, "none": None}

    x = np.ones(2, np.float32)
    m = converter.from_jax(f, x)
    out = m.to_jax()(x)
    assert out["none"] is None and int(out["n"]) == 3
    np.testing.assert_array_equal(out["y"], x + 1)


def test_shape_polymorphic_exported_records_symbolic_dims():
    (b,) = jax.export.symbolic_shape("b")
    exp = jax.export.export(jax.jit(lambda x: jnp.sin(x) * 2))(jax.ShapeDtypeStruct((b, 3), jnp.float32))
    m = converter.from_jax(exp)
    assert m.signature.inputs[0].shape == ("b", 3)
    # the JAX backend specializes the module to each call's shapes (converter.passes.shapes)
    f = m.to_jax()
    for n in (1, 4):
        x = np.arange(3 * n, dtype=np.float32).reshape(n, 3)
        np.testing.assert_allclose(np.asarray(f(x)), np.sin(x) * 2, rtol=1e-6)
    # the torch backend runs it at any size too (one traced graph per shape)
    t = m.to_torch()
    for n in (2, 5):
        x = np.arange(3 * n, dtype=np.float32).reshape(n, 3)
        np.testing.assert_allclose(t(torch.from_numpy(x)).numpy(), np.sin(x) * 2, rtol=1e-6)


def test_custom_vjp_is_reported():
    @jax.custom_vjp
    def clip_grad(x):
        return x

    clip_grad.defvjp(lambda x: (x, None), lambda _, g: (jnp.clip(g, -0.1, 0.1),))

    x = np.ones(3, np.float32)
    with pytest.warns(UserWarning, match="clip_grad"):
        m = converter.from_jax(lambda x: jax.jit(clip_grad)(x) * 2, x)
    assert "clip_grad" in m.meta["warnings"][0]
    _close(m.to_jax()(x), 2 * x)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        converter.from_jax(lambda x: jax.nn.relu(x) * 2, x)  # custom_jvp (relu) is not reported


def test_exported_params_mismatch_is_reported():
    exp = jax.export.export(jax.jit(lambda p, x: x @ p["w"]))(
        {"w": np.ones((3, 2), np.float32)}, np.ones(3, np.float32)
    )
    with pytest.raises(SignatureMismatchError, match="params has 2 leaves"):
        converter.from_jax(exp, params={"w": np.ones((3, 2), np.float32), "b": np.ones(2, np.float32)})


def test_typed_prng_keys_are_taken_and_returned_as_key_data():
    """``jax.random.key`` inputs and outputs (typed ``key<fry>`` arrays): the module holds
    their key data (``uint32[..., 2]``, what StableHLO has); the JAX function takes the
    typed key or its data (the torch module its data) and draws JAX's numbers."""

    def noisy(x, key):
        key, sub = jax.random.split(key)
        return x + jax.random.normal(sub, x.shape), key

    x, key = np.ones((2, 3), np.float32), jax.random.key(7)
    m = converter.from_jax(noisy, x, key)
    assert [(s.shape, s.dtype) for s in m.signature.inputs] == [((2, 3), "float32"), ((2,), "uint32")]
    assert m.signature.outputs[1].shape == (2,) and m.signature.outputs[1].dtype == "uint32"
    want_y, want_key = jax.jit(noisy)(x, key)
    y, new_key = m.to_jax()(x, key)
    np.testing.assert_array_equal(np.asarray(y), np.asarray(want_y))
    np.testing.assert_array_equal(np.asarray(new_key), np.asarray(jax.random.key_data(want_key)))
    np.testing.assert_array_equal(np.asarray(m.to_jax()(x, jax.random.key_data(key))[0]), np.asarray(want_y))


def test_stop_gradient_is_kept(tmp_path):
    """``lax.stop_gradient`` (no StableHLO op: JAX lowers it to nothing) is kept as a marked
    custom call: gradients through ``to_jax`` and ``to_torch`` equal ``jax.grad`` of the
    source (they flowed through it: a target network, a commitment loss...)."""

    def fn(w, x):
        h = jnp.tanh(x @ w)
        return jnp.sum((h - jax.lax.stop_gradient(h.mean(0))) ** 2) + jnp.sum(jax.lax.stop_gradient(w) * w)

    w = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    x = np.linspace(-2, 1, 15, dtype=np.float32).reshape(5, 3)
    m = converter.from_jax(fn, x, params=w)
    want = jax.grad(fn)(w, x)
    f = m.to_jax()
    np.testing.assert_allclose(
        jax.grad(lambda p: f.apply(p, x))(f.params)["params"], want, rtol=1e-5, atol=1e-6
    )
    t = m.to_torch()
    t(torch.from_numpy(x)).backward()
    np.testing.assert_allclose(next(t.parameters()).grad.numpy(), want, rtol=1e-5, atol=1e-6)
    session = ort.InferenceSession(m.to_onnx().SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(session.run(None, {"args[0]": x})[0], np.asarray(jax.jit(fn)(w, x)), rtol=1e-6)
    from converter.tools import cli  # --to stablehlo writes no marker other consumers would not know

    cli.write_stablehlo(m, tmp_path / "f.mlir", None)
    assert (
        "converter.stop_gradient" in m.text()
        and "converter.stop_gradient" not in (tmp_path / "f.mlir").read_text()
    )
    # the Exported a JaxFunction calls under jax.export's symbolic shapes: XLA runs it
    # (it knows no marker), forward only (it has no VJP)
    got = f._exported().call(*[f.params[p.name] for p in m.signature.params], x)
    np.testing.assert_allclose(np.asarray(got[0]), np.asarray(jax.jit(fn)(w, x)), rtol=1e-6)


def test_stop_gradient_is_kept_on_symbolic_shapes():
    """On ``jax.export`` symbolic shapes the marker carries its shape as an operand (StableHLO
    shape refinement reads it): gradients of ``to_jax``/``to_torch`` at two batch sizes equal
    ``jax.grad`` of the source, no warning (it was dropped, with a warning, and gradients
    flowed through it), and the unmarked form XLA runs computes the source's value."""

    def fn(w, x):
        h = jnp.tanh(x @ w)
        return jnp.sum((h - jax.lax.stop_gradient(h.mean(0))) ** 2)

    w = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    (b,) = jax.export.symbolic_shape("b")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = converter.from_jax(fn, jax.ShapeDtypeStruct((b, 3), np.float32), params=w)
    f, t = m.to_jax(), m.to_torch()
    for n in (2, 5):
        x = np.linspace(-2, 1, 3 * n, dtype=np.float32).reshape(n, 3)
        want = jax.grad(fn)(w, x)
        got = jax.grad(lambda p, x=x: f.apply(p, x))(f.params)["params"]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        t.zero_grad()
        t(torch.from_numpy(x)).backward()
        np.testing.assert_allclose(next(t.parameters()).grad.numpy(), want, rtol=1e-5, atol=1e-6)
    value = f._exported().call(f.params[m.signature.params[0].name], x)[0]
    np.testing.assert_allclose(np.asarray(value), np.asarray(fn(w, x)), rtol=1e-6)


def test_stop_gradient_marking_is_per_thread():
    """While one thread is inside ``from_jax``'s marking scope, another thread's ``jax.jit``
    of a fresh ``stop_gradient`` program lowers it as JAX does (XLA knows no marker: it failed
    with NOT_FOUND when the rule was swapped process-wide), and the scope still marks."""
    import threading

    from converter import _jax_internal

    inside, done = threading.Event(), threading.Event()
    results: dict = {}

    def other_thread():
        inside.wait(10)
        g = jax.jit(lambda v: jnp.sum(jax.lax.stop_gradient(v) * v * 3.0))
        results["other"] = float(jax.grad(g)(jnp.float32(2.0)))
        done.set()

    thread = threading.Thread(target=other_thread)
    thread.start()
    with _jax_internal.stop_gradient_marked():
        inside.set()
        done.wait(20)
        exp = jax.export.export(
            jax.jit(lambda v: jax.lax.stop_gradient(v) * v),
            disabled_checks=[jax.export.DisabledSafetyCheck.custom_call(_jax_internal.STOP_GRADIENT_TARGET)],
        )(jax.ShapeDtypeStruct((2,), jnp.float32))
    thread.join()
    assert results["other"] == 6.0
    assert _jax_internal.STOP_GRADIENT_TARGET in exp.mlir_module()


def test_function_of_no_argument_and_parameter_checks():
    """A function of no argument converts;
    non-array parameters are refused naming their path; a variables dict whose other entry
    is no collection (a dict) has no Flax state."""
    from converter.frontends.jax import _flax_state, _param_names

    m = converter.from_jax(lambda: jnp.arange(3.0) * 2)
    assert m.signature.inputs == () and m.signature.params == ()
    _close(m.to_jax()(), np.arange(3.0) * 2)
    with pytest.raises(TypeError, match=r"params\['b'\]: parameters must be arrays, got int"):
        _param_names({"w": np.ones(2), "b": 3})
    names = ["params['params']['w']", "params['scale']"]
    assert _flax_state({"params": {"w": np.ones(2)}, "scale": np.ones(1)}, names) == set()
    assert _flax_state({"params": {"w": np.ones(2)}, "stats": {"s": np.ones(1)}}, names) == {
        "params['scale']"
    }

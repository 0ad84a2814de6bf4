"""JAX's default mode (``jax_enable_x64`` off): a converted GPT-2 with int64 or int32 token
ids runs in its 32-bit form (``converter.passes.narrow``) under every JAX transform, with
torch's numbers, and never switches x64 on; out-of-range values raise named errors. The
same for a ``from_jax`` module written under x64."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

import converter
from converter.errors import InputRangeError, NarrowingError, SignatureMismatchError
from tests.examples_converted import torch_example


@pytest.fixture
def x64_off():
    """The process default, set process-wide (conftest turns x64 on for the suite), so that
    a call switching it on globally would be seen; restored after."""
    jax.config.update("jax_enable_x64", False)
    try:
        yield
        assert not jax.config.jax_enable_x64  # nothing switched it on
    finally:
        jax.config.update("jax_enable_x64", True)


class GPT2:
    def __init__(self):
        self.model, (ids,), self.module = torch_example("gpt2")
        self.ids = ids.numpy()  # int64, (2, 16)
        with jax.enable_x64(False):
            self.f = self.module.to_jax()  # x64 off where to_jax runs: the 32-bit form
        with torch.no_grad():
            self.logits = self.model(ids).logits.numpy()


@pytest.fixture(scope="module")
def gpt2() -> GPT2:
    return GPT2()


def _logits(out) -> np.ndarray:
    return np.asarray(out["logits"])


FORMS = {
    "f(int64 numpy)": lambda f, ids: _logits(f(ids)),
    "f(int32 numpy)": lambda f, ids: _logits(f(ids.astype(np.int32))),
    "f(jnp.asarray(ids))": lambda f, ids: _logits(f(jnp.asarray(ids))),
    "jax.jit(f)(ids)": lambda f, ids: _logits(jax.jit(f)(ids)),
    "jax.jit(f.apply)(params, ids)": lambda f, ids: _logits(jax.jit(f.apply)(f.params, ids)),
    "jax.jit(lambda f, x: f(x))(f, ids)": lambda f, ids: _logits(jax.jit(lambda g, x: g(x))(f, ids)),
    "jax.vmap(f)": lambda f, ids: _unreverse(_logits(jax.vmap(f)(np.stack([ids, ids[::-1]])))),
}


def _unreverse(out: np.ndarray) -> np.ndarray:
    """vmap over (ids, ids with the batch reversed): both results in the order of ids."""
    return np.stack([out[0], out[1][::-1]])


@pytest.mark.parametrize("form", FORMS)
def test_gpt2_forms_match_torch(gpt2, x64_off, form):
    assert gpt2.f.signature.inputs[0].dtype == "int32"
    assert gpt2.f.signature.narrowed == {"args[0]": "int64"}
    got = FORMS[form](gpt2.f, gpt2.ids)
    assert got.dtype == np.float32
    want = gpt2.logits if got.ndim == 3 else np.stack([gpt2.logits, gpt2.logits])  # vmap: 2 batches
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_gpt2_grad_matches_torch_autograd(gpt2, x64_off):
    f, model = gpt2.f, gpt2.model
    trainable, state = f.partition()
    loss = lambda p, ids: jnp.sum(f.apply({**p, **state}, ids)["logits"] ** 2) / 1000  # noqa: E731
    grads = jax.jit(jax.grad(loss))(trainable, gpt2.ids)
    model.zero_grad()
    (model(torch.from_numpy(gpt2.ids)).logits.pow(2).sum() / 1000).backward()
    want = {n: p.grad.numpy() for n, p in model.named_parameters()}
    assert set(grads) <= set(want) and len(grads) > 20
    for name, g in grads.items():
        np.testing.assert_allclose(np.asarray(g), want[name], rtol=1e-4, atol=1e-5, err_msg=name)
    model.zero_grad()


def test_out_of_range_ids_are_refused_never_wrapped(gpt2, x64_off):
    f = gpt2.f
    for bad in (2**31, -(2**31) - 1):
        ids = gpt2.ids.copy()
        ids[1, 3] = bad
        with pytest.raises(InputRangeError, match=rf"args\[0\]: holds {bad}, outside the int32 range"):
            f(ids)
    edge = gpt2.ids.copy()
    edge[0, 0] = 2**31 - 1  # fits: taken (the gather clamps the index, as in the source)
    assert np.isfinite(_logits(f(edge))).all()


def test_traced_int64_under_an_x64_scope_runs_the_64bit_module(gpt2, x64_off):
    """x64 switched on around a transform: the ids arrive as int64 tracers, whose values
    cannot be checked to fit, so the call runs the source's 64-bit module (exact)."""
    f = gpt2.f
    with jax.enable_x64(True):
        out = jax.jit(f.apply)(f.params, gpt2.ids)
    np.testing.assert_allclose(_logits(out), gpt2.logits, rtol=1e-5, atol=1e-5)


def test_explicit_choices(gpt2, x64_off):
    f64 = gpt2.module.to_jax(x64=True)  # the 64-bit form (scoped; its numbers: test_models.py)
    assert f64.signature.inputs[0].dtype == "int64"
    with pytest.raises(SignatureMismatchError, match=r"to_jax\(x64=False\)"):
        jax.jit(f64)(gpt2.ids)  # JAX narrowed the ids first: the message names the 32-bit form
    with jax.enable_x64(True):  # x64=False chooses the 32-bit form whatever the setting
        assert gpt2.module.to_jax(x64=False).signature.inputs[0].dtype == "int32"
        assert gpt2.module.to_jax().signature.inputs[0].dtype == "int64"


class _Big(torch.nn.Module):
    """An int64 result past 2**32: no exact 32-bit form."""

    def forward(self, ids):
        return ids * 2**33


@pytest.fixture(scope="module")
def big_module():
    return converter.from_torch(_Big(), (torch.tensor([[1, 2]]),))


def test_no_exact_32bit_form(big_module, x64_off):
    with pytest.raises(NarrowingError, match=r"stablehlo.constant.*8589934592"):
        big_module.to_jax(x64=False)
    f = big_module.to_jax()  # the default keeps the 64-bit form, and says why under jit
    assert f(np.array([[1, 2]])).tolist() == [[2**33, 2**34]]
    with pytest.raises(SignatureMismatchError, match=r"no exact 32-bit form.*8589934592"):
        jax.jit(f)(np.array([[1, 2]]))


def test_state_dict_keeps_the_source_dtypes(x64_off):
    class Pos(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(8, 3)
            self.register_buffer("position_ids", torch.arange(4)[None])

        def forward(self, ids):
            return self.emb(ids) + self.emb(self.position_ids)

    model = Pos().eval()
    ids = torch.tensor([[1, 7, 0, 3]])
    f = converter.from_torch(model, (ids,)).to_jax()
    assert f.params["position_ids"].dtype == jnp.int32
    np.testing.assert_allclose(np.asarray(jax.jit(f)(ids.numpy())), model(ids).detach().numpy(), rtol=1e-6)
    sd = f.state_dict()
    assert sd["position_ids"].dtype == torch.int64
    model.load_state_dict(sd)


def _embed(params, ids):
    pos = jnp.arange(ids.shape[1])  # int64 under x64
    return params["wte"][ids] + params["wpe"][pos]  # indexing wraps negative ids: select(i < 0, i + n, i)


@pytest.fixture(scope="module")
def jax_x64():
    rng = np.random.default_rng(0)
    params = {
        "wte": rng.standard_normal((50, 8)).astype(np.float32),
        "wpe": rng.standard_normal((16, 8)).astype(np.float32),
    }
    ids = rng.integers(-50, 50, (3, 16))
    with jax.enable_x64(True):
        b = jax.export.symbolic_shape("b", constraints=["b <= 1024"])[0]
        spec = jax.ShapeDtypeStruct((b, 16), np.int64)
        exported = jax.export.export(jax.jit(_embed))(params, spec)
        static = converter.from_jax(_embed, ids, params=params)
        symbolic = converter.from_jax(exported, params=params)
        want = np.asarray(_embed(params, ids))
        want_grad = jax.grad(lambda p: jnp.sum(_embed(p, ids) ** 2))(params)
    return params, ids, static, symbolic, want, want_grad


def test_from_jax_written_under_x64(jax_x64, x64_off):
    params, ids, static, symbolic, want, want_grad = jax_x64
    assert static.signature.inputs[0].dtype == "int64"
    f = static.to_jax()
    np.testing.assert_array_equal(np.asarray(jax.jit(f)(ids)), want)
    np.testing.assert_array_equal(np.asarray(jax.vmap(f)(ids[None]))[0], want)
    grad = jax.grad(lambda p: jnp.sum(f.apply(p, ids) ** 2))(f.params)
    assert sorted(grad) == ["params['wpe']", "params['wte']"]
    for k in params:
        np.testing.assert_allclose(np.asarray(grad[f"params['{k}']"]), np.asarray(want_grad[k]), rtol=1e-6)
    g = symbolic.to_jax()  # a symbolic batch, declared at most 1024: its size arithmetic fits
    assert g.signature.inputs[0].shape == ("b", 16) and g.signature.inputs[0].dtype == "int32"
    for n in (3, 1):
        np.testing.assert_array_equal(np.asarray(jax.jit(g)(ids[:n])), want[:n])


def test_a_failing_32bit_analysis_keeps_the_exact_64bit_form(x64_off, monkeypatch):
    """An error of the narrowing analysis itself (not a NarrowingError): the default keeps the
    source's 64-bit form, exact, and says why; ``x64=False`` asked for the 32-bit form and
    gets the error."""
    import converter.passes

    m = converter.from_stablehlo(
        "func.func @main(%x: tensor<1xi64>) -> tensor<1xi64> {\n"
        "  %c = stablehlo.constant dense<1> : tensor<1xi64>\n"
        "  %y = stablehlo.add %x, %c : tensor<1xi64>\n  return %y : tensor<1xi64>\n}"
    )

    def broken(module, passes):
        raise RuntimeError("boom")

    monkeypatch.setattr(converter.passes, "run_passes", broken)
    f = m.to_jax()
    assert f._why_64bit == "the 32-bit analysis failed (RuntimeError: boom)"
    assert int(np.asarray(f(np.array([2**40], np.int64)))[0]) == 2**40 + 1
    with pytest.raises(converter.ConversionError, match="boom"):
        m.to_jax(x64=False)


_I64_TO_F32 = """func.func @main(%x: tensor<?xi64>) -> tensor<?xf32> {
  %0 = stablehlo.convert %x : (tensor<?xi64>) -> tensor<?xf32>
  return %0 : tensor<?xf32>
}"""


def test_int64_inputs_of_the_32bit_form_are_taken_up_to_both_int32_bounds(x64_off):
    """The 32-bit form takes an int64 input whose values fit int32, both bounds included, and
    an empty one (nothing to check); one past either bound is refused, naming the value."""
    f = converter.from_stablehlo(_I64_TO_F32).to_jax(x64=False)
    assert f.signature.inputs[0].dtype == "int32"
    x = np.array([-(2**31), 2**31 - 1, 0, -7], np.int64)
    np.testing.assert_array_equal(np.asarray(f(x)), x.astype(np.float32))
    empty = np.asarray(f(np.zeros((0,), np.int64)))
    assert empty.shape == (0,) and empty.dtype == np.float32
    for values, bad in (([5, -(2**31) - 1, 9], -(2**31) - 1), ([-3, 2**31, 1], 2**31)):
        with pytest.raises(InputRangeError, match=rf"args\[0\]: holds {bad}, outside the int32 range"):
            f(np.array(values, np.int64))


def test_params_lacking_parameters_are_refused_naming_at_most_ten(gpt2):
    """``apply`` with incomplete params names how many are missing and the first ten of them
    (in the signature's order), then ", ..." only when more are missing."""
    f = gpt2.f
    names = [p.name for p in f.signature.params]
    n = len(names)
    assert n > 11
    shown = ", ".join(repr(k) for k in names[:10])
    with pytest.raises(
        SignatureMismatchError, match=rf"params lacks {n} of the module's {n} parameters: "
    ) as e:
        f.apply({}, gpt2.ids)
    assert f"{shown}, ... (pass every parameter" in str(e.value)
    for k, tail in ((10, ""), (11, ", ...")):  # ten missing: all shown; eleven: ten and ", ..."
        kept = {name: f.params[name] for name in names[k:]}
        with pytest.raises(
            SignatureMismatchError, match=rf"params lacks {k} of the module's {n} parameters: "
        ) as e:
            f.apply(kept, gpt2.ids)
        assert f"parameters: {shown}{tail} (pass every parameter" in str(e.value)


def _times_constants(k: int) -> str:
    """``x * c`` for ``k`` int64 constants ``c = 2**33 + i``: each past the 32-bit range."""
    body = "\n".join(
        f"  %c{i} = stablehlo.constant dense<{2**33 + i}> : tensor<2xi64>\n"
        f"  %r{i} = stablehlo.multiply %x, %c{i} : tensor<2xi64>"
        for i in range(k)
    )
    rets, types = ", ".join(f"%r{i}" for i in range(k)), ", ".join(["tensor<2xi64>"] * k)
    return f"func.func @main(%x: tensor<2xi64>) -> ({types}) {{\n{body}\n  return {rets} : {types}\n}}"


def test_why_no_32bit_form_names_at_most_three_problems(x64_off):
    """The default ``to_jax()`` keeps the 64-bit form of a module that does not narrow
    exactly and says why when JAX narrowed an argument: the first three problems, then
    " ..." only when there are more."""
    problems = [
        f"may compute values in [{2**33 + i}, {2**33 + i}], outside the 32-bit range" for i in range(3)
    ]
    for k, tail in ((3, ""), (4, " ...")):
        f = converter.from_stablehlo(_times_constants(k)).to_jax()
        assert f.signature.inputs[0].dtype == "int64"
        with pytest.raises(SignatureMismatchError) as e:
            jax.jit(f)(np.array([1, 2]))
        msg = str(e.value)
        assert msg.endswith("; ".join(f"stablehlo.constant: {p}" for p in problems) + tail), (k, msg[-300:])

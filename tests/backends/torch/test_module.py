"""The converted nn.Module: parameters, signature checks, autograd vs jax.grad,
torch.export, torch.compile, and the one-error-for-all-unsupported-ops contract."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from jax import lax

import converter
from converter.signature import UPDATE_PREFIX, LeafSpec, Mutation

from .helpers import numpy_of, to_torch_module

rng = np.random.default_rng(0)
X = rng.standard_normal((3, 4)).astype(np.float32)
W = rng.standard_normal((4, 5)).astype(np.float32)


def mlp(x, w):
    h = jnp.tanh(x @ w)
    return jax.nn.softmax(h, axis=-1).sum() + lax.fori_loop(0, 3, lambda i, c: c * 0.5 + h.mean(), 0.0)


def test_autograd_matches_jax_grad():
    module = to_torch_module(mlp, X, W)
    x, w = torch.tensor(X, requires_grad=True), torch.tensor(W, requires_grad=True)
    module(x, w).backward()
    gx, gw = jax.grad(mlp, argnums=(0, 1))(X, W)
    np.testing.assert_allclose(x.grad.numpy(), gx, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(w.grad.numpy(), gw, rtol=1e-5, atol=1e-6)


def test_autograd_through_conv_pool_and_gather():
    img = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    k = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)

    def f(x, k):
        y = lax.conv(x, k, (1, 1), "SAME")
        y = lax.reduce_window(y, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
        return (y[:, jnp.array([0, 2])] ** 2).sum()

    module = to_torch_module(f, img, k)
    x, kk = torch.tensor(img, requires_grad=True), torch.tensor(k, requires_grad=True)
    module(x, kk).backward()
    gx, gk = jax.grad(f, argnums=(0, 1))(img, k)
    np.testing.assert_allclose(x.grad.numpy(), gx, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(kk.grad.numpy(), gk, rtol=1e-4, atol=1e-4)


def _with_params(fn, params: dict, *inputs):
    """A Module whose first arguments are parameters named like torch state-dict keys."""
    names = list(params)
    text = jax.jit(lambda *a: fn(dict(zip(names, a[: len(names)], strict=True)), *a[len(names) :])).lower(
        *params.values(), *inputs
    )
    base = converter.from_stablehlo(text.as_text())
    sig = base.signature
    n = len(names)
    pspecs = tuple(
        LeafSpec(name, s.shape, s.dtype, "parameter") for name, s in zip(names, sig.inputs[:n], strict=True)
    )
    args_spec = {"kind": "tuple", "children": [{"kind": "leaf"}] * (len(sig.inputs) - n)}
    in_tree = {"kind": "tuple", "children": [args_spec, {"kind": "dict", "keys": [], "children": []}]}
    sig = sig.replace(params=pspecs, inputs=sig.inputs[n:], in_tree=in_tree)
    return converter.Module(base.mlir, sig, {k: np.asarray(v) for k, v in params.items()})


def test_parameters_are_named_and_trainable():
    params = {"layer.0.weight": W, "layer.0.bias": np.zeros(5, np.float32), "steps": np.array(3, np.int32)}
    module = _with_params(lambda p, x: x @ p["layer.0.weight"] + p["layer.0.bias"] * p["steps"], params, X)
    tm = module.to_torch()
    names = dict(tm.named_parameters())
    assert set(names) == {"layer_0_weight", "layer_0_bias"}
    assert tm.param_names["layer_0_weight"] == "layer.0.weight"
    assert set(dict(tm.named_buffers())) >= {"steps"}
    assert set(tm.source_state_dict()) == set(params)
    out = tm(torch.tensor(X))
    np.testing.assert_allclose(out.detach().numpy(), X @ W, rtol=1e-5, atol=1e-5)
    out.sum().backward()
    assert tm.layer_0_weight.grad is not None and tm.layer_0_weight.grad.shape == (4, 5)


def test_a_parameter_the_program_updates_in_place_is_a_buffer():
    """A floating ``parameter`` entry that is the target of a buffer mutation (JAX state such
    as Flax's ``batch_stats``, converted with ``mutable=True``) is registered as a buffer, not
    a trainable parameter, and the call updates it in place."""
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    params = {"bn.mean": np.zeros(3, np.float32), "w": np.ones(3, np.float32)}
    module = _with_params(lambda p, x: (x * p["w"] - p["bn.mean"], p["bn.mean"] * 0.5 + x.mean(0)), params, x)
    y, update = module.signature.outputs
    update = LeafSpec(UPDATE_PREFIX + "bn.mean", update.shape, update.dtype, "update")
    module.signature = module.signature.replace(
        outputs=(y, update), out_tree={"kind": "leaf"}, mutations=(Mutation("buffer", "bn.mean"),)
    )
    tm = module.to_torch()
    assert set(dict(tm.named_parameters())) == {"w"}
    assert "bn_mean" in dict(tm.named_buffers())
    np.testing.assert_array_equal(tm(torch.tensor(x)).detach().numpy(), x)
    np.testing.assert_array_equal(tm.bn_mean.numpy(), x.mean(0))


def test_zero_dim_parameters_and_inputs_keep_their_shape():
    # a 0-d parameter (e.g. a constant torch.export lifts) used to become shape [1], which
    # broke rank-sensitive ops such as the empty transpose of a reduce over no dimensions
    params = {"scale": np.array(2.5, np.float32), "steps": np.array(3, np.int32)}
    module = _with_params(lambda p, x: (x * p["scale"] + p["steps"]).transpose(), params, np.float32(1.5))
    tm = module.to_torch()
    assert tm.scale.shape == () and tm.steps.shape == ()
    for x in (torch.tensor(1.5), np.array(1.5, np.float32)):
        out = tm(x)
        assert out.shape == ()
        assert out.item() == 1.5 * 2.5 + 3


def test_kept_var_idx_drops_unused_arguments():
    module = converter.from_stablehlo(jax.jit(lambda x, y: x * 2).lower(X, W).as_text())
    full_sig = module.signature
    if len(full_sig.inputs) == 1:  # jax already dropped y; rebuild with an explicit kept list
        sig = full_sig.replace(
            inputs=(full_sig.inputs[0], LeafSpec("args[1]", (4, 5), "float32")),
            in_tree={
                "kind": "tuple",
                "children": [
                    {"kind": "tuple", "children": [{"kind": "leaf"}] * 2},
                    {"kind": "dict", "keys": [], "children": []},
                ],
            },  # fmt: skip
            kept_var_idx=(0,),
        )
        module = converter.Module(module.mlir, sig, {})
    t = module.to_torch()
    np.testing.assert_allclose(t(torch.tensor(X), torch.tensor(W)).numpy(), X * 2)
    np.testing.assert_allclose(t(X, W).numpy(), X * 2)  # NumPy inputs: the checked path


def test_signature_mismatch_names_the_argument():
    module = to_torch_module(mlp, X, W)
    np.testing.assert_allclose(module(X, W).numpy(), module(torch.tensor(X), torch.tensor(W)).numpy())
    with pytest.raises(converter.SignatureMismatchError, match=r"args\[1\]"):
        module(torch.tensor(X), torch.zeros(4, 6))


def test_torch_export_and_compile():
    def f(x, w):
        y = jnp.maximum(x @ w, 0.0)
        y = lax.cond(y.sum() > 0, lambda v: v * 2, lambda v: v - 1, y)
        y = lax.fori_loop(0, 2, lambda i, c: c + jnp.sin(c), y)
        return lax.while_loop(lambda c: jnp.abs(c).sum() < 100.0, lambda c: c * 2.0 + 1.0, y)

    module = to_torch_module(f, X, W)
    args = (torch.tensor(X), torch.tensor(W))
    ep = torch.export.export(module, args)
    want = np.asarray(jax.jit(f)(X, W))
    np.testing.assert_allclose(ep.module()(*args).numpy(), want, rtol=1e-5, atol=1e-5)
    compiled = torch.compile(module)  # cond + while_loop HOPs and an unrolled loop
    np.testing.assert_allclose(numpy_of(compiled(*args)), want, rtol=1e-5, atol=1e-5)


def test_each_module_compiles_under_dynamos_recompile_limit():
    """Dynamo caches compilations per code object up to ``recompile_limit``: every converted
    module has a ``forward`` code of its own, so the limit counts one module's compilations
    (sharing one, the third module here would run eagerly); pickling and deepcopy rebuild it."""
    import copy
    import pickle

    import torch._dynamo

    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    modules = [to_torch_module(lambda x, k=k: jnp.tanh(x) * k, X) for k in (1.0, 2.0, 3.0)]
    torch._dynamo.reset()
    with torch._dynamo.config.patch(recompile_limit=2):  # not monkeypatch: its undo deletes the entry
        for k, module in enumerate(modules, 1):
            got = torch.compile(module, backend=backend)(torch.tensor(X))
            np.testing.assert_allclose(numpy_of(got), np.tanh(X) * k, rtol=1e-6)
    assert len(graphs) == 3
    for clone in (pickle.loads(pickle.dumps(modules[2])), copy.deepcopy(modules[2])):
        assert clone.forward.__self__ is clone and clone.forward.__code__ is not modules[2].forward.__code__
        np.testing.assert_allclose(numpy_of(clone(torch.tensor(X))), np.tanh(X) * 3, rtol=1e-6)
    torch._dynamo.reset()


_UNSUPPORTED = """
func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.custom_call @my_kernel(%a) : (tensor<4xf32>) -> tensor<4xf32> loc("model.py":3:1)
  %1 = stablehlo.custom_call @other_kernel(%0) : (tensor<4xf32>) -> tensor<4xf32> loc("model.py":4:1)
  %2 = stablehlo.custom_call @my_kernel(%1) : (tensor<4xf32>) -> tensor<4xf32> loc("model.py":5:1)
  %3 = "stablehlo.collective_broadcast"(%2) {replica_groups = dense<[[0]]> : tensor<1x1xi64>}
    : (tensor<4xf32>) -> tensor<4xf32>
  return %3 : tensor<4xf32>
}
"""


def test_unsupported_ops_reported_together():
    module = converter.from_stablehlo(_UNSUPPORTED)
    with pytest.raises(converter.UnsupportedOpError) as err:
        module.to_torch()
    names = {m.name: m for m in err.value.missing}
    assert set(names) == {
        "stablehlo.custom_call@my_kernel",
        "stablehlo.custom_call@other_kernel",
        "stablehlo.collective_broadcast",
    }
    assert names["stablehlo.custom_call@my_kernel"].count == 2
    assert "model.py:3" in names["stablehlo.custom_call@my_kernel"].location


def test_training_step_five_steps_match_jax():
    import optax

    opt = optax.adam(1e-2)
    y = rng.standard_normal((3, 5)).astype(np.float32)
    params = {"b": np.zeros(5, np.float32), "w": W}

    def loss(p, x, y):
        return ((jnp.tanh(x @ p["w"]) + p["b"] - y) ** 2).mean()

    def step(p, s, x, y):
        value, grads = jax.value_and_grad(loss)(p, x, y)
        updates, s = opt.update(grads, s, p)
        return optax.apply_updates(p, updates), s, value

    state = opt.init(params)
    flat, tree = jax.tree_util.tree_flatten((params, state))
    module = to_torch_module(
        lambda *a: step(*jax.tree_util.tree_unflatten(tree, a[:-2]), *a[-2:]), *flat, X, y
    )
    tflat = [torch.tensor(np.asarray(v)) for v in flat]
    jp, js = params, state
    for _ in range(5):
        out = module(*tflat, torch.tensor(X), torch.tensor(y))
        tflat = list(out[:-1])
        jp, js, _ = jax.jit(step)(jp, js, X, y)
    for got, want in zip(tflat, jax.tree_util.tree_leaves((jp, js)), strict=True):
        np.testing.assert_allclose(numpy_of(got), np.asarray(want), rtol=1e-5, atol=1e-6)


def test_torch_round_trip_mlp():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(4, 8), torch.nn.GELU(), torch.nn.LayerNorm(8), torch.nn.Linear(8, 2)
    )
    x = torch.tensor(X)
    back = converter.from_torch(model, (x,)).to_torch()
    torch.testing.assert_close(back(x), model(x), rtol=1e-5, atol=1e-5)
    state = back.source_state_dict()
    assert set(state) == set(dict(model.named_parameters()))
    back(x).square().sum().backward()
    model(x).square().sum().backward()
    for name, p in model.named_parameters():
        torch.testing.assert_close(state[name].grad, p.grad, rtol=1e-4, atol=1e-5)


def test_parameters_named_like_module_attributes():
    """An ONNX initializer named ``half`` or ``eval`` (a ``torch.nn.Module`` method) or
    ``signature`` (a TorchModule attribute) gets another attribute name: registering it
    raised ``KeyError: "attribute 'half' already exists"`` (an ``InternalError``)."""
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    names = ("half", "eval", "signature")
    nodes = [helper.make_node("Mul", ["x", names[0]], ["t0"])]
    nodes += [helper.make_node("Add", [f"t{i}", n], [f"t{i + 1}"]) for i, n in enumerate(names[1:])]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info(f"t{len(names) - 1}", TensorProto.FLOAT, [2])],
        initializer=[
            numpy_helper.from_array(np.array([i + 0.5, -i], np.float32), n) for i, n in enumerate(names)
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    t = converter.from_onnx(model).to_torch()
    x = np.array([1.5, -2.0], np.float32)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x}
    )
    (got,) = t(torch.from_numpy(x))
    np.testing.assert_allclose(got.detach().numpy(), want[0], rtol=1e-6)
    assert sorted(t.source_state_dict()) == sorted(names) and callable(t.half)


def test_parameter_names_colliding_twice_get_increasing_suffixes():
    """Three parameter names with the same word characters get ``_1`` then ``_2``: each a
    distinct identifier that ``torch.nn.Module.register_parameter`` accepts (no ``.``)."""
    from converter.backends.torch.module import param_attr_names

    # three names only: were the suffix not to grow, a fourth collision would loop forever
    names = ["a.b", "a_b", "a[b]"]
    attrs = param_attr_names(names)
    assert attrs == {"a.b": "a_b", "a_b": "a_b_1", "a[b]": "a_b_2"}
    holder = torch.nn.Module()
    for attr in attrs.values():
        holder.register_parameter(attr, torch.nn.Parameter(torch.zeros(1)))
    assert len(dict(holder.named_parameters())) == len(names)


class _AddInto(torch.nn.Module):
    """Updates its second input in place (a recorded input mutation)."""

    def forward(self, x, acc):
        acc.add_(x * 2)
        return x.sum()


def test_inputs_updated_in_place_are_written_back_or_refused():
    """The module writes an input the source updates in place back into a torch tensor or a
    writable NumPy array, and refuses a read-only array (naming its path) rather than drop
    the update."""
    from converter.errors import SignatureMismatchError

    module = converter.from_torch(_AddInto(), (torch.ones(3), torch.zeros(3))).to_torch()
    x = np.arange(3.0, dtype=np.float32)
    acc, acc_np = torch.full((3,), 5.0), np.full(3, 5.0, np.float32)
    module(torch.from_numpy(x), acc)
    module(x, acc_np)
    np.testing.assert_array_equal(acc.numpy(), 5 + 2 * x)
    np.testing.assert_array_equal(acc_np, 5 + 2 * x)
    frozen = np.zeros(3, np.float32)
    frozen.flags.writeable = False
    with pytest.raises(
        SignatureMismatchError, match=r"args\[1\]: the model updates this input .* cannot be written"
    ):
        module(x, frozen)


_TUPLES = """
func.func public @main(%a: tensor<2xf32>, %b: tensor<i32>) -> (tensor<2xf32>, tensor<i32>) {
  %t = stablehlo.tuple %a, %b : tuple<tensor<2xf32>, tensor<i32>>
  %x = stablehlo.get_tuple_element %t[1] : (tuple<tensor<2xf32>, tensor<i32>>) -> tensor<i32>
  %y = stablehlo.get_tuple_element %t[0] : (tuple<tensor<2xf32>, tensor<i32>>) -> tensor<2xf32>
  %z = stablehlo.negate %y : tensor<2xf32>
  return %z, %x : tensor<2xf32>, tensor<i32>
}
"""


def test_tuple_values_pass_through():
    """``tuple``/``get_tuple_element`` (a tuple-typed result, no tensor type to read) carry
    their elements by index."""
    t = converter.from_stablehlo(_TUPLES).to_torch()
    z, x = t(torch.tensor([1.5, -2.0]), torch.tensor(7, dtype=torch.int32))
    np.testing.assert_array_equal(z.numpy(), [-1.5, 2.0])
    assert x.dtype == torch.int32 and int(x) == 7


_DYNAMIC = """
func.func public @main(%x: tensor<?xf32>) -> tensor<?xf32> {
  %0 = stablehlo.custom_call @my_kernel(%x) : (tensor<?xf32>) -> tensor<?xf32>
  return %0 : tensor<?xf32>
}
"""


def test_dynamic_module_refused_where_it_needs_static_shapes():
    """``build_graph`` traces static shapes only (naming the input), and a shape-polymorphic
    module's unsupported ops are reported at ``to_torch``, not at its first call."""
    from converter.backends.torch.module import build_graph

    module = converter.from_stablehlo(_DYNAMIC)
    with pytest.raises(
        converter.ConversionError, match=r"args\[0\]: dynamic shape \[None\] is not supported"
    ):
        build_graph(module)
    with pytest.raises(converter.UnsupportedOpError) as err:
        module.to_torch()
    assert [m.name for m in err.value.missing] == ["stablehlo.custom_call@my_kernel"]


def test_make_fx_error_behind_another_is_raised(monkeypatch):
    """An error make_fx raises while a rule's ConversionError unwinds (its trace logging
    failing) gives way to the rule's error; other errors propagate as they are."""
    from converter.backends.torch import module as torch_module

    def make_fx(fn, tracing_mode):
        def trace(*args):
            try:
                raise converter.ConversionError("the rule's error")
            except converter.ConversionError:
                raise KeyError("printing") from None

        return trace

    monkeypatch.setattr(torch_module, "make_fx", make_fx)
    with pytest.raises(converter.ConversionError, match="the rule's error") as err:
        torch_module._make_fx_graph(lambda x: x, [torch.zeros(1)])
    assert isinstance(err.value.__cause__, KeyError)
    monkeypatch.setattr(torch_module, "make_fx", lambda fn, tracing_mode: lambda *a: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        torch_module._make_fx_graph(lambda x: x, [torch.zeros(1)])

    def rule_error(fn, tracing_mode):
        def trace(*args):
            raise converter.ConversionError("raised directly")

        return trace

    monkeypatch.setattr(torch_module, "make_fx", rule_error)
    with pytest.raises(converter.ConversionError, match="raised directly") as err:
        torch_module._make_fx_graph(lambda x: x, [torch.zeros(1)])
    assert err.value.__cause__ is None  # as raised, not chained to itself


_KEYED = """
func.func public @main(%x: tensor<2xui32>, %key: tensor<2xui32>) -> tensor<2xf64> {
  %0 = stablehlo.convert %key : (tensor<2xui32>) -> tensor<2xf64>
  %1 = stablehlo.convert %x : (tensor<2xui32>) -> tensor<2xf64>
  %2 = stablehlo.add %0, %1 : tensor<2xf64>
  return %2 : tensor<2xf64>
}
"""


def _args_tree(n: int, keys: tuple = ()) -> dict:
    return {
        "kind": "tuple",
        "children": [
            {"kind": "tuple", "children": [{"kind": "leaf"}] * n},
            {"kind": "dict", "keys": list(keys), "children": [{"kind": "leaf"}] * len(keys)},
        ],
    }


@pytest.fixture(scope="module")
def keyed():
    """A module whose second argument is its PRNG key: returns ``x + key`` (in float64: the
    key's words as the module receives them, not wrapped by a uint32 add)."""
    from converter.signature import RNG_KEY

    base = converter.from_stablehlo(_KEYED)
    sig = base.signature.replace(inputs=base.signature.inputs[:1], rng=RNG_KEY, in_tree=_args_tree(1))
    return converter.Module(base.mlir, sig, {}).to_torch()


def test_rng_key_as_an_int_a_pair_or_refused(keyed):
    """``rng=`` takes an int seed (high word, low word, as ``jax.random.PRNGKey``) or two
    integers (a key's data, each word kept to 32 bits); anything else is refused, naming it."""
    x = np.array([1, 2], np.uint32)
    np.testing.assert_array_equal(keyed(x, rng=(5 << 32) + 9), [6, 11])
    np.testing.assert_array_equal(keyed(x, rng=np.array([3, 2**32 + 4])), [4, 6])
    np.testing.assert_array_equal(keyed(x, rng=torch.tensor([7, 8], dtype=torch.int32)), [8, 10])
    with pytest.raises(converter.SignatureMismatchError, match=r"rng: expected .* got torch.int64\[3\]"):
        keyed(x, rng=np.array([1, 2, 3]))
    with pytest.raises(converter.SignatureMismatchError, match=r"rng: .* got torch.float32\[2\]"):
        keyed(x, rng=torch.tensor([1.0, 2.0]))


def test_rng_key_drawn_when_not_given_spans_uint32(keyed):
    """Without ``rng=`` the key is drawn from torch's default generator: the same after the
    same ``torch.manual_seed``, new on the next call, and its words are uniform ``uint32``
    values (of 8 words, some at least ``2**16``)."""
    x = np.zeros(2, np.uint32)
    torch.manual_seed(1234)
    draws = [keyed(x) for _ in range(4)]
    torch.manual_seed(1234)
    assert torch.equal(keyed(x), draws[0])
    assert not torch.equal(draws[0], draws[1])
    words = torch.stack(draws)
    assert words.min() >= 0 and words.max() < 2**32 and words.max() >= 2**16


def test_call_with_missing_argument_or_inconsistent_tree():
    """A call with too few arguments leaves the fast path and is refused naming the
    arguments; a signature whose tree has fewer leaves than inputs is refused at call."""
    base = converter.from_stablehlo(jax.jit(lambda x, y: x - y).lower(X, X).as_text())
    t = base.to_torch()
    with pytest.raises(converter.SignatureMismatchError, match="args"):
        t(torch.tensor(X))
    bad = converter.Module(base.mlir, base.signature.replace(in_tree=_args_tree(1)), {}).to_torch()
    with pytest.raises(converter.ConversionError, match="expected 2 input leaves, got 1"):
        bad(torch.tensor(X))


def test_keyword_inputs_become_keyword_only_parameters_of_forward():
    """A module called with keywords shows them in ``inspect.signature(forward)`` (what
    ``torch.export`` binds inputs to) as keyword-only parameters, after the positional ones
    and before ``forward``'s own ``rng``, which stays; ``**kwargs`` is gone."""
    import inspect

    base = converter.from_stablehlo(jax.jit(lambda x, y: x - y).lower(X, X).as_text())
    t = converter.Module(base.mlir, base.signature.replace(in_tree=_args_tree(1, ("y",))), {}).to_torch()
    params = inspect.signature(t.forward).parameters
    assert list(params) == ["args", "y", "rng"]
    assert params["y"].kind is params["rng"].kind is inspect.Parameter.KEYWORD_ONLY
    np.testing.assert_array_equal(t(torch.tensor(X), y=torch.tensor(X * 3)).numpy(), X - X * 3)


def test_keyword_input_named_as_a_forward_parameter():
    """A keyword input named as a parameter of ``forward`` (``args``) keeps ``forward``'s
    ``**kwargs`` signature (a keyword-only one would clash) and still binds by name."""
    import inspect

    base = converter.from_stablehlo(jax.jit(lambda x, y: x - y).lower(X, X).as_text())
    t = converter.Module(base.mlir, base.signature.replace(in_tree=_args_tree(1, ("args",))), {}).to_torch()
    params = inspect.signature(t.forward).parameters
    assert "kwargs" in params and params["kwargs"].kind is inspect.Parameter.VAR_KEYWORD
    np.testing.assert_array_equal(t(torch.tensor(X), args=torch.tensor(X * 3)).numpy(), X - X * 3)


def test_export_dynamic_shapes_of_dimension_expressions():
    """Dimension names that are not identifiers become ``Dim`` names (``d_`` before a digit),
    derived dimensions ``Dim`` expressions (``+ - *`` of names and integers); other
    expressions are refused, naming the input and the expression."""
    from converter.backends.torch.module import export_dynamic_shapes

    sig = converter.from_stablehlo(jax.jit(lambda x: x).lower(X).as_text()).signature

    def shapes(*dims):
        inputs = tuple(LeafSpec(f"args[{i}]", (d, 4), "float32") for i, d in enumerate(dims))
        return export_dynamic_shapes(sig.replace(inputs=inputs, in_tree=_args_tree(len(dims))))["args"]

    a, b, c = shapes("9n", "n-1", "3*m")
    assert a[0].__name__ == "d_9n"
    assert str(b[0]) == str(torch.export.Dim("n") - 1) and str(c[0]) == str(3 * torch.export.Dim("m"))
    (_, d, e) = shapes("k", "2*k+1", "k*2-3")
    assert str(d[0]) == str(2 * torch.export.Dim("k") + 1) and str(e[0]) == str(torch.export.Dim("k") * 2 - 3)
    (_, g) = shapes("k", "1+k")  # an integer first: the Dim's own ``+`` (``int + Dim`` has none)
    assert str(g[0]) == str(torch.export.Dim("k") + 1)
    with pytest.raises(
        converter.ConversionError, match=r"args\[1\]: dimension 'k//2' has no torch.export Dim"
    ):
        shapes("k", "k//2", "k")


def test_export_example_sizes_follow_the_ranges():
    """``export_example`` gives each dynamic dimension a size other than 0 and 1 within its
    range (the only one of ``[0, 2]`` is 2), distinct unbounded names distinct sizes, a derived
    dimension the value of its expression; ``export_dynamic_shapes`` names an unnamed
    dimension ``d<input>_<axis>`` and one that is no identifier with ``_`` for the others."""
    from converter.backends.torch.module import export_dynamic_shapes, export_example

    identity = "func.func public @main(%x: tensor<2xf32>) -> tensor<2xf32> {\n  return %x : tensor<2xf32>\n}"
    sig = converter.from_stablehlo(identity).signature
    dims = [("a", 4), ("b", 2), (3, None), ("2*a+1",), ("k",), ("n",), ("batch-size",), ("x1",)]
    inputs = tuple(LeafSpec(f"args[{i}]", d, "float32") for i, d in enumerate(dims))
    sig = sig.replace(
        inputs=inputs,
        in_tree=_args_tree(len(dims)),
        dim_ranges={"k": [0, 2], "n": [5, 9], "batch-size": [4, None]},
    )
    args, kwargs = export_example(sig)
    assert kwargs == {}
    a, b, d = args[0].shape[0], args[1].shape[0], args[2].shape[1]
    assert args[0].shape[1] == 4 and args[2].shape[0] == 3 and args[0].dtype == torch.float32
    assert min(a, b, d) >= 2 and len({a, b, d}) == 3
    assert args[3].shape == (2 * a + 1,)
    assert args[4].shape == (2,) and 5 <= args[5].shape[0] <= 9 and args[6].shape[0] >= 4
    shapes = export_dynamic_shapes(sig)["args"]
    assert shapes[2][1].__name__ == "d2_1" and shapes[6][0].__name__ == "batch_size"
    assert shapes[7][0].__name__ == "x1"  # only a leading digit takes ``d_``
    assert (shapes[4][0].min, shapes[4][0].max) == (0, 2) and shapes[6][0].min == 4
    named = [a, b, d, args[5].shape[0], args[6].shape[0], args[7].shape[0]]  # k: 2 is its only size
    assert len(set(named)) == len(named), named  # every other range leaves a size no name took


def test_export_example_sizes_are_distinct_where_the_ranges_allow():
    """A bounded name whose range starts where an unbounded one's first size falls, and a range
    of one size taken first by another name: each name still gets a size of its own when its
    range holds one, and stays within its range."""
    from converter.backends.torch.module import export_example

    identity = "func.func public @main(%x: tensor<2xf32>) -> tensor<2xf32> {\n  return %x : tensor<2xf32>\n}"
    base = converter.from_stablehlo(identity).signature

    def sizes(dims, ranges):
        inputs = tuple(LeafSpec(f"args[{i}]", (d,), "float32") for i, d in enumerate(dims))
        sig = base.replace(inputs=inputs, in_tree=_args_tree(len(dims)), dim_ranges=ranges)
        return [t.shape[0] for t in export_example(sig)[0]]

    n, m = sizes(["n", "m"], {"n": [3, 10]})
    assert 3 <= n <= 10 and m >= 2 and n != m
    p, q, r = sizes(["p", "q", "r"], {"q": [2, 3], "r": [2, 3]})
    assert p >= 2 and {q, r} == {2, 3} and p not in (q, r)
    s, t = sizes(["s", "t"], {"s": [4, 4], "t": [4, 4]})
    assert s == t == 4  # one size in both ranges: shared


_PARTITIONED_DYNAMIC = """module @m attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=2]>
  func.func public @main(%arg0: tensor<?x4xf32>) -> (tensor<?x4xf32>) {
    %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"x"}, {}]>]
        out_shardings=[<@mesh, [{"x"}, {}]>] manual_axes={"x"} (%a: tensor<?x4xf32>) {
      %1 = stablehlo.negate %a : tensor<?x4xf32>
      sdy.return %1 : tensor<?x4xf32>
    } : (tensor<?x4xf32>) -> tensor<?x4xf32>
    return %0 : tensor<?x4xf32>
  }
}
"""


def test_partitioned_module_with_dynamic_shapes_refused():
    with pytest.raises(converter.DistributedError, match="partitioned module with dynamic shapes"):
        converter.from_stablehlo(_PARTITIONED_DYNAMIC).to_torch()


def test_shape_polymorphic_module_traces_once_per_shape():
    """A shape-polymorphic module builds one graph per argument shapes and reuses it."""
    text = _DYNAMIC.replace(
        "stablehlo.custom_call @my_kernel(%x) : (tensor<?xf32>) ->", "stablehlo.negate %x :"
    )
    t = converter.from_stablehlo(text).to_torch()
    x3, x5 = torch.tensor([1.0, -2.0, 3.0]), torch.arange(5.0)
    np.testing.assert_array_equal(t(x3).numpy(), -x3.numpy())
    first = t._graphs[((3,),)]
    np.testing.assert_array_equal(t(x3 * 2).numpy(), -2 * x3.numpy())
    np.testing.assert_array_equal(t(x5).numpy(), -x5.numpy())
    assert t._graphs[((3,),)] is first and set(t._graphs) == {((3,),), ((5,),)}

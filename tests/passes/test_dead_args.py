"""Dead-argument elimination: kept indices, full-signature calls, zero gradients, no transfers."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

import converter
from converter import mlir
from converter.passes import DEAD_ARGUMENTS, PassError, eliminate_dead_arguments, run_passes, verify


def _main_arity(m):
    return len(mlir.main_function(m.mlir).regions[0].blocks[0].arguments)


TEXT = """
func.func public @main(%a: tensor<3xf32>, %b: tensor<3xf32>, %c: tensor<2xi32>, %d: tensor<3xf32>)
    -> tensor<3xf32> {
  %dead = stablehlo.multiply %b, %b : tensor<3xf32>
  %0 = stablehlo.add %a, %d : tensor<3xf32>
  return %0 : tensor<3xf32>
}
"""


def test_pass_on_stablehlo_removes_unused_and_dead_only_uses():
    m = converter.from_stablehlo(TEXT)
    assert _main_arity(m) == 4
    out = eliminate_dead_arguments(m)
    assert out.signature.kept_var_idx == (0, 3)
    assert _main_arity(out) == 2 and _main_arity(m) == 4  # input module untouched
    assert "stablehlo.multiply" not in out.text()
    verify(out)
    a, b, d = (np.full(3, v, np.float32) for v in (1, 2, 4))
    np.testing.assert_array_equal(out.to_jax()(a, b, np.zeros(2, np.int32), d), a + d)
    # idempotent, and composes with earlier drops
    again = eliminate_dead_arguments(out)
    assert again.signature.kept_var_idx == (0, 3)


def test_verifier_catches_inconsistent_signature():
    m = converter.from_stablehlo(TEXT)
    bad = converter.Module(m.mlir, m.signature.replace(kept_var_idx=(0, 1)), {})
    with pytest.raises(PassError, match="keeps 2 of 4"):
        run_passes(bad, [DEAD_ARGUMENTS])


def test_run_passes_names_the_first_invalid_step():
    """run_passes runs the MLIR verifier on its result only; when that fails, or a later
    pass raises, it names the first step whose module fails."""
    from converter.passes import Pass

    m = converter.from_stablehlo(TEXT)

    def breaks(module):  # a copy whose @main returns nothing: fails the verifier
        out = mlir.clone_module(module.mlir)
        ret = list(mlir.main_function(out).regions[0].blocks[0].operations)[-1]
        ret.operation.erase()
        return converter.Module(out, module.signature, module.params)

    def copies(module):
        return converter.Module(mlir.clone_module(module.mlir), module.signature, module.params)

    def raises(module):
        raise RuntimeError("a pass failing on what it was given")

    with pytest.raises(PassError, match="after breaks: MLIR verifier failed"):
        run_passes(m, [Pass("copies", copies), Pass("breaks", breaks), Pass("copies", copies)])
    with pytest.raises(PassError, match="after breaks: MLIR verifier failed"):
        run_passes(m, [Pass("breaks", breaks), Pass("raises", raises)])
    with pytest.raises(RuntimeError, match="failing on what"):  # every step valid: its own error
        run_passes(m, [Pass("copies", copies), Pass("raises", raises)])


@pytest.mark.parametrize(
    "fn, kept",
    [
        (lambda a, b, c: a + c, (0, 2)),  # one ignored
        (lambda a, b, c: b * 2, (1,)),  # several ignored
        (lambda a, b, c: jnp.ones(3), ()),  # all ignored
    ],
    ids=["one", "several", "all"],
)
def test_ignored_inputs(fn, kept):
    xs = [np.full(3, v, np.float32) for v in (1, 2, 3)]
    m = converter.from_jax(fn, *xs)
    assert m.signature.kept_var_idx == kept
    assert _main_arity(m) == len(kept)
    np.testing.assert_allclose(m.to_jax()(*xs), fn(*xs))


def test_nested_pytree_inputs():
    def f(batch, cfg):
        return batch["x"][1] * cfg["w"]

    batch = {"x": [np.ones(2, np.float32), np.full(2, 3, np.float32)], "mask": np.ones(2, bool)}
    cfg = {"w": np.float32(2), "unused": (np.zeros(4, np.float32), None)}
    m = converter.from_jax(f, batch, cfg)
    names = [s.name for s in m.signature.inputs]
    kept = [names[i] for i in m.signature.kept_var_idx]
    assert kept == ["args[0]['x'][1]", "args[1]['w']"]
    np.testing.assert_allclose(m.to_jax()(batch, cfg), f(batch, cfg))


def test_unused_parameters_get_zero_gradients():
    def apply(p, x):
        return (x @ p["used"]).sum()

    p = {"used": np.ones((3, 2), np.float32), "unused": np.ones((5, 4), np.float32)}
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    m = converter.from_jax(apply, x, params=p)
    assert [m.signature.all_args[i].name for i in m.signature.kept_var_idx] == ["params['used']", "args[0]"]
    g = m.to_jax()
    grads = jax.grad(lambda q: g.apply(q, x))(g.params)
    want = jax.grad(apply)(p, x)
    np.testing.assert_allclose(grads["params['used']"], want["used"])
    assert grads["params['unused']"].shape == (5, 4)
    assert not np.asarray(grads["params['unused']"]).any()


class WithUnused(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 2)
        self.unused = torch.nn.Parameter(torch.ones(4))

    def forward(self, x, y):
        return self.lin(x)


def test_torch_unused_parameter_and_input():
    torch.manual_seed(0)
    model = WithUnused()
    x, y = torch.randn(5, 3), torch.randn(7)
    m = converter.from_torch(model, (x, y))
    names = [s.name for s in m.signature.all_args]
    assert sorted(names[:3]) == ["lin.bias", "lin.weight", "unused"] and names[3:] == ["args[0]", "args[1]"]
    kept_names = {names[i] for i in m.signature.kept_var_idx}
    assert kept_names == {"lin.weight", "lin.bias", "args[0]"}
    assert _main_arity(m) == 3
    g = m.to_jax()
    np.testing.assert_allclose(np.asarray(g(x.numpy(), y.numpy())), model(x, y).detach().numpy(), rtol=1e-6)
    grads = jax.grad(lambda q: g.apply(q, x.numpy(), y.numpy()).sum())(g.params)
    assert not np.asarray(grads["unused"]).any() and grads["unused"].shape == (4,)
    model(x, y).sum().backward()
    np.testing.assert_allclose(np.asarray(grads["lin.weight"]), model.lin.weight.grad.numpy(), rtol=1e-5)


def test_dropped_inputs_are_not_transferred():
    m = converter.from_jax(lambda a, b: a * 2, np.ones(3, np.float32), np.ones(3, np.float32))
    g = m.to_jax()
    a = jax.device_put(np.ones(3, np.float32))
    g(a, np.ones(3, np.float32))  # compile first
    with jax.transfer_guard_host_to_device("disallow"):
        out = g(a, np.ones(3, np.float32))  # b is a host array: moving it would raise
        with pytest.raises(Exception, match="[Dd]isallowed"):
            g(np.ones(3, np.float32), np.ones(3, np.float32))  # a kept host input is moved
    np.testing.assert_array_equal(out, 2 * np.ones(3))


def test_save_load_keeps_dropped_convention(tmp_path):
    m = converter.from_jax(lambda a, b: a + 1, np.ones(2, np.float32), np.ones(2, np.float32))
    m.save(tmp_path / "m.shlo")
    m2 = converter.load(tmp_path / "m.shlo")
    verify(m2)
    assert m2.signature.kept_var_idx == (0,)
    np.testing.assert_array_equal(m2.to_jax()(np.ones(2, np.float32), np.ones(2, np.float32)), 2 * np.ones(2))


def test_torch_backend_accepts_full_signature():
    backends_torch = pytest.importorskip("converter.backends.torch", reason="torch backend not available")
    del backends_torch

    def apply(p, x, unused_x):
        return x @ p["used"]

    p = {"used": np.ones((3, 2), np.float32), "unused": np.ones((5,), np.float32)}
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    m = converter.from_jax(apply, x, np.ones(7, np.float32), params=p)
    assert len(m.signature.kept_var_idx) == 2
    tm = m.to_torch()
    out = tm(torch.from_numpy(x), torch.ones(7))
    np.testing.assert_allclose(out.detach().numpy(), x @ p["used"])

"""Dynamic shapes from PyTorch end to end: ``from_torch(dynamic_shapes=...)`` (``Dim`` with
ranges, derived dims, ``Dim.AUTO``, a ``.pt2``) gives a shape-polymorphic module that
``to_jax``, ``to_torch``, the ``.jax`` artifact and the ``.onnx`` model run at every size in
range, compared with eager torch (onnxruntime for the ONNX model)."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import jax
import numpy as np
import onnxruntime as ort
import pytest
import torch
from torch.export import Dim
from torch.utils._pytree import tree_leaves

import converter
from converter.errors import DynamicDimensionError, SignatureMismatchError
from converter.tools import cli

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(6, 16)
        self.fc2 = torch.nn.Linear(16, 3)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        return self.fc2(h).reshape(x.shape[0], -1).softmax(-1)


class Pair(torch.nn.Module):
    """``y`` has twice ``x``'s rows (a derived dim); sizes are used in arithmetic."""

    def forward(self, x, y):
        b = x.shape[0]
        return x * 2 + y.view(b, 2, -1).sum(1), torch.arange(b * 3).reshape(b, 3)


def _torch_out(model, *args, **kwargs):
    with torch.no_grad():
        return model(*args, **kwargs)


@pytest.fixture(scope="module")
def mlp():
    torch.manual_seed(0)
    model = MLP().eval()
    batch = Dim("batch", min=2, max=64)
    module = converter.from_torch(model, (torch.randn(5, 6),), dynamic_shapes=({0: batch},))
    return model, module


def test_signature_names_dims_and_ranges(mlp):
    _, m = mlp
    assert m.signature.inputs[0].shape == ("batch", 6)
    assert m.signature.outputs[0].shape == ("batch", 3)
    assert m.signature.dim_ranges == {"batch": [2, 64]}
    assert "tensor<?x6xf32>" in m.text(debug_info=False)


def test_to_jax_runs_every_size_in_range(mlp):
    model, m = mlp
    f = m.to_jax()
    for n in (2, 7, 64, 7):
        x = torch.randn(n, 6)
        np.testing.assert_allclose(
            np.asarray(f(x.numpy())), _torch_out(model, x).numpy(), rtol=1e-5, atol=1e-6
        )
    assert len(f._refined) == 3  # one specialization per shape, as jit compiles once per shape
    for n in (1, 65):
        with pytest.raises(
            SignatureMismatchError, match=rf"'batch' is {n} in args\[0\], outside its range \[2, 64\]"
        ):
            f(np.zeros((n, 6), np.float32))


def test_to_torch_runs_every_size_in_range(mlp):
    model, m = mlp
    t = m.to_torch()
    for n in (3, 40):
        x = torch.randn(n, 6)
        torch.testing.assert_close(_torch_out(t, x), _torch_out(model, x), rtol=1e-5, atol=1e-6)
    with pytest.raises(SignatureMismatchError, match=r"'batch' is 65.*\[2, 64\]"):
        t(torch.zeros(65, 6))


def test_saved_module_keeps_dims_and_ranges(mlp, tmp_path):
    model, m = mlp
    m.save(tmp_path / "mlp.shlo")
    loaded = converter.load(tmp_path / "mlp.shlo")
    assert loaded.signature.dim_ranges == {"batch": [2, 64]}
    f = loaded.to_jax()
    x = torch.randn(13, 6)
    np.testing.assert_allclose(np.asarray(f(x.numpy())), _torch_out(model, x).numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(SignatureMismatchError, match=r"'batch' is 70.*\[2, 64\]"):
        f(np.zeros((70, 6), np.float32))


def test_onnx_and_jax_artifacts_keep_symbolic_dims(mlp, tmp_path):
    model, m = mlp
    proto = m.to_onnx()
    dims = [d.dim_param or d.dim_value for d in proto.graph.input[0].type.tensor_type.shape.dim]
    assert dims == ["batch", 6]
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    exported = cli.export_jax(m)
    assert str(exported.in_avals[0].shape) == "(batch, 6)"
    exported = jax.export.deserialize(exported.serialize())
    for n in (2, 11):
        x = torch.randn(n, 6)
        want = _torch_out(model, x).numpy()
        (got,) = session.run(None, {"args[0]": x.numpy()})
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(np.asarray(exported.call(x.numpy())), want, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="refining shapes") as e:  # JAX's shape assertion
        exported.call(np.zeros((65, 6), np.float32))
    assert "constraint batch <= 64" in str(e.value.__cause__)


def test_derived_dim_and_size_arithmetic():
    model = Pair()
    b = Dim("b", min=1, max=32)
    x, y = torch.randn(4, 3), torch.randn(8, 3)
    m = converter.from_torch(model, (x, y), dynamic_shapes=({0: b}, {0: 2 * b}))
    assert [s.shape for s in m.signature.inputs] == [("b", 3), ("2*b", 3)]
    f, t = m.to_jax(), m.to_torch()
    for n in (1, 5):
        x, y = torch.randn(n, 3), torch.randn(2 * n, 3)
        want = _torch_out(model, x, y)
        for got in (f(x.numpy(), y.numpy()), _torch_out(t, x, y)):
            np.testing.assert_allclose(np.asarray(got[0]), want[0].numpy(), rtol=1e-6)
            np.testing.assert_array_equal(np.asarray(got[1]), want[1].numpy())
    with pytest.raises(SignatureMismatchError, match=r"'2\*b' of args\[1\] is 7.*b=5"):
        f(np.zeros((5, 3), np.float32), np.zeros((7, 3), np.float32))


class Halves(torch.nn.Module):
    """A keyword input, a dimension used halved, a cumulative sum along a dynamic axis."""

    def forward(self, x, *, mask):
        return (x.view(-1, 2, x.shape[1]).sum(1) * mask[: x.shape[0] // 2]).cumsum(0)


def test_keyword_input_and_cumsum_along_a_dynamic_axis():
    model, b = Halves(), Dim("b", min=1, max=20)
    x, mask = torch.randn(6, 3), torch.randn(3, 3)
    m = converter.from_torch(model, (x,), {"mask": mask}, dynamic_shapes={"x": {0: 2 * b}, "mask": {0: b}})
    assert [s.shape for s in m.signature.inputs] == [("2*b", 3), ("b", 3)]
    f, t = m.to_jax(), m.to_torch()
    session = ort.InferenceSession(m.to_onnx().SerializeToString(), providers=["CPUExecutionProvider"])
    for n in (1, 4, 9):
        x, mask = torch.randn(2 * n, 3), torch.randn(n, 3)
        want = _torch_out(model, x, mask=mask).numpy()
        np.testing.assert_allclose(np.asarray(f(x.numpy(), mask=mask.numpy())), want, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(_torch_out(t, x, mask=mask).numpy(), want, rtol=1e-5, atol=1e-5)
        (got,) = session.run(None, {"args[0]": x.numpy(), "kwargs['mask']": mask.numpy()})
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


class Frames(torch.nn.Module):
    """Wav2Vec2's feature projection: ``(b, s - 1)`` frames flattened to ``b*s - b`` rows,
    whose sign JAX's bounds (term by term) cannot decide without the size constraint."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(3, 2)

    def forward(self, x):
        h = x[:, 1:]
        return self.proj(h.reshape(-1, 3)).reshape(h.shape[0], h.shape[1], 2)


def test_flattened_product_of_dims_minus_one():
    torch.manual_seed(0)
    model = Frames().eval()
    dims = ({0: Dim("b", max=8), 1: Dim("s", min=3, max=40)},)
    m = converter.from_torch(model, (torch.randn(2, 5, 3),), dynamic_shapes=dims)
    f = m.to_jax()
    for shape in ((1, 3), (4, 9)):
        x = torch.randn(*shape, 3)
        want = _torch_out(model, x).numpy()
        np.testing.assert_allclose(np.asarray(f(x.numpy())), want, rtol=1e-5, atol=1e-6)


def test_conv_and_max_pool_with_dynamic_batch():
    """Max pooling picks its values by a one-hot select under dynamic shapes (the ONNX
    backend has no gather with dynamic batching dims); NaN windows give NaN as in torch."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(2, 4, 3, padding=1), torch.nn.MaxPool2d(2), torch.nn.Flatten()
    ).eval()
    m = converter.from_torch(model, (torch.randn(3, 2, 8, 8),), dynamic_shapes=({0: Dim("n", max=16)},))
    f = m.to_jax()
    session = ort.InferenceSession(m.to_onnx().SerializeToString(), providers=["CPUExecutionProvider"])
    for n in (1, 6):
        x = torch.randn(n, 2, 8, 8)
        x[0, 0, 0, 0] = float("nan")
        want = _torch_out(model, x).numpy()
        np.testing.assert_allclose(np.asarray(f(x.numpy())), want, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(session.run(None, {"args[0]": x.numpy()})[0], want, rtol=1e-5, atol=1e-5)


class Pools(torch.nn.Module):
    """Max pooling with its indices and average pooling without the padding counted, over
    a dynamic image size: their index tables and divisors depend on the size."""

    def forward(self, x):
        vals, idx = torch.nn.functional.max_pool2d(x, 3, 2, padding=1, return_indices=True)
        return vals, idx, torch.nn.functional.avg_pool2d(x, 3, 2, padding=1, count_include_pad=False)


def test_pooling_over_a_dynamic_image_size():
    model, side = Pools(), Dim("side", min=3, max=32)  # torch: pooled sizes != 1
    m = converter.from_torch(model, (torch.randn(1, 2, 6, 8),), dynamic_shapes=({2: side, 3: side + 2},))
    x = torch.randn(1, 2, 5, 7)  # odd sizes: the last window reads the right padding
    for got, want in zip(m.to_jax()(x.numpy()), _torch_out(model, x), strict=True):
        np.testing.assert_allclose(np.asarray(got), want.numpy(), rtol=1e-5, atol=1e-6)


def test_auto_dims_keep_torch_names(mlp):
    model, _ = mlp
    m = converter.from_torch(model, (torch.randn(4, 6),), dynamic_shapes=({0: Dim.AUTO},))
    ((name, _),) = (s.shape for s in m.signature.inputs)
    assert name.startswith("s") and name[1:].isdigit()  # torch's own symbol
    x = torch.randn(9, 6)
    np.testing.assert_allclose(np.asarray(m.to_jax()(x.numpy())), _torch_out(model, x), rtol=1e-5, atol=1e-6)


class SameRows(torch.nn.Module):
    """``y`` is viewed with ``x``'s row count: torch's guards make the two sizes equal."""

    def forward(self, x, y):
        return x * y.view(x.shape[0], 6).sum(1, keepdim=True)


@pytest.mark.parametrize(
    ("model", "example", "rows"),
    [
        (Pair(), (torch.randn(4, 3), torch.randn(8, 3)), lambda n: ((n, 3), (2 * n, 3))),
        (SameRows(), (torch.randn(4, 6), torch.randn(4, 2, 3)), lambda n: ((n, 6), (n, 2, 3))),
    ],
    ids=["twice", "equal"],
)
def test_auto_dims_related_by_a_guard_convert(model, example, rows):
    """With ``Dim.AUTO`` torch keeps each input's rows a symbol of its own and the relation
    (``rows(y) == 2 * rows(x)``, or equal rows) a guard of the example; the guards force it,
    so the module takes it as a derived dimension (one name, checked at call) and runs
    every size, instead of raising on the ``view`` or specializing."""
    m = converter.from_torch(model, example, dynamic_shapes=({0: Dim.AUTO},) * len(example))
    (a, *_), (b, *_) = (s.shape for s in m.signature.inputs)
    assert isinstance(a, str) and b in (a, f"2*{a}")
    assert list(m.signature.dim_ranges) == [a]
    f, t = m.to_jax(), m.to_torch()
    for n in (2, 5, 11):
        args = [torch.randn(*shape) for shape in rows(n)]
        want = tree_leaves(_torch_out(model, *args))
        got_jax = tree_leaves(f(*(x.numpy() for x in args)))
        got_torch = tree_leaves(_torch_out(t, *args))
        for w, gj, gt in zip(want, got_jax, got_torch, strict=True):
            np.testing.assert_allclose(np.asarray(gj), w.numpy(), rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(gt.numpy(), w.numpy(), rtol=1e-5, atol=1e-5)
    bad = [torch.zeros(*shape) for shape in rows(3)]
    bad[1] = torch.zeros(bad[1].shape[0] + 1, *bad[1].shape[1:])
    with pytest.raises(SignatureMismatchError, match="dimension"):
        f(*(x.numpy() for x in bad))


def test_auto_dims_a_guard_does_not_force_stay_apart():
    """``y[: rows(x)]`` only needs ``rows(y) >= rows(x)``: no relation is taken, the two
    sizes stay separate dimensions."""

    class Prefix(torch.nn.Module):
        def forward(self, x, y):
            return x + y[: x.shape[0]]

    m = converter.from_torch(
        Prefix(), (torch.randn(3, 2), torch.randn(5, 2)), dynamic_shapes=({0: Dim.AUTO},) * 2
    )
    (a, _), (b, _) = (s.shape for s in m.signature.inputs)
    assert a != b and a.isidentifier() and b.isidentifier()
    x, y = torch.randn(4, 2), torch.randn(9, 2)
    np.testing.assert_allclose(
        np.asarray(m.to_jax()(x.numpy(), y.numpy())), _torch_out(Prefix(), x, y).numpy()
    )


def test_rule_needing_a_concrete_size_names_the_dim():
    class FloatStep(torch.nn.Module):
        def forward(self, x):
            return x.sum() + torch.arange(0, x.shape[0], 0.5).sum()

    with pytest.raises(
        DynamicDimensionError, match=r"aten\.arange\.start_step at .*test_dynamic\.py:\d+"
    ) as e:
        converter.from_torch(FloatStep(), (torch.randn(4),), dynamic_shapes=({0: Dim("n", max=100)},))
    assert e.value.dims == ("n",) and "'n' cannot stay symbolic" in str(e.value)


@pytest.fixture(scope="module")
def gpt2():
    sys.path.insert(0, str(EXAMPLES))
    try:
        from gpt2 import factory
    finally:
        sys.path.remove(str(EXAMPLES))
    model, (ids,) = factory()
    seq = Dim("seq", min=2, max=128)
    return model, converter.from_torch(model, (ids,), dynamic_shapes=({1: seq},))


def test_gpt2_dynamic_sequence_length(gpt2):
    model, m = gpt2
    assert m.signature.inputs[0].shape == (2, "seq")
    f = m.to_jax()
    session = ort.InferenceSession(m.to_onnx().SerializeToString(), providers=["CPUExecutionProvider"])
    for n in (3, 37):  # shorter and longer than the traced 16: one compilation each
        ids = torch.randint(0, 1000, (2, n))
        want = _torch_out(model, ids).logits.numpy()
        np.testing.assert_allclose(np.asarray(f(ids.numpy())["logits"]), want, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(session.run(None, {"args[0]": ids.numpy()})[0], want, rtol=1e-4, atol=1e-4)


def test_validate_takes_dynamic_shapes():
    from converter.tools import validate as V

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 4), torch.nn.Tanh()).eval()
    source = (model, (torch.randn(3, 6),), {}, ({0: Dim("rows", max=20)},))
    assert V.load_source(source, "torch").module.signature.inputs[0].shape == ("rows", 6)
    report = V.validate(source, from_="torch", targets=("jax", "torch"), progress=False)
    assert report.passed and all(row.shape == [3, 4] for t in report.targets for row in t.rows)


def test_cli_pt2_and_factory_with_dynamic_shapes(tmp_path):
    torch.manual_seed(0)
    model = MLP().eval()
    pt2 = tmp_path / "mlp.pt2"
    ep = torch.export.export(model, (torch.randn(4, 6),), dynamic_shapes=({0: Dim("batch", max=50)},))
    torch.export.save(ep, pt2)
    factory = tmp_path / "dyn.py"
    factory.write_text(
        textwrap.dedent(
            """
            import torch
            from torch.export import Dim

            def factory():
                torch.manual_seed(0)
                model = torch.nn.Sequential(torch.nn.Linear(6, 4), torch.nn.Tanh()).eval()
                return model, (torch.randn(3, 6),), {}, ({0: Dim("rows", max=20)},)
            """
        )
    )
    for source, out in (
        (pt2, tmp_path / "a.jax"),
        (pt2, tmp_path / "a.onnx"),
        (f"{factory}:factory", tmp_path / "b.jax"),
    ):
        assert cli.main([str(source), "-o", str(out)]) == 0
    exported = jax.export.deserialize(bytearray((tmp_path / "a.jax").read_bytes()))
    session = ort.InferenceSession(str(tmp_path / "a.onnx"), providers=["CPUExecutionProvider"])
    from_factory = jax.export.deserialize(bytearray((tmp_path / "b.jax").read_bytes()))
    assert "rows" in str(from_factory.in_avals[0].shape)
    reference, _, _, _ = cli.load_factory(factory, "factory", dynamic=True)
    for n in (2, 9):
        x = torch.randn(n, 6)
        want = _torch_out(model, x).numpy()
        np.testing.assert_allclose(np.asarray(exported.call(x.numpy())), want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(session.run(None, {"args[0]": x.numpy()})[0], want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(
            np.asarray(from_factory.call(x.numpy())), _torch_out(reference, x).numpy(), rtol=1e-5, atol=1e-6
        )

"""``torch.export`` of a shape-polymorphic module's ``to_torch()``: the exported program keeps
the dimensions symbolic (named as in the module, with their ranges), and runs every size in
range, compared with eager torch (the source) and onnxruntime (an ONNX ``dim_param`` source).
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
import torch
from torch.export import Dim

import converter
from converter.tools import cli
from tests.frontends.onnx.test_dynamic import _cnn


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(6, 16)
        self.fc2 = torch.nn.Linear(16, 3)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        return (self.fc2(h).reshape(x.shape[0], -1).softmax(-1), x.mean(0))


class Pair(torch.nn.Module):
    """``y`` has twice ``x``'s rows (a derived dim); sizes in arithmetic and ``arange``."""

    def forward(self, x, y):
        b = x.shape[0]
        return x * 2 + y.view(b, 2, -1).sum(1), torch.arange(b * 3).reshape(b, 3) + x.shape[0]


def _eager(model, *args):
    with torch.no_grad():
        return model(*args)


@pytest.fixture(scope="module")
def mlp():
    torch.manual_seed(0)
    model = MLP().eval()
    module = converter.from_torch(
        model, (torch.randn(5, 6),), dynamic_shapes=({0: Dim("batch", min=2, max=64)},)
    )
    t = module.to_torch()
    ep = torch.export.export(t, (torch.randn(5, 6),), dynamic_shapes=t.export_dynamic_shapes())
    return model, module, ep


def test_export_keeps_the_dimension_and_its_range(mlp):
    model, _, ep = mlp
    (x,) = (n for n in ep.graph.nodes if n.op == "placeholder" and n.name.startswith("args"))
    size = x.meta["val"].shape[0]
    assert isinstance(size, torch.SymInt)
    (vr,) = (r for s, r in ep.range_constraints.items() if str(s) == str(size.node.expr))
    assert (int(vr.lower), int(vr.upper)) == (2, 64)
    run = ep.module()
    for n in (2, 9, 64):
        x = torch.randn(n, 6)
        for got, want in zip(_eager(run, x), _eager(model, x), strict=True):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    with pytest.raises(Exception, match="batch|65|64"):  # torch's own range check
        run(torch.randn(65, 6))


def test_exported_program_converts_back_with_the_names(mlp):
    model, module, ep = mlp
    again = converter.from_torch(ep)
    assert again.signature.inputs[0].shape == ("batch", 6)
    assert again.signature.dim_ranges == {"batch": [2, 64]}
    x = torch.randn(11, 6)
    for got, want in zip(again.to_jax()(x.numpy()), _eager(model, x), strict=True):
        np.testing.assert_allclose(np.asarray(got), want.numpy(), rtol=1e-5, atol=1e-6)


def test_derived_dims_and_size_arithmetic_reexport():
    model = Pair()
    b = Dim("b", min=2, max=32)
    module = converter.from_torch(
        model, (torch.randn(4, 3), torch.randn(8, 3)), dynamic_shapes=({0: b}, {0: 2 * b})
    )
    t = module.to_torch()
    shapes = t.export_dynamic_shapes()
    assert shapes["args"][0][0].__name__ == "b" and shapes["args"][1][0].root.__name__ == "b"
    ep = torch.export.export(t, (torch.randn(4, 3), torch.randn(8, 3)), dynamic_shapes=shapes)
    run = ep.module()
    for n in (2, 5, 32):
        x, y = torch.randn(n, 3), torch.randn(2 * n, 3)
        for got, want in zip(_eager(run, x, y), _eager(model, x, y), strict=True):
            torch.testing.assert_close(got, want)


class Fold(torch.nn.Module):
    """A reshape by another input's size: the module computes ``rows(x) // rows(y)`` (a
    floor division of two dimensions, with JAX's sign corrections) as a shape."""

    def forward(self, x, y):
        return x.reshape(-1, y.shape[0]).sum(0) * y


def test_size_division_of_two_dims_stays_symbolic():
    k = Dim("k", min=2, max=8)
    args = (torch.randn(12), torch.randn(3))
    t = converter.from_torch(Fold(), args, dynamic_shapes=({0: 4 * k}, {0: k})).to_torch()
    ep = torch.export.export(t, args, dynamic_shapes=t.export_dynamic_shapes())
    assert "VR[2, 8]" in [str(r) for r in ep.range_constraints.values()]  # k, and 4*k
    for n in (2, 5, 8):
        x, y = torch.randn(4 * n), torch.randn(n)
        torch.testing.assert_close(_eager(ep.module(), x, y), _eager(Fold(), x, y))


def test_cli_writes_a_dynamic_pt2(tmp_path):
    torch.manual_seed(0)
    model = MLP().eval()
    src = tmp_path / "mlp.pt2"
    ep = torch.export.export(model, (torch.randn(4, 6),), dynamic_shapes=({0: Dim("batch", max=50)},))
    torch.export.save(ep, src)
    out = tmp_path / "again.pt2"
    assert cli.main([str(src), "-o", str(out)]) == 0
    run = torch.export.load(out).module()
    for n in (3, 17, 50):
        x = torch.randn(n, 6)
        for got, want in zip(_eager(run, x), _eager(model, x), strict=True):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_onnx_dim_param_to_pt2(tmp_path):
    """An ONNX model with batch ``N`` → ``.pt2`` with ``N`` dynamic (no ``--dim``)."""
    source = _cnn(13, "shape")
    path = tmp_path / "cnn.onnx"
    path.write_bytes(source.SerializeToString())
    out = tmp_path / "cnn.pt2"
    assert cli.main([str(path), "-o", str(out)]) == 0
    ep = torch.export.load(out)
    assert any(isinstance(d, torch.SymInt) for n in ep.graph.nodes if n.op == "placeholder"
               for d in getattr(n.meta.get("val"), "shape", ()))  # fmt: skip
    session = ort.InferenceSession(source.SerializeToString(), providers=["CPUExecutionProvider"])
    run = ep.module()
    for n in (1, 3, 6):
        x = np.random.default_rng(n).standard_normal((n, 3, 8, 8)).astype(np.float32)
        (want,) = session.run(None, {"x": x})
        (got,) = _eager(run, torch.from_numpy(x))
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)


def test_size_without_a_symbolic_form_names_the_dimension():
    """A shape computation the symbolic sizes cannot express raises naming the dimension,
    the op and its location, rather than specializing the export."""
    from converter.backends.torch import symbolic

    with pytest.raises(symbolic.SymbolicSizeError, match="unknown sign"):
        shape_env = torch.fx.experimental.symbolic_shapes.ShapeEnv()
        s = shape_env.create_unbacked_symint()
        symbolic._tdiv(s, 2)


def test_static_module_has_no_dynamic_shapes():
    model = torch.nn.Linear(3, 2).eval()
    t = converter.from_torch(model, (torch.randn(4, 3),)).to_torch()
    assert t.export_dynamic_shapes() == {"args": (None,)}


class Keywords(torch.nn.Module):
    def forward(self, input_ids, attention_mask):
        return input_ids.float() * attention_mask


def test_keyword_only_module_reexports():
    """A module called with keyword inputs only (as Hugging Face models are): torch.export
    binds the keyword inputs by name (forward's signature lists them; through ``**kwargs``
    torch 2.13 refused the export), and no ``args``."""
    seq = Dim("seq", min=2, max=40)
    kw = {"input_ids": torch.randint(0, 9, (2, 6)), "attention_mask": torch.ones(2, 6)}
    dyn = {"input_ids": {1: seq}, "attention_mask": {1: seq}}
    t = converter.from_torch(Keywords(), (), kw, dynamic_shapes=dyn).to_torch()
    shapes = t.export_dynamic_shapes()
    assert list(shapes) == ["input_ids", "attention_mask"]
    ep = torch.export.export(t, (), kw, dynamic_shapes=shapes)
    ids, mask = torch.randint(0, 9, (2, 11)), torch.rand(2, 11)
    torch.testing.assert_close(ep.module()(input_ids=ids, attention_mask=mask), ids.float() * mask)


def test_gather_of_a_dynamic_size_reexports():
    """A gather whose result has a dynamic dimension (an embedding of a dynamic number of
    ids) traced symbolically by ``torch.export`` of ``to_torch()``: it expanded to the
    module's static shape, None for the dynamic size (every HF model's re-export failed)."""
    torch.manual_seed(0)
    emb = torch.nn.Embedding(10, 4).eval()
    ids = torch.randint(0, 10, (2, 5))
    t = converter.from_torch(emb, (ids,), dynamic_shapes=({1: Dim("seq", min=2, max=40)},)).to_torch()
    ep = torch.export.export(t, (ids,), dynamic_shapes=t.export_dynamic_shapes())
    other = torch.randint(0, 10, (2, 17))
    torch.testing.assert_close(ep.module()(other), emb(other).detach())


def test_torch_compile_of_a_shape_polymorphic_module(mlp):
    """``torch.compile(fullgraph=True, dynamic=True)`` of a shape-polymorphic ``to_torch()``:
    one graph for every batch size whose forward holds the module's ATen ops on a symbolic
    batch (AOTAutograd traces the module's interpretation: inductor can fuse it; it was one
    opaque custom op, and before that an error), outputs and parameter gradients as eager
    torch's; the module pickles and deep-copies without its compile hook."""
    import copy
    import pickle

    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd
    from torch._dynamo.utils import counters

    model, module, _ = mlp
    t = module.to_torch()
    forwards = []

    def keep(gm, _):
        forwards.append(gm)
        return make_boxed_func(gm.forward)

    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(t, backend=aot_autograd(fw_compiler=keep), fullgraph=True, dynamic=True)
    for n in (3, 10):
        x = torch.randn(n, 6)
        got, want = compiled(x), model(x)
        for g, w in zip(got, want, strict=True):
            torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-6)
        t.zero_grad()
        model.zero_grad()
        got[0].square().sum().backward()
        want[0].square().sum().backward()
        for (_, p), q in zip(t.named_parameters(), model.parameters(), strict=True):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-6)
    assert counters["stats"]["unique_graphs"] == 1
    fw = forwards[0]  # then the backward (aot_autograd compiles it with fw_compiler too)
    targets = {str(n.target) for n in fw.graph.nodes if n.op == "call_function"}
    assert {"aten.mm.default", "aten.exp.default"} <= targets, targets
    assert not any("converter" in t for t in targets)
    inputs = [n.meta["val"] for n in fw.graph.nodes if n.op == "placeholder"]
    assert any(isinstance(v, torch.SymInt) for v in inputs)  # the batch size, an input of the graph
    assert any(isinstance(v, torch.Tensor) and isinstance(v.shape[0], torch.SymInt) for v in inputs)
    x = torch.randn(4, 6)
    for clone in (pickle.loads(pickle.dumps(t)), copy.deepcopy(t)):
        torch.testing.assert_close(clone(x)[0], model(x)[0].detach(), rtol=1e-5, atol=1e-6)


def test_embedding_gather_of_dynamic_ids_reexports():
    """``Gather(table, ids)`` with ids ``[N, S]`` (a token embedding): the gather's result
    has dynamic dimensions while torch.export traces, and keeps their sizes."""
    from onnx import TensorProto, helper, numpy_helper

    table = np.random.default_rng(0).standard_normal((10, 4)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "ids"], ["y"])],
        "g",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, ["N", "S"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", "S", 4])],
        initializer=[numpy_helper.from_array(table, "table")],
    )
    t = converter.from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])).to_torch()
    ids = torch.tensor([[1, 2, 3], [4, 5, 9]])
    ep = torch.export.export(t, (ids,), dynamic_shapes=t.export_dynamic_shapes())
    other = torch.tensor([[7, 0, 1, 2, 3]])
    (got,) = _eager(ep.module(), other)
    np.testing.assert_array_equal(got.numpy(), table[other.numpy()])


class _Running(torch.nn.Module):
    """A buffer updated in place every call (a running total)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("total", torch.zeros(4))
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        self.total.add_(x.sum(0))
        return self.lin(x) * self.total


def test_torch_compile_of_a_shape_polymorphic_module_with_state():
    """A shape-polymorphic module whose buffer the source updates in place, under
    ``torch.compile(fullgraph=True)``: the first size compiles with static sizes, the next
    with torch's automatic dynamic shapes; every call's output and the buffer after three
    calls of different sizes equal eager torch's."""
    torch.manual_seed(0)
    source, eager = _Running(), _Running()
    eager.load_state_dict(source.state_dict())
    t = converter.from_torch(
        source, (torch.randn(3, 4),), dynamic_shapes=({0: Dim("b", min=2, max=32)},)
    ).to_torch()
    compiled = torch.compile(t, backend="aot_eager", fullgraph=True)
    for n in (3, 5, 7):
        x = torch.randn(n, 4)
        torch.testing.assert_close(compiled(x), eager(x).detach())
    torch.testing.assert_close(t.total, eager.total)


def _strided_conv_resize():
    """``Conv`` stride 2 then ``Resize`` x2 (nearest) along a symbolic ``h`` (the sweep's
    convnet): the gather's sizes hold JAX's floor-division sign corrections (selects)."""
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(
        np.random.default_rng(0).standard_normal((1, 1, 3, 3)).astype(np.float32), "w"
    )
    scales = numpy_helper.from_array(np.array([1, 1, 2, 1], np.float32), "scales")
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], strides=[2, 1]),
        helper.make_node("Resize", ["c", "", "scales"], ["y"], mode="nearest"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, "h", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, None, 3])],
        initializer=[w, scales],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_size_selects_decided_by_the_ranges_reexport():
    """A select on sizes that the ranges decide (``h >= 3``: the sign correction of
    ``(h - 1) // 2``) is taken at trace time: ``torch.sym_ite`` made an ``ITE`` that torch's
    range analysis (asked by the gather's view) has no rule for (``KeyError: ITE``)."""
    model = _strided_conv_resize()
    t = converter.from_onnx(model).to_torch()
    # torch's own contiguity checks guard the pooled sizes != 1: its suggested min=3
    dims = {"args": ({2: Dim("h", min=3, max=64)},)}
    ep = torch.export.export(t, (torch.randn(1, 1, 8, 3),), dynamic_shapes=dims)
    x = np.random.default_rng(1).standard_normal((1, 1, 11, 3)).astype(np.float32)
    (want,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x}
    )
    (got,) = _eager(ep.module(), torch.from_numpy(x))
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)


class _CondOnParams(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return torch.cond(
            x.sum() > 0, lambda v: torch.relu(self.lin(v)), lambda v: v @ self.lin.weight.T, (x,)
        )


def test_torch_compile_of_a_dynamic_cond_on_views_of_parameters():
    """``torch.compile`` of a shape-polymorphic module whose ``cond`` takes a parameter and its
    transpose: AOTAutograd refuses ``cond`` operands or outputs that alias each other
    ("might be aliasing"), so traced ``cond``s get fresh copies; both branches equal eager."""
    torch.manual_seed(0)
    model = _CondOnParams()
    t = converter.from_torch(
        model, (torch.randn(3, 4),), dynamic_shapes=({0: Dim("b", min=2, max=16)},)
    ).to_torch()
    compiled = torch.compile(t, backend="aot_eager", fullgraph=True, dynamic=True)
    for x in (torch.rand(3, 4) + 0.1, -torch.rand(5, 4) - 0.1):
        torch.testing.assert_close(compiled(x), model(x).detach(), rtol=1e-5, atol=1e-6)


def _iota_of(size: str) -> str:
    """A module of one dynamic input ``x`` returning ``iota(size)`` (f32), ``size`` computed
    from ``n = dim(x, 0)`` by the given ops (``%q`` names the size)."""
    return f"""
func.func public @main(%x: tensor<?xf32>) -> tensor<?xf32> {{
  %n = stablehlo.get_dimension_size %x, dim = 0 : (tensor<?xf32>) -> tensor<i32>
  %c5 = stablehlo.constant dense<5> : tensor<i32>
  {size}
  %s = stablehlo.reshape %q : (tensor<i32>) -> tensor<1xi32>
  %y = stablehlo.dynamic_iota %s, dim = 0 : (tensor<1xi32>) -> tensor<?xf32>
  return %y : tensor<?xf32>
}}
"""


def test_dimension_size_read_symbolically():
    """``get_dimension_size`` of an input read under ``torch.export`` is the input's symbolic
    size: ``iota(n + 5)`` exports once and runs at every ``n``; a size with no symbolic form
    (``n / (n - 5)``, a divisor of unknown sign) raises naming the op and the size."""
    from converter.signature import LeafSpec

    base = converter.from_stablehlo(_iota_of("%q = stablehlo.add %n, %c5 : tensor<i32>"))
    sig = base.signature  # with a second input the module does not use (kept_var_idx)
    tree = {"kind": "tuple", "children": [{"kind": "tuple", "children": [{"kind": "leaf"}] * 2},
                                          {"kind": "dict", "keys": [], "children": []}]}  # fmt: skip
    sig = sig.replace(
        inputs=(*sig.inputs, LeafSpec("args[1]", (2,), "float32")), in_tree=tree, kept_var_idx=(0,)
    )
    t = converter.Module(base.mlir, sig, {}).to_torch()
    ep = torch.export.export(t, (torch.zeros(4), torch.ones(2)), dynamic_shapes=t.export_dynamic_shapes())
    for n in (2, 9):
        torch.testing.assert_close(ep.module()(torch.zeros(n), torch.ones(2)), torch.arange(n + 5.0))
    size = "%d = stablehlo.subtract %n, %c5 : tensor<i32>\n  %q = stablehlo.divide %n, %d : tensor<i32>"
    t = converter.from_stablehlo(_iota_of(size)).to_torch()
    torch.testing.assert_close(t(torch.zeros(10)), torch.arange(2.0))  # eager: any size
    with pytest.raises(converter.DynamicDimensionError, match="stablehlo.divide.*unknown sign") as err:
        torch.export.export(t, (torch.zeros(10),), dynamic_shapes=t.export_dynamic_shapes())
    (dim,) = err.value.dims
    assert f"size {dim} by {dim} - 5" in str(err.value)


_SHAPE_OPS = """
func.func public @main(%a: tensor<2xi32>, %b: tensor<2xi32>, %p: tensor<i1>, %q: tensor<2xi1>)
    -> tensor<2xi32> {
  %0 = stablehlo.divide %a, %b : tensor<2xi32>
  %1 = stablehlo.remainder %a, %b : tensor<2xi32>
  %2 = stablehlo.maximum %a, %b : tensor<2xi32>
  %3 = stablehlo.minimum %a, %b : tensor<2xi32>
  %4 = stablehlo.select %p, %a, %b : tensor<i1>, tensor<2xi32>
  %5 = stablehlo.select %p, %q, %q : tensor<i1>, tensor<2xi1>
  %6 = stablehlo.clamp %b, %a, %b : tensor<2xi32>
  %7 = stablehlo.slice %a [1:2] : (tensor<2xi32>) -> tensor<1xi32>
  %8 = stablehlo.convert %a : (tensor<2xi32>) -> tensor<2xi1>
  %9 = stablehlo.convert %q : (tensor<2xi1>) -> tensor<2xi32>
  %10 = stablehlo.not %q : tensor<2xi1>
  %11 = stablehlo.not %a : tensor<2xi32>
  %12 = stablehlo.and %q, %8 : tensor<2xi1>
  %13 = stablehlo.or %q, %8 : tensor<2xi1>
  %14 = stablehlo.constant dense<[[1, 2], [3, 4]]> : tensor<2x2xi32>
  %15 = stablehlo.constant dense<7> : tensor<20xi32>
  %16 = stablehlo.sign %a : tensor<2xi32>
  %17 = stablehlo.constant dense<7> : tensor<16xi32>
  %18 = stablehlo.constant dense<7> : tensor<17xi32>
  %19 = stablehlo.constant dense<[true, false]> : tensor<2xi1>
  %20 = stablehlo.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %21 = stablehlo.constant dense<[4, 5]> : tensor<2xui32>
  %22 = stablehlo.broadcast_in_dim %a, dims = [0] : (tensor<2xi32>) -> tensor<2x3xi32>
  %23 = stablehlo.reshape %22 : (tensor<2x3xi32>) -> tensor<3x2xi32>
  %24 = stablehlo.broadcast_in_dim %23, dims = [1, 0] : (tensor<3x2xi32>) -> tensor<2x3xi32>
  %25 = stablehlo.concatenate %a, %b, dim = 0 : (tensor<2xi32>, tensor<2xi32>) -> tensor<4xi32>
  %26 = stablehlo.slice %25 [1:4:2] : (tensor<4xi32>) -> tensor<2xi32>
  %27 = stablehlo.abs %a : tensor<2xi32>
  %28 = stablehlo.compare LT, %a, %b : (tensor<2xi32>, tensor<2xi32>) -> tensor<2xi1>
  %29 = stablehlo.convert %a : (tensor<2xi32>) -> tensor<2xf32>
  %30 = stablehlo.subtract %a, %b : tensor<2xi32>
  %31 = stablehlo.and %a, %b : tensor<2xi32>
  %32 = stablehlo.or %a, %b : tensor<2xi32>
  return %0 : tensor<2xi32>
}
"""


@pytest.fixture(scope="module")
def shape_ops():
    """The ops of ``_SHAPE_OPS`` by result name (``"%4"`` ...) and the module holding them."""
    from converter import mlir

    module = converter.from_stablehlo(_SHAPE_OPS)
    ops = [mlir.Op(o) for o in mlir.walk_ops(module.mlir.operation) if o.name != "func.return"]
    ops = [o for o in ops if o.name.startswith("stablehlo.")]
    return module, {f"%{i}": op for i, op in enumerate(ops)}


def test_shape_arithmetic_on_concrete_sizes_follows_the_spec(shape_ops):
    """Integer ``divide``/``remainder`` truncate toward zero (the spec's, not Python's floor),
    ``maximum``/``minimum``/``clamp``/``slice``/``not`` elementwise; only small 1-D integer
    constants are shape values."""
    from converter.backends.torch.symbolic import SymArray, constant, eval_shape_op

    _, ops = shape_ops
    a, b = SymArray([-7, 7], "int32"), SymArray([2, -2], "int32")

    def ev(name, *xs):
        return eval_shape_op(ops[name], list(xs)).values.tolist()

    assert ev("%0", a, b) == [-3, -3] and ev("%1", a, b) == [-1, 1]
    assert ev("%2", a, b) == [2, 7] and ev("%3", a, b) == [-7, -2]
    assert ev("%6", SymArray([0, 0], "int32"), a, SymArray([5, 5], "int32")) == [0, 5]
    assert ev("%7", a) == [7] and ev("%11", a) == [6, -8]
    assert ev("%8", SymArray([0, -3], "int32")) == [False, True]
    assert ev("%9", SymArray([True, False], "bool")) == [1, 0] and ev(
        "%10", SymArray([True, False], "bool")
    ) == [False, True]
    assert constant(ops["%14"]) is None and constant(ops["%15"]) is None  # 2-D, 20 elements
    assert repr(SymArray([3, 4], "int64")) == "SymArray([3, 4], int64)"


def test_shape_sign_of_concrete_sizes_matches_numpy(shape_ops):
    """``sign`` on concrete sizes is -1, 0 or 1 as the spec's (numpy's): -1 included."""
    from converter.backends.torch.symbolic import SymArray, eval_shape_op

    _, ops = shape_ops
    for values in ([-1, 7], [0, -5]):
        got = eval_shape_op(ops["%16"], [SymArray(values, "int32")]).values.tolist()
        assert got == np.sign(values).tolist()


def test_shape_values_of_constants_and_layout_ops_follow_the_spec(shape_ops):
    """Integer and bool constants of at most 16 elements are shape values (a float one is
    not); ``broadcast_in_dim`` (a transposing one too), ``reshape``, ``concatenate``, a
    strided ``slice``, ``abs``, ``compare`` and the integer ``and``/``or`` give NumPy's values; a
    ``convert`` to a float, or an op with a tensor operand, is no shape computation.
    ``materialize`` puts concrete values in their storage dtype (``uint32`` in int64);
    ``shape_list`` gives Python ints."""
    from converter.backends.torch.symbolic import SymArray, constant, eval_shape_op, materialize, shape_list

    _, ops = shape_ops
    assert constant(ops["%17"]).values.tolist() == [7] * 16 and constant(ops["%18"]) is None
    flags = constant(ops["%19"])
    assert flags.dtype == "bool" and flags.values.tolist() == [True, False]
    assert type(flags.values[0]) is bool
    assert constant(ops["%20"]) is None and constant(ops["%21"]).values.tolist() == [4, 5]
    a, b = np.array([-7, 3]), np.array([2, -2])
    sa, sb = SymArray(a.tolist(), "int32"), SymArray(b.tolist(), "int32")

    def ev(name, *xs):
        return eval_shape_op(ops[name], list(xs)).values

    wide = np.broadcast_to(a[:, None], (2, 3))
    assert ev("%22", sa).tolist() == wide.tolist()
    assert ev("%23", SymArray(wide, "int32")).tolist() == wide.reshape(3, 2).tolist()
    tall = wide.reshape(3, 2)
    assert ev("%24", SymArray(tall, "int32")).tolist() == tall.T.tolist()
    both = np.concatenate([a, b])
    assert ev("%25", sa, sb).tolist() == both.tolist()
    assert ev("%26", SymArray(both, "int32")).tolist() == both[1:4:2].tolist()
    assert ev("%27", sa).tolist() == np.abs(a).tolist()
    assert ev("%28", sa, sb).tolist() == (a < b).tolist()
    assert ev("%30", sa, sb).tolist() == (a - b).tolist()
    assert ev("%31", sa, sb).tolist() == (a & b).tolist() and ev("%32", sa, sb).tolist() == (a | b).tolist()
    assert eval_shape_op(ops["%29"], [sa]) is None
    assert eval_shape_op(ops["%30"], [sa, torch.tensor(b)]) is None  # one operand is data
    got = materialize(None, SymArray([[3, 4]], "uint32"))
    assert got.dtype == torch.int64 and got.tolist() == [[3, 4]]
    sizes = shape_list(SymArray([np.int64(3), 4], "int64"))
    assert sizes == [3, 4] and all(type(v) is int for v in sizes)  # NumPy integers as ints
    assert shape_list(torch.tensor([5, 6])) == [5, 6]


def test_shape_arithmetic_on_symbolic_sizes(shape_ops):
    """On a size ``u`` of unknown sign: ``select`` on ``u > 0`` mixes ints and sizes through
    ``sym_ite`` (scalar predicates broadcast), booleans through and/or, ``clamp`` through
    ``sym_max``/``sym_min``; a remainder by it raises. Checked by substituting values of ``u``."""
    from converter.backends.torch.symbolic import SymArray, SymbolicSizeError, eval_shape_op

    _, ops = shape_ops
    u = torch.fx.experimental.symbolic_shapes.ShapeEnv().create_unbacked_symint()
    c = u > 0

    def ev(name, *xs):
        return list(eval_shape_op(ops[name], list(xs)).values)

    def at(values, n):
        out = []
        for v in values:
            if isinstance(v, (torch.SymInt, torch.SymBool)):
                v = v.node.expr.subs({u.node.expr: n})
            out.append(bool(v) if isinstance(v, bool) or str(v) in ("True", "False") else int(v))
        return out

    p = SymArray(c, "bool")
    got = ev("%4", p, SymArray([3, 1], "int32"), SymArray([3, u], "int32"))
    assert got[0] == 3 and at(got, 5) == [3, 1] and at(got, -2) == [3, -2]
    got = ev("%4", p, SymArray([u, u * 2], "int32"), SymArray([u + 1, 4], "int32"))
    assert at(got, 5) == [5, 10] and at(got, -2) == [-1, 4]
    got = ev("%5", p, SymArray([True, c], "bool"), SymArray([c, False], "bool"))
    assert at(got, 5) == [True, True] and at(got, -2) == [False, False]
    got = ev("%6", SymArray([0, 0], "int32"), SymArray([u, -4], "int32"), SymArray([10, 10], "int32"))
    assert [at(got, n)[0] for n in (-2, 5, 20)] == [0, 5, 10] and got[1] == 0
    assert at(ev("%9", SymArray([True, c], "bool")), -3) == [1, 0]
    assert at(ev("%10", SymArray([True, c], "bool")), -3) == [False, True]
    both = SymArray([c, c], "bool")
    assert at(ev("%12", SymArray([True, c], "bool"), both), 3) == [True, True]
    assert at(ev("%12", both, SymArray([True, False], "bool")), 3) == [True, False]
    assert at(ev("%13", SymArray([False, c], "bool"), both), -3) == [False, False]
    assert at(ev("%13", SymArray([True, c], "bool"), both), -3) == [True, False]
    assert at(ev("%13", both, SymArray([True, False], "bool")), -3) == [True, False]
    assert ev("%7", SymArray([4, u], "int32")) == [u]
    with pytest.raises(SymbolicSizeError, match="remainder of the size 6 by u0 of unknown sign"):
        ev("%1", SymArray([6, 6], "int32"), SymArray([u, u], "int32"))


def test_shape_sign_and_abs_of_a_symbolic_size(shape_ops):
    """``sign``/``abs`` of a size ``u`` of unknown sign follow NumPy at every value of ``u``
    (negative ones included), through ``sym_ite``."""
    from converter.backends.torch.symbolic import SymArray, eval_shape_op

    _, ops = shape_ops
    u = torch.fx.experimental.symbolic_shapes.ShapeEnv().create_unbacked_symint()
    sign = eval_shape_op(ops["%16"], [SymArray([u, 3], "int32")]).values
    size = eval_shape_op(ops["%27"], [SymArray([u, -3], "int32")]).values
    for n in (-3, 0, 4):
        assert int(sign[0].node.expr.subs({u.node.expr: n})) == np.sign(n)
        assert int(size[0].node.expr.subs({u.node.expr: n})) == abs(n)
    assert sign.tolist()[1] == 1 and size.tolist()[1] == 3


def test_division_of_sizes_of_known_sign_stays_symbolic():
    """Integer ``divide``/``remainder`` of sizes known ``>= 0`` by ones known ``> 0`` (0
    included among the dividends) are floor division and modulo (the spec's truncation
    agrees there): checked by substituting values; a divisor only known ``>= 0`` (it may
    be 0) raises."""
    from converter.backends.torch.symbolic import SymbolicSizeError, _tdiv, _trem

    env = torch.fx.experimental.symbolic_shapes.ShapeEnv()
    n, d, m = (env.create_unbacked_symint() for _ in range(3))
    torch._check(n >= 0)
    torch._check(d > 0)
    torch._check(m >= 0)

    def at(v, **values):
        return int(v.node.expr.subs({s.node.expr: values[k] for k, s in (("n", n), ("d", d)) if k in values}))

    assert [at(_tdiv(n, 3), n=k) for k in (0, 7)] == [0, 2] and at(_trem(n, 3), n=7) == 1
    assert at(_tdiv(7, d), d=2) == 3 and at(_trem(7, d), d=2) == 1
    assert at(_tdiv(n, d), n=0, d=5) == 0
    with pytest.raises(SymbolicSizeError, match="unknown sign"):
        _tdiv(7, m)
    with pytest.raises(SymbolicSizeError, match="unknown sign"):
        _trem(7, m)

"""Documented precedence and ordering rules (issue 27): the first matching sharding rule
wins; ONNX Scan's input and output directions (and axes) are each honoured per value; a
static input value specialized at conversion accepts only a value of the same kind
(``True``, ``1`` and ``1.0`` compare equal in Python but are three specializations).
"""

from __future__ import annotations

import jax
import numpy as np
import onnxruntime as ort
import pytest
import torch
from jax.sharding import PartitionSpec as P
from onnx import TensorProto, helper

import converter
from converter.errors import ShardingError, SignatureMismatchError
from converter.sharding import param_specs

# ------------------------------------------------------------------ sharding: first match wins


@pytest.fixture(scope="module")
def mesh():
    return jax.make_mesh((1, 1), ("fsdp", "tp"))


PARAMS = {"attn.q.weight": np.zeros((4, 6)), "attn.o.weight": np.zeros((6, 4)), "norm.weight": np.zeros(4)}


def test_first_matching_sharding_rule_wins(mesh):
    general_first = [("attn", P("tp")), (r"attn\.q", P(None, "tp"))]
    specific_first = general_first[::-1]
    a, b = param_specs(PARAMS, mesh, general_first), param_specs(PARAMS, mesh, specific_first)
    assert a["attn.q.weight"] == ("tp", None) and b["attn.q.weight"] == (None, "tp")
    assert a["attn.o.weight"] == b["attn.o.weight"] == ("tp", None)
    assert a["norm.weight"] is None and b["norm.weight"] is None  # unmatched: replicated


def test_rules_after_the_first_match_are_not_consulted(mesh):
    """A later rule that would not fit (an axis the mesh lacks) is never applied to a
    parameter an earlier rule matched; one that matches first is."""
    rules = [("weight", P("fsdp")), ("attn", P("nope"))]
    assert param_specs(PARAMS, mesh, rules)["attn.q.weight"] == ("fsdp", None)
    with pytest.raises(ShardingError, match=r"attn\.q\.weight.*\['nope'\]"):
        param_specs(PARAMS, mesh, rules[::-1])


def test_rule_patterns_are_searched_not_matched_at_the_start(mesh):
    assert param_specs(PARAMS, mesh, [(r"q\.weight$", P("fsdp"))])["attn.q.weight"] == ("fsdp", None)
    assert param_specs(PARAMS, mesh, [(r"^q\.weight", P("fsdp"))])["attn.q.weight"] is None


# ------------------------------------------------------------------ ONNX Scan directions

F = TensorProto.FLOAT


def _scan_model(in_dirs, out_dirs, in_axes=None, out_axes=None) -> object:
    """Scan over two sequences xs, ys ([5, 2]) with a running sum s: outputs s + x and s * y
    per step (two scan outputs), carrying s + x."""
    body = helper.make_graph(
        [
            helper.make_node("Add", ["s", "x"], ["s2"]),
            helper.make_node("Identity", ["s2"], ["a"]),
            helper.make_node("Mul", ["s", "y"], ["b"]),
        ],
        "body",
        [helper.make_tensor_value_info(n, F, [2]) for n in ("s", "x", "y")],
        [helper.make_tensor_value_info(n, F, [2]) for n in ("s2", "a", "b")],
    )
    attrs = {"num_scan_inputs": 2, "scan_input_directions": in_dirs, "scan_output_directions": out_dirs}
    if in_axes is not None:
        attrs["scan_input_axes"] = in_axes
    if out_axes is not None:
        attrs["scan_output_axes"] = out_axes
    node = helper.make_node("Scan", ["s0", "xs", "ys"], ["sf", "as", "bs"], body=body, **attrs)
    shape_in = [5, 2] if not in_axes or in_axes == [0, 0] else [2, 5]
    graph = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info("s0", F, [2]),
            helper.make_tensor_value_info("xs", F, shape_in),
            helper.make_tensor_value_info("ys", F, [5, 2]),
        ],
        [
            helper.make_tensor_value_info("sf", F, [2]),
            *(
                helper.make_tensor_value_info(n, F, [2, 5] if out_axes and out_axes[i] == 1 else [5, 2])
                for i, n in enumerate(("as", "bs"))
            ),
        ],
    )
    if in_axes:
        graph.input[2].CopyFrom(helper.make_tensor_value_info("ys", F, [5, 2] if in_axes[1] == 0 else [2, 5]))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


@pytest.mark.parametrize(
    ("in_dirs", "out_dirs", "in_axes", "out_axes"),
    [
        ([0, 0], [0, 0], None, None),
        ([1, 0], [0, 0], None, None),
        ([0, 1], [0, 0], None, None),
        ([0, 0], [1, 0], None, None),
        ([0, 0], [0, 1], None, None),
        ([1, 1], [1, 0], None, None),
        ([0, 1], [1, 0], [1, 0], [0, 1]),
    ],
)
def test_scan_directions_per_value(in_dirs, out_dirs, in_axes, out_axes):
    model = _scan_model(in_dirs, out_dirs, in_axes, out_axes)
    rng = np.random.default_rng(0)
    s0 = rng.standard_normal(2).astype(np.float32)
    xs = rng.standard_normal((2, 5) if in_axes and in_axes[0] == 1 else (5, 2)).astype(np.float32)
    ys = rng.standard_normal((2, 5) if in_axes and in_axes[1] == 1 else (5, 2)).astype(np.float32)
    feed = {"s0": s0, "xs": xs, "ys": ys}
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feed)
    got = converter.from_onnx(model).to_jax()(s0, xs, ys)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-5, atol=1e-6, err_msg=f"output {i}")


# ------------------------------------------------------------------ static values of equal value


class Kinds(torch.nn.Module):
    def forward(self, x, s):
        return x + (100 if isinstance(s, bool) else 0) + (1000 if isinstance(s, float) else 0) + s


@pytest.mark.parametrize("converted_with", [True, 1, 1.0])
def test_static_values_that_compare_equal_are_different_specializations(converted_with):
    x = torch.ones(2)
    m = converter.from_torch(Kinds(), (x, converted_with))
    f, t = m.to_jax(), m.to_torch()
    for value in (True, 1, 1.0):
        if type(value) is type(converted_with):
            want = Kinds()(x, value).numpy()
            np.testing.assert_array_equal(np.asarray(f(x.numpy(), value)), want)
            np.testing.assert_array_equal(t(x, value).numpy(), want)
            continue
        for fn, arg in ((f, x.numpy()), (t, x)):
            with pytest.raises(
                SignatureMismatchError, match=rf"specialized to {converted_with!r}.*got {value!r}"
            ):
                fn(arg, value)


def test_call_jax_caches_equal_static_values_of_different_types_apart():
    import jax.numpy as jnp

    def fn(x, s):
        return (
            x + (100 if isinstance(s, bool) else 0) + (1000 if isinstance(s, float) else 0) + jnp.asarray(s)
        )

    x = torch.ones(2)
    for s in (True, 1, 1.0, False, 0, 0.0):
        got = converter.call_jax(fn, x, s)
        np.testing.assert_array_equal(got.numpy(), np.asarray(fn(jnp.ones(2), s)), err_msg=repr(s))

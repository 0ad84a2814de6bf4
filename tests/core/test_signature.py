"""Signature pytrees: flattening order, static leaves, argument-path errors, JSON round trip."""

import json
import re
from decimal import Decimal

import numpy as np
import pytest
import torch

import converter
from converter.errors import SignatureMismatchError
from converter.signature import (
    LEAF,
    LeafSpec,
    Signature,
    args_tree,
    check_leaf,
    flatten,
    input_path,
    leaf_paths,
    num_leaves,
    unflatten,
)

TREE = args_tree(
    {
        "kind": "tuple",
        "children": [LEAF, {"kind": "dict", "keys": ["mask", "ids"], "children": [LEAF, LEAF]}],
    },
    {
        "kind": "dict",
        "keys": ["scale", "extra"],
        "children": [{"kind": "static", "value": 2.0}, {"kind": "none"}],
    },
)


def test_flatten_keeps_source_key_order_not_sorted():
    a, m, i = np.zeros(1), np.ones(2), np.arange(3)
    leaves = flatten(((a, {"ids": i, "mask": m}), {"scale": 2.0, "extra": None}), TREE)
    assert [p for p, _ in leaves] == ["[0][0]", "[0][1]['mask']", "[0][1]['ids']"]
    assert leaves[1][1] is m and leaves[2][1] is i


def test_unflatten_inverts_flatten():
    vals = ["a", "m", "i"]
    args, kwargs = unflatten(TREE, vals)
    assert args == ("a", {"mask": "m", "ids": "i"})
    assert kwargs == {"scale": 2.0, "extra": None}
    assert num_leaves(TREE) == 3


def test_missing_key_names_path():
    with pytest.raises(SignatureMismatchError, match=r"args\[1\]: missing key.*'ids'"):
        flatten(((0, {"mask": 1}), {"scale": 2.0, "extra": None}), TREE)


def test_static_leaf_mismatch_names_kwarg():
    with pytest.raises(SignatureMismatchError, match=r"kwargs\['scale'\].*specialized to 2.0.*3.0"):
        flatten(((0, {"mask": 1, "ids": 2}), {"scale": 3.0, "extra": None}), TREE)


def test_wrong_arity_is_reported():
    with pytest.raises(SignatureMismatchError, match="expected a tuple of 2"):
        flatten(((0,), {"scale": 2.0, "extra": None}), TREE)


def test_leaf_paths_render_as_user_paths():
    assert [input_path(p) for p in leaf_paths(TREE)] == ["args[0]", "args[1]['mask']", "args[1]['ids']"]


def test_check_leaf_message_has_path_shapes_and_dtypes():
    spec = LeafSpec("args[1]['mask']", (2, 3), "float32")
    check_leaf("args[1]['mask']", np.zeros((2, 3), np.float32), spec)
    with pytest.raises(SignatureMismatchError) as e:
        check_leaf("args[1]['mask']", np.zeros((2, 4), np.int32), spec)
    msg = str(e.value)
    assert "args[1]['mask']" in msg and "[2, 3]" in msg and "[2, 4]" in msg
    assert "float32" in msg and "int32" in msg


def test_signature_json_round_trip():
    sig = Signature(
        params=(LeafSpec("w", (2, 2), "bfloat16", "parameter"),),
        inputs=(LeafSpec("args[0]", (None, 3), "int64", memory_kind="pinned_host"),),
        outputs=(LeafSpec("outputs", (3,), "float32", "output"),),
        in_tree=TREE,
        out_tree=LEAF,
        kept_var_idx=(1,),
    )
    assert Signature.from_json(sig.to_json()) == sig


def _typed_signature(**fields) -> Signature:
    leaf = LeafSpec("args[0]", ("batch", 3), "int64")
    return Signature(params=(), inputs=(leaf,), outputs=(leaf,), in_tree=TREE, out_tree=LEAF, **fields)


TYPED = {
    "dim_ranges": {"batch": [2, None]},
    "narrowed": {"args[0]": "int64"},
    "tied": {"lm_head.weight": "wte.weight"},
    "frozen": ("wte.weight",),
    "non_persistent": ("mask",),
    "training": False,
    "host_functions": ("host_computation_0",),
}


def test_typed_metadata_round_trips_through_json():
    sig = _typed_signature(**TYPED, extra={"note": 1})
    text = json.dumps(sig.to_json())
    back = Signature.from_json(json.loads(text))
    assert back == sig
    assert {k: getattr(back, k) for k in TYPED} == TYPED
    assert back.extra == {"note": 1}
    assert Signature.from_json(_typed_signature().to_json()).training is None


def test_manifests_written_with_extra_keys_read_into_the_fields():
    """A manifest saved before the typed fields kept them as keys of ``extra``."""
    old = _typed_signature().to_json()
    old["extra"] = {k: list(v) if isinstance(v, tuple) else v for k, v in TYPED.items()} | {"note": 1}
    sig = Signature.from_json(json.loads(json.dumps(old)))
    assert {k: getattr(sig, k) for k in TYPED} == TYPED
    assert sig.extra == {"note": 1}
    assert _typed_signature(extra={"training": True}).training is True


# --------------------------------------------------------------------------- strict calls


def test_unknown_and_misspelled_kwargs_are_refused():
    good = ((0, {"mask": 1, "ids": 2}), {"scale": 2.0, "extra": None})
    assert len(flatten(good, TREE)) == 3
    with pytest.raises(SignatureMismatchError, match=r"kwargs: unexpected keyword argument\(s\) \['maks'\]"):
        flatten(((0, {"mask": 1, "ids": 2}), {"scale": 2.0, "extra": None, "maks": 0}), TREE)
    with pytest.raises(SignatureMismatchError, match=r"args\[1\]: unexpected key\(s\) \['pos'\]"):
        flatten(((0, {"mask": 1, "ids": 2, "pos": 3}), {"scale": 2.0, "extra": None}), TREE)


def test_extra_positional_argument_is_refused():
    with pytest.raises(SignatureMismatchError, match=r"args: expected a tuple of 2 positional.*tuple of 3"):
        flatten(((0, {"mask": 1, "ids": 2}, 5), {"scale": 2.0, "extra": None}), TREE)


@pytest.mark.parametrize("value", [np.float32(3.0), np.array(2.0), True, "2.0", 1.5])
def test_static_leaf_refuses_other_values_and_arrays(value):
    with pytest.raises(SignatureMismatchError, match=r"kwargs\['scale'\]: this input was specialized to 2.0"):
        flatten(((0, {"mask": 1, "ids": 2}), {"scale": value, "extra": None}), TREE)


def test_mutations_json_round_trip():
    from converter.signature import Mutation

    sig = Signature(
        params=(LeafSpec("bn.running_mean", (2,), "float32", "buffer"),),
        inputs=(LeafSpec("args[0]", (2,), "float32"),),
        outputs=(
            LeafSpec("outputs", (2,), "float32", "output"),
            LeafSpec("updated:bn.running_mean", (2,), "float32", "update"),
        ),
        in_tree=args_tree(
            {"kind": "tuple", "children": [LEAF]}, {"kind": "dict", "keys": [], "children": []}
        ),
        out_tree=LEAF,
        mutations=(Mutation("buffer", "bn.running_mean"),),
    )
    back = Signature.from_json(json.loads(json.dumps(sig.to_json())))
    assert back == sig
    assert back.user_outputs == sig.outputs[:1]
    assert "mutations" not in sig.replace(mutations=()).to_json()  # unchanged JSON without state


# --------------------------------------------------------------------------- converted callables


class Masked(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, x, mask=None, scale=2.0):
        y = self.lin(x) * scale
        return y if mask is None else y * mask


@pytest.fixture(scope="module")
def masked():
    torch.manual_seed(0)
    model = Masked().eval()
    x = torch.randn(2, 4)
    module = converter.from_torch(model, (x,), {"scale": 2.0})
    return model, x, module.to_jax(), module.to_torch()


@pytest.mark.parametrize("target", ["jax", "torch"])
def test_converted_model_refuses_what_it_was_not_converted_with(masked, target):
    model, x, jf, tm = masked
    fn = jf if target == "jax" else tm
    xin = x.numpy() if target == "jax" else x
    with torch.no_grad():
        np.testing.assert_allclose(np.asarray(fn(xin, scale=2.0)), model(x, scale=2.0).numpy(), rtol=1e-6)
    zeros = xin[:, :3] * 0
    with pytest.raises(SignatureMismatchError, match=r"kwargs: unexpected keyword argument\(s\) \['mask'\]"):
        fn(xin, mask=zeros, scale=2.0)
    with pytest.raises(SignatureMismatchError, match=r"\['maks'\]"):
        fn(xin, maks=zeros, scale=2.0)
    with pytest.raises(SignatureMismatchError, match=r"args: expected a tuple of 1 positional"):
        fn(xin, zeros, scale=2.0)
    with pytest.raises(
        SignatureMismatchError, match=r"kwargs\['scale'\]: this input was specialized to 2.0 .*got 3.0"
    ):
        fn(xin, scale=3.0)


def test_apply_refuses_unknown_kwargs(masked):
    _, x, jf, _ = masked
    with pytest.raises(SignatureMismatchError, match=r"\['maks'\]"):
        jf.apply(jf.params, x.numpy(), scale=2.0, maks=1)


def test_jax_function_refuses_a_torch_tensor_by_its_path(masked):
    """The JAX function takes NumPy or JAX arrays: a torch tensor is refused naming its
    argument path and type (as ``jax.jit`` refuses a non-JAX type), not converted silently."""
    _, x, jf, _ = masked
    with pytest.raises(SignatureMismatchError, match=r"args\[0\]: a Tensor; the JAX function takes NumPy"):
        jf(x, scale=2.0)


class _TakesMutable(torch.nn.Module):
    def forward(self, x, mutable):
        return x * mutable


def test_apply_passes_a_model_keyword_named_mutable_to_the_model():
    """A model's own ``mutable`` input goes to the model: ``apply`` then returns the outputs
    alone (no ``(outputs, updates)`` pair, which ``mutable=True`` asks of other models)."""
    x, m = torch.arange(3.0), torch.tensor([2.0, -1.0, 0.5])
    jf = converter.from_torch(_TakesMutable(), (x,), {"mutable": m}).to_jax()
    out = jf.apply(jf.params, x.numpy(), mutable=m.numpy())
    np.testing.assert_array_equal(np.asarray(out), (x * m).numpy())


def test_call_jax_refuses_unknown_kwargs_and_extra_args():
    from converter.tools.embed import call_jax

    def fn(x, scale=1.0):
        return x * scale

    x = torch.ones(2)
    assert torch.equal(call_jax(fn, x, scale=3.0), torch.full((2,), 3.0))
    with pytest.raises(SignatureMismatchError, match=r"fn\(x, scale=1.0\).*'scael'"):
        call_jax(fn, x, scael=3.0)
    with pytest.raises(SignatureMismatchError, match="too many positional"):
        call_jax(fn, x, 2.0, x)


def test_call_torch_refuses_unknown_kwargs(masked):
    from converter.tools.embed import call_torch

    model, x, _, _ = masked
    with pytest.raises(SignatureMismatchError, match=r"Masked\(x, mask=None, scale=2.0\).*'maks'"):
        call_torch(model, x.numpy(), maks=np.zeros((2, 3), np.float32))


# --------------------------------------------------------------------------- tree specs


def test_tree_spec_is_the_one_builder_for_jax_and_embed_trees():
    import collections

    import converter.frontends.jax

    from converter.errors import InputTypeError
    from converter.signature import tree_spec
    from converter.tools import embed

    assert converter.frontends.jax.tree_spec is tree_spec
    point = collections.namedtuple("Point", "y x")
    tree = ((np.zeros(2), {"b": 1.5, "a": None}), {"p": point(np.ones(1), 2j)})
    assert tree_spec(tree) == {
        "kind": "tuple",
        "children": [
            {"kind": "tuple", "children": [LEAF, {"kind": "dict", "keys": ["a", "b"],
             "children": [{"kind": "none"}, {"kind": "static", "value": 1.5}]}]},
            {"kind": "dict", "keys": ["p"], "children": [
                {"kind": "dict", "keys": ["y", "x"], "type": "Point",
                 "children": [LEAF, {"kind": "static", "value": 2j}]}]},
        ],
    }  # fmt: skip
    # call_jax's torch-side tree: tensors are leaves, NumPy arrays and pytree nodes are refused
    assert embed.torch_tree(((torch.zeros(1),), {})) == {
        "kind": "tuple",
        "children": [{"kind": "tuple", "children": [LEAF]}, {"kind": "dict", "keys": [], "children": []}],
    }
    with pytest.raises(InputTypeError, match=r"args\[0\]\['m'\]: unsupported type ndarray"):
        embed.torch_tree((({"m": np.zeros(1)},), {}))
    with pytest.raises(InputTypeError, match=r"kwargs\['p'\]: unsupported type Point"):
        embed.torch_tree(((), {"p": point(torch.zeros(1), 1)}))


# --------------------------------------------------------------------------- leaf specs, outputs, args


def test_leaf_size_counts_dynamic_dimensions_as_one_and_sharding_round_trips():
    assert LeafSpec("x", (None, 3, "batch", 2), "float32").size == 6
    assert LeafSpec("s", (), "float32").size == 1
    assert LeafSpec("e", (0, 5), "float32").size == 0
    plain = LeafSpec("x", (2,), "float32")
    assert "sharding" not in plain.to_json()  # readable by versions without shardings
    sharded = LeafSpec("y", (4, 2, 3), "float32", sharding=(("x", "y"), None, "z"))
    d = json.loads(json.dumps(sharded.to_json()))
    assert d["sharding"] == [["x", "y"], None, "z"] and d["shape"] == [4, 2, 3]
    assert LeafSpec.from_json(d) == sharded


def test_outputs_split_at_the_mutations_and_all_args_replace_in_order():
    from converter.signature import RNG_KEY, Mutation

    x, y = LeafSpec("args[0]", (2,), "float32"), LeafSpec("args[1]", (3,), "int32")
    outs = tuple(LeafSpec(f"o{i}", (1,), "float32") for i in range(4))
    sig = Signature(
        params=(LeafSpec("w", (1,), "float32", "parameter"),),
        inputs=(x, y),
        outputs=outs,
        in_tree=TREE,
        out_tree=LEAF,
        rng=RNG_KEY,
        mutations=(Mutation("input", "args[0]"),),
    )
    assert sig.user_outputs == outs[:3]
    assert sig.split_outputs([0, 1, 2, 3]) == ([0, 1, 2], [3])
    assert sig.num_devices == 1 and sig.replace(mesh={"a": 3, "b": 2}).num_devices == 6
    assert sig.all_args == (sig.params[0], x, y, RNG_KEY)
    a, b, c, d = (LeafSpec(n, (1,), "int8") for n in "abcd")
    got = sig.with_all_args([a, b, c, d])
    assert (got.params, got.inputs, got.rng) == ((a,), (b, c), d)
    norng = sig.replace(rng=None)
    got = norng.with_all_args((a, b, c))
    assert (got.params, got.inputs, got.rng) == ((a,), (b, c), None)
    with pytest.raises(ValueError, match="expected 4 argument specs, got 3"):
        sig.with_all_args([a, b, c])


def test_explicit_typed_fields_win_over_old_extra_keys():
    """``extra`` keys of the typed fields fill only fields left empty; a None there is dropped."""
    leaf = LeafSpec("args[0]", (3,), "int64")
    sig = Signature(
        params=(),
        inputs=(leaf,),
        outputs=(leaf,),
        in_tree=TREE,
        out_tree=LEAF,
        tied={"a": "b"},
        extra={"tied": {"c": "d"}, "frozen": None, "narrowed": {"args[0]": "int64"}},
    )
    assert sig.tied == {"a": "b"} and sig.frozen == () and sig.narrowed == {"args[0]": "int64"}
    assert sig.extra == {}
    j = sig.to_json()
    assert "frozen" not in j and "mesh" not in j and "mutations" not in j and j["tied"] == {"a": "b"}
    assert j["kept_var_idx"] is None and j["rng"] is None


def test_flatten_and_unflatten_refuse_what_the_spec_does_not_hold():
    none_tree = args_tree(
        {"kind": "tuple", "children": [{"kind": "none"}]}, {"kind": "dict", "keys": [], "children": []}
    )
    with pytest.raises(SignatureMismatchError, match=r"^args\[0\]: expected None, got int$"):
        flatten(((3,), {}), none_tree)
    with pytest.raises(SignatureMismatchError, match=r"^args\[1\]: missing key\(s\) \['mask', 'ids'\]$"):
        flatten(((0, [1, 2]), {"scale": 2.0, "extra": None}), TREE)
    with pytest.raises(SignatureMismatchError, match=r"^kwargs: missing key\(s\) \['scale', 'extra'\]$"):
        flatten(((0, {"mask": 1, "ids": 2}), 5), TREE)
    with pytest.raises(SignatureMismatchError, match=r"^kwargs: expected a list of 1, got a tuple of 2$"):
        flatten(
            ((0,), (1, 2)),
            args_tree({"kind": "list", "children": [LEAF]}, {"kind": "list", "children": [LEAF]}),
        )
    with pytest.raises(ValueError, match="unknown tree spec kind 'set'"):
        flatten({1}, {"kind": "set"})
    with pytest.raises(ValueError, match="^2 leaves left over$"):
        unflatten(TREE, ["a", "m", "i", "x", "y"])
    assert unflatten({"kind": "list", "children": [LEAF, {"kind": "static", "value": 3}]}, [1]) == [1, 3]


def test_custom_nodes_flatten_by_attribute_and_may_hold_more():
    import types

    node = {"kind": "dict", "keys": ["logits"], "children": [LEAF], "type": "Output"}
    assert flatten(types.SimpleNamespace(logits=1, loss=2), node) == [("['logits']", 1)]
    assert flatten({"logits": 1, "loss": 2}, node) == [("['logits']", 1)]
    with pytest.raises(SignatureMismatchError, match=r"^input: missing key\(s\) \['logits'\]$"):
        flatten(types.SimpleNamespace(loss=2), node)


@pytest.mark.parametrize(
    "value, ok, bad",
    [
        (float("nan"), [float("nan")], [1.0, np.nan * 1j]),
        (1, [1], [1.0, True, 1 + 0j]),
        (True, [True], [1, 1.0]),
        (2j, [2j], [2, 2.0]),
        (2 + 0j, [2 + 0j], [Decimal(2)]),  # a number of no kind: Decimal(2) == 2 + 0j
        ("a", ["a"], ["b"]),
    ],
)
def test_static_values_match_by_number_kind(value, ok, bad):
    spec = {"kind": "static", "value": value}
    for v in ok:
        assert flatten(v, spec) == []
    for v in bad:
        with pytest.raises(
            SignatureMismatchError, match="^input: this input was specialized to " + re.escape(repr(value))
        ):
            flatten(v, spec)


def test_static_mismatch_describes_an_array_by_dtype_and_shape():
    with pytest.raises(SignatureMismatchError, match=r"got an array float32\[2, 3\]; convert again"):
        flatten(np.zeros((2, 3), np.float32), {"kind": "static", "value": 1.0})
    with pytest.raises(SignatureMismatchError, match=r"got an array int8\[\]; convert again"):
        flatten(np.int8(1), {"kind": "static", "value": 1})


def test_check_leaf_accepts_any_size_for_dynamic_dimensions_and_names_python_types():
    spec = LeafSpec("x", (None, "n", 3), "float32")
    check_leaf("x", np.zeros((5, 0, 3), np.float32), spec)
    for bad in (
        np.zeros((5, 1, 4), np.float32),
        np.zeros((5, 3), np.float32),
        np.zeros((1, 1, 3, 1), np.float32),
    ):
        with pytest.raises(SignatureMismatchError, match="^x: expected shape"):
            check_leaf("x", bad, spec)
    with pytest.raises(SignatureMismatchError, match=r"got shape \[\] dtype float$"):
        check_leaf("s", 1.5, LeafSpec("s", (), "float32"))


def test_tree_spec_without_pytree_nodes_and_input_path_of_other_paths():
    import collections

    from converter.errors import InputTypeError
    from converter.signature import tree_spec

    point = collections.namedtuple("Point", "x")
    with pytest.raises(InputTypeError, match=r"^input: unsupported type Point \(.*, tuple, list or dict\)$"):
        tree_spec(point(np.zeros(1)), pytree_nodes=False)
    with pytest.raises(
        InputTypeError, match=r"^args\[0\]: unsupported type object \(.*list, dict or a JAX pytree node\)$"
    ):
        tree_spec((object(),), path="[0]")
    assert tree_spec(point(np.zeros(1))) == {
        "kind": "dict",
        "keys": ["x"],
        "children": [LEAF],
        "type": "Point",
    }
    assert input_path("[2][0]") == "[2][0]" and input_path("") == ""
    assert input_path("[1]['m'][0]") == "kwargs['m'][0]"

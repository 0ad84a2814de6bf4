"""Signature pytrees: flattening order, static leaves, argument-path errors, JSON round trip."""

import numpy as np
import pytest

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

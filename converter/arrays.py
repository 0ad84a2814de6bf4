"""Small array-tree helpers shared by :mod:`converter.tools.validate` and :mod:`converter.tools.bisect`
(which must not import each other's modules both ways: validate depends on bisect)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from . import dtypes


def tree_map(fn: Callable, tree: Any) -> Any:
    """``fn`` applied to the leaves of a tree of tuples, lists and dicts."""
    if isinstance(tree, tuple):
        return tuple(tree_map(fn, t) for t in tree)
    if isinstance(tree, list):
        return [tree_map(fn, t) for t in tree]
    if isinstance(tree, dict):
        return {k: tree_map(fn, v) for k, v in tree.items()}
    return fn(tree)


def to_torch_tree(tree: Any) -> Any:
    """NumPy leaves → torch tensors (bfloat16 through a uint16 view), other leaves as is."""
    import torch

    def conv(x):
        if not isinstance(x, np.ndarray):
            return x
        if dtypes.name_of(x.dtype) == "bfloat16":
            return torch.from_numpy(x.view(np.uint16).copy()).view(torch.bfloat16)
        return torch.from_numpy(dtypes.contiguous(x, copy=True))

    return tree_map(conv, tree)

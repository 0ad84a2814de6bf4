"""ATen-rule cases written for mutants that survived the mutation run (CONTRIBUTING.md, *Mutation
testing*; ``tools/mutation/survivors.toml`` names the mutant each one kills), compared with
eager torch on both backends."""

from __future__ import annotations

import torch

from tests.frontends.torch.both_targets import check_targets


def test_cat_skips_legacy_empty_1d_tensors_but_promotes_with_them():
    """``torch.cat`` accepts 1-D empty tensors beside tensors of any rank (skipped for the
    shapes) and promotes with their dtype; an empty tensor of the same rank takes part as any."""

    def fn(x, e64, ei, z):
        return torch.cat([e64, x], dim=1), torch.cat([x, ei, x], dim=-1), torch.cat([z, x], dim=0)

    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    e64, ei, z = torch.empty(0, dtype=torch.float64), torch.empty(0, dtype=torch.int64), torch.zeros(0, 3)
    check_targets(fn, x, e64, ei, z, ops="aten.cat.default", rtol=0, atol=0)

"""The StableHLO → native PyTorch rule table.

A rule is ``rule(interp, op, *operands) -> tensor | [tensors]`` where ``op`` is a
:class:`converter.mlir.Op` and the operands are ``torch.Tensor`` values (fake tensors while the
FX graph is being traced). Keys are StableHLO/CHLO op names (``stablehlo.dot_general``) or
``stablehlo.custom_call@<target>``.
"""

from converter.registry import Registry

TORCH_RULES = Registry("StableHLO → torch")
register = TORCH_RULES.register

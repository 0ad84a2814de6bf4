"""Frontends: a torch.export program, a jax function, an ONNX model or StableHLO text →
:class:`converter.Module`."""

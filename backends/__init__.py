"""Backends: StableHLO ``converter.Module`` → executable JAX, native PyTorch, ONNX."""

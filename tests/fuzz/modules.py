"""Random small torch modules for the differential fuzzer (a hypothesis strategy).

A :class:`TorchCase` is the Python source of an ``nn.Module`` built from a set of layers
(Linear, Conv1d/2d, ConvTranspose1d, BatchNorm, LayerNorm, GroupNorm, pools, Embedding,
MultiheadAttention, activations, softmax, residual connections, reshapes and reductions),
chained so each layer fits the shape its input has at that point (:func:`torch_cases` tracks
it), plus seeded inputs. The source is kept so a failing case prints as a runnable repro.

The module runs in ``eval()`` mode (dropout off, batch norm on random running statistics);
float32 or float64 throughout.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from hypothesis import strategies as st
from torch import nn

ACTIVATIONS = [
    "nn.ReLU()",
    "nn.GELU()",
    "nn.GELU(approximate='tanh')",
    "nn.SiLU()",
    "nn.Tanh()",
    "nn.Sigmoid()",
    "nn.LeakyReLU(0.1)",
    "nn.ELU()",
    "nn.Hardtanh()",
    "nn.Softplus()",
    "nn.Mish()",
    "nn.Hardswish()",
    "nn.Hardsigmoid()",
    "nn.ReLU6()",
    "nn.SELU()",
    "nn.Dropout(0.3)",
]


@dataclass
class TorchCase:
    """A generated module: ``layers`` (name → constructor source), ``body`` (lines of
    ``forward`` over ``h``), its input shapes and dtype."""

    layers: list[tuple[str, str]] = field(default_factory=list)
    body: list[str] = field(default_factory=list)
    inputs: list[tuple[tuple[int, ...], str]] = field(default_factory=list)
    dtype: str = "float32"
    seed: int = 0

    def source(self) -> str:
        names = ", ".join(f"x{i}" for i in range(len(self.inputs)))
        lines = ["class M(nn.Module):", "    def __init__(self):", "        super().__init__()"]
        lines += [f"        self.{n} = {src}" for n, src in self.layers]
        lines += [f"    def forward(self, {names}):", "        h = x0"]
        lines += [f"        {line}" for line in self.body]
        lines.append("        return h")
        return "\n".join(lines)

    def build(self) -> nn.Module:
        """The module: seeded weights, random batch-norm statistics, ``eval()``, in ``dtype``."""
        scope = {"nn": nn, "torch": torch}
        exec(compile(self.source(), "<fuzz module>", "exec"), scope)  # noqa: S102 - generated code
        torch.manual_seed(self.seed)
        m = scope["M"]()
        gen = torch.Generator().manual_seed(self.seed)
        for mod in m.modules():
            if isinstance(mod, nn.modules.batchnorm._BatchNorm):
                mod.running_mean.copy_(torch.randn(mod.running_mean.shape, generator=gen) * 0.5)
                mod.running_var.copy_(torch.rand(mod.running_var.shape, generator=gen) + 0.5)
        return m.to(getattr(torch, self.dtype)).eval()

    def args(self) -> tuple[torch.Tensor, ...]:
        rng = np.random.default_rng(self.seed)
        out = []
        for shape, kind in self.inputs:
            if kind.startswith("int"):
                out.append(torch.from_numpy(rng.integers(0, int(kind[3:]), shape).astype(np.int64)))
            else:
                out.append(torch.from_numpy(rng.standard_normal(shape).astype(self.dtype)))
        return tuple(out)

    def __repr__(self) -> str:
        return f"TorchCase(seed={self.seed}, dtype={self.dtype}, inputs={self.inputs})\n{self.source()}"


class _Gen:
    def __init__(self, draw, case: TorchCase):
        self.draw, self.case = draw, case

    def layer(self, src: str) -> str:
        name = f"l{len(self.case.layers)}"
        self.case.layers.append((name, src))
        return f"self.{name}"

    def i(self, lo, hi):
        return self.draw(st.integers(lo, hi))

    def pick(self, options):
        return self.draw(st.sampled_from(options))


def _step(g: _Gen, shape: list[int]) -> list[int]:
    """Append one layer or op for the current shape of ``h``; return the new shape."""
    r = len(shape)
    c = g.case
    options = ["act", "act", "linear", "layernorm", "residual", "scale", "softmax"]
    if r == 3:
        options += ["conv1d", "conv1d", "bn1d", "pool1d", "groupnorm", "transpose", "attention", "convt1d"]
    if r == 4:
        options += ["conv2d", "conv2d", "bn2d", "pool2d", "flatten", "adaptive"]
    if r == 2:
        options += ["bn1d", "unflatten"]
    if r >= 2:
        options += ["reduce"]
    kind = g.pick(options)
    if kind == "act":
        c.body.append(f"h = {g.layer(g.pick(ACTIVATIONS))}(h)")
        return shape
    if kind == "linear":
        out = g.i(1, 6)
        c.body.append(f"h = {g.layer(f'nn.Linear({shape[-1]}, {out}, bias={g.pick([True, False])})')}(h)")
        return [*shape[:-1], out]
    if kind == "layernorm":
        c.body.append(
            f"h = {g.layer(f'nn.LayerNorm({shape[-1]}, elementwise_affine={g.pick([True, False])})')}(h)"
        )
        return shape
    if kind == "residual":
        act = g.layer(g.pick(ACTIVATIONS))
        op = g.pick(["+", "*", "-"])
        c.body.append(f"h = h {op} {act}(h)")
        return shape
    if kind == "scale":
        c.body.append(g.pick(["h = h * 0.5 + 1.0", "h = torch.clamp(h, -1.0, 2.0)", "h = h / (h.abs() + 1)"]))
        return shape
    if kind == "softmax":
        c.body.append(f"h = torch.{g.pick(['softmax', 'log_softmax'])}(h, dim={g.i(-r, r - 1)})")
        return shape
    if kind in ("conv1d", "conv2d", "convt1d"):
        nd = 2 if kind == "conv2d" else 1
        cin = shape[1]
        groups = g.pick([1, cin]) if cin > 1 else 1
        cout = groups * g.i(1, 2) if groups > 1 else g.i(1, 5)
        k, stride, dil = g.i(1, 3), g.i(1, 2), g.i(1, 2)
        pad = g.i(0, 2)
        spatial = shape[2:]
        if kind == "convt1d":
            out_sp = [(s - 1) * stride - 2 * pad + dil * (k - 1) + 1 for s in spatial]
            if min(out_sp) < 1:
                return shape
            src = (
                f"nn.ConvTranspose1d({cin}, {cout}, {k}, stride={stride}, padding={pad}, "
                f"dilation={dil}, groups={groups})"
            )
        else:
            out_sp = [(s + 2 * pad - dil * (k - 1) - 1) // stride + 1 for s in spatial]
            if min(out_sp) < 1:
                return shape
            mode = (
                g.pick(["zeros", "zeros", "reflect", "circular"]) if pad and pad < min(spatial) else "zeros"
            )
            src = (
                f"nn.Conv{nd}d({cin}, {cout}, {k}, stride={stride}, padding={pad}, dilation={dil}, "
                f"groups={groups}, padding_mode={mode!r})"
            )
        c.body.append(f"h = {g.layer(src)}(h)")
        return [shape[0], cout, *out_sp]
    if kind in ("bn1d", "bn2d"):
        c.body.append(f"h = {g.layer(f'nn.BatchNorm{kind[2]}d({shape[1]})')}(h)")
        return shape
    if kind == "groupnorm":
        groups = g.pick([d for d in (1, 2, 3) if shape[1] % d == 0])
        c.body.append(f"h = {g.layer(f'nn.GroupNorm({groups}, {shape[1]})')}(h)")
        return shape
    if kind in ("pool1d", "pool2d"):
        nd = int(kind[4])
        k, stride = g.i(1, 2), g.i(1, 2)
        if min(shape[2:]) < k:
            return shape
        typ = g.pick(["Max", "Avg"])
        ceil = g.pick([False, True])
        pad = g.i(0, k // 2)
        src = f"nn.{typ}Pool{nd}d({k}, stride={stride}, padding={pad}, ceil_mode={ceil})"
        out = []
        for s in shape[2:]:
            o = (s + 2 * pad - k + (stride - 1 if ceil else 0)) // stride + 1
            if ceil and (o - 1) * stride >= s + pad:
                o -= 1
            out.append(o)
        c.body.append(f"h = {g.layer(src)}(h)")
        return [*shape[:2], *out]
    if kind == "adaptive":
        c.body.append(f"h = {g.layer('nn.AdaptiveAvgPool2d(1)')}(h)")
        return [*shape[:2], 1, 1]
    if kind == "flatten":
        c.body.append("h = torch.flatten(h, 1)")
        return [shape[0], int(np.prod(shape[1:]))]
    if kind == "unflatten":
        c.body.append("h = h.unsqueeze(1)")
        return [shape[0], 1, shape[1]]
    if kind == "transpose":
        c.body.append("h = h.transpose(1, 2)")
        return [shape[0], shape[2], shape[1]]
    if kind == "attention":
        d = shape[-1]
        heads = g.pick([h for h in (1, 2) if d % h == 0])
        att = g.layer(f"nn.MultiheadAttention({d}, {heads}, batch_first=True)")
        c.body.append(f"h = {att}(h, h, h, need_weights=False)[0]")
        return shape
    if kind == "reduce":
        dim = g.i(1, r - 1)
        op = g.pick(["mean", "sum", "amax"])
        c.body.append(f"h = h.{op}(dim={dim})")
        return shape[:dim] + shape[dim + 1 :]
    return shape


@st.composite
def torch_cases(draw, max_layers: int = 5) -> TorchCase:
    """A random small module and its inputs (see the module docstring)."""
    case = TorchCase(
        seed=draw(st.integers(0, 2**31 - 1)), dtype=draw(st.sampled_from(["float32", "float64"]))
    )
    g = _Gen(draw, case)
    start = draw(st.sampled_from(["vec", "seq", "img", "tokens"]))
    n = draw(st.integers(1, 3))
    if start == "vec":
        shape = [n, draw(st.integers(1, 6))]
    elif start == "seq":
        shape = [n, draw(st.integers(1, 4)), draw(st.integers(2, 7))]
    elif start == "img":
        shape = [n, draw(st.integers(1, 3)), draw(st.integers(2, 6)), draw(st.integers(2, 6))]
    else:
        vocab, length, dim = draw(st.integers(2, 9)), draw(st.integers(1, 5)), draw(st.integers(1, 6))
        case.inputs.append(((n, length), f"int{vocab}"))
        case.body.append(f"h = {g.layer(f'nn.Embedding({vocab}, {dim})')}(h)")
        shape = [n, length, dim]
    if start != "tokens":
        case.inputs.append((tuple(shape), "float"))
    for _ in range(draw(st.integers(1, max_layers))):
        shape = _step(g, shape)
    if draw(st.integers(0, 3)) == 0:
        # a second input, broadcast against the result
        other = tuple(d if draw(st.booleans()) else 1 for d in shape)
        case.inputs.append((other, "float"))
        case.body.append(f"h = h {draw(st.sampled_from(['+', '*']))} x{len(case.inputs) - 1}")
    return case

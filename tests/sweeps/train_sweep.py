"""Training sweep: a converted model trained for a few optimizer steps next to the source
framework doing the same training, losses, parameters and buffers compared after every step.

Programs (tiny configs, random weights, fixed seeds):

* torch → JAX (``to_jax``, ``jax.value_and_grad`` + optax against ``torch.optim``):
  ``gpt2`` (Hugging Face GPT-2, LM head tied to the embedding, the position embedding frozen,
  the loss computed inside the model), ``bert`` (BERT masked LM, embeddings frozen, the loss
  computed outside, int64 buffers), ``gpt2_ckpt`` (gradient checkpointing), ``gpt2_bf16``
  (bfloat16 parameters), ``gpt2_dropout`` (dropout in training mode), ``cnn_bn_eval`` (a
  BatchNorm CNN converted in eval mode and fine-tuned: the statistics must stay put),
  ``mlp_autocast`` (``torch.autocast`` to bfloat16 inside the model, float32 weights),
  ``simsiam_detach`` (a stop-gradient loss: ``Tensor.detach()`` inside the model);
  ``cnn_bn_train`` (BatchNorm in training mode: running statistics updated once per step)
  through ``to_torch`` only (its JAX side: ``tests/models/test_train_batchnorm.py``);
* torch → torch (``to_torch``, the converted module trained by ``torch.optim`` as the
  original): ``gpt2``, ``cnn_bn_eval``, ``cnn_bn_train``, ``mlp_autocast``, ``simsiam_detach``;
* JAX/Flax → torch (``to_torch``, ``torch.optim`` against optax): ``flax_bn`` (Dense →
  BatchNorm → Dense, the batch statistics a collection of their own);
* ONNX → JAX and torch (``from_onnx`` of a ``torch.onnx`` export in eval mode, optax and
  ``torch.optim`` on ``to_torch()`` against ``torch.optim`` on the original): ``onnx_bn``.

Paths (columns):

* ``sgd``, ``adam``: N steps of SGD with momentum / Adam, the trainable parameters taken as
  the source's optimizer takes them (``JaxFunction.partition``, ``parameters()``);
* ``clip``: SGD with the gradients clipped to a global norm (``optax.clip_by_global_norm``
  against ``torch.nn.utils.clip_grad_norm_``);
* ``state``: the trained weights back into a fresh source model (``f.state_dict()`` →
  ``load_state_dict``; for the torch module ``state_dict()`` → ``torch.save`` → a fresh
  converted module), outputs compared;
* ``rng``: (dropout) the converted function needs a key, draws a fresh mask per key (not
  the eval-mode numbers), and ``to_torch`` given the same key returns the same numbers;
* ``mode``: the ``to_torch`` module starts in the source's training mode and refuses to run in
  the other mode after ``.train()``/``.eval()`` (its dropout/BatchNorm cannot follow);
* ``t-sgd``: the ``to_torch`` module trained by ``torch.optim`` over its ``parameters()``
  as the original over its own; ``t-state``: its ``state_dict()`` through ``torch.save``
  into a fresh conversion;
* ``compile``: ``torch.compile`` of the converted module's training step (forward and
  backward) against eager (the source's, for a torch source).

Each cell: ``ok <max error>`` (the largest difference over the steps, relative to the
largest magnitude of each compared tensor, at least 1), ``MISMATCH <what>`` or the error
class. Run ``python tests/sweeps/train_sweep.py [program ...]`` (``-v``: tracebacks) or
``SWEEP=train pytest tests/sweeps/test_train_sweep.py``.
"""

from __future__ import annotations

import copy
import io
import os
import sys
import traceback
import warnings
from collections.abc import Callable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
import torch  # noqa: E402

import converter  # noqa: E402
from tests.sweeps.jax_sweep import Mismatch, _check, _err  # noqa: E402

STEPS = 3
LR = {"sgd": 0.1, "adam": 0.01, "clip": 0.1}
CLIP = 0.5
#: float32 per-step tolerance (relative to each tensor's largest magnitude). Adam divides
#: by sqrt(v): a gradient that is zero up to rounding (GPT-2's key bias) moves by up to
#: ``lr`` in either framework, so its parameters are held to 1e-4.
TOL = {"float32": 1e-5, "adam": 1e-4, "bfloat16": 3e-2}
V = 50  # vocabulary


def _np(t) -> np.ndarray:
    if isinstance(t, torch.Tensor):
        t = t.detach()
        return (t.float() if t.dtype == torch.bfloat16 else t).numpy()
    a = np.asarray(t)
    return a.astype(np.float32) if a.dtype == jnp.bfloat16 else a


def _torch_opt(name: str, params) -> torch.optim.Optimizer:
    if name == "adam":
        return torch.optim.Adam(params, lr=LR[name])
    return torch.optim.SGD(params, lr=LR[name], momentum=0.9)


def _optax(name: str) -> optax.GradientTransformation:
    if name == "adam":
        return optax.adam(LR[name])
    tx = optax.sgd(LR[name], momentum=0.9)
    return optax.chain(optax.clip_by_global_norm(CLIP), tx) if name == "clip" else tx


def _torch_step(model: torch.nn.Module, opt: torch.optim.Optimizer, loss_fn: Callable, clip: bool) -> float:
    opt.zero_grad()
    loss = loss_fn(model)
    loss.backward()
    if clip:
        torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], CLIP)
    opt.step()
    return float(loss)


# ---------------------------------------------------------------- torch → JAX / torch programs


class TorchProgram:
    """A torch model and its training: ``build()`` a fresh model (fixed seed), ``batch`` the
    example inputs, ``loss(model_or_outputs)``: the scalar loss in torch; ``jloss(outputs)``
    the same in JAX (None: the model returns its loss)."""

    def __init__(self, build, batch, tloss, jloss, dtype="float32", eval_mode=False, paths=()):
        self.build, self.batch, self.tloss, self.jloss = build, batch, tloss, jloss
        self.dtype, self.eval_mode, self.paths = dtype, eval_mode, paths

    def model(self) -> torch.nn.Module:
        m = self.build()
        return m.eval() if self.eval_mode else m.train()


def _gpt2(n_layer=1, dropout=0.0, ckpt=False, dtype=torch.float32):
    import transformers as tr

    def build():
        torch.manual_seed(0)
        cfg = tr.GPT2Config(
            vocab_size=V, n_positions=16, n_embd=16, n_layer=n_layer, n_head=2, attn_pdrop=dropout,
            resid_pdrop=dropout, embd_pdrop=dropout, attn_implementation="eager", use_cache=False,
            bos_token_id=0, eos_token_id=0,
        )  # fmt: skip
        lm = tr.GPT2LMHeadModel(cfg).to(dtype)
        assert lm.lm_head.weight is lm.transformer.wte.weight  # tied
        lm.transformer.wpe.weight.requires_grad_(False)  # frozen
        if ckpt:
            lm.gradient_checkpointing_enable()
        return _WithLoss(lm)

    return build


class _WithLoss(torch.nn.Module):
    """A causal LM returning its own loss (labels = the inputs)."""

    def __init__(self, lm):
        super().__init__()
        self.lm = lm

    def forward(self, ids):
        return self.lm(input_ids=ids, labels=ids).loss


def _bert():
    import transformers as tr

    def build():
        torch.manual_seed(0)
        cfg = tr.BertConfig(
            vocab_size=V, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
            max_position_embeddings=16, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
            attn_implementation="eager",
        )  # fmt: skip
        m = tr.BertForMaskedLM(cfg)
        for p in m.bert.embeddings.parameters():
            p.requires_grad_(False)
        return _Logits(m)

    return build


class _Logits(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, ids):
        return self.m(input_ids=ids).logits


def _ce_torch(logits, ids):
    return torch.nn.functional.cross_entropy(logits.reshape(-1, V), ids.reshape(-1))


def _ce_jax(logits, ids):
    logp = jax.nn.log_softmax(logits.reshape(-1, V))
    return -jnp.mean(jnp.take_along_axis(logp, ids.reshape(-1, 1), axis=1))


class _BNCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(2, 4, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(4)
        self.head = torch.nn.Linear(4, 3)

    def forward(self, x):
        return self.head(torch.relu(self.bn(self.conv(x))).mean(dim=(2, 3)))


def _cnn():
    def build():
        torch.manual_seed(0)
        m = _BNCNN()
        with torch.no_grad():  # statistics away from their initial values
            m.bn.running_mean.uniform_(-1, 1)
            m.bn.running_var.uniform_(0.5, 2)
        return m

    return build


class _Autocast(torch.nn.Module):
    """Linear → ReLU → Linear under ``torch.autocast`` (bfloat16 products, float32 weights)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.a, self.b = torch.nn.Linear(8, 16), torch.nn.Linear(16, 3)

    def forward(self, x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = self.b(torch.relu(self.a(x)))
        return y.float()


class _SimSiam(torch.nn.Module):
    """A SimSiam-style loss inside the model: the predictor's output against the stopped
    (``detach``) projection of the other view; the loss is its own output."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.proj = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 8))
        self.pred = torch.nn.Linear(8, 8)

    def forward(self, x):
        z1, z2 = self.proj(x), self.proj(x.flip(0) * 0.5)
        p1, p2 = self.pred(z1), self.pred(z2)
        cos = torch.nn.functional.cosine_similarity
        return -(cos(p1, z2.detach()).mean() + cos(p2, z1.detach()).mean()) / 2


_X = torch.randn(4, 8, generator=torch.Generator().manual_seed(6))
_IDS = torch.randint(0, V, (2, 8), generator=torch.Generator().manual_seed(1))
_IMG = torch.randn(4, 2, 6, 6, generator=torch.Generator().manual_seed(2))
_TGT = torch.randn(4, 3, generator=torch.Generator().manual_seed(3))

TORCH_PROGRAMS: dict[str, TorchProgram] = {
    "gpt2": TorchProgram(
        _gpt2(), (_IDS,), lambda m: m(_IDS), None, paths=("sgd", "adam", "clip", "state", "t-sgd", "t-state")
    ),
    "bert": TorchProgram(
        _bert(),
        (_IDS,),
        lambda m: _ce_torch(m(_IDS), _IDS),
        lambda out: _ce_jax(out, _IDS.numpy()),
        paths=("adam", "state"),
    ),  # fmt: skip
    "gpt2_ckpt": TorchProgram(_gpt2(n_layer=2, ckpt=True), (_IDS,), lambda m: m(_IDS), None, paths=("sgd",)),
    "gpt2_bf16": TorchProgram(
        _gpt2(dtype=torch.bfloat16), (_IDS,), lambda m: m(_IDS), None, dtype="bfloat16", paths=("sgd",)
    ),
    "gpt2_dropout": TorchProgram(_gpt2(dropout=0.1), (_IDS,), lambda m: m(_IDS), None, paths=("rng", "mode")),
    "cnn_bn_eval": TorchProgram(
        _cnn(),
        (_IMG,),
        lambda m: ((m(_IMG) - _TGT) ** 2).mean(),
        lambda out: jnp.mean((out - _TGT.numpy()) ** 2),
        eval_mode=True,
        paths=("sgd", "adam", "t-sgd", "mode"),
    ),
    "cnn_bn_train": TorchProgram(
        lambda: _cnn()().train(),
        (_IMG,),
        lambda m: ((m(_IMG) - _TGT) ** 2).mean(),
        lambda out: jnp.mean((out - _TGT.numpy()) ** 2),
        paths=("t-sgd", "compile"),
    ),  # fmt: skip
    "simsiam_detach": TorchProgram(_SimSiam, (_X,), lambda m: m(_X), None, paths=("sgd", "t-sgd")),
    "mlp_autocast": TorchProgram(
        lambda: _Autocast(),
        (_X,),
        lambda m: ((m(_X) - _TGT) ** 2).mean(),
        lambda out: jnp.mean((out - _TGT.numpy()) ** 2),
        paths=("sgd", "adam", "t-sgd"),
    ),  # fmt: skip
}


def _compare_params(got: dict, ref: dict, tol: float, what: str) -> float:
    worst = 0.0
    for k, r in ref.items():
        if k not in got:
            raise Mismatch(f"{what}: {k} missing")
        e = _err(_np(got[k]), _np(r))
        if not e <= tol:
            raise Mismatch(f"{what}: {k} differs by {e:.2e}")
        worst = max(worst, e)
    return worst


def _jax_train(prog: TorchProgram, opt: str) -> float:
    """N steps of ``opt`` on the converted function (optax) and on the source (torch.optim)."""
    src = prog.model()
    ref = copy.deepcopy(src)
    f = converter.from_torch(src, prog.batch).to_jax()
    trainable, state = f.partition()
    tx = _optax(opt)
    opt_state = tx.init(trainable)
    args = [a.numpy() for a in prog.batch]

    def loss_fn(p, state):
        out = f.apply({**p, **state}, *args, mutable=True)
        out, updates = out
        return (out if prog.jloss is None else prog.jloss(out)).astype(jnp.float32), updates

    step_fn = jax.jit(jax.value_and_grad(loss_fn, has_aux=True))
    topt = _torch_opt(opt, [p for p in ref.parameters() if p.requires_grad])
    tol = TOL[prog.dtype] if prog.dtype != "float32" else TOL["adam" if opt == "adam" else "float32"]
    worst = 0.0
    for step in range(STEPS):
        (loss, updates), grads = step_fn(trainable, state)
        for k, g in grads.items():
            if g.dtype != trainable[k].dtype:
                raise Mismatch(f"step {step}: gradient of {k} is {g.dtype}, parameter {trainable[k].dtype}")
        changes, opt_state = tx.update(grads, opt_state, trainable)
        trainable = optax.apply_updates(trainable, changes)
        state = {**state, **updates}
        tloss = _torch_step(ref, topt, prog.tloss, clip=opt == "clip")
        worst = max(worst, _err(np.float32(loss), np.float32(tloss)))
        if not worst <= tol:
            raise Mismatch(f"step {step}: loss {float(loss)} vs torch {tloss}")
        sd = {k: v for k, v in ref.state_dict().items() if k in {**trainable, **state}}
        worst = max(worst, _compare_params({**trainable, **state}, sd, tol, f"step {step}"))
    return worst


def _jax_state(prog: TorchProgram) -> float:
    """Train 1 step in JAX, load the result back into a fresh torch model: same outputs as
    the converted function with those parameters."""
    src = prog.model()
    f = converter.from_torch(src, prog.batch).to_jax()
    trainable, state = f.partition()
    args = [a.numpy() for a in prog.batch]
    loss_fn = (lambda p: f.apply({**p, **state}, *args)) if prog.jloss is None else (
        lambda p: prog.jloss(f.apply({**p, **state}, *args))
    )  # fmt: skip
    grads = jax.grad(loss_fn)(trainable)
    trained = {k: v - 0.1 * grads[k] for k, v in trainable.items()}
    fresh = prog.model()
    fresh.load_state_dict(f.state_dict({**trained, **state}))  # strict: every name, tied ones too
    with torch.no_grad():
        got = fresh(*prog.batch)
    return _check(_err(_np(got), _np(f.apply({**trained, **state}, *args))), 1e-5)


def _torch_train(prog: TorchProgram, opt: str, compile: bool = False) -> float:
    """The ``to_torch`` module (``torch.compile``d with ``compile``) trained by torch.optim
    over its ``parameters()`` as the original over its own (eager)."""
    src = prog.model()
    ref = copy.deepcopy(src)
    tm = converter.from_torch(src, prog.batch).to_torch()
    if prog.eval_mode:
        tm.eval()
    run = torch.compile(tm) if compile else tm
    o1 = _torch_opt(opt, [p for p in tm.parameters() if p.requires_grad])
    o2 = _torch_opt(opt, [p for p in ref.parameters() if p.requires_grad])
    worst = 0.0
    for step in range(STEPS):
        l1 = _torch_step(run, o1, prog.tloss, clip=False)
        l2 = _torch_step(ref, o2, prog.tloss, clip=False)
        worst = max(worst, _check(_err(np.float32(l1), np.float32(l2)), TOL["float32"]))
        got = tm.source_state_dict()
        want = {k: v for k, v in ref.state_dict().items() if k in got}
        worst = max(worst, _compare_params(got, want, TOL["float32"], f"step {step}"))
    return worst


def _torch_state(prog: TorchProgram) -> float:
    """``torch.save(tm.state_dict())`` after a step, loaded into a fresh converted module."""
    src = prog.model()
    mod = converter.from_torch(src, prog.batch)
    tm = mod.to_torch()
    _torch_step(
        tm, _torch_opt("sgd", [p for p in tm.parameters() if p.requires_grad]), prog.tloss, clip=False
    )
    buf = io.BytesIO()
    torch.save(tm.state_dict(), buf)
    buf.seek(0)
    fresh = mod.to_torch()
    fresh.load_state_dict(torch.load(buf))
    with torch.no_grad():
        return _check(_err(_np(fresh(*prog.batch)), _np(tm(*prog.batch))), 0.0)


def _rng(prog: TorchProgram) -> float:
    """Dropout in training mode: a key is required, two keys give two masks, neither is the
    eval-mode result, and ``to_torch`` with the same key gives the same numbers."""
    src = prog.model()
    mod = converter.from_torch(src, prog.batch)
    if mod.signature.rng is None:
        raise Mismatch("no PRNG key: dropout in training mode was dropped")
    f = mod.to_jax()
    args = [a.numpy() for a in prog.batch]
    try:
        jax.jit(lambda p: f.apply(p, *args))(f.params)
    except converter.ConversionError:
        pass
    else:
        raise Mismatch("apply under jit without rng= ran")
    a, b = (float(f.apply(f.params, *args, rng=k)) for k in (0, 1))
    with torch.no_grad():
        plain = float(copy.deepcopy(src).eval()(*prog.batch))
    if a == b or plain in (a, b):
        raise Mismatch(f"keys 0, 1 give {a}, {b}; eval mode {plain}")
    with torch.no_grad():
        t = float(mod.to_torch()(*prog.batch, rng=0))
    return _check(_err(np.float32(t), np.float32(a)), 1e-6)


def run_torch(name: str, path: str) -> float:
    prog = TORCH_PROGRAMS[name]
    if path in ("sgd", "adam", "clip"):
        return _jax_train(prog, path)
    if path == "state":
        return _jax_state(prog)
    if path == "t-sgd":
        return _torch_train(prog, "sgd")
    if path == "compile":
        return _torch_train(prog, "sgd", compile=True)
    if path == "t-state":
        return _torch_state(prog)
    if path == "rng":
        return _rng(prog)
    if path == "mode":
        return _mode(prog)
    raise KeyError(path)


def _mode(prog: TorchProgram) -> float:
    """The ``to_torch`` module called in the other training mode: it cannot follow (the
    mode is fixed at conversion), so the call must raise, not compute in the converted mode."""
    src = prog.model()
    tm = converter.from_torch(src, prog.batch).to_torch()
    if tm.training != src.training:
        raise Mismatch(f"converted module starts with training={tm.training}, source {src.training}")
    tm.train(not src.training)
    try:
        tm(*prog.batch)
    except converter.ConversionError:
        return 0.0
    raise Mismatch(f"called with train({not src.training}): the module computed in the converted mode")


# ---------------------------------------------------------------- JAX/Flax → torch


def _flax_bn():
    import flax.linen as nn

    class Net(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.Dense(8, use_bias=False)(x)  # a bias before BatchNorm has no gradient
            x = nn.BatchNorm(use_running_average=False, momentum=0.9)(x)
            return nn.Dense(3)(nn.relu(x))

    net = Net()
    rng = np.random.default_rng(0)
    x = rng.normal(size=(6, 5)).astype(np.float32)
    y = rng.normal(size=(6, 3)).astype(np.float32)
    variables = net.init(jax.random.PRNGKey(0), x)

    def fwd(v, x):
        out, upd = net.apply(v, x, mutable=["batch_stats"])
        return out, upd["batch_stats"]

    return fwd, variables, x, y


def _flatten_names(tree) -> dict[str, np.ndarray]:
    return {
        "params" + "".join(f"[{k.key!r}]" for k in path): leaf
        for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]
    }


def run_flax(path: str) -> float:
    fwd, variables, x, y = _flax_bn()
    mod = converter.from_jax(fwd, x, params=variables)
    tm = mod.to_torch()
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    trainable = {tm.param_names[a] for a, p in tm.named_parameters() if p.requires_grad}
    want = set(_flatten_names({"params": variables["params"]}))
    if trainable != want:
        raise Mismatch(f"trainable in torch: {sorted(trainable ^ want)} differ from Flax's 'params'")

    def tstep(m, opt):
        opt.zero_grad()
        out, stats = m(xt)
        loss = ((out - yt) ** 2).mean()
        loss.backward()
        opt.step()
        with torch.no_grad():  # the new statistics, as a Flax training loop carries them
            attr = {n: a for a, n in tm.param_names.items()}
            for k, v in _flatten_names({"batch_stats": stats}).items():
                getattr(m, attr[k]).copy_(v)
        return loss

    if path in ("sgd", "adam"):
        tx = _optax(path)
        v = variables
        opt_state = tx.init(v["params"])

        def loss_fn(p, stats):
            out, new = fwd({"params": p, "batch_stats": stats}, x)
            return jnp.mean((out - y) ** 2), new

        step_fn = jax.jit(jax.value_and_grad(loss_fn, has_aux=True))
        topt = _torch_opt(path, [p for p in tm.parameters() if p.requires_grad])
        tol = TOL["adam" if path == "adam" else "float32"]
        worst = 0.0
        for step in range(STEPS):
            (loss, stats), g = step_fn(v["params"], v["batch_stats"])
            ch, opt_state = tx.update(g, opt_state, v["params"])
            v = {"params": optax.apply_updates(v["params"], ch), "batch_stats": stats}
            tl = float(tstep(tm, topt))
            worst = max(worst, _check(_err(np.float32(tl), np.float32(loss)), tol))
            worst = max(
                worst, _compare_params(tm.source_state_dict(), _flatten_names(v), tol, f"step {step}")
            )
        return worst
    if path == "state":
        tstep(tm, _torch_opt("sgd", [p for p in tm.parameters() if p.requires_grad]))
        buf = io.BytesIO()
        torch.save(tm.state_dict(), buf)
        buf.seek(0)
        fresh = mod.to_torch()
        fresh.load_state_dict(torch.load(buf))
        if set(dict(fresh.named_parameters())) != set(dict(tm.named_parameters())):
            raise Mismatch("parameter names differ between two conversions")
        with torch.no_grad():
            return _check(_err(_np(fresh(xt)[0]), _np(tm(xt)[0])), 0.0)
    if path == "compile":
        twin = mod.to_torch()
        compiled = torch.compile(twin)
        o1 = _torch_opt("sgd", [p for p in tm.parameters() if p.requires_grad])
        o2 = _torch_opt("sgd", [p for p in twin.parameters() if p.requires_grad])
        worst = 0.0
        for _ in range(STEPS):
            l1 = float(tstep(tm, o1))
            l2 = float(tstep(compiled, o2))
            worst = max(worst, _check(_err(np.float32(l2), np.float32(l1)), 1e-5))
        return max(worst, _compare_params(twin.source_state_dict(), tm.source_state_dict(), 1e-5, "compiled"))
    raise KeyError(path)


# ---------------------------------------------------------------- ONNX → JAX


class _OnnxNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(6, 8)
        self.bn = torch.nn.BatchNorm1d(8)
        self.out = torch.nn.Linear(8, 3)

    def forward(self, x):
        h = torch.relu(self.bn(self.fc(x)))
        return self.out(h.reshape(h.shape[0], 2, 4).reshape(h.shape[0], 8))


def run_onnx(path: str) -> float:
    torch.manual_seed(0)
    src = _OnnxNet()
    with torch.no_grad():
        src.bn.running_mean.uniform_(-1, 1)
        src.bn.running_var.uniform_(0.5, 2)
    src.eval()
    ref = copy.deepcopy(src)
    x = torch.randn(5, 6, generator=torch.Generator().manual_seed(4))
    y = torch.randn(5, 3, generator=torch.Generator().manual_seed(5))
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(src, (x,), buf, dynamo=False, input_names=["x"], do_constant_folding=False)
    mod = converter.from_onnx(buf.getvalue())
    if path == "t-sgd":  # the torch module fine-tuned by torch.optim over its parameters()
        tm = mod.to_torch()
        trains = {tm.param_names[a] for a, p in tm.named_parameters() if p.requires_grad}
        if trains != {n for n, _ in src.named_parameters()}:
            raise Mismatch(f"torch trains {sorted(trains)}")
        o1, o2 = (_torch_opt("sgd", [p for p in m.parameters() if p.requires_grad]) for m in (tm, ref))
        worst = 0.0
        for step in range(STEPS):
            l1 = _torch_step(tm, o1, lambda m: ((m(x)[0] - y) ** 2).mean(), clip=False)
            l2 = _torch_step(ref, o2, lambda m: ((m(x) - y) ** 2).mean(), clip=False)
            worst = max(worst, _check(_err(np.float32(l1), np.float32(l2)), TOL["float32"]))
            got, sd = tm.source_state_dict(), ref.state_dict()
            worst = max(
                worst,
                _compare_params(got, {k: sd[k] for k in got if k in sd}, TOL["float32"], f"step {step}"),
            )
        return worst
    f = mod.to_jax()
    trainable, state = f.partition()
    names = {n: n for n, _ in src.named_parameters()}
    if set(trainable) != set(names):
        raise Mismatch(f"trainable {sorted(trainable)}, torch trains {sorted(names)}")
    tx = _optax(path)
    opt_state = tx.init(trainable)

    def loss_fn(p):
        (out,) = f.apply({**p, **state}, x.numpy())  # an ONNX graph's outputs: a list
        return jnp.mean((out - y.numpy()) ** 2)

    step_fn = jax.jit(jax.value_and_grad(loss_fn))
    topt = _torch_opt(path, list(ref.parameters()))
    tol = TOL["adam" if path == "adam" else "float32"]
    worst = 0.0
    for step in range(STEPS):
        loss, g = step_fn(trainable)
        ch, opt_state = tx.update(g, opt_state, trainable)
        trainable = optax.apply_updates(trainable, ch)
        tl = _torch_step(ref, topt, lambda m: ((m(x) - y) ** 2).mean(), clip=False)
        worst = max(worst, _check(_err(np.float32(loss), np.float32(tl)), tol))
        sd = ref.state_dict()
        worst = max(
            worst,
            _compare_params(
                {**trainable, **state}, {k: sd[k] for k in f.params if k in sd}, tol, f"step {step}"
            ),
        )
    return worst


# ---------------------------------------------------------------- the table

CELLS: dict[str, tuple[str, ...]] = {
    **{n: p.paths for n, p in TORCH_PROGRAMS.items()},
    "flax_bn": ("sgd", "adam", "state", "compile"),
    "onnx_bn": ("sgd", "adam", "t-sgd"),
}
PATHS = ("sgd", "adam", "clip", "state", "rng", "mode", "t-sgd", "t-state", "compile")
DIRECTION = {**{n: "torch" for n in TORCH_PROGRAMS}, "flax_bn": "jax→torch", "onnx_bn": "onnx"}


def run_cell(name: str, path: str) -> float:
    """One cell: the worst error, or raises (``Mismatch`` for wrong numbers)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if name in TORCH_PROGRAMS:
            return run_torch(name, path)
        if name == "flax_bn":
            return run_flax(path)
        return run_onnx(path)


def run(name: str, verbose: bool = False) -> dict[str, str]:
    row = {}
    for path in CELLS[name]:
        try:
            row[path] = f"ok {run_cell(name, path):.1e}"
        except Mismatch as e:
            row[path] = f"MISMATCH {e}"
            row[f"_trace_{path}"] = traceback.format_exc()
        except Exception as e:  # noqa: BLE001 - the table reports every failure
            row[path] = f"{type(e).__name__}: {str(e).splitlines()[0][:80] if str(e) else ''}"
            row[f"_trace_{path}"] = traceback.format_exc()
        if verbose and f"_trace_{path}" in row:
            print(row[f"_trace_{path}"])
    return row


def main(argv: list[str]) -> None:
    verbose = "-v" in argv
    names = [a for a in argv if not a.startswith("-")] or list(CELLS)
    width = max(map(len, names))
    print(f"{'program':{width}}  {'from':9}  " + "  ".join(f"{p:12}" for p in PATHS))
    for name in names:
        row = run(name, verbose)
        cells = [row.get(p, "-") for p in PATHS]
        print(f"{name:{width}}  {DIRECTION[name]:9}  " + "  ".join(f"{c[:12]:12}" for c in cells), flush=True)
        for p in PATHS:
            if p in row and not row[p].startswith("ok"):
                print(f"    {p}: {row[p]}")


if __name__ == "__main__":
    main(sys.argv[1:])

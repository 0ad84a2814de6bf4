"""Control-flow sweep: loops, conditionals and loop-carried state in all three sources
(:mod:`tests.sweeps.ctrlflow_programs`), each converted and run on every path against its source.

* JAX programs go through :class:`tests.sweeps.jax_sweep.Run` (static and symbolic ``to_torch``,
  autograd, ``torch.compile``, ``torch.export``, ``to_onnx`` in onnxruntime, ``to_jax`` under
  ``jit``/``grad``/``vmap``, against ``jax.jit``/``jax.grad``); for a program JAX cannot
  differentiate in reverse mode (a ``while_loop``), ``jgrad`` checks that ``jax.grad`` of the
  converted function raises as JAX's does (never zeros).
* torch programs (``torch.export`` higher-order ops): ``jax`` (``to_jax()`` called per size;
  for stateful programs its ``params`` after the calls), ``jit`` (``jax.jit(f.apply)``;
  stateful: ``apply(..., mutable=True)`` threading the state), ``grad`` (``jax.grad`` of
  ``f.apply`` against torch autograd, parameters), ``torch`` (``to_torch()``, its buffers
  after the calls), ``export`` (``torch.export`` of that module), ``compile``
  (``torch.compile``; stateful: each from the initial state, buffers compared after the
  calls), ``onnx`` (onnxruntime; stateful: the state fed back as inputs from
  the ``updated:`` outputs), against eager torch.
* ONNX programs go through :func:`tests.sweeps.onnx_sweep.run_file` (``to_jax``, ``to_torch``,
  ``to_onnx``) against onnxruntime on the file.

Prints ``program x path -> ok <error> / FAIL <class> / -``; errors are relative to the
reference's scale (exact for integers). ``python tests/sweeps/ctrlflow_sweep.py [-v] [name ...]``
(names as ``jax:while_data_trip``, ``torch:kv_decode``, ``onnx:ts_for_loop`` or bare);
``SWEEP=ctrlflow pytest tests/sweeps/test_ctrlflow_sweep.py`` runs it as tests. About 2 CPU minutes.
"""

from __future__ import annotations

import copy
import os
import sys
import tempfile
import time
import traceback
import warnings
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

import converter  # noqa: E402
from tests.sweeps.ctrlflow_programs import JAX_PROGRAMS, ONNX_PROGRAMS, TORCH_PROGRAMS, TorchProgram  # noqa: E402
from tests.sweeps.hf_sweep import _compare, _flat  # noqa: E402
from tests.sweeps.jax_sweep import Run, _check, _torch_args  # noqa: E402

TORCH_PATHS = ("jax", "jit", "grad", "torch", "export", "compile", "onnx")
ONNX_PATHS = ("jax", "torch", "onnx")


class JaxRun(Run):
    """:class:`tests.sweeps.jax_sweep.Run` whose ``jgrad`` also checks, for a program JAX cannot
    differentiate in reverse mode, that the converted function raises too, and whose
    ``tgrad`` checks torch autograd of such a program (exact: the loop replayed) against
    JAX's forward mode of the source along a random direction."""

    def p_tgrad(self):
        if self.prog.grad:
            return super().p_tgrad()
        p, args = self.prog, self.size_args[0]
        if np.asarray(args[0]).dtype.kind != "f":
            return None
        pre = (p.params,) if p.params is not None else ()

        def loss(x):
            out = p.fn(*pre, x, *args[1:])
            return sum(
                jnp.sum(o) for o in jax.tree_util.tree_leaves(out) if jnp.issubdtype(o.dtype, jnp.floating)
            )

        v = np.random.default_rng(1).normal(size=np.shape(args[0])).astype(np.float32)
        _, want = jax.jvp(loss, (args[0],), (v,))
        x = torch.from_numpy(np.array(args[0])).requires_grad_(True)
        out = self.torch_module()(x, *_torch_args(args[1:]))
        sum(o.sum() for o in torch.utils._pytree.tree_leaves(out) if o.is_floating_point()).backward()
        got = float((x.grad * torch.from_numpy(v)).sum())
        return _check(abs(got - float(want)) / max(1.0, abs(float(want))), self.gtol)

    def p_jgrad(self):
        if self.prog.grad:
            return super().p_jgrad()
        p, args = self.prog, self.size_args[0]

        def loss_of(fn):
            def loss(x):
                out = fn(*((p.params,) if p.params is not None else ()), x, *args[1:])
                return sum(
                    jnp.sum(o)
                    for o in jax.tree_util.tree_leaves(out)
                    if jnp.issubdtype(o.dtype, jnp.floating)
                )

            return loss

        try:
            jax.grad(loss_of(p.fn))(args[0])
        except Exception:  # noqa: BLE001 - JAX refuses: so must the converted function, or be exact
            f = self.jax_fn()
            conv = loss_of(lambda *a: f.apply(f.params, *a[1:]) if p.params is not None else f(*a))
            try:
                g = jax.grad(conv)(args[0])
            except Exception:  # noqa: BLE001
                return "raises"
            # it returned (the backend proved the trip count static): checked against JAX's
            # forward mode of the source along a random direction
            v = np.random.default_rng(0).normal(size=np.shape(args[0])).astype(np.float32)
            _, want = jax.jvp(loss_of(p.fn), (args[0],), (v,))
            got = float(jnp.vdot(g, v))
            return _check(abs(got - float(want)) / max(1.0, abs(float(want))), self.gtol)
        return None


def _np(x: Any) -> np.ndarray:
    return x.detach().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def _buffers(model: torch.nn.Module, names=None) -> dict[str, np.ndarray]:
    """The buffers (those in ``names`` when given), keyed as :func:`_flat` keys outputs."""
    return {f"['{k}']": b.detach().numpy() for k, b in model.named_buffers() if names is None or k in names}


def run_torch(name: str, prog: TorchProgram, verbose: bool = False) -> tuple[dict, dict]:
    """Every path of :data:`TORCH_PATHS` on one torch program: ``(results, failures)``."""
    results: dict[str, str] = {}
    failures: dict[str, str] = {}
    torch.manual_seed(0)
    model = prog.build().eval()
    calls = [prog.inputs(s) for s in prog.sizes]
    eager = copy.deepcopy(model)
    with torch.no_grad():
        refs = [_flat(eager(*a)) for a in calls]
    state = _buffers(eager)
    t0 = time.process_time()
    try:
        m = converter.from_torch(copy.deepcopy(model), calls[0], dynamic_shapes=prog.dynamic)
        results["convert"] = f"ok [{time.process_time() - t0:.1f}s]"
    except Exception as e:  # noqa: BLE001 - the sweep records every failure
        results["convert"] = f"FAIL {type(e).__name__}"
        failures["convert"] = "".join(traceback.format_exception(e))
        return results, failures

    def outputs(fn) -> float:
        return max(_compare(_flat(fn(a)), r) for a, r in zip(calls, refs, strict=True))

    def p_jax():
        f = m.to_jax()
        err = outputs(lambda a: f(*[t.numpy() for t in a]))
        if prog.stateful:
            err = max(
                err,
                _compare({f"['{k}']": np.asarray(f.params[k]) for k in dict(model.named_buffers())}, state),
            )
        return err

    def p_jit():
        f = m.to_jax()
        if not prog.stateful:
            jf = jax.jit(f.apply)
            return outputs(lambda a: jf(f.params, *[t.numpy() for t in a]))
        step = jax.jit(lambda params, *a: f.apply(params, *a, mutable=True))
        params = dict(f.params)
        err = 0.0
        with jax.enable_x64(True):  # int64 positions and step counter
            for a, r in zip(calls, refs, strict=True):
                out, updates = step(params, *[t.numpy() for t in a])
                params.update(updates)
                err = max(err, _compare(_flat(out), r))
        return max(
            err, _compare({f"['{k}']": np.asarray(params[k]) for k in dict(model.named_buffers())}, state)
        )

    def p_grad():
        if not prog.grad:
            return None
        args = calls[0]
        tmod = copy.deepcopy(model)
        targs = [a.clone().requires_grad_(a.dtype.is_floating_point) for a in args]
        sum(
            (o.float() ** 2).sum()
            for o in torch.utils._pytree.tree_leaves(tmod(*targs))
            if o.is_floating_point()
        ).backward()
        f = m.to_jax()

        def loss(params, *a):
            leaves = jax.tree_util.tree_leaves(f.apply(params, *a))
            return sum(
                jnp.sum(jnp.asarray(x, jnp.float32) ** 2)
                for x in leaves
                if jnp.issubdtype(x.dtype, jnp.floating)
            )

        try:
            g = jax.grad(loss)(f.params, *[a.numpy() for a in args])
        except Exception as e:  # noqa: BLE001
            if "Reverse-mode differentiation does not work for lax.while_loop" in str(e):
                return "raises"  # a while_loop: JAX has no reverse mode (torch's is the replay)
            raise
        want = {
            k: (q.grad if q.grad is not None else torch.zeros_like(q)).numpy()
            for k, q in tmod.named_parameters()
        }
        return _compare({k: np.asarray(g[k]) for k in want}, want)

    tm: list[Any] = []

    def torch_module():
        if not tm:
            tm.append(m.to_torch())
        return tm[0]

    def p_torch():
        t = torch_module()
        with torch.no_grad():
            err = outputs(lambda a: t(*a))
        if prog.stateful:
            err = max(err, _compare(_buffers(t, dict(model.named_buffers())), state))
        return err

    def p_export():
        t = m.to_torch() if prog.stateful else torch_module()  # stateful: from the initial state
        ep = torch.export.export(
            t, calls[0], dynamic_shapes=t.export_dynamic_shapes() if prog.dynamic else None
        )
        run = ep.module()
        with torch.no_grad():
            err = outputs(lambda a: run(*a))
        if prog.stateful:  # the exported module's buffers after the calls
            err = max(err, _compare(_buffers(run, dict(model.named_buffers())), state))
        return err

    def p_compile():
        t = m.to_torch() if prog.stateful else torch_module()
        torch._dynamo.reset()
        c = torch.compile(t)
        with torch.no_grad():
            err = outputs(lambda a: c(*a))
        if prog.stateful:
            err = max(err, _compare(_buffers(t, dict(model.named_buffers())), state))
        return err

    def p_onnx():
        import onnxruntime as ort

        proto = m.to_onnx()
        names = list(dict(model.named_buffers())) if prog.stateful else []
        if names:  # the state as graph inputs, fed from the updated: outputs of the last call
            kept = [i for i in proto.graph.initializer if i.name not in names]
            inputs = [converter_input(proto, i) for i in proto.graph.initializer if i.name in names]
            del proto.graph.initializer[:]
            proto.graph.initializer.extend(kept)
            proto.graph.input.extend(inputs)
        sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
        outs = [o.name for o in sess.get_outputs()]
        feeds_state = {k: b.numpy() for k, b in copy.deepcopy(model).named_buffers() if k in names}
        err = 0.0
        for a, r in zip(calls, refs, strict=True):
            user = [i.name for i in sess.get_inputs() if i.name not in names]
            got = sess.run(None, {**dict(zip(user, [t.numpy() for t in a], strict=True)), **feeds_state})
            n_user = len(r)
            err = max(err, _compare(dict(zip(sorted(r), [got[i] for i in range(n_user)], strict=True)), r))
            for k in names:
                feeds_state[k] = got[outs.index(f"updated:{k}")]
        if names:
            err = max(err, _compare({f"['{k}']": v for k, v in feeds_state.items()}, state))
        return err

    for path in TORCH_PATHS:
        fn = locals()[f"p_{path}"]
        t0 = time.process_time()
        try:
            r = fn()
        except Exception as e:  # noqa: BLE001
            results[path] = f"FAIL {type(e).__name__}"
            failures[path] = "".join(traceback.format_exception(e))
            if verbose:
                print(f"--- torch:{name} / {path}\n{failures[path]}", file=sys.stderr)
            continue
        cell = "-" if r is None else (r if isinstance(r, str) else f"ok {r:.0e}")
        results[path] = cell + ("" if r is None else f" [{time.process_time() - t0:.1f}s]")
    return results, failures


def converter_input(proto, init):
    """A graph input of ``init``'s name, dtype and shape (state fed per call)."""
    from onnx import helper

    return helper.make_tensor_value_info(init.name, init.data_type, list(init.dims))


def run_onnx(name: str, verbose: bool = False) -> tuple[dict, dict]:
    """:func:`tests.sweeps.onnx_sweep.run_file` on one ONNX program: ``(results, failures)``."""
    from tests.sweeps.onnx_sweep import run_file

    model, feeds = ONNX_PROGRAMS[name]()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, f"{name}.onnx")
        with open(path, "wb") as f:
            f.write(model.SerializeToString())
        row = run_file(path, feeds, ONNX_PATHS, reexport=False)
    results, failures = {}, {}
    for path, (status, detail) in row.items():
        column = "convert" if path == "from_onnx" else path
        if status == "ok":
            results[column] = f"ok {detail.split()[0]}"
        else:
            results[column] = f"FAIL {status}"
            failures[column] = detail
            if verbose:
                print(f"--- onnx:{name} / {column}\n{detail}", file=sys.stderr)
    return results, failures


def run(qualified: str, verbose: bool = False) -> tuple[dict, dict]:
    """One program by ``framework:name``: ``(results, failures)`` (failure text per path)."""
    kind, name = qualified.split(":", 1)
    if kind == "jax":
        r = JaxRun(name, JAX_PROGRAMS[name](), verbose).run()
        return r.results, r.failures
    if kind == "torch":
        return run_torch(name, TORCH_PROGRAMS[name], verbose)
    return run_onnx(name, verbose)


def all_programs() -> list[str]:
    return (
        [f"jax:{n}" for n in JAX_PROGRAMS]
        + [f"torch:{n}" for n in TORCH_PROGRAMS]
        + [f"onnx:{n}" for n in ONNX_PROGRAMS]
    )


def table(rows: dict[str, dict]) -> str:
    cols = ["convert"]
    for r in rows.values():
        cols += [c for c in r if c not in cols]
    lines = [("program", *cols)] + [(n, *(r.get(c, "") for c in cols)) for n, r in rows.items()]
    widths = [max(len(line[i]) for line in lines) for i in range(len(cols) + 1)]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in lines
    )


def main(argv: list[str]) -> int:
    verbose = "-v" in argv
    wanted = [a for a in argv if not a.startswith("-")]
    names = [n for n in all_programs() if not wanted or n in wanted or n.split(":", 1)[1] in wanted]
    warnings.simplefilter("ignore")
    rows, failed = {}, False
    for n in names:
        t0 = time.process_time()
        rows[n], failures = run(n, verbose)
        failed = failed or bool(failures)
        print(f"{n}: {time.process_time() - t0:.1f} CPU s", file=sys.stderr, flush=True)
    print(table(rows))
    return int(failed)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

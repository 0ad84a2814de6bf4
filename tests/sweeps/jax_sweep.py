"""Sweep of realistic JAX programs (:mod:`tests.sweeps.jax_programs`) through every path.

For each program: ``converter.from_jax`` (of a ``jax.export`` with symbolic shapes when the
program has them, else of the function), then

* ``static``: ``from_jax`` of the function at the example shapes, ``to_torch``, eager outputs;
* ``torch``: ``to_torch`` outputs at each size against ``jax.jit`` of the source;
* ``tgrad``: torch autograd gradients (parameters, float inputs) against ``jax.grad``;
* ``compile``: ``torch.compile`` of the converted module (a few programs);
* ``texport``: ``torch.export`` of the converted module with ``export_dynamic_shapes()``,
  run at each size (symbolic programs marked for it);
* ``onnx``: ``to_onnx`` run by onnxruntime at each size;
* ``jax``: ``jax.jit`` of ``to_jax()`` at each size; ``jgrad``: ``jax.grad`` through it;
  ``vmap``: ``jax.vmap`` of it over a leading batch of 3.

Prints a table ``program x path -> ok (max error) / FAIL (class) / -``; the error is the
largest absolute difference over the largest magnitude of the reference (at least 1),
exact for integer and bool outputs. Run ``python tests/sweeps/jax_sweep.py [program ...]``
(``-v`` prints each failure's traceback) or ``SWEEP=jax pytest tests/sweeps/test_jax_sweep.py``.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
import warnings

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

import converter  # noqa: E402
from tests.sweeps.jax_programs import PROGRAMS, Program  # noqa: E402

PATHS = ("static", "torch", "tgrad", "compile", "texport", "onnx", "jax", "jgrad", "vmap")
OUT_TOL = 1e-4  # float32 outputs
GRAD_TOL = 1e-3  # float32 gradients (sums of many products)


class Mismatch(AssertionError):
    """A path ran but its numbers differ from the source's."""


def _is_key(a) -> bool:
    return isinstance(a, jax.Array) and jnp.issubdtype(a.dtype, jax.dtypes.prng_key)


def _np(a):
    if isinstance(a, torch.Tensor):
        return a.detach().numpy()
    if _is_key(a):
        return np.asarray(jax.random.key_data(a))
    return np.asarray(a)


def _torch_args(args):
    def conv(a):
        if a is None or isinstance(a, (bool, int, float, str)):
            return a
        return torch.from_numpy(np.array(_np(a)))

    return jax.tree_util.tree_map(conv, args, is_leaf=lambda x: x is None)


def _err(got, ref) -> float:
    """Largest relative error over the leaves (``Mismatch`` on a structure or exact-dtype difference)."""
    gl, rl = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(ref)
    if len(gl) != len(rl):
        raise Mismatch(f"{len(gl)} output leaves, source has {len(rl)}")
    worst = 0.0
    for i, (g, r) in enumerate(zip(gl, rl, strict=True)):
        g, r = _np(g), _np(r)
        if g.shape != r.shape:
            raise Mismatch(f"leaf {i}: shape {g.shape}, source {r.shape}")
        if r.dtype.kind in "biu":
            if not np.array_equal(g.astype(r.dtype), r):
                raise Mismatch(f"leaf {i} ({r.dtype}): {int(np.sum(g.astype(r.dtype) != r))} elements differ")
            continue
        g, r = g.astype(np.float64), r.astype(np.float64)
        if not np.array_equal(np.isnan(g), np.isnan(r)):
            raise Mismatch(f"leaf {i}: NaN at other places")
        fin = ~np.isnan(r)
        if fin.any():
            worst = max(
                worst, float(np.max(np.abs(g[fin] - r[fin])) / max(1.0, float(np.max(np.abs(r[fin])))))
            )
    return worst


def _check(err: float, tol: float) -> float:
    if not err <= tol:
        raise Mismatch(f"max error {err:.2e} > {tol:.0e}")
    return err


def _loss(out):
    """A scalar of every float output leaf (the same in JAX and torch)."""
    total = 0.0
    for leaf in jax.tree_util.tree_leaves(out):
        if isinstance(leaf, torch.Tensor):
            if leaf.dtype.is_floating_point:
                total = total + (leaf * leaf).mean() + leaf.mean()
        elif jnp.issubdtype(leaf.dtype, jnp.floating):
            total = total + jnp.mean(leaf * leaf) + jnp.mean(leaf)
    return total


def _float_arg_mask(args):
    return jax.tree_util.tree_map(lambda a: isinstance(a, np.ndarray) and a.dtype.kind == "f", args)


class Run:
    def __init__(self, name: str, prog: Program, verbose: bool = False):
        self.name, self.prog, self.verbose = name, prog, verbose
        self.results: dict[str, str] = {}
        self.failures: dict[str, str] = {}
        p = prog
        self.call = (lambda *a: p.fn(p.params, *a)) if p.params is not None else p.fn
        self.jit = jax.jit(p.fn)
        self.size_args = [p.make(**s) for s in p.sizes]
        self.refs = [self._ref(a) for a in self.size_args]
        self.module = None
        self.tol = max(OUT_TOL, prog.tol)
        self.gtol = max(GRAD_TOL, prog.tol * 10)

    def _ref(self, args):
        return self.jit(self.prog.params, *args) if self.prog.params is not None else self.jit(*args)

    def _convert_symbolic(self):
        p = self.prog
        args = self.size_args[0]
        scope = jax.export.SymbolicScope(p.constraints)
        leaves, tree = jax.tree_util.tree_flatten(args)
        specs = [
            jax.ShapeDtypeStruct(
                jax.export.symbolic_shape(s, scope=scope) if s else np.shape(leaf), leaf.dtype
            )
            for s, leaf in zip(p.shapes, leaves, strict=True)
        ]
        sds = jax.tree_util.tree_unflatten(tree, specs)
        exp = jax.export.export(jax.jit(p.fn))(*((p.params,) if p.params is not None else ()), *sds)
        return converter.from_jax(exp, params=p.params)

    def _convert(self):
        p = self.prog
        if p.shapes is None:
            return converter.from_jax(p.fn, *self.size_args[0], params=p.params)
        return self._convert_symbolic()

    def path(self, name, fn):
        t0 = time.process_time()
        try:
            r = fn()
        except Exception as e:  # noqa: BLE001 - the sweep records every failure
            cls = type(e).__name__
            self.results[name] = f"FAIL {cls}"
            self.failures[name] = "".join(traceback.format_exception(e))
            if self.verbose:
                print(f"--- {self.name} / {name}\n{self.failures[name]}", file=sys.stderr)
            return
        if r is None:
            self.results[name] = "-"
        else:
            self.results[name] = f"ok {r:.0e}" if isinstance(r, float) else str(r)
        self.results[name] += "" if r is None else f" [{time.process_time() - t0:.1f}s]"

    # ------------------------------------------------------------------ paths

    def p_static(self):
        args = self.size_args[0]
        m = converter.from_jax(self.prog.fn, *args, params=self.prog.params)
        with torch.no_grad():
            out = m.to_torch()(*_torch_args(args))
        return _check(_err(out, self.refs[0]), self.tol)

    def torch_module(self):
        if getattr(self, "_tm", None) is None:
            self._tm = self.module.to_torch()
        return self._tm

    def p_torch(self):
        tm = self.torch_module()
        worst = 0.0
        for args, ref in zip(self.size_args, self.refs, strict=True):
            with torch.no_grad():
                worst = max(worst, _check(_err(tm(*_torch_args(args)), ref), self.tol))
        return worst

    def _jax_grads(self, args):
        p = self.prog
        mask = _float_arg_mask(args)

        def loss(params, fargs):
            full = jax.tree_util.tree_map(lambda m, f, a: f if m else a, mask, fargs, args)
            return _loss(p.fn(params, *full) if p.params is not None else p.fn(*full))

        fargs = jax.tree_util.tree_map(lambda m, a: a if m else np.zeros((), np.float32), mask, args)
        if p.params is None:
            return None, jax.grad(lambda fa: loss(None, fa))(fargs), mask
        gp, ga = jax.grad(loss, argnums=(0, 1), allow_int=True)(p.params, fargs)
        return gp, ga, mask

    def p_tgrad(self):
        if not self.prog.grad:
            return None
        args = self.size_args[0]
        gp, ga, mask = self._jax_grads(args)
        tm = self.torch_module()
        tm.zero_grad(set_to_none=True)
        targs = _torch_args(args)
        targs = jax.tree_util.tree_map(
            lambda m, t: t.requires_grad_(True) if m else t, mask, targs, is_leaf=lambda x: x is None
        )
        _loss(tm(*targs)).backward()
        worst = 0.0
        if gp is not None:
            by_name = {tm.param_names[a]: q for a, q in tm.named_parameters()}
            names = [
                "params" + jax.tree_util.keystr(kp) for kp, _ in jax.tree_util.tree_flatten_with_path(gp)[0]
            ]
            compared = 0
            for nm, g in zip(names, jax.tree_util.tree_leaves(gp), strict=True):
                if nm not in by_name or g.dtype == jax.dtypes.float0:
                    continue  # a parameter the program does not use (dropped), or an integer one
                tg = by_name[nm].grad
                tg = torch.zeros_like(by_name[nm]) if tg is None else tg
                worst = max(worst, _check(_err(tg, g), self.gtol))
                compared += 1
            if not compared:
                raise Mismatch("no parameter gradient compared (parameter names differ?)")
        for m, t, g in zip(
            jax.tree_util.tree_leaves(mask),
            jax.tree_util.tree_leaves(targs),
            jax.tree_util.tree_leaves(ga),
            strict=True,
        ):
            if m:
                tg = t.grad if t.grad is not None else torch.zeros_like(t)
                worst = max(worst, _check(_err(tg, g), self.gtol))
        tm.zero_grad(set_to_none=True)
        return worst

    def p_compile(self):
        if not self.prog.compile:
            return None
        tm = self.torch_module()
        torch._dynamo.reset()
        cm = torch.compile(tm)
        worst = 0.0
        for args, ref in zip(self.size_args, self.refs, strict=True):
            with torch.no_grad():
                worst = max(worst, _check(_err(cm(*_torch_args(args)), ref), self.tol))
        return worst

    def p_texport(self):
        if not (self.prog.texport and self.prog.shapes):
            return None
        tm = self.torch_module()
        args0 = _torch_args(self.size_args[0])
        ep = torch.export.export(tm, tuple(args0), dynamic_shapes=tm.export_dynamic_shapes())
        worst = 0.0
        for args, ref in zip(self.size_args, self.refs, strict=True):
            with torch.no_grad():
                worst = max(worst, _check(_err(ep.module()(*_torch_args(args)), ref), self.tol))
        return worst

    def p_onnx(self):
        import onnxruntime as ort

        model = self.module.to_onnx()
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        worst = 0.0
        for args, ref in zip(self.size_args, self.refs, strict=True):
            leaves = [_np(a) for a in jax.tree_util.tree_leaves(args)]
            inputs = sess.get_inputs()
            if len(inputs) != len(leaves):
                raise Mismatch(f"{len(inputs)} ONNX inputs for {len(leaves)} argument leaves")
            got = sess.run(None, {i.name: a for i, a in zip(inputs, leaves, strict=True)})
            ref_leaves = jax.tree_util.tree_leaves(ref)
            worst = max(worst, _check(_err(got, ref_leaves), self.tol))
        return worst

    def jax_fn(self):
        if getattr(self, "_jf", None) is None:
            self._jf = self.module.to_jax()
        return self._jf

    def p_jax(self):
        f = self.jax_fn()
        jf = jax.jit(f.apply)
        worst = 0.0
        for args, ref in zip(self.size_args, self.refs, strict=True):
            worst = max(worst, _check(_err(jf(f.params, *args), ref), self.tol))
        return worst

    def p_jgrad(self):
        if not self.prog.grad:
            return None
        f = self.jax_fn()
        args = self.size_args[0]
        gp, ga, mask = self._jax_grads(args)

        def loss(params, fargs):
            full = jax.tree_util.tree_map(lambda m, fa, a: fa if m else a, mask, fargs, args)
            return _loss(f.apply(params, *full))

        fargs = jax.tree_util.tree_map(lambda m, a: a if m else np.zeros((), np.float32), mask, args)
        cp, ca = jax.jit(jax.grad(loss, argnums=(0, 1), allow_int=True))(f.params, fargs)
        worst = 0.0
        if gp is not None:
            names = [
                "params" + jax.tree_util.keystr(kp) for kp, _ in jax.tree_util.tree_flatten_with_path(gp)[0]
            ]
            compared = 0
            for nm, g in zip(names, jax.tree_util.tree_leaves(gp), strict=True):
                if nm in cp and g.dtype != jax.dtypes.float0:
                    worst = max(worst, _check(_err(cp[nm], g), self.gtol))
                    compared += 1
            if not compared:
                raise Mismatch("no parameter gradient compared (parameter names differ?)")
        for m, c, g in zip(
            jax.tree_util.tree_leaves(mask),
            jax.tree_util.tree_leaves(ca),
            jax.tree_util.tree_leaves(ga),
            strict=True,
        ):
            if m:
                worst = max(worst, _check(_err(c, g), self.gtol))
        return worst

    def p_vmap(self):
        if not self.prog.vmap:
            return None
        f = self.jax_fn()
        args = self.size_args[0]
        batched = jax.tree_util.tree_map(
            lambda a: np.stack([a, a * 0.5 + 0.1, -a]) if a.dtype.kind == "f" else np.stack([a] * 3), args
        )
        ref = jax.vmap(self.call)(*batched)
        return _check(_err(jax.vmap(f)(*batched), ref), self.tol)

    def run(self, paths=PATHS):
        if "static" in paths:
            self.path("static", self.p_static)
        t0 = time.process_time()
        try:
            self.module = self._convert()
        except Exception as e:  # noqa: BLE001
            self.results["convert"] = f"FAIL {type(e).__name__}"
            self.failures["convert"] = "".join(traceback.format_exception(e))
            if self.verbose:
                print(f"--- {self.name} / convert\n{self.failures['convert']}", file=sys.stderr)
            return self
        self.results["convert"] = f"ok [{time.process_time() - t0:.1f}s]"
        for name in paths:
            if name != "static":
                self.path(name, getattr(self, f"p_{name}"))
        return self


def table(runs: list[Run], paths=PATHS) -> str:
    cols = ("convert", *paths)
    rows = [("program", *cols)] + [(r.name, *(r.results.get(c, "") for c in cols)) for r in runs]
    widths = [max(len(row[i]) for row in rows) for i in range(len(cols) + 1)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows)


def main(argv: list[str]) -> int:
    verbose = "-v" in argv
    names = [a for a in argv if not a.startswith("-")] or list(PROGRAMS)
    runs = []
    warnings.simplefilter("ignore")
    for n in names:
        t0 = time.process_time()
        runs.append(Run(n, PROGRAMS[n](), verbose).run())
        print(f"{n}: {time.process_time() - t0:.1f} CPU s", file=sys.stderr, flush=True)
    print(table(runs))
    return int(any(r.failures for r in runs))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

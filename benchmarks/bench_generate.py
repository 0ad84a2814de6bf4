"""Greedy decoding speed: the converted decode step against eager torch and ``generate``, in one run.

    .venv/bin/python benchmarks/bench_generate.py [--arch llama] [--layers 2] [--tokens 64]

The model and the StaticCache decode step are those of ``examples/generate.py``. Prints tokens
per second, after a prompt of 8 tokens, of:

- ``jax``: the converted decode step, ``jax.jit`` of ``apply(params, token, pos, mutable=True)``
  with the greedy ``argmax`` inside, the cache threaded through its updates;
- ``eager torch``: the same ``StaticCacheLM`` step run eagerly by torch (``no_grad``);
- ``torch generate``: ``model.generate(do_sample=False)`` with transformers' default
  (dynamic) cache, prefill included (one of ``--tokens`` steps).

and the ratios of ``jax`` to the other two (> 1: the converted step is faster). Each loop runs
once to warm up (jit compiles), then is timed as the best of ``--repeat`` runs. Torch runs on
``--torch-threads`` intra-op threads (default 1: a decode step of a small model is too small
to split, and on a loaded machine torch's spinning threads slow it down tens of times).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import perf_page  # noqa: E402  (benchmarks/: the script's directory)

from examples import generate as gen  # noqa: E402


def best(fn, repeat: int) -> float:
    """The shortest of ``repeat`` timed calls of ``fn`` after one warm-up call."""
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", choices=gen.ARCHS, default="llama")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--torch-threads", type=int, default=1)
    parser.add_argument(
        "--record",
        action="store_true",
        help="store the result in the performance tables (benchmarks/perf_page.py)",
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(args.torch_threads)
    jax.config.update("jax_enable_x64", True)  # int64 ids under jax.jit: JAX narrows them otherwise
    p, n = 8, args.tokens

    model = gen.build(args.arch, layers=args.layers)
    ids = gen.prompt(p)
    start = time.perf_counter()
    prefill, decode, _ = gen.convert_static(model, p, p + n)
    took = time.perf_counter() - start
    print(f"{args.arch}, {args.layers} layers, torch threads {args.torch_threads}: converted in {took:.1f} s")

    fp, fd = prefill.to_jax(), decode.to_jax()
    logits, updates = fp.apply(dict(fd.params), ids.numpy(), np.arange(p), mutable=True)
    after_prefill = {**fd.params, **updates}
    first = jnp.argmax(logits[0, -1])

    @jax.jit
    def step(params, token, pos):
        logits, updates = fd.apply(params, token.reshape(1, 1), pos.reshape(1), mutable=True)
        return jnp.argmax(logits[0, -1]), {**params, **updates}

    def jax_loop():
        params, token, out = after_prefill, first, []
        for i in range(n - 1):
            token, params = step(params, token, jnp.asarray(p + i))
            out.append(token)
        return [int(t) for t in out]

    wrapper = gen.StaticCacheLM(model, p + n)
    with torch.no_grad():
        torch_first = wrapper(ids, torch.arange(p))[0, -1].argmax()
    cache = {k: v.clone() for k, v in wrapper.state_dict().items() if k in wrapper.cache_names()}

    def eager_loop():
        wrapper.load_state_dict(cache, strict=False)
        token, out = torch_first, []
        with torch.no_grad():
            for i in range(n - 1):
                token = wrapper(token.reshape(1, 1), torch.tensor([p + i]))[0, -1].argmax()
                out.append(token)
        return [int(t) for t in out]

    assert jax_loop() == eager_loop() == gen.torch_generate(model, ids, n)[1:], "tokens differ"
    steps = n - 1
    rates = {
        "jax (converted step, jit)": steps / best(jax_loop, args.repeat),
        "eager torch (same step)": steps / best(eager_loop, args.repeat),
        "torch generate": n / best(lambda: gen.torch_generate(model, ids, n), args.repeat),
    }
    for name, rate in rates.items():
        print(f"  {name:<28} {rate:8.0f} tokens/s")
    jax_rate, eager_rate, gen_rate = rates.values()
    print(f"  jax / eager torch: {jax_rate / eager_rate:.2f}x", end="   ")
    print(f"jax / torch generate: {jax_rate / gen_rate:.2f}x")
    if args.record:
        perf_page.record(
            "generate",
            what=f"greedy decoding, converted decode step under `jax.jit` ({args.layers}-layer {args.arch})",
            result=f"{jax_rate / eager_rate:.1f}×",
            anchor="the eager torch decode step (tokens/s)",
            command=perf_page.command(__file__, argv),
        )


if __name__ == "__main__":
    main()

"""The locks behind the public API's thread safety (see ``docs/design.md``, "Threads").

Every public entry point (``from_*``, ``load``, ``Module.to_*``, ``call_jax``,
``call_torch``, the converted callables) may be called from many threads at once. Most of
the work runs concurrently: JAX traces, lowers and compiles from any thread, the MLIR
context is shared (its uniquing is thread-safe), and the JAX and ONNX backends keep no
global state. What torch cannot do concurrently is serialized here, behind the API:

* :data:`TORCH_TRACE` — ``torch.export`` (its module-level export flags, the Python side of
  the dispatch-mode stack, Dynamo's global state), ``torch.export.load`` (fake tensors while
  deserializing), and the torch backend's graph tracing (``make_fx`` and the recorder share
  ``proxy_tensor``'s tracer globals and the recorder's fake-result memo). One lock for all
  of them, re-entrant: ``call_torch`` converts with ``from_torch`` inside its own miss
  handling, ``from_torch(path)`` loads and then exports, ``to_torch`` of a shape-polymorphic
  module traces a graph on a later call.

Running a converted module (the torch graph, the compiled JAX function) takes no lock.
The locks are held only around the framework's own tracing, never while user code waits
on another thread's result, so they cannot deadlock with the caller's own locks unless the
model's ``forward`` itself blocks on a thread that converts.
"""

from __future__ import annotations

import threading

#: Serializes torch tracing: ``torch.export``, ``torch.export.load`` and the torch backend's
#: graph tracing (re-entrant).
TORCH_TRACE = threading.RLock()

__all__ = ["TORCH_TRACE"]

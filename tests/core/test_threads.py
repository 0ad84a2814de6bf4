"""The public API from many threads at once (docs/design.md, "Threads"): 8 threads each
run ``from_torch``, ``from_jax``, ``from_onnx``, ``to_torch``, ``to_jax``, ``call_jax``,
``call_torch``, ``to_onnx``, ``save``/``load`` and ``from_stablehlo`` on their own small
model, some of them on inputs that must fail. Every success matches its source, every
failure is the typed error of its own thread, and a user thread logging, warning and
printing to stderr meanwhile loses nothing: no process-wide logging, warning-filter or
stderr state is changed."""

from __future__ import annotations

import logging
import sys
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

import converter

N = 8
FAILING = {2, 5}  # threads whose calls get inputs that must fail


def _torch_model(i: int) -> torch.nn.Module:
    torch.manual_seed(i)
    return torch.nn.Sequential(torch.nn.Linear(4, 3 + i), torch.nn.Tanh(), torch.nn.Linear(3 + i, 2)).eval()


def _weights(i: int) -> np.ndarray:
    return np.linspace(-1, 1, 4 * (3 + i), dtype=np.float32).reshape(4, 3 + i)


def _jax_fn(i: int):
    w = _weights(i)
    return lambda x: jnp.tanh(x @ w) * (i + 1)


def _jax_ref(i: int, x: np.ndarray) -> np.ndarray:
    return np.tanh(x @ _weights(i)) * (i + 1)


def _onnx_model(i: int, op: str = "Relu"):
    w = numpy_helper.from_array(_weights(i), "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node(op, ["h"], ["y"])]
    graph = helper.make_graph(
        nodes,
        f"g{i}",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3 + i])],
        initializer=[w],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


class _DataDependent(torch.nn.Module):
    def forward(self, x):
        return torch.zeros(int(x.sum().item()))


def _x(i: int) -> np.ndarray:
    return np.linspace(-2, 2, 8, dtype=np.float32).reshape(2, 4) + i / 10


def _close(got, want) -> None:
    got = got.detach().numpy() if isinstance(got, torch.Tensor) else np.asarray(got)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


# --------------------------------------------------------------------------- the calls
#
# Each returns a short tag; a failing thread's call must raise the named ConversionError.


def _from_torch(i, modules):
    x = torch.from_numpy(_x(i))
    if i in FAILING:
        with pytest.raises(converter.ExportError, match="GuardOnDataDependentSymNode") as info:
            converter.from_torch(_DataDependent(), (torch.ones(3),))
        # torch.export's partial graph, held back for this thread's error only
        assert "def forward" in info.value.diagnostics
        return "ExportError"
    model = _torch_model(i)
    _close(converter.from_torch(model, (x,)).to_jax()(x.numpy()), model(x).detach().numpy())
    return "ok"


def _from_jax(i, modules):
    if i in FAILING:
        with pytest.raises(converter.ExportError):
            converter.from_jax(lambda x: x @ np.ones((5, 2), np.float32), _x(i))  # 4 vs 5
        return "ExportError"
    m = converter.from_jax(_jax_fn(i), _x(i))
    _close(m.to_torch()(torch.from_numpy(_x(i))), _jax_ref(i, _x(i)))
    return "ok"


def _from_onnx(i, modules):
    if i in FAILING:
        with pytest.raises(converter.ParseError, match="NoSuchOp"):  # the ONNX checker refuses it
            converter.from_onnx(_onnx_model(i, op="NoSuchOp"))
        return "ParseError"
    m = converter.from_onnx(_onnx_model(i))
    (y,) = m.to_jax()(_x(i))  # the graph's outputs, in order
    _close(y, np.maximum(_x(i) @ _weights(i), 0))
    return "ok"


def _to_torch(i, modules):
    if i in FAILING:
        with pytest.raises(converter.SignatureMismatchError):
            modules[i].to_torch()(torch.ones(3, 5))  # the module is static (2, 4)
        return "SignatureMismatchError"
    _close(modules[i].to_torch()(torch.from_numpy(_x(i))), _jax_ref(i, _x(i)))
    return "ok"


def _to_jax(i, modules):
    f = modules[i].to_jax()
    if i in FAILING:
        with pytest.raises(converter.SignatureMismatchError):
            f(np.ones((3, 5), np.float32))
        return "SignatureMismatchError"
    _close(f(_x(i)), _jax_ref(i, _x(i)))
    return "ok"


def _call_jax(i, modules):
    fn = _jax_fn(i)
    if i in FAILING:
        with pytest.raises(converter.ExportError):
            converter.call_jax(fn, torch.ones(3, 5))
        return "ExportError"
    _close(converter.call_jax(fn, torch.from_numpy(_x(i))), _jax_ref(i, _x(i)))
    return "ok"


def _call_torch(i, modules):
    model = _torch_model(i)
    if i in FAILING:
        with pytest.raises(converter.ExportError):
            converter.call_torch(model, jnp.ones((3, 5), jnp.float32))
        return "ExportError"
    x = _x(i)
    _close(converter.call_torch(model, jnp.asarray(x)), model(torch.from_numpy(x)).detach().numpy())
    return "ok"


def _to_onnx(i, modules):
    import onnxruntime as ort

    if i in FAILING:
        with pytest.raises(converter.InputValueError, match="opset"):
            modules[i].to_onnx(opset=12)
        return "InputValueError"
    model = modules[i].to_onnx()
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (y,) = sess.run(None, {sess.get_inputs()[0].name: _x(i)})
    _close(y, _jax_ref(i, _x(i)))
    return "ok"


def _save_load_from_stablehlo(i, modules):
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = f"{tmp}/m{i}.shlo"
        if i in FAILING:
            with open(path, "wb") as f:
                f.write(b"not a zip")
            with pytest.raises(converter.ParseError):
                converter.load(path)
            with pytest.raises(converter.ParseError):
                converter.from_stablehlo("func.func @main( {")
            return "ParseError"
        modules[i].save(path)
        _close(converter.load(path).to_jax()(_x(i)), _jax_ref(i, _x(i)))
    text = str(modules[i].mlir)
    _close(converter.from_stablehlo(text).to_jax()(_x(i)), _jax_ref(i, _x(i)))
    return "ok"


CALLS = [
    _from_torch,
    _from_jax,
    _from_onnx,
    _to_torch,
    _to_jax,
    _call_jax,
    _call_torch,
    _to_onnx,
    _save_load_from_stablehlo,
]


@pytest.fixture(scope="module")
def modules():
    """A converted module per thread for ``to_torch``/``to_jax``; the frontends and backends
    are imported first (with the third-party warning filters some add, such as SymPy's)
    before the process state is compared."""
    import converter.backends.onnx  # noqa: F401
    import converter.backends.torch  # noqa: F401
    import converter.frontends.onnx  # noqa: F401
    import converter.frontends.torch  # noqa: F401

    return [converter.from_jax(_jax_fn(i), _x(i)) for i in range(N)]


def _user_chatter(stop: threading.Event, logger: logging.Logger, counts: dict) -> None:
    """What an application's other thread does meanwhile: a log record, a FutureWarning and a
    stderr line, each uniquely numbered, until ``stop``."""
    k = 0
    while not stop.is_set() or k < 5:
        logger.warning("user record %d", k)
        warnings.warn(f"user future warning {k}", FutureWarning, stacklevel=1)
        print(f"user stderr line {k}", file=sys.stderr)
        k += 1
        time.sleep(0.005)
    counts["sent"] = k


def test_every_entry_point_from_eight_threads(modules, capsys):
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append
    logger = logging.getLogger("tests.user_app")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    from converter import _contract

    # the converter's two inert warning filters are in place (pytest's per-test
    # catch_warnings restores a list from before converter was imported): from here on,
    # nothing may change the process's logging, warning filters or stderr
    _contract._install_warning_filters()
    disable, filters, stderr = logging.root.manager.disable, list(warnings.filters), sys.stderr

    def thread(i: int) -> list[str]:
        return [CALLS[(i + k) % len(CALLS)](i, modules) for k in range(len(CALLS))]  # staggered

    stop, counts = threading.Event(), {}
    try:
        with warnings.catch_warnings(record=True) as caught:  # records; the filters stay as they are
            user = threading.Thread(target=_user_chatter, args=(stop, logger, counts))
            user.start()
            try:
                with ThreadPoolExecutor(N) as pool:
                    results = list(pool.map(thread, range(N)))
            finally:
                stop.set()
                user.join()
    finally:
        logger.removeHandler(handler)

    for i, tags in enumerate(results):
        want = {"ok"} if i not in FAILING else {t for t in tags if t != "ok"}
        assert set(tags) == want and len(tags) == len(CALLS), (i, tags)
    sent = counts["sent"]
    assert sent >= 5
    assert [r.getMessage() for r in records] == [f"user record {k}" for k in range(sent)]
    user_warnings = [str(w.message) for w in caught if str(w.message).startswith("user future")]
    assert user_warnings == [f"user future warning {k}" for k in range(sent)]
    err = capsys.readouterr().err
    assert [ln for ln in err.splitlines() if ln.startswith("user stderr")] == [
        f"user stderr line {k}" for k in range(sent)
    ]
    assert "def forward" not in err  # torch.export's partial graph went to the error only
    assert logging.root.manager.disable == disable
    assert warnings.filters == filters
    assert sys.stderr is stderr


def test_error_contract_is_per_thread():
    """An API call running in one thread does not make another thread's call "nested": each
    thread's outer call classifies what escapes (a raw torch error never leaks)."""
    from converter import _contract

    inside, release = threading.Event(), threading.Event()

    @_contract.api(name="slow_probe")
    def slow_probe():
        inside.set()
        release.wait(10)

    t = threading.Thread(target=slow_probe)
    t.start()
    try:
        assert inside.wait(10)
        assert not _contract.nested()
        with pytest.raises(converter.ExportError) as info:
            converter.call_torch(torch.nn.Linear(4, 2), jnp.ones((3, 5), jnp.float32))
        assert isinstance(info.value.__cause__, RuntimeError)
    finally:
        release.set()
        t.join()


def test_stop_gradient_marking_stays_in_its_thread():
    """``from_jax`` marks ``lax.stop_gradient`` as a custom call while it lowers; another
    thread's ``jax.jit`` of the same function meanwhile lowers JAX's own way (XLA runs it)."""
    from converter import _jax_internal

    def fn(x):
        return jnp.sum(jax.lax.stop_gradient(x) * x)

    x = jnp.arange(3.0)
    with _jax_internal.stop_gradient_marked():
        marked = jax.jit(fn).lower(x).as_text()
        out: list = []
        t = threading.Thread(target=lambda: out.append((jax.jit(fn).lower(x).as_text(), jax.jit(fn)(x))))
        t.start()
        t.join()
    assert _jax_internal.STOP_GRADIENT_TARGET in marked
    assert _jax_internal.STOP_GRADIENT_TARGET not in out[0][0]
    assert float(out[0][1]) == 5.0
    assert _jax_internal.STOP_GRADIENT_TARGET not in jax.jit(fn).lower(x).as_text()  # nor later


def test_eager_dtype_check_leaves_other_threads_draws_alone():
    """``call_torch`` runs a module eagerly to refuse what eager torch refuses (dtypes); its
    random ops draw nothing then, and torch's global generator is not saved and restored: a
    number another thread draws meanwhile is not drawn again afterwards."""
    drawn: list[torch.Tensor] = []

    class Drops(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(4, 2)

        def forward(self, x):
            other = threading.Thread(target=lambda: drawn.append(torch.rand(4)))
            other.start()
            other.join()
            return torch.nn.functional.dropout(self.linear(x), 0.5, training=True)

    torch.manual_seed(0)
    with pytest.raises(converter.SignatureMismatchError, match="float64"):
        converter.call_torch(Drops(), jnp.ones((3, 4), jnp.float64))  # float32 weights
    after = torch.rand(4)
    torch.manual_seed(0)
    torch.nn.Linear(4, 2)  # the same draws as Drops() made
    assert torch.equal(drawn[0], torch.rand(4)) and not torch.equal(after, drawn[0])


def test_framework_chatter_is_held_back_in_the_converting_thread_only():
    """A framework logger's record and a FutureWarning are held back in a thread inside a
    conversion (the record becomes the diagnostics), and arrive from any other thread
    meanwhile, through the same logger and the same filters."""
    from converter import _contract

    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append
    framework = logging.getLogger("torch.tests_threads_probe")
    framework.addHandler(handler)
    framework.setLevel(logging.INFO)
    inside, done, held = threading.Event(), threading.Event(), []

    def converting():
        with _contract.quiet() as text:
            framework.warning("in the converting thread")
            warnings.warn("framework future warning, converting", FutureWarning, stacklevel=1)
            inside.set()
            done.wait(10)
        held.append(text.getvalue())

    try:
        with warnings.catch_warnings(record=True) as caught:
            t = threading.Thread(target=converting)
            t.start()
            assert inside.wait(10)
            framework.warning("in another thread")
            warnings.warn("framework future warning, other", FutureWarning, stacklevel=1)
            done.set()
            t.join()
    finally:
        framework.removeHandler(handler)
    assert [r.getMessage() for r in records] == ["in another thread"]
    assert "in the converting thread" in held[0]
    assert [str(w.message) for w in caught if "framework future" in str(w.message)] == [
        "framework future warning, other"
    ]

"""State a torch model updates in place (``Signature.mutations``): BatchNorm running statistics
in training mode and user inputs torch mutates, kept by every backend and compared with eager
torch after several training-mode calls."""

from __future__ import annotations

import copy
import json
import zipfile

import jax
import numpy as np
import onnxruntime as ort
import pytest
import torch

import converter
from converter.errors import ConversionError, SignatureMismatchError
from converter.signature import UPDATE_PREFIX, Mutation
from converter.tools.embed import call_torch

BUFFERS = ["1.running_mean", "1.running_var", "1.num_batches_tracked"]


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU()).train()


def _batches(n: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return [torch.randn(2, 3, 6, 6, generator=g) * 2 + 1 for _ in range(n)]


@pytest.fixture(scope="module")
def module():
    model = _model()
    return converter.from_torch(model, (_batches(1)[0],))


def _torch_run(n: int):
    """Eager torch: the outputs and buffers after ``n`` training-mode calls."""
    model = _model()
    with torch.no_grad():
        outs = [model(x).numpy() for x in _batches(n)]
    return outs, {k: v.numpy() for k, v in model.state_dict().items() if k in BUFFERS}


def _close(actual, expected, what):
    np.testing.assert_allclose(np.asarray(actual), expected, rtol=1e-5, atol=1e-6, err_msg=what)


def test_signature_records_buffer_mutations(module):
    sig = module.signature
    assert sig.mutations == tuple(Mutation("buffer", b) for b in BUFFERS)
    assert [o.name for o in sig.outputs[1:]] == [UPDATE_PREFIX + b for b in BUFFERS]
    assert len(sig.user_outputs) == 1


def test_jax_call_updates_params_as_torch_updates_buffers(module):
    f = module.to_jax()
    outs, buffers = _torch_run(3)
    for i, x in enumerate(_batches(3)):
        _close(f(x.numpy()), outs[i], f"output of call {i}")
    for name in BUFFERS:
        _close(f.params[name], buffers[name], name)
    assert int(f.params["1.num_batches_tracked"]) == 3
    assert f.state_dict()["1.running_mean"].shape == (4,)


def test_jax_apply_mutable_returns_updates_and_is_pure(module):
    f = module.to_jax()
    x = _batches(1)[0].numpy()
    before = {k: np.asarray(v) for k, v in f.params.items()}
    plain = f.apply(f.params, x)
    out, updates = jax.jit(lambda p, v: f.apply(p, v, mutable=True))(f.params, x)
    assert isinstance(plain, jax.Array)  # without mutable: outputs only, as before
    _close(out, np.asarray(plain), "output")
    assert sorted(updates) == sorted(BUFFERS)
    for k, v in f.params.items():  # apply does not touch f.params
        np.testing.assert_array_equal(np.asarray(v), before[k])
    _, buffers = _torch_run(1)
    for name in BUFFERS:
        _close(updates[name], buffers[name], name)


def test_jax_call_under_transform_refuses_to_drop_state(module):
    f = module.to_jax()
    with pytest.raises(SignatureMismatchError, match=r"updates state.*1\.running_mean.*mutable=True"):
        jax.jit(f)(_batches(1)[0].numpy())


def test_torch_module_updates_its_buffers(module):
    tm = module.to_torch()
    outs, buffers = _torch_run(3)
    for i, x in enumerate(_batches(3)):
        _close(tm(x).detach(), outs[i], f"output of call {i}")
    state = tm.source_state_dict()
    for name in BUFFERS:
        _close(state[name].detach(), buffers[name], name)
    assert {n for n, _ in tm.named_buffers()} >= {"p_1_running_mean", "p_1_running_var"}
    assert "p_1_running_mean" not in dict(tm.named_parameters())


def test_onnx_returns_new_buffers_as_named_outputs(module):
    proto = module.to_onnx()
    names = [o.name for o in proto.graph.output]
    assert names[1:] == [UPDATE_PREFIX + b for b in BUFFERS]
    meta = {p.key: p.value for p in proto.metadata_props}
    assert json.loads(meta["converter.updates"])["updated:1.running_var"] == {
        "kind": "buffer",
        "target": "1.running_var",
    }
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    results = session.run(None, {session.get_inputs()[0].name: _batches(1)[0].numpy()})
    _, buffers = _torch_run(1)
    for name, value in zip(BUFFERS, results[1:], strict=True):
        _close(value, buffers[name], name)


def test_save_load_keeps_mutations(module, tmp_path):
    path = tmp_path / "bn.cvm"
    module.save(path)
    with zipfile.ZipFile(path) as zf:
        assert json.loads(zf.read("manifest.json"))["version"] == 2
    loaded = converter.load(path)
    assert loaded.signature.mutations == module.signature.mutations
    f = loaded.to_jax()
    f(_batches(1)[0].numpy())
    _, buffers = _torch_run(1)
    _close(f.params["1.running_mean"], buffers["1.running_mean"], "running_mean after load")


def test_jax_artifact_refuses_state(module):
    from converter.tools.cli import export_jax

    with pytest.raises(ConversionError, match=r"updates state in place.*1\.running_mean.*eval mode"):
        export_jax(module)


class AddInto(torch.nn.Module):
    """Updates its second input in place (``USER_INPUT_MUTATION``)."""

    def forward(self, x, acc):
        acc.add_(x * 2)
        return x.sum()


@pytest.fixture(scope="module")
def add_into():
    return converter.from_torch(AddInto(), (torch.ones(3), torch.zeros(3)))


def test_user_input_mutation_recorded_and_applied(add_into):
    assert add_into.signature.mutations == (Mutation("input", "args[1]"),)
    x = torch.arange(3.0)
    want = torch.full((3,), 5.0)
    AddInto()(x, want)  # eager torch: want is 5 + 2x
    acc = torch.full((3,), 5.0)
    add_into.to_torch()(x, acc)
    torch.testing.assert_close(acc, want)
    acc_np = np.full(3, 5.0, np.float32)
    f = add_into.to_jax()
    f(x.numpy(), acc_np)
    np.testing.assert_allclose(acc_np, want.numpy())
    _, updates = f.apply(f.params, x.numpy(), np.zeros(3, np.float32), mutable=True)
    np.testing.assert_allclose(np.asarray(updates["args[1]"]), 2 * x.numpy())


def test_user_input_mutation_refuses_immutable_array(add_into):
    f = add_into.to_jax()
    with pytest.raises(SignatureMismatchError, match=r"args\[1\]: the model updates this input in place"):
        f(np.ones(3, np.float32), jax.numpy.zeros(3, np.float32))


def test_call_torch_never_switches_x64_on():
    """BatchNorm's num_batches_tracked is int64: without x64 JAX would narrow it, and
    call_torch raises rather than change the process's setting."""
    with jax.enable_x64(False):
        with pytest.raises(ConversionError, match=r"num_batches_tracked \(int64\).*jax_enable_x64"):
            call_torch(_model(), _batches(1)[0].numpy())
        assert not jax.config.jax_enable_x64


@jax.enable_x64(True)
def test_call_torch_writes_buffers_back_or_returns_them():
    model, ref = _model(), _model()
    x = _batches(1)[0]
    with torch.no_grad():
        ref(x)
    call_torch(model, x.numpy())
    for name in BUFFERS:
        _close(model.state_dict()[name], ref.state_dict()[name].numpy(), name)
    with pytest.raises(SignatureMismatchError, match="mutable=True"):
        jax.jit(lambda v: call_torch(model, v))(x.numpy())
    before = copy.deepcopy(model.state_dict())
    _, updates = jax.jit(lambda v: call_torch(model, v, mutable=True))(x.numpy())
    with torch.no_grad():
        ref(x)
    for name in BUFFERS:
        _close(updates[name], ref.state_dict()[name].numpy(), name)
        torch.testing.assert_close(model.state_dict()[name], before[name])  # mutable=True: untouched


def test_roundtrip_through_jax_keeps_state(module):
    """torch → JAX → torch: the JAX function is pure (``apply(..., mutable=True)``); its
    updates come back as the new Module's mutations, so the torch module updates its buffers."""
    from converter.tools.validate import reimport

    x = _batches(1)[0]
    back = reimport("jax", module, ((x.numpy(),), {}))
    assert [m.target for m in back.signature.mutations] == sorted(f"params[{b!r}]" for b in BUFFERS)
    tm = back.to_torch()
    outs, buffers = _torch_run(2)
    for i, xb in enumerate(_batches(2)):
        _close(tm(xb).detach(), outs[i], f"output of call {i}")
    state = tm.source_state_dict()
    for name in BUFFERS:
        _close(state[f"params[{name!r}]"].detach(), buffers[name], name)


def test_validate_train_mode_model_all_targets():
    from converter.tools import validate as V

    report = V.validate(
        (_model(), (_batches(1)[0],)),
        from_="torch",
        targets=("jax", "torch", "onnx"),
        roundtrip=True,
        progress=False,
    )
    ran = [t for t in report.targets if t.status != "skipped"]
    assert len(ran) == 5 and all(t.status == "passed" for t in ran), [
        (t.target, t.reason) for t in report.targets
    ]


def test_onnx_model_read_back_keeps_state(module):
    back = converter.from_onnx(module.to_onnx())
    assert back.signature.mutations == module.signature.mutations
    assert back.signature.params[-1].kind == "parameter"  # an int64 buffer the model updates
    f = back.to_jax()
    for x in _batches(2):  # the second call reads the state the first wrote, not the file's
        f(x.numpy())
    _, buffers = _torch_run(2)
    for name in BUFFERS:
        _close(f.params[name], buffers[name], name)

"""Devices: to_jax(device=...) places parameters; inputs on another device are refused by
name; nothing moves implicitly. Runs in a subprocess with two forced host devices."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests import xla_fast

SCRIPT = textwrap.dedent(
    """
    import jax, numpy as np, pytest, torch
    import converter
    from converter import SignatureMismatchError

    d0, d1 = jax.devices()
    assert len(jax.devices()) == 2

    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    x = torch.randn(4, 3)
    f = converter.from_torch(model, (x,)).to_jax(device=d1)
    assert all(p.devices() == {d1} for p in f.params.values())

    want = model(x).detach().numpy()
    out = f(jax.device_put(x.numpy(), d1))            # already on the right device
    assert out.devices() == {d1}
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-6)
    out = f(x.numpy())                                 # host data goes to the params' device
    assert out.devices() == {d1}

    with pytest.raises(SignatureMismatchError, match=r"args\\[0\\]: input is on \\['cpu:0'\\]") as e:
        f(jax.device_put(x.numpy(), d0))
    print("ERR", e.value)

    # default: JAX's default device
    w = {"w": np.ones((3, 2), np.float32)}
    g = converter.from_jax(lambda p, a: a @ p["w"], np.ones((4, 3), np.float32), params=w)
    h = g.to_jax()
    assert h.params["params['w']"].devices() == {d0}
    with pytest.raises(SignatureMismatchError, match=r"args\\[0\\]"):
        h(jax.device_put(np.ones((4, 3), np.float32), d1))
    print("OK")
    """
)


def test_two_host_devices(tmp_path):
    script = tmp_path / "devices.py"
    script.write_text(SCRIPT)
    devices = "--xla_force_host_platform_device_count=2"
    env = {**os.environ, "XLA_FLAGS": f"{xla_fast.flags()} {devices}", "JAX_PLATFORMS": "cpu"}
    root = Path(__file__).parents[2]
    r = subprocess.run(
        [sys.executable, str(script)], env=env, cwd=root, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "OK" in r.stdout
    assert "ERR args[0]: input is on" in r.stdout

"""``convert --from jax --to torch``: the ``.pt2`` runs with torch alone (issue 3, part 5),
in a process where neither this project nor JAX can be imported."""

import subprocess
import sys
import sysconfig
import textwrap

import jax
import numpy as np

from converter.tools import cli

FACTORY = """
import jax, jax.numpy as jnp, numpy as np

def factory():
    w = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
    def fn(x, y):
        h = jnp.tanh(x @ w) + y
        return {"h": h, "m": jnp.max(h, axis=0)}
    return fn, (np.ones((2, 4), np.float32), np.full((2, 3), 0.5, np.float32))
"""


def test_pt2_runs_without_the_project_or_jax(tmp_path):
    src = tmp_path / "model.py"
    src.write_text(FACTORY)
    out = tmp_path / "model.pt2"
    assert cli.main(["--from", "jax", "--to", "torch", f"{src}:factory", "-o", str(out)]) == 0

    x = np.random.default_rng(0).normal(size=(2, 4)).astype(np.float32)
    y = np.random.default_rng(1).normal(size=(2, 3)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    code = textwrap.dedent(
        f"""
        import sys
        sys.path.append({sysconfig.get_paths()["purelib"]!r})
        for name in ("converter", "frontends", "backends", "jax", "jaxlib"):
            sys.modules[name] = None  # any import of these now fails
        import numpy as np, torch
        m = torch.export.load("model.pt2").module()
        out = m(torch.from_numpy(np.load("x.npy")), torch.from_numpy(np.load("y.npy")))
        np.save("h.npy", out["h"].detach().numpy())
        np.save("m.npy", out["m"].detach().numpy())
        assert "jax" not in sys.modules or sys.modules["jax"] is None
        """
    )
    run = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, cwd=tmp_path
    )
    assert run.returncode == 0, run.stderr[-3000:]

    jax.config.update("jax_enable_x64", True)
    w = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
    h = np.tanh(x @ w) + y
    np.testing.assert_allclose(np.load(tmp_path / "h.npy"), h, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.load(tmp_path / "m.npy"), h.max(0), rtol=1e-5, atol=1e-6)

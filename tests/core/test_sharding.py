"""Sharding: ``shard_params`` runs a converted model SPMD (issue 14 point 3), and sharded JAX
sources keep their mesh, specs, ``shard_map`` and collectives (point 4).

The multi-device checks run in one subprocess with 8 forced host devices
(``XLA_FLAGS=--xla_force_host_platform_device_count=8`` must be set before JAX starts) that
prints its findings as JSON; this process (one device) then checks that a saved 8-device
module refuses to run here.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import jax
import numpy as np
import pytest

import converter
from converter import DistributedError, ShardingError
from converter.sharding import param_specs
from converter.signature import LeafSpec, Signature
from tests import registry_coverage, xla_fast

#: A partitioned module whose ``all_reduce`` runs over ``GROUPS`` (logical device ids).
BAD_GROUPS = """
module @m attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=4, "y"=2]>
  func.func public @main(%arg0: tensor<32x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>})
      -> (tensor<32x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}) {
    %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"x"}, {"y"}]>]
        out_shardings=[<@mesh, [{"x"}, {"y"}]>] manual_axes={"x", "y"} (%arg1: tensor<8x8xf32>) {
      %1 = "stablehlo.all_reduce"(%arg1) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 0>,
          replica_groups = dense<GROUPS> : tensor<2x3xi64>, use_global_device_ids}> ({
      ^bb0(%a: tensor<f32>, %b: tensor<f32>):
        %2 = stablehlo.add %a, %b : tensor<f32>
        stablehlo.return %2 : tensor<f32>
      }) : (tensor<8x8xf32>) -> tensor<8x8xf32>
      sdy.return %1 : tensor<8x8xf32>
    } : (tensor<32x16xf32>) -> tensor<32x16xf32>
    return %0 : tensor<32x16xf32>
  }
}
"""

SCRIPT = (
    "BAD_GROUPS = "
    + repr(BAD_GROUPS)
    + textwrap.dedent(
        r"""
    import json, sys
    import jax, jax.numpy as jnp, numpy as np, optax, torch
    from jax.sharding import NamedSharding, PartitionSpec as P
    import converter
    from converter.tools import cli, inspection
    from tests import registry_coverage

    registry_coverage.install()  # the rules this process runs count for the suite's coverage check
    jax.config.update("jax_enable_x64", True)  # int64 token ids through jax.jit(f.apply)
    out = {}
    assert len(jax.devices()) == 8
    rs = np.random.RandomState(0)

    # ---------------------------------------------------------------- 3: shard_params
    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed_tokens = torch.nn.Embedding(64, 128)
            self.q_proj = torch.nn.Linear(128, 128)
            self.o_proj = torch.nn.Linear(128, 128)
            self.norm = torch.nn.LayerNorm(128)
            self.fc1 = torch.nn.Linear(128, 512)
            self.fc2 = torch.nn.Linear(512, 128)

        def forward(self, ids):
            h = self.embed_tokens(ids)
            h = h + self.o_proj(torch.tanh(self.q_proj(h)))
            return h + self.fc2(torch.nn.functional.gelu(self.fc1(self.norm(h))))

    torch.manual_seed(0)
    model = Block().eval()
    ids = torch.randint(0, 64, (8, 16))
    want = model(ids).detach().numpy()
    f = converter.from_torch(model, (ids,)).to_jax()
    x = ids.numpy()
    compiled_one = jax.jit(f.apply).lower(f.params, x).compile()
    one = np.asarray(compiled_one(f.params, x))
    out["one_device_vs_torch"] = float(np.abs(one - want).max())

    mesh8 = jax.make_mesh((8,), ("data",), axis_types=(jax.sharding.AxisType.Auto,))
    mesh_tp = jax.make_mesh((2, 4), ("data", "model"), axis_types=(jax.sharding.AxisType.Auto,) * 2)
    rules = {
        "fsdp": (mesh8, "fsdp"),
        "tp": (mesh_tp, "tp"),
        "regex": (mesh8, [(r"fc1\.weight", P("data", None)), (r"embed", P(None, "data"))]),
    }
    unsharded = compiled_one.memory_analysis().argument_size_in_bytes
    for key, (mesh, rule) in rules.items():
        sharded = converter.shard_params(f.params, mesh, rule)
        compiled = jax.jit(f.apply).lower(sharded, x).compile()  # one compile: run and measured
        got = compiled(sharded, x)
        out[key] = {
            "max_diff": float(np.abs(np.asarray(got) - one).max()),
            "specs": {k: str(v.sharding.spec) for k, v in sharded.items()},
            "bytes_ratio": compiled.memory_analysis().argument_size_in_bytes / unsharded,
        }

    # a jax.grad + optax step, sharded (fsdp) against one device
    y = rs.randn(*want.shape).astype(np.float32)
    opt = optax.sgd(0.5, momentum=0.9)  # adam would amplify rounding where a gradient is ~0

    def step(params, state, x, y):
        loss, grads = jax.value_and_grad(lambda p: jnp.mean((f.apply(p, x) - y) ** 2))(params)
        updates, state = opt.update(grads, state, params)
        return optax.apply_updates(params, updates), state, loss

    p1, _, loss1 = jax.jit(step)(f.params, opt.init(f.params), x, y)
    sharded = converter.shard_params(f.params, mesh8, "fsdp")
    p8, _, loss8 = jax.jit(step)(sharded, opt.init(sharded), x, y)
    out["train"] = {
        "loss_diff": float(abs(loss1 - loss8)),
        "param_diff": max(float(np.abs(np.asarray(p1[k]) - np.asarray(p8[k])).max()) for k in p1),
        "changed": max(float(np.abs(np.asarray(p1[k]) - np.asarray(f.params[k])).max()) for k in p1),
        "still_sharded": all(p8[k].sharding.is_equivalent_to(v.sharding, v.ndim) for k, v in sharded.items()),
    }

    # ---------------------------------------------------------------- 4: sharded sources
    mesh = jax.make_mesh((4, 2), ("x", "y"), axis_types=(jax.sharding.AxisType.Explicit,) * 2)

    def collectives(a):
        return (
            jax.lax.psum(a, "x"),
            jax.lax.all_gather(a, "y", tiled=True),
            jax.lax.psum_scatter(a, "x", scatter_dimension=0, tiled=True),
            jax.lax.ppermute(a, "x", [(i, (i + 1) % 4) for i in range(4)]),
            jax.lax.all_to_all(a, "y", 0, 1, tiled=True),
            a + jax.lax.axis_index("x") + 10 * jax.lax.axis_index("y"),
            jax.lax.pmax(a, ("x", "y")),
            jax.lax.pmin(a, ("y", "x")),
        )

    specs = (P(None, "y"), P("x", None), P("x", "y"), P("x", "y"), P("x", "y"), P("x", "y"), P(), P())
    sm = jax.shard_map(collectives, mesh=mesh, in_specs=P("x", "y"), out_specs=specs, check_vma=False)
    sm = jax.jit(sm)
    a = jax.device_put(rs.randn(32, 16).astype(np.float32), NamedSharding(mesh, P("x", "y")))
    m = converter.from_jax(sm, a)
    ops = m.op_histogram()
    out["shard_map"] = {
        "mesh": m.signature.mesh,
        "in_specs": [s.sharding for s in m.signature.inputs],
        "out_specs": [s.sharding for s in m.signature.outputs],
        "ops": sorted(k for k in ops if k.startswith("sdy.") or "all_" in k or "collective" in k
                      or k.endswith(("reduce_scatter", "partition_id"))),
    }

    def compare(fn, source, *args):
        ref, got = source(*args), fn(*args)
        ref, got = jax.tree.leaves(ref), jax.tree.leaves(got)
        return {
            "max_diff": max(float(np.abs(np.asarray(r) - np.asarray(g)).max()) for r, g in zip(ref, got)),
            "same_shardings": all(g.sharding.is_equivalent_to(r.sharding, r.ndim) for r, g in zip(ref, got)),
            "out_specs": [str(g.sharding.spec) for g in got],
        }

    out["shard_map"]["to_jax"] = compare(m.to_jax(), sm, a)
    m.save(sys.argv[1])
    out["cli_to_jax"] = cli.main([sys.argv[1], "-o", sys.argv[1] + ".jax"])  # convert x.shlo -o x.jax
    out["shard_map"]["loaded"] = compare(converter.load(sys.argv[1]).to_jax(), sm, a)
    # a mesh of another shape is refused; one of the same shape (other devices order) is fine
    try:
        m.to_jax(mesh=jax.make_mesh((2, 4), ("x", "y")))
        out["wrong_mesh"] = "no error"
    except converter.ShardingError as e:
        out["wrong_mesh"] = str(e)
    # a partially manual shard_map (manual over "x" only; "y" stays automatic)
    part = jax.shard_map(
        lambda v: jax.lax.psum(v, "x") * 2, mesh=mesh, in_specs=P("x", None), out_specs=P(), axis_names={"x"}
    )
    part = jax.jit(part)
    out["partial"] = compare(converter.from_jax(part, a).to_jax(), part, a)
    # permutations along "y" alone (pairs over all 8 devices: "x" is tried first and does not
    # fit) and over both axes at once (no single axis fits; in the last, the first two pairs
    # alone would fit "x": 0 -> 1 for y = 0 and y = 1, the next two move along "y" too)
    perms = jax.jit(jax.shard_map(
        lambda v: (
            jax.lax.ppermute(v, "y", [(0, 1), (1, 0)]),
            jax.lax.ppermute(v, ("x", "y"), [(d, (d + 3) % 8) for d in range(7)]),
            jax.lax.ppermute(v, ("x", "y"), [(0, 2), (1, 3), (2, 1), (3, 0)]),
        ),
        mesh=mesh, in_specs=P("x", "y"), out_specs=P("x", "y"), check_vma=False,
    ))
    mp = converter.from_jax(perms, a)
    out["permutes"] = compare(mp.to_jax(), perms, a)
    out["permutes"]["pairs"] = [
        len(converter.mlir.Op(o).attr("source_target_pairs"))
        for fn in converter.mlir.functions(mp.mlir).values()
        for o in converter.mlir.walk_ops(fn)
        if o.name == "stablehlo.collective_permute"
    ]
    try:  # an input committed to one device of the mesh: refused, not moved implicitly
        m.to_jax()(jax.device_put(np.asarray(a), jax.devices()[0]))
        out["one_device_input"] = "no error"
    except converter.SignatureMismatchError as e:
        out["one_device_input"] = str(e)
    rev = jax.sharding.Mesh(np.array(jax.devices()[::-1]).reshape(4, 2), ("x", "y"))
    a_rev = jax.device_put(a, NamedSharding(rev, P("x", "y")))
    got = m.to_jax(mesh=rev)(a_rev)
    out["shard_map"]["other_devices"] = {
        "max_diff": max(float(np.abs(np.asarray(r) - np.asarray(g)).max()) for r, g in zip(sm(a), got)),
        "same_shardings": all(g.sharding.mesh == rev for g in got),
        "out_specs": [str(g.sharding.spec) for g in got],
    }

    # a jitted function with NamedSharding inputs, parameters and out_shardings
    auto = jax.make_mesh((4, 2), ("x", "y"), axis_types=(jax.sharding.AxisType.Auto,) * 2)
    params = {
        "w": jax.device_put(rs.randn(8, 16).astype(np.float32), NamedSharding(auto, P(None, "y"))),
        "b": jax.device_put(rs.randn(16).astype(np.float32), NamedSharding(auto, P("y"))),
    }
    xs = jax.device_put(rs.randn(4, 8).astype(np.float32), NamedSharding(auto, P("x", None)))

    def dense(p, v):
        h = jnp.tanh(v @ p["w"]) + p["b"]
        return jax.lax.with_sharding_constraint(h, NamedSharding(auto, P(None, "y"))) * 2

    jd = jax.jit(dense, out_shardings=NamedSharding(auto, P("x", "y")))
    md = converter.from_jax(jd, xs, params=params)
    fd = md.to_jax()
    out["named"] = {
        "mesh": md.signature.mesh,
        "specs": {s.name: s.sharding for s in md.signature.all_args + md.signature.outputs},
        "param_specs": {k: str(v.sharding.spec) for k, v in fd.params.items()},
        "constraint": md.op_histogram().get("sdy.sharding_constraint", 0),
        "call": compare(lambda v: fd(v), lambda v: jd(params, v), xs),
        "numpy_input": compare(lambda v: fd(np.asarray(v)), lambda v: jd(params, v), xs),
    }
    mu = converter.from_jax(dense, xs, params=params)  # not jitted: traced with the arrays' shardings
    out["unjitted"] = {
        "specs": {s.name: s.sharding for s in mu.signature.all_args},
        "call": compare(mu.to_jax(), lambda v: jd(params, v), xs),
    }
    text = inspection.render(inspection.report(md))
    out["inspect"] = [line for line in text.splitlines() if "mesh" in line or "P(" in line]

    # the .jax artifact is for 8 devices and keeps the shardings
    exp = cli.export_jax(md)
    back = converter.from_jax(jax.export.deserialize(exp.serialize()))
    out["artifact"] = {
        "nr_devices": exp.nr_devices,
        "call": compare(exp.call, lambda v: jd(params, v), xs),
        "mesh": back.signature.mesh,
        "specs": [s.sharding for s in back.signature.inputs + back.signature.outputs],
    }
    exp_w = cli.export_jax(md, external_weights=True)
    weights = converter.shard_params(cli.artifact_weights(md), auto, [("w", P(None, "y")), ("b", P("y"))])
    out["artifact"]["external"] = compare(lambda v: exp_w.call(weights, v), lambda v: jd(params, v), xs)
    # jax.grad through a converted shard_map (psum of a replicated weight's products)
    def body(v, w):
        h = v @ w
        return jax.lax.psum(h, "x"), jnp.sin(h)

    smg = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=(P("x"), P()), out_specs=(P(), P("x"))))
    v = jax.device_put(rs.randn(16, 8).astype(np.float32), NamedSharding(mesh, P("x")))
    w = jax.device_put(rs.randn(8, 4).astype(np.float32), NamedSharding(mesh, P()))

    def loss(fn, v, w):
        s, g = fn(v, w)
        return jnp.sum(s**2) + jnp.sum(g)

    with jax.set_mesh(mesh):
        want = jax.grad(loss, argnums=(1, 2))(smg, v, w)
    fg = converter.from_jax(smg, v, w).to_jax()
    va = jax.device_put(np.asarray(v), NamedSharding(fg.mesh, P("x")))
    wa = jax.device_put(np.asarray(w), NamedSharding(fg.mesh, P()))
    got = jax.grad(loss, argnums=(1, 2))(fg, va, wa)
    rel = lambda x, y: float(np.abs(np.asarray(x) - np.asarray(y)).max() / np.abs(np.asarray(x)).max())
    out["grad"] = [rel(x, y) for x, y in zip(want, got)]

    # device groups that are no set of mesh axes: refused, naming the op
    bad = BAD_GROUPS.replace("GROUPS", "[[0, 1, 2], [3, 4, 5]]")
    try:
        converter.from_stablehlo(bad).to_jax()(np.ones((32, 16), np.float32))
        out["bad_groups"] = "no error"
    except converter.OpConversionError as e:
        out["bad_groups"] = str(e)
    out["hits"] = sorted([n, k] for n, k in registry_coverage.HITS if isinstance(k, str))
    print("JSON" + json.dumps(out))
    """
    )
)


@pytest.fixture(scope="module")
def eight(tmp_path_factory):
    """The findings of the 8-device subprocess, and the path of the 8-device module it saved."""
    tmp = tmp_path_factory.mktemp("sharding")
    script, saved = tmp / "sharding.py", tmp / "sharded.shlo"
    script.write_text(SCRIPT)
    devices = "--xla_force_host_platform_device_count=8"
    env = {**os.environ, "XLA_FLAGS": f"{xla_fast.flags()} {devices}", "JAX_PLATFORMS": "cpu"}
    root = Path(__file__).parents[2]
    env["PYTHONPATH"] = os.pathsep.join([str(root), env.get("PYTHONPATH", "")])
    r = subprocess.run(
        [sys.executable, str(script), str(saved)],
        env=env,
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-4000:]
    line = next(x for x in r.stdout.splitlines() if x.startswith("JSON"))
    out = json.loads(line[4:])
    registry_coverage.HITS.update((name, key) for name, key in out["hits"])
    return out, saved


# ------------------------------------------------------------------ 3: shard_params


def test_shard_params_results_equal_one_device(eight):
    out, _ = eight
    assert out["one_device_vs_torch"] < 1e-4
    for key in ("fsdp", "tp", "regex"):
        assert out[key]["max_diff"] < 1e-5, key


def test_fsdp_puts_one_eighth_of_the_parameters_on_each_device(eight):
    out, _ = eight
    specs = out["fsdp"]["specs"]
    assert specs["fc1.weight"] == "P('data', None)"  # (512, 128): largest dim first
    assert specs["embed_tokens.weight"] == "P(None, 'data')"  # (64, 128)
    assert specs["fc2.bias"] == "P('data',)"
    assert 0.11 < out["fsdp"]["bytes_ratio"] < 0.14  # ~1/8 (the int ids are replicated)


def test_tp_splits_columns_and_rows_megatron_style(eight):
    out, _ = eight
    specs = out["tp"]["specs"]
    assert specs["q_proj.weight"] == "P('model', None)"  # column: torch (out, in)
    assert specs["q_proj.bias"] == "P('model',)"
    assert specs["fc1.weight"] == "P('model', None)"
    assert specs["o_proj.weight"] == "P(None, 'model')"  # row: input features
    assert specs["fc2.weight"] == "P(None, 'model')"
    assert specs["o_proj.bias"] == "P()"
    assert specs["norm.weight"] == "P()"
    assert specs["embed_tokens.weight"] == "P('model', None)"  # vocabulary-parallel
    assert out["tp"]["bytes_ratio"] < 0.3  # 4-way over "model", norms and row biases replicated


def test_regex_rules(eight):
    specs = eight[0]["regex"]["specs"]
    assert specs["fc1.weight"] == "P('data', None)"
    assert specs["embed_tokens.weight"] == "P(None, 'data')"
    assert specs["fc2.weight"] == "P()"


def test_training_step_sharded_equals_unsharded(eight):
    t = eight[0]["train"]
    assert t["changed"] > 1e-3  # the step did move the parameters
    assert t["loss_diff"] < 1e-5
    assert t["param_diff"] < 1e-5
    assert t["still_sharded"]  # the new parameters keep the fsdp layout


def test_param_specs_rules_and_errors():
    mesh = jax.sharding.AbstractMesh((2, 4), ("data", "model"))
    params = {
        "params['Dense_0']['kernel']": np.zeros((8, 16)),
        "h.0.attn.c_attn.weight": np.zeros((8, 24)),
        "h.0.attn.c_proj.weight": np.zeros((8, 8)),
        "h.0.mlp.down_proj.weight": np.zeros((8, 16)),
        "lm_head.weight": np.zeros((10, 8)),  # 10 rows: not divisible by 4
    }
    specs = param_specs(params, mesh, "tp")
    assert specs["h.0.attn.c_attn.weight"] == (None, "model")  # GPT-2 Conv1D is (in, out)
    assert specs["h.0.attn.c_proj.weight"] == ("model", None)
    assert specs["h.0.mlp.down_proj.weight"] == (None, "model")
    assert specs["lm_head.weight"] is None
    assert specs["params['Dense_0']['kernel']"] is None  # not a transformer name
    fsdp = param_specs(params, mesh, "fsdp")
    assert fsdp["params['Dense_0']['kernel']"] == (None, "data")  # the "data" axis only
    with pytest.raises(ShardingError, match=r"lm_head\.weight: dimension 0 of size 10 is not divisible by 8"):
        param_specs(params, mesh, [("lm_head", jax.sharding.PartitionSpec(("data", "model")))])
    with pytest.raises(ShardingError, match=r"names axes \['z'\]"):
        param_specs(params, mesh, [("kernel", jax.sharding.PartitionSpec("z"))])
    with pytest.raises(ShardingError, match="unknown sharding rules 'zero3'"):
        converter.shard_params({}, mesh, "zero3")


def test_tp_splits_only_a_two_dimensional_embedding_by_its_vocabulary():
    """A (vocabulary, features) embedding table is vocabulary-parallel (dim 0); an
    embedding-named parameter of another rank (a 3-D patch embedding, a 1-D scale) is no
    lookup table and stays replicated."""
    mesh = jax.sharding.AbstractMesh((2, 4), ("data", "model"))
    params = {
        "embed_tokens.weight": np.zeros((8, 6)),
        "vision.embedding.weight": np.zeros((8, 4, 6)),
        "text.embedding.scale": np.zeros(8),
    }
    specs = param_specs(params, mesh, "tp")
    assert specs == {
        "embed_tokens.weight": ("model", None),
        "vision.embedding.weight": None,
        "text.embedding.scale": None,
    }


# ------------------------------------------------------------------ 4: sharded sources

_COLLECTIVES = [
    "sdy.manual_computation",
    "stablehlo.all_gather",
    "stablehlo.all_reduce",
    "stablehlo.all_to_all",
    "stablehlo.collective_permute",
    "stablehlo.partition_id",
    "stablehlo.reduce_scatter",
]


def test_shard_map_signature_records_mesh_and_specs(eight):
    s = eight[0]["shard_map"]
    assert s["mesh"] == {"x": 4, "y": 2}
    assert s["in_specs"] == [["x", "y"]]
    assert s["out_specs"][:3] == [[None, "y"], ["x", None], ["x", "y"]]
    assert s["out_specs"][6] == [None, None]
    assert set(_COLLECTIVES) <= set(s["ops"])


@pytest.mark.parametrize("how", ["to_jax", "loaded", "other_devices"])
def test_shard_map_collectives_reproduced(eight, how):
    r = eight[0]["shard_map"][how]
    assert r["max_diff"] < 1e-5
    assert r["same_shardings"], r["out_specs"]


def test_named_shardings_kept(eight):
    n = eight[0]["named"]
    assert n["mesh"] == {"x": 4, "y": 2}
    assert n["specs"] == {
        "params['b']": ["y"],
        "params['w']": [None, "y"],
        "args[0]": ["x", None],
        "outputs": ["x", "y"],
    }
    assert n["param_specs"] == {"params['b']": "P('y',)", "params['w']": "P(None, 'y')"}
    assert n["constraint"] >= 1  # with_sharding_constraint inside stays an sdy op
    for key in ("call", "numpy_input"):
        assert n[key]["max_diff"] < 1e-5
        assert n[key]["same_shardings"] and n[key]["out_specs"] == ["P('x', 'y')"]


def test_grad_through_converted_shard_map(eight):
    assert max(eight[0]["grad"]) < 1e-6  # relative to the largest gradient, against jax.grad of the source


def test_unjitted_function_keeps_its_arguments_shardings(eight):
    u = eight[0]["unjitted"]
    assert u["specs"] == {"params['b']": ["y"], "params['w']": [None, "y"], "args[0]": ["x", None]}
    assert u["call"]["max_diff"] < 1e-5


def test_input_on_one_device_of_the_mesh_refused(eight):
    msg = eight[0]["one_device_input"]
    assert msg.startswith("args[0]: input is on [") and "move it with jax.device_put" in msg
    assert "the 8 devices of its mesh" in msg


def test_partially_manual_shard_map(eight):
    p = eight[0]["partial"]
    assert p["max_diff"] < 1e-5 and p["same_shardings"], p


def test_permutations_along_one_axis_and_over_both(eight):
    """``ppermute`` along the second mesh axis, and over both axes with partial permutations
    (device 7 sends nothing: device 2 receives zeros; then pairs whose first ones fit the first
    axis alone): the same values and shardings as JAX."""
    p = eight[0]["permutes"]
    assert p["pairs"] == [8, 7, 4]
    assert p["max_diff"] == 0 and p["same_shardings"], p


def test_wrong_mesh_refused(eight):
    assert "needs a mesh {'x': 4, 'y': 2}, got a mesh {'x': 2, 'y': 4}" in eight[0]["wrong_mesh"]


def test_inspect_shows_mesh_and_specs(eight):
    lines = eight[0]["inspect"]
    assert "mesh: x=4, y=2 (8 devices)" in lines
    assert "  args[0]: float32[4, 8] P('x', None)" in lines
    assert "  outputs: float32[4, 16] P('x', 'y')" in lines
    assert any(line.startswith("  params['w']: float32[8, 16] P(None, 'y')") for line in lines)


def test_jax_artifact_for_eight_devices(eight):
    a = eight[0]["artifact"]
    assert a["nr_devices"] == 8
    assert a["call"]["max_diff"] < 1e-5 and a["call"]["same_shardings"]
    assert a["external"]["max_diff"] < 1e-5
    assert a["mesh"] == {"x": 4, "y": 2}
    assert a["specs"] == [["x", None], ["x", "y"]]


def test_collective_over_groups_matching_no_axes_refused(eight):
    msg = eight[0]["bad_groups"]
    assert msg.startswith("While converting stablehlo.all_reduce")
    assert (
        "ShardingError: device groups [[0, 1, 2], [3, 4, 5]] match no axes of the mesh {'x': 4, 'y': 2}"
        in msg
    )


def test_one_device_reduce_scatter_all_to_all_and_partition_id():
    """Over one-device groups ``reduce_scatter`` (any combiner: one value is not combined) and
    ``all_to_all`` give their operand, and ``partition_id`` is 0 (the StableHLO spec: the one
    process is partition 0)."""
    text = """
module @m attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%x: tensor<4x2xf32>) -> (tensor<4x2xf32>, tensor<4x2xf32>, tensor<ui32>) {
    %0 = "stablehlo.reduce_scatter"(%x) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>,
        replica_groups = dense<[[0]]> : tensor<1x1xi64>, scatter_dimension = 0 : i64,
        use_global_device_ids}> ({
      ^bb0(%a: tensor<f32>, %b: tensor<f32>):
        %s = stablehlo.multiply %a, %b : tensor<f32>
        stablehlo.return %s : tensor<f32>
      }) : (tensor<4x2xf32>) -> tensor<4x2xf32>
    %1 = "stablehlo.all_to_all"(%x) <{channel_handle = #stablehlo.channel_handle<handle = 2, type = 1>,
        concat_dimension = 1 : i64, replica_groups = dense<[[0]]> : tensor<1x1xi64>, split_count = 1 : i64,
        split_dimension = 0 : i64}> : (tensor<4x2xf32>) -> tensor<4x2xf32>
    %2 = stablehlo.partition_id : tensor<ui32>
    return %0, %1, %2 : tensor<4x2xf32>, tensor<4x2xf32>, tensor<ui32>
  }
}"""
    x = np.arange(8, dtype=np.float32).reshape(4, 2)
    rs, a2a, pid = converter.from_stablehlo(text).to_jax()(x)
    np.testing.assert_array_equal(np.asarray(rs), x)
    np.testing.assert_array_equal(np.asarray(a2a), x)
    assert pid.dtype == np.uint32 and int(pid) == 0


_ONE_BY_ONE = (
    BAD_GROUPS.replace("num_partitions = 8", "num_partitions = 1")
    .replace('"x"=4, "y"=2', '"x"=1, "y"=1')
    .replace("8x8xf32", "32x16xf32")
)
_NO_MESH = """
module @m attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    BODY
    return %0 : tensor<4xf32>
  }
}"""
_PERMUTE = """%0 = "stablehlo.collective_permute"(%x) <{channel_handle = #stablehlo.channel_handle<handle = 1,
        type = 1>, source_target_pairs = dense<[[0, 1], [1, 0]]> : tensor<2x2xi64>}>
        : (tensor<4xf32>) -> tensor<4xf32>"""
_MANUAL_INLINE_MESH = """%0 = sdy.manual_computation(%x) in_shardings=[<mesh<["x"=1]>, [{"x"}]>]
        out_shardings=[<mesh<["x"=1]>, [{"x"}]>] manual_axes={"x"} (%a: tensor<4xf32>) {
      sdy.return %a : tensor<4xf32>
    } : (tensor<4xf32>) -> tensor<4xf32>"""
_EMPTY_GROUPS = """%0 = "stablehlo.all_reduce"(%x) <{replica_groups = dense<> : tensor<0x0xi64>}> ({
      ^bb0(%a: tensor<f32>, %b: tensor<f32>):
        %s = stablehlo.add %a, %b : tensor<f32>
        stablehlo.return %s : tensor<f32>
      }) : (tensor<4xf32>) -> tensor<4xf32>"""


def test_all_reduce_over_every_process_of_a_one_process_module():
    """Empty ``replica_groups`` (every process) in a module of one partition and one replica:
    one group of one process, so the reduction of the single operand, the operand itself
    (StableHLO spec ``all_reduce``)."""
    x = np.arange(4, dtype=np.float32) - 1.5
    got = converter.from_stablehlo(_NO_MESH.replace("BODY", _EMPTY_GROUPS)).to_jax()(x)
    np.testing.assert_array_equal(np.asarray(got), x)


@pytest.mark.parametrize(
    "text, op, words",
    [
        pytest.param(  # empty groups over two replicas (one process: test below)
            _NO_MESH.replace("BODY", _EMPTY_GROUPS).replace("num_replicas = 1", "num_replicas = 2"),
            "stablehlo.all_reduce",
            "a collective over several devices in a module without a mesh",
            id="all-devices-without-mesh",
        ),
        pytest.param(
            _NO_MESH.replace("BODY", _PERMUTE), "stablehlo.collective_permute", "the module has no mesh"
        ),
        pytest.param(
            _NO_MESH.replace("BODY", _MANUAL_INLINE_MESH), "sdy.manual_computation", "the module has no mesh"
        ),
        pytest.param(  # empty groups: every device of the mesh, whose axes are then all taken
            _ONE_BY_ONE.replace(", use_global_device_ids", "")
            .replace("dense<GROUPS> : tensor<2x3xi64>", "dense<> : tensor<0x0xi64>")
            .replace("stablehlo.add %a", "stablehlo.multiply %a"),
            "stablehlo.all_reduce",
            "combiner mul is not supported",
            id="all-reduce-multiply",
        ),
        pytest.param(
            _ONE_BY_ONE.replace("dense<GROUPS> : tensor<2x3xi64>", "dense<[[0]]> : tensor<1x1xi64>").replace(
                "%0 = sdy.manual_computation",
                "%p = stablehlo.partition_id : tensor<ui32>\n    %0 = sdy.manual_computation",
            ),
            "stablehlo.partition_id",
            "only supported inside a manual computation over every mesh axis ['x', 'y'] (manual here: [])",
            id="partition-id-outside-manual",
        ),
        pytest.param(
            _ONE_BY_ONE.replace("dense<GROUPS> : tensor<2x3xi64>", "dense<[[0]]> : tensor<1x1xi64>")
            .replace('manual_axes={"x", "y"}', 'manual_axes={"x"}')
            .replace("%1 = ", "%p = stablehlo.partition_id : tensor<ui32>\n      %1 = "),
            "stablehlo.partition_id",
            "only supported inside a manual computation over every mesh axis ['x', 'y'] (manual here: ['x'])",
            id="partition-id-partly-manual",
        ),
        pytest.param(
            _NO_MESH.replace("BODY", _EMPTY_GROUPS)
            .replace(
                '"stablehlo.all_reduce"(%x) <{',
                '"stablehlo.reduce_scatter"(%x) <{scatter_dimension = 0 : i64, ',
            )
            .replace("stablehlo.add %a", "stablehlo.maximum %a")
            .replace("func.func", 'sdy.mesh @mesh = <["x"=1]>\n  func.func'),
            "stablehlo.reduce_scatter",
            "combiner max is not supported",
            id="reduce-scatter-max",
        ),
    ],
)
def test_collectives_refused_by_name(text, op, words):
    """What the JAX backend cannot run is refused, naming the op and why (never a wrong value)."""
    m = converter.from_stablehlo(text)
    x = np.ones([s for s in m.signature.inputs[0].shape], np.float32)
    with pytest.raises(converter.OpConversionError) as e:
        m.to_jax()(x)
    assert str(e.value).startswith(f"While converting {op}") and f"ShardingError: {words}" in str(e.value)


def test_one_device_collectives_are_identities():
    """A one-partition module's collectives run over one-device groups: XLA gives the operand."""
    text = BAD_GROUPS.replace("GROUPS", "[[0]]").replace("tensor<2x3xi64>", "tensor<1x1xi64>")
    text = text.replace("num_partitions = 8", "num_partitions = 1").replace('"x"=4, "y"=2', '"x"=1, "y"=1')
    text = text.replace("8x8xf32", "32x16xf32")
    m = converter.from_stablehlo(text)
    x = np.arange(32 * 16, dtype=np.float32).reshape(32, 16)
    want = jax.jit(lambda v: v)(x)  # an all_reduce over {0} alone leaves the value as it is
    np.testing.assert_array_equal(np.asarray(m.to_jax()(x)), np.asarray(want))


def test_convert_inspect_of_saved_module_and_artifact(eight, capsys):
    """``convert inspect`` needs no devices: here (one device) it reads the 8-device files."""
    from converter.tools import cli

    out, saved = eight
    assert out["cli_to_jax"] == 0
    assert cli.main(["inspect", str(saved)]) == 0
    text = capsys.readouterr().out
    assert "mesh: x=4, y=2 (8 devices)" in text
    assert "  args[0]: float32[32, 16] P('x', 'y')" in text
    assert "  outputs[0]: float32[8, 16] P(None, 'y')" in text
    assert cli.main(["inspect", "--json", str(saved)]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["mesh"] == {"x": 4, "y": 2}
    assert [row["sharding"] for row in rep["inputs"]] == [["x", "y"]]
    assert cli.main(["inspect", "--json", f"{saved}.jax"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["mesh"] == {"x": 4, "y": 2}
    assert [row["sharding"] for row in rep["inputs"]] == [["x", "y"]]
    assert rep["outputs"][6]["sharding"] == [None, None]


def test_fewer_devices_is_a_clear_error(eight, tmp_path, capsys):
    """This process has fewer devices than the saved module's mesh."""
    from converter.tools import cli

    _, saved = eight
    m = converter.load(saved)
    assert m.signature.mesh == {"x": 4, "y": 2} and m.signature.num_devices == 8
    with zipfile.ZipFile(saved) as zf:  # format 3: older readers refuse it rather than run one device
        assert json.loads(zf.read("manifest.json"))["version"] == 3
    assert len(jax.devices()) < 8
    with pytest.raises(ShardingError, match=r"mesh \{'x': 4, 'y': 2\} \(8 devices\) but only \d device"):
        m.to_jax()
    assert cli.main([str(saved), "-o", str(tmp_path / "one.jax")]) == 2  # the user's environment
    assert "(8 devices) but only" in capsys.readouterr().err
    assert not (tmp_path / "one.jax").exists()


def test_signature_json_keeps_mesh_and_specs_and_reads_older_files():
    leaf = LeafSpec("args[0]", (4, 8), "float32", sharding=(("x", "y"), None))
    sig = Signature((), (leaf,), (), {"kind": "leaf"}, {"kind": "leaf"}, mesh={"x": 4, "y": 2})
    d = json.loads(json.dumps(sig.to_json()))
    assert d["mesh"] == {"x": 4, "y": 2} and d["inputs"][0]["sharding"] == [["x", "y"], None]
    assert Signature.from_json(d) == sig
    old = {k: v for k, v in d.items() if k != "mesh"}
    old["inputs"] = [{k: v for k, v in d["inputs"][0].items() if k != "sharding"}]
    back = Signature.from_json(old)
    assert back.mesh is None and back.inputs[0].sharding is None and back.num_devices == 1
    plain = Signature((), (LeafSpec("x", (2,), "float32"),), (), {"kind": "leaf"}, {"kind": "leaf"})
    assert "mesh" not in plain.to_json() and "sharding" not in plain.to_json()["inputs"][0]


# --------------------------------------------------------------------------- the Shardy reader


def test_one_shardy_reader_reads_device_ids_per_the_spec():
    """Shardy's ``MeshAttr``: without ``device_ids`` the devices are iota in row-major order;
    with them, position ``i`` holds device ``device_ids[i]``; a mesh without axes is maximal
    (one device of any id). The signature's mesh is over devices in order, so a permuted
    mesh is refused there, by name, and a maximal mesh ignored."""
    from jaxlib.mlir import ir

    from converter import mlir, sdy, sharding

    permuted = sdy.parse_mesh('#sdy.mesh<["x"=2, "y"=3], device_ids=[5, 4, 3, 2, 1, 0]>')
    assert permuted.device_ids == (5, 4, 3, 2, 1, 0) and permuted.size == 6
    assert permuted.coordinates(5) == {"x": 0, "y": 0} and permuted.coordinates(0) == {"x": 1, "y": 2}
    maximal = sdy.parse_mesh("#sdy.mesh<[], device_ids=[3]>")
    assert maximal.maximal and maximal.size == 1 and maximal.coordinates(3) == {}
    assert sdy.parse_mesh('#sdy.mesh<["x"=2]>').device_ids is None
    texts = ("<[], device_ids=[0]>", "<[]>", '<["x"=2], device_ids=[0, 1]>', '<["x"=2], device_ids=[1, 0]>')
    with mlir.context():  # a mesh's text is Shardy's own (the maximal mesh of device 0 is no empty mesh)
        for text in texts:
            assert f"#sdy.mesh{sdy.parse_mesh(text)}" == str(ir.Attribute.parse(f"#sdy.mesh{text}"))
    with pytest.raises(ShardingError, match="device 7 is not in the mesh"):
        permuted.coordinates(7)
    with pytest.raises(ShardingError, match="cannot read the Shardy attribute"):
        sdy.parse_mesh('#sdy.mesh<["x"=2], device_ids=[0, 0]>')  # Shardy's verifier: not a permutation

    def module(meshes: str) -> object:
        return mlir.parse_module(
            f"module {{\n{meshes}\n  func.func public @main(%a: tensor<4xf32>) -> tensor<4xf32> {{\n"
            "    return %a : tensor<4xf32>\n  }\n}"
        )

    both = module('  sdy.mesh @maximal = <[], device_ids=[3]>\n  sdy.mesh @mesh = <["x"=2, "y"=2]>')
    assert set(sdy.meshes(both)) == {"maximal", "mesh"}
    assert sharding.module_mesh(both) == {"x": 2, "y": 2}
    order = module('  sdy.mesh @mesh = <["x"=2, "y"=2], device_ids=[3, 2, 1, 0]>')
    assert sdy.meshes(order)["mesh"].device_ids == (3, 2, 1, 0)
    with pytest.raises(ShardingError, match=r"@mesh has device_ids=\[3, 2, 1, 0\]"):
        sharding.module_mesh(order)
    assert sdy.parse_sharding('<@mesh, [{"x", "y"}, {}, {"y", ?}]>').spec == (("x", "y"), None, "y")


def test_shardy_reader_refusals_and_shard_shapes():
    """Each form the converter does not run is refused by name; a sharding's text, one
    shard's shape (or why the value does not split) and the spec helpers."""
    from converter import sdy, sharding

    with pytest.raises(ShardingError, match=r"^mesh @m: #sdy.sharding<@x, \[\]> is not an #sdy.mesh$"):
        sdy.parse_mesh("#sdy.sharding<@x, []>", "m")
    with pytest.raises(ShardingError, match="device ids must be iota"):  # Shardy's own check
        sdy.parse_mesh('#sdy.mesh<["x"=2], device_ids=[0, 2]>')
    with pytest.raises(ShardingError, match=r'^#sdy.mesh<\["x"=2\]> is not an #sdy.sharding$'):
        sdy.parse_sharding('#sdy.mesh<["x"=2]>')
    for text, why in [
        ('<mesh<["x"=2]>, [{"x"}]>', r"only shardings over a named mesh \(@name\) are supported"),
        ('<@mesh, [{}], unreduced={"x"}>', "unreduced axes are not supported"),
        ('<@mesh, [{"x":(1)2}]>', r"sub-axes \(#sdy<axis_ref\"x\":\(1\)2>\) are not supported"),
    ]:
        with pytest.raises(ShardingError, match=rf"^sharding #sdy.sharding{re.escape(text[:6])}.*: {why}$"):
            sdy.parse_sharding(text)
    with pytest.raises(ShardingError, match=r"is not an #sdy.sharding_per_value$"):
        sdy.parse_sharding_list('#sdy.sharding<@mesh, [{"x"}]>')

    mesh = sdy.parse_mesh('#sdy.mesh<["x"=2, "y"=3]>')
    s = sdy.parse_sharding('<@mesh, [{"x", "y"}, {}]>')
    assert str(s) == '<@mesh, [{"x", "y"}, {}]>' and s.spec == (("x", "y"), None)
    assert s.local_shape((12, 5), mesh, "w") == (2, 5)
    with pytest.raises(
        DistributedError, match=r"^w: dimension 0 of size 9 does not split into 6 equal shards$"
    ):
        s.local_shape((9, 5), mesh, "w")
    with pytest.raises(
        DistributedError, match=r'^w: sharding <@mesh, \[\{"x", "y"\}, \{\}\]> has 2 dimensions, the value 1$'
    ):
        s.local_shape((12,), mesh, "w")

    spec = ("x", None, ("y", "z"))
    assert sharding.spec_to_json(spec) == ["x", None, ["y", "z"]]
    assert sharding.spec_from_json(["x", None, ["y", "z"]]) == spec
    assert sharding.spec_to_json(None) is None and sharding.spec_from_json(None) is None
    assert sharding.format_spec(spec) == "P('x', None, ('y', 'z'))" and sharding.format_spec(None) == "P()"
    assert [sharding.is_replicated(v) for v in (None, (None, None), ("x", None))] == [True, True, False]


def test_meshes_from_shardy_round_trip_attributes_and_several_meshes_refused():
    from converter import mlir, sdy, sharding

    body = "func.func public @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n  return %a : tensor<4xf32>\n}"
    meshes = '{xla.sdy.meshes = "{mesh = #sdy.mesh<[\\"x\\"=2]>}"}'
    text = "module attributes {mhlo.frontend_attributes = " + meshes + "} {\n" + body + "\n}"
    module = mlir.parse_module(text)
    assert sdy.meshes(module) == {"mesh": sdy.Mesh((("x", 2),))} and sharding.module_mesh(module) == {"x": 2}
    two = mlir.parse_module('module {\n  sdy.mesh @a = <["x"=2]>\n  sdy.mesh @b = <["x"=4]>\n' + body + "\n}")
    with pytest.raises(
        ShardingError, match=r"^the module uses several meshes \{'a': \{'x': 2\}, 'b': \{'x': 4\}\}"
    ):
        sharding.module_mesh(two)


def test_param_specs_fsdp_on_a_mesh_without_a_data_axis():
    """Without an axis named fsdp/data/dp, fsdp shards over every axis together; a parameter
    with no dimension that divides is replicated; a spec longer than the shape is refused."""
    mesh = jax.sharding.AbstractMesh((2, 2), ("a", "b"))
    specs = param_specs({"w": np.zeros((3, 8)), "odd": np.zeros((3, 5))}, mesh, "fsdp")
    assert specs == {"w": (None, ("a", "b")), "odd": None}
    with pytest.raises(
        ShardingError,
        match=r"^w: spec P\('a', None, None\) has more entries than the parameter's shape \[3, 8\]",
    ):
        param_specs({"w": np.zeros((3, 8))}, mesh, [("w", jax.sharding.PartitionSpec("a", None, None))])


# --------------------------------------------------------------------------- in-process checks of
# the JAX backend's device-group reading (the 8-device runs above are a subprocess)


def _fake_op(**attrs):
    from types import SimpleNamespace

    return SimpleNamespace(attr=lambda name, default=None: attrs.get(name, default))


def _fake_interp(mesh: dict[str, int] | None, manual: tuple[str, ...] = ()):
    from types import SimpleNamespace

    return SimpleNamespace(mesh=None if mesh is None else SimpleNamespace(shape=mesh), manual_axes=manual)


def test_device_groups_read_as_mesh_axes():
    """``replica_groups`` over logical device ids (row-major positions of the mesh x=4, y=2:
    id ``2 * x + y``; spec ``all_reduce`` with ``use_global_device_ids``) name the mesh axes
    their groups run along, in the order the groups enumerate them; -1 pads a group."""
    from converter.backends.jax.ops import sharding as s

    interp = _fake_interp({"x": 4, "y": 2})

    def axes(groups):
        return s._axes_of_groups(interp, _fake_op(replica_groups=np.array(groups, np.int64)))

    assert s._groups(_fake_op(replica_groups=np.array([[0, 1, 2, -1], [3, 4, 5, 6]]))) == [
        [0, 1, 2],
        [3, 4, 5, 6],
    ]
    assert s._groups(_fake_op(replica_groups=np.zeros((0, 0), np.int64))) is None
    assert axes([[0, 1], [2, 3], [4, 5], [6, 7]]) == ("y",)
    assert axes([[0, 2, 4, 6], [1, 3, 5, 7]]) == ("x",)
    assert axes([[0, 1, 2, 3, 4, 5, 6, 7]]) == ("x", "y")
    assert axes([[0, 2, 4, 6, 1, 3, 5, 7]]) == ("y", "x")
    assert axes([[k] for k in range(8)]) == ()
    assert axes(np.zeros((0, 0), np.int64)) == ("x", "y")  # every device
    with pytest.raises(
        ShardingError, match=r"device groups \[\[0, 1, 2, 3\], \[4, 5, 6, 7\]\] match no axes"
    ):
        axes([[0, 1, 2, 3], [4, 5, 6, 7]])  # x's first half with y: no axes of this mesh
    with pytest.raises(ShardingError, match="several devices in a module without a mesh"):
        s._axes_of_groups(_fake_interp(None), _fake_op(replica_groups=np.array([[0, 1]])))


def test_manual_computation_specs_keep_only_manual_axes():
    """``shard_map``'s specs name only the manual axes: the others are dropped from each
    dimension's axes (a dimension left with none is replicated)."""
    from converter.backends.jax.ops import sharding as s
    from jax.sharding import PartitionSpec as P

    got = s._manual_spec((("x", "z"), ("z", "y"), "y", None, "z", ("x", "y")), {"x", "y"})
    assert got == P("x", "y", "y", None, None, ("x", "y"))


@pytest.mark.parametrize(
    ("mesh", "pairs", "want"),
    [
        # y swapped in every row of x: a permutation along y alone
        ({"x": 4, "y": 2}, [(0, 1), (1, 0), (2, 3), (3, 2), (4, 5), (5, 4), (6, 7), (7, 6)],
         ("y", [(0, 1), (1, 0)])),
        # x shifted by one for each y: along x alone
        ({"x": 4, "y": 2}, [(0, 2), (2, 4), (4, 6), (6, 0), (1, 3), (3, 5), (5, 7), (7, 1)],
         ("x", [(0, 1), (1, 2), (2, 3), (3, 0)])),
        # y swapped only where x == 0: over both axes, the pairs themselves
        ({"x": 4, "y": 2}, [(0, 1), (1, 0)], (("x", "y"), [(0, 1), (1, 0)])),
        # the first pairs move along x, the later ones leave it: over both axes
        ({"x": 2, "y": 2}, [(0, 2), (1, 3), (2, 1), (3, 0)], (("x", "y"), [(0, 2), (1, 3), (2, 1), (3, 0)])),
        # a different permutation of y in each row of x: over both axes
        ({"x": 2, "y": 2}, [(0, 1), (1, 0), (2, 2), (3, 3)], (("x", "y"), [(0, 1), (1, 0), (2, 2), (3, 3)])),
    ],
)  # fmt: skip
def test_collective_permute_along_the_fewest_axes(monkeypatch, mesh, pairs, want):
    """``source_target_pairs`` (logical device ids, row-major in the mesh) become one
    ``ppermute`` along the fewest mesh axes whose permutation is the same in every position
    of the other axes, else over all axes with the pairs as they are (spec
    ``collective_permute``)."""
    from converter.backends.jax.ops import sharding as s

    def ppermute(x, axis_name, perm):  # one axis by its name or as a 1-tuple: the same to JAX
        return (axis_name if isinstance(axis_name, str) or len(axis_name) > 1 else axis_name[0]), sorted(perm)

    monkeypatch.setattr(jax.lax, "ppermute", ppermute)
    op = _fake_op(source_target_pairs=np.array(pairs, np.int64))
    assert s._collective_permute(_fake_interp(mesh), op, None) == want


def test_partition_id_is_the_row_major_device_position(monkeypatch):
    """``partition_id`` inside a manual computation over every axis is the device's logical
    id: its row-major position in the mesh (x=2, y=3, z=2 at (1, 2, 1): 1*6 + 2*2 + 1)."""
    import jax.numpy as jnp
    from converter.backends.jax.ops import sharding as s

    index = {"x": 1, "y": 2, "z": 1}
    monkeypatch.setattr(jax.lax, "axis_index", lambda a: jnp.asarray(index[a], jnp.int32))
    got = s._partition_id(_fake_interp({"x": 2, "y": 3, "z": 2}, ("z", "x", "y")), _fake_op())
    assert got.dtype == np.uint32 and int(got) == 11


def test_device_mismatch_names_one_device_or_the_mesh():
    """Where a function runs, as its device-mismatch error says: its one device by name, or
    the count of its mesh's devices with how to lay an input out on them."""
    from converter.backends.jax.function import _where

    assert _where({"TFRT_CPU_3"}) == "TFRT_CPU_3"
    two = _where({"TFRT_CPU_0", "TFRT_CPU_1"})
    assert two.startswith("the 2 devices of its mesh") and "NamedSharding on f.mesh" in two

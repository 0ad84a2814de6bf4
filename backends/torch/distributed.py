"""Partitioned modules on ``torch.distributed``: one rank per partition.

A module lowered from ``jax.jit(shard_map(f, mesh, in_specs, out_specs))`` on N devices has
``mhlo.num_partitions = N`` and its work in an ``sdy.manual_computation`` whose body is
written for one device's shards. :func:`partition_plan` reads how every ``@main`` argument
and result is split (:mod:`converter.sdy`); :class:`DistributedTorchModule` is the module
each rank of ``torch.distributed``'s default process group (world size N) calls with its own
shards and which returns its own result shards. Rank ``r`` runs partition ``r``: its shards
are those of the mesh position whose device id is ``r`` (position ``r`` unless the mesh has
``device_ids``), as JAX assigns ``mesh.devices.flat[r]``. The collectives in the body are
``torch.distributed`` functional collectives (:mod:`converter.backends.torch.ops.collectives`).

Only programs whose ``@main`` is manual computations are run: an op between them or around
them works on whole (global) arrays, which XLA would partition itself; this backend refuses it
(:class:`converter.DistributedError`) rather than run it on shards.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch
from jaxlib.mlir import ir

from converter import dtypes, mlir, sdy
from converter.errors import DistributedError, SignatureMismatchError
from converter.module import Module
from converter.signature import Signature, check_leaf, flatten, input_path, unflatten

from ._util import CARRIED, STORAGE
from .module import TorchModule, build_graph, input_tensor
from .ops.collectives import Communicator


@dataclass(frozen=True)
class PartitionPlan:
    """How a partitioned module's ``@main`` arguments and results are split.

    Attributes:
        num_partitions: N, the number of ranks that run it.
        mesh: the mesh every sharding refers to.
        args: one sharding per ``@main`` argument.
        results: one sharding per ``@main`` result.
    """

    num_partitions: int
    mesh: sdy.Mesh
    args: tuple[sdy.Sharding, ...]
    results: tuple[sdy.Sharding, ...]


def _replicated(mesh: str, rank: int) -> sdy.Sharding:
    return sdy.Sharding(mesh, ((),) * rank)


# Shardy's "round-trip" form, which JAX's portable-artifact serializer writes (what
# Module.save stores): the manual computation becomes custom calls around a call of its body,
# the shardings frontend attributes
_GLOBAL_TO_LOCAL = "xla.sdy.GlobalToLocalShape"
_LOCAL_TO_GLOBAL = "xla.sdy.LocalToGlobalShape"
_RESULT_SHARDING = "xla.sdy.FuncResultSharding"
_BODY = "xla.sdy.manual_computation_body"


def _attr_sharding(fn: ir.Operation, i: int) -> sdy.Sharding | None:
    """Argument ``i``'s sharding attribute (``sdy.sharding``, or its round-trip form)."""
    if "arg_attrs" not in fn.attributes:
        return None
    attrs = mlir.decode_attribute(ir.ArrayAttr(fn.attributes["arg_attrs"])[i])
    text = attrs.get("sdy.sharding") or attrs.get("mhlo.frontend_attributes", {}).get("xla.sdy.sharding")
    return None if text is None else sdy.parse_sharding(str(text))


def _frontend(op: mlir.Op, key: str) -> str:
    return op.attr("mhlo.frontend_attributes", {}).get(key, "")


class _Planner:
    """Walks ``@main`` recording the sharding of every value a manual computation reads or
    writes (see :func:`partition_plan`)."""

    def __init__(self, meshes: dict[str, sdy.Mesh]):
        self.meshes = meshes
        self.mesh_name: str | None = None
        self.shardings: dict[Any, sdy.Sharding] = {}
        self.local: set = set()  # values inside a round-trip manual computation (shards)
        self.tuples: dict[Any, list[sdy.Sharding]] = {}  # a tuple of whole arrays: their splits

    def use(self, shardings: list[sdy.Sharding], where: str) -> None:
        for s in shardings:
            if self.mesh_name not in (None, s.mesh):
                raise DistributedError(f"{where}: shardings over two meshes (@{self.mesh_name}, @{s.mesh})")
            self.mesh_name = s.mesh
        if self.mesh_name is not None and self.mesh_name not in self.meshes:
            raise DistributedError(f"{where}: sharding over an undefined mesh @{self.mesh_name}")

    def manual_axes(self, axes: tuple[str, ...], where: str) -> None:
        if self.mesh_name is None:
            return
        auto = [a for a, size in self.meshes[self.mesh_name].axes if size > 1 and a not in axes]
        if auto:
            raise DistributedError(
                f"{where}: mesh axes {auto} stay automatic (shard_map with axis_names a subset of the "
                "mesh); only fully manual shard_map is supported"
            )

    def read(self, values: list, shardings: list[sdy.Sharding], where: str) -> None:
        for value, s in zip(values, shardings, strict=True):
            prev = self.shardings.get(value)
            if prev is not None and prev.dims != s.dims:
                raise DistributedError(
                    f"{where}: a value split as {prev} is read as {s}: resharding between manual "
                    "computations is not supported"
                )
            self.shardings[value] = s

    def write(self, values: list, shardings: list[sdy.Sharding]) -> None:
        self.shardings.update(zip(values, shardings, strict=True))

    def op(self, op: mlir.Op) -> None:
        where = f"{op.name} at {op.location or 'an unknown location'}"
        target = op.attr("call_target_name") if op.name == "stablehlo.custom_call" else None
        if op.name == "sdy.manual_computation":
            ins = sdy.parse_sharding_list(op.attr("in_shardings"))
            outs = sdy.parse_sharding_list(op.attr("out_shardings"))
            self.use(ins + outs, where)
            self.manual_axes(sdy.manual_axes(op.attr("manual_axes", "")), where)
            self.read(op.operands, ins, where)
            self.write(op.results, outs)
        elif target == _GLOBAL_TO_LOCAL:
            ins = sdy.parse_sharding_list(_frontend(op, "xla.sdy.in_shardings"))
            self.use(ins, where)
            self.manual_axes(sdy.manual_axes(_frontend(op, "xla.sdy.manual_axes")), where)
            self.read(op.operands, ins, where)
            self.local.update(op.results)
        elif op.name == "stablehlo.get_tuple_element" and op.operands[0] in self.local:
            self.local.update(op.results)  # XLA's form: the custom calls of several values give tuples
        elif op.name == "stablehlo.get_tuple_element" and op.operands[0] in self.tuples:
            self.write(op.results, [self.tuples[op.operands[0]][op.attr("index")]])
        elif op.name == "func.call" and str(op.attr("callee")).startswith(_BODY):
            if not all(v in self.local for v in op.operands):
                raise DistributedError(f"{where}: the manual computation reads values not split for it")
            self.local.update(op.results)
        elif target == _LOCAL_TO_GLOBAL:
            outs = sdy.parse_sharding_list(_frontend(op, "xla.sdy.out_shardings"))
            self.use(outs, where)
            if not all(v in self.local for v in op.operands):
                raise DistributedError(f"{where}: reads values not computed by the manual computation")
            if len(op.results) == 1 and len(outs) > 1:
                self.tuples[op.results[0]] = outs
            else:
                self.write(op.results, outs)
        elif target == _RESULT_SHARDING and op.operands[0] in self.shardings:
            self.write(op.results, [self.shardings[op.operands[0]]])
        else:
            raise DistributedError(
                f"{where} runs outside shard_map on whole (unpartitioned) arrays; the torch backend "
                "runs only the manual computation: put the whole jitted function inside shard_map"
            )


def _has_manual(block: ir.Block) -> bool:
    for op in block.operations:
        op = op.operation
        if op.name == "sdy.manual_computation":
            return True
        if op.name == "stablehlo.custom_call" and mlir.Op(op).attr("call_target_name") == _GLOBAL_TO_LOCAL:
            return True
    return False


def _needed(operations: list[ir.Operation]) -> set[ir.Operation]:
    """The operations of a block (``operations``, its terminator last) that its terminator
    depends on."""
    defs = {r: op for op in operations for r in op.results}
    needed: set[ir.Operation] = set()
    stack = [operations[-1]]
    while stack:
        op = stack.pop()
        if op in needed:
            continue
        needed.add(op)
        stack.extend(defs[v] for v in op.operands if v in defs)
    return needed


def partition_plan(module: Module) -> PartitionPlan | None:
    """The plan of a partitioned module, or ``None`` for a one-partition module and for a
    module whose partitioning is left to XLA (``jax.jit`` of sharded inputs, no
    ``shard_map``): its ops mean the same on whole arrays, so it runs as one process. Reads
    ``sdy.manual_computation`` as JAX lowers it and Shardy's round-trip form (custom calls
    ``xla.sdy.GlobalToLocalShape``/``LocalToGlobalShape`` around a call of the body, as XLA
    writes it: ``jax.extend.mlir.hlo_to_stablehlo`` of a jitted ``shard_map``'s HLO, whose
    module has no ``mhlo.num_partitions``: the mesh's size is the number of partitions then).

    Raises:
        DistributedError: the module has more than one replica, an op of ``@main`` outside
            a manual computation (named with its location), a manual computation leaving
            mesh axes automatic, a value shared by two manual computations under different
            shardings, or a mesh whose size is not the number of partitions.
    """
    ir_module = module.mlir
    n = sdy.num_partitions(ir_module)
    meshes = sdy.meshes(ir_module)
    main = mlir.main_function(ir_module)
    block = main.regions[0].blocks[0]
    if sdy.num_replicas(ir_module) != 1:  # a one-partition module's too: its collectives span replicas
        raise DistributedError(
            f"the module has {sdy.num_replicas(ir_module)} replicas: only one is supported"
        )
    if n == 1 and all(m.size == 1 for m in meshes.values()):
        return None
    if not _has_manual(block):
        return None  # shardings alone (jit of sharded inputs): whole-array semantics, one process
    planner = _Planner(meshes)
    args = list(block.arguments)
    operations = [op.operation for op in block.operations]
    needed = _needed(operations)
    for operation in operations[:-1]:  # the last is func.return
        if operation in needed:  # XLA's HLO keeps results' reshapes nothing uses
            planner.op(mlir.Op(operation))
    name = planner.mesh_name
    if name is not None and "mhlo.num_partitions" not in ir_module.operation.attributes:
        n = meshes[name].size  # a module from XLA's HLO: the count was a compile option, not kept
    if name is None or meshes[name].size != n:
        raise DistributedError(
            f"the module has {n} partitions but its mesh has {meshes[name].size if name else 1} devices"
        )
    arg_sh = []
    for i, arg in enumerate(args):
        rank = len(mlir.tensor_type(arg.type).shape)
        arg_sh.append(planner.shardings.get(arg) or _attr_sharding(main, i) or _replicated(name, rank))
    res_sh = []
    for i, value in enumerate(operations[-1].operands):
        s = planner.shardings.get(value)
        if s is None:
            raise DistributedError(f"result {i} of @main is not computed by the manual computation")
        res_sh.append(s)
    return PartitionPlan(n, meshes[name], tuple(arg_sh), tuple(res_sh))


def local_signature(sig: Signature, plan: PartitionPlan) -> Signature:
    """``sig`` with every kept argument and every output of the shape of one shard.

    Raises:
        DistributedError: a dimension does not split evenly (names the argument).
    """
    args = list(sig.all_args)
    kept = range(len(args)) if sig.kept_var_idx is None else sig.kept_var_idx
    for j, i in enumerate(kept):
        spec = args[i]
        args[i] = replace(spec, shape=plan.args[j].local_shape(tuple(spec.shape), plan.mesh, spec.name))
    outputs = tuple(
        replace(o, shape=s.local_shape(tuple(o.shape), plan.mesh, o.name))
        for o, s in zip(sig.outputs, plan.results, strict=True)
    )
    return sig.with_all_args(args).replace(outputs=outputs)


def local_shard(value: Any, sharding: sdy.Sharding, mesh: sdy.Mesh, partition: int) -> Any:
    """Partition ``partition``'s shard of the whole array ``value`` (a NumPy array or torch
    tensor; torch tensors give views)."""
    counts = sharding.counts(mesh)
    index = sharding.shard_index(mesh, partition)
    slices = tuple(
        slice(i * (n // k), (i + 1) * (n // k)) for n, k, i in zip(value.shape, counts, index, strict=True)
    )
    return value[slices]


class DistributedTorchModule(TorchModule):
    """A partitioned module (``shard_map`` on N devices) as the module each rank of
    ``torch.distributed``'s default process group runs.

    ``forward(*args, **kwargs)`` takes the inputs of the source function with each array
    replaced by this rank's shard (the part ``in_specs`` gives the device of partition id
    ``rank``; :meth:`shard_inputs` cuts them from whole arrays) and returns this rank's
    shards of the outputs (what that device computes; replicated outputs whole). The graph
    is traced on the first call, when the process group exists (every rank must call: the
    collectives, and the creation of their process groups, involve all ranks). Parameters
    (``from_jax(params=...)``) are held whole, and each call uses this rank's shards of them.

    Outputs carry no gradient: the collectives are run without autograd.

    Attributes:
        plan: the :class:`PartitionPlan` (mesh, each argument's and result's sharding).
        num_partitions: the world size the module needs.

    Raises:
        DistributedError: on call, without an initialized default process group of world
            size :attr:`num_partitions`.
        SignatureMismatchError: on call, an input that is not this rank's shard's shape.
    """

    def __init__(self, module: Module, plan: PartitionPlan, device: torch.device | str | None = None):
        super().__init__(module, None, device)
        self.plan = plan
        self.num_partitions = plan.num_partitions
        self._local = Module(module.mlir, local_signature(module.signature, plan), module.params)
        self._dynamic_module = None
        self._rank_graphs: dict[int, torch.fx.GraphModule] = {}
        kept = (
            range(len(self.signature.all_args))
            if self.signature.kept_var_idx is None
            else self.signature.kept_var_idx
        )
        self._arg_sharding = dict(zip(kept, plan.args, strict=True))

    def rank(self) -> int:
        """This process's rank in the default process group (= the partition it runs).

        Raises:
            DistributedError: no default process group, or one of another size.
        """
        import torch.distributed as dist

        n = self.num_partitions
        if not (dist.is_available() and dist.is_initialized()):
            raise DistributedError(
                f"this module runs as {n} partitions, one per rank: call "
                f"torch.distributed.init_process_group(world_size={n}, ...) in each of {n} processes first"
            )
        if dist.get_world_size() != n:
            raise DistributedError(
                f"this module runs as {n} partitions, but the default process group has world size "
                f"{dist.get_world_size()}"
            )
        return dist.get_rank()

    def shard_inputs(self, *args: Any, rank: int | None = None, **kwargs: Any) -> tuple[tuple, dict]:
        """``(args, kwargs)`` of whole arrays cut to partition ``rank``'s shards (default:
        this process's rank), ready for ``forward(*args, **kwargs)``."""
        rank = self.rank() if rank is None else rank
        sig = self.signature
        leaves = flatten((args, kwargs), sig.in_tree)
        n_params = len(sig.params)
        shards = []
        for k, (_, value) in enumerate(leaves):
            sharding = self._arg_sharding.get(n_params + k)
            shards.append(value if sharding is None else local_shard(value, sharding, self.plan.mesh, rank))
        return unflatten(sig.in_tree, shards)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        rank = self.rank()
        sig, local = self.signature, self._local.signature
        leaves = flatten((args, kwargs), sig.in_tree)
        flat = []
        for i, a in enumerate(self._attrs):
            value = getattr(self, a)
            sharding = self._arg_sharding.get(i)
            flat.append(value if sharding is None else local_shard(value, sharding, self.plan.mesh, rank))
        for k, ((path, value), spec) in enumerate(zip(leaves, local.inputs, strict=True)):
            try:
                check_leaf(input_path(path), value, spec)
            except SignatureMismatchError as e:
                whole = sig.inputs[k].shape
                sharding = self._arg_sharding.get(len(sig.params) + k)
                raise SignatureMismatchError(
                    f"{e} (rank {rank} takes its shard of the whole {list(whole)}, split as {sharding})"
                ) from None
            flat.append(input_tensor(input_path(path), value, spec, self.device))
        if sig.kept_var_idx is not None:
            flat = [flat[i] for i in sig.kept_var_idx]
        with torch.no_grad():
            outs = list(self._rank_graph(rank)(*flat))
        for i, spec in enumerate(sig.outputs):
            if spec.dtype in STORAGE and spec.dtype not in CARRIED:  # carried types stay in storage
                outs[i] = outs[i].to(dtypes.torch_dtype(spec.dtype))
        return unflatten(sig.out_tree, outs)

    def _rank_graph(self, rank: int) -> torch.fx.GraphModule:
        if rank not in self._rank_graphs:
            comm = Communicator(rank, self.num_partitions)
            self._rank_graphs[rank] = build_graph(self._local, self.device, comm=comm)
        return self._rank_graphs[rank]


def to_torch_distributed(
    module: Module, plan: PartitionPlan, device: torch.device | str | None
) -> DistributedTorchModule:
    """The :class:`DistributedTorchModule` of a partitioned module (see :func:`to_torch`).

    Raises:
        DistributedError: state updates, random ops or dynamic shapes, which partitioned
            modules do not support yet; shards of unequal size.
    """
    sig = module.signature
    if sig.mutations:
        raise DistributedError("a partitioned module that updates state in place is not supported")
    if sig.rng is not None:
        raise DistributedError("a partitioned module with random ops (signature.rng) is not supported")
    local_signature(sig, plan)  # unequal shards raise here, before any process group is needed
    return DistributedTorchModule(module, plan, device)


__all__ = ["DistributedTorchModule", "PartitionPlan", "local_shard", "local_signature", "partition_plan"]

"""Reading ``.pt2`` files (``torch.export.save``) without running code from them.

``torch.export.load`` is not safe on untrusted files: it unpickles with
``torch.load(weights_only=False)`` every weight or constant its config marks
``"use_pickle": true``, every opaque constant (``pickle.loads``), and the sample inputs or
legacy payloads whenever torch's restricted loader refuses them; it loads AOTInductor
shared libraries found under ``data/aotinductor/``; its graph nodes may name any ``torch.*``
or ``_operator`` callable (``torch.hub.load``, ``operator.call``), which running or
re-tracing the program calls; and it passes the symbolic shape
expressions of the program (``expr_str``) to ``sympy.sympify``, which evaluates them as
Python. :func:`check_pt2` inspects the archive before any of that happens and refuses what
would run code, unless the caller opts in with ``trust_pickle=True``; :func:`load_pt2`
checks, then loads. See ``docs/security.md``.
"""

from __future__ import annotations

import io
import json
import os
import re
import zipfile
from pathlib import Path
from typing import Any

from .. import ziparchive
from ..errors import ParseError, UntrustedInputError
from ..fileio import check_inflate, check_size

#: Names ``sympy.sympify`` may see in a shape expression besides shape symbols (``s0``, ``u3``):
#: torch writes them with ``sympy.srepr`` (``Add(Symbol('s0', positive=True, integer=True),
#: Integer(1))``), so sympy's class names, torch's sympy functions (the deserializer's
#: locals) and the assumption keywords.
_SYMPY_NAMES = frozenset(
    """Add Mul Pow Symbol Dummy Integer Rational Float Half One Zero NegativeOne Infinity
    NegativeInfinity ComplexInfinity NaN BooleanTrue BooleanFalse Equality Unequality
    StrictLessThan LessThan StrictGreaterThan GreaterThan Eq Ne Lt Le Gt Ge And Or Not Xor
    Max Min Mod floor ceiling Abs sign Piecewise ExprCondPair Tuple ITE sqrt exp log
    true false oo zoo nan True False None
    CeilDiv CeilToInt CleanDiv FloatPow FloatTrueDiv FloorDiv FloorToInt IntTrueDiv Identity
    IsNonOverlappingAndDenseIndicator LShift ModularIndexing PowByNatural PythonMod RShift
    RoundDecimal RoundToInt ToFloat TruncToFloat TruncToInt Where
    positive negative nonnegative nonpositive integer real finite infinite zero nonzero
    commutative rational even odd prime composite complex imaginary hermitian precision evaluate
    extended_real extended_positive extended_negative extended_nonnegative extended_nonpositive""".split()
)
_NAME_PATTERNS = re.compile(r"[a-z]+[0-9]+|OpaqueUnaryFn_[a-z0-9]+|BitwiseFn_[a-z_]+")
_TOKEN = re.compile(
    r"""\s+|'[^'\\\n]*'|"[^"\\\n]*"|[0-9]+\.[0-9]*(?:[eE][-+]?[0-9]+)?|[0-9]+|[A-Za-z_][A-Za-z0-9_]*"""
    r"|\*\*|//|[-+*/%()<>=!,&|~^]"
)


def _safe_expr(expr: str) -> bool:
    """Whether ``expr`` is a plain expression over shape symbols: calls of the sympy names
    above, numbers, quoted plain strings (symbol names), keyword arguments and operators; no
    other names, no attributes (``.``), subscripts or double underscores."""
    pos = 0
    while pos < len(expr):
        m = _TOKEN.match(expr, pos)
        if m is None:
            return False
        tok = m.group()
        if tok[0].isalpha() or tok[0] == "_":
            if "__" in tok or (tok not in _SYMPY_NAMES and not _NAME_PATTERNS.fullmatch(tok)):
                return False
        pos = m.end()
    return True


#: ``_operator`` functions a graph node may call: arithmetic, comparisons, indexing (not
#: ``call``, ``attrgetter``, ``methodcaller``, ``setitem``: with those a graph reaches any
#: Python object).
_OPERATORS = frozenset(
    """add sub mul truediv floordiv mod pow neg pos abs and_ or_ xor not_ invert lshift rshift
    eq ne lt le gt ge getitem truth is_ is_not index matmul""".split()
)
#: ``torch.*`` callables (not ops) torch.export puts in graphs.
_TORCH_CALLABLES = frozenset(
    {
        "torch._C._set_grad_enabled",
        "torch.amp.autocast_mode._enter_autocast",
        "torch.amp.autocast_mode._exit_autocast",
    }
)
#: ``torch.ops.<namespace>.<op>[.<overload>]``; an op name may be one of ATen's dunder ops
#: (``aten.__and__.Tensor``), no other dunder (``torch.ops.aten.__setattr__``).
_OP_TARGET = re.compile(
    r"torch\.ops\.[A-Za-z][A-Za-z0-9_]*\.(?:_?[A-Za-z][A-Za-z0-9_]*|__i?(?:and|or|xor|lshift|rshift)__)"
    r"(?:\.[A-Za-z_][A-Za-z0-9_]*)?"
)


def _safe_target(target: str) -> bool:
    """Whether a graph node's ``target`` is an operator (``torch.ops.ns.op[.overload]``, a
    ``#namespace:op`` extension op), a symbolic-shape function (``torch.sym_*``, ``math.*``),
    an arithmetic ``_operator`` function, or one of :data:`_TORCH_CALLABLES`: not an
    arbitrary Python callable that running the program would call (``torch.hub.load``,
    ``torch.ops.load_library``, ``_operator.call``)."""
    if _OP_TARGET.fullmatch(target) and "__" not in target.rpartition(".")[2]:
        return True
    if "__" in target:
        return False
    if target in _TORCH_CALLABLES:
        return True
    if re.fullmatch(r"#[A-Za-z0-9_.]+:[A-Za-z0-9_.]+", target):
        return True
    head, _, name = target.partition(".")
    if head == "_operator":
        return name in _OPERATORS
    if head == "math":
        return re.fullmatch(r"[a-z0-9_]+", name) is not None
    return head == "torch" and re.fullmatch(r"_?sym_[a-z_]+", name) is not None


def _node_targets(tree: Any) -> list[str]:
    """The ``target`` of every graph node (a dict with ``target``, ``inputs``, ``outputs``)."""
    found: list[str] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            target = node.get("target")
            if isinstance(target, str) and "inputs" in node and "outputs" in node:
                found.append(target)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return found


def _expr_strings(tree: Any) -> list[str]:
    """Every ``expr_str`` value in a JSON tree."""
    found: list[str] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for k, v in node.items():
                if k == "expr_str" and isinstance(v, str):
                    found.append(v)
                else:
                    stack.append(v)
        elif isinstance(node, list):
            stack.extend(node)
    return found


#: Bytes per element of torch's serialized ScalarType (torch._export.serde.schema); others 1.
_ITEMSIZE = {2: 1, 3: 2, 4: 4, 5: 8, 6: 2, 7: 4, 8: 8, 9: 4, 10: 8, 11: 16, 13: 2, 28: 2, 34: 4, 35: 8}


def check_pt2(path: str | os.PathLike, *, trust_pickle: bool = False) -> None:
    """Refuse a ``.pt2`` whose loading would run code or allocate more than it holds.

    Checked, without unpickling anything:

    * the file is a zip archive with a ``torch.export`` program (``models/*.json``);
    * no payload is a pickle torch would load unrestricted: ``"use_pickle": true`` entries of
      the weights and constants configs, opaque/custom-object constants, legacy ``.pt``
      weights; no AOTInductor libraries (``data/aotinductor/``);
    * every graph node calls an operator, not an arbitrary Python callable that running (or
      re-tracing, as ``run_decompositions`` does) the program would call (:func:`_safe_target`);
    * the sample inputs (and any other ``.pt`` member) load with torch's restricted
      ``weights_only=True`` unpickler, so torch never falls back to the unrestricted one;
    * every symbolic shape expression (``expr_str``, which torch gives to ``sympy.sympify``,
      i.e. ``eval``) is arithmetic over shape symbols;
    * members and tensors claim no more bytes than the machine has or the record holds.

    With ``trust_pickle=True`` only the structure and sizes are checked.

    Raises:
        ParseError: not a readable ``.pt2`` archive, or sizes it cannot hold.
        UntrustedInputError: a payload would run code; names the member.
    """
    path = Path(path)
    with _open_pt2(path) as f:
        _check_open(f, path, trust_pickle)


def _open_pt2(path: Path):
    """``path`` opened for reading, after the checks that need no reading.

    Raises:
        ParseError: no such file, or an empty one.
    """
    if not path.is_file():
        raise ParseError(f"{path}: no such file")
    if path.stat().st_size == 0:
        raise ParseError(f"{path}: empty file, not a readable torch.export archive (.pt2)")
    try:
        return open(path, "rb")
    except OSError as e:
        raise ParseError(f"{path}: cannot be read ({e.strerror or e})") from e


def _open_zip(f, path: Path) -> zipfile.ZipFile:
    """The checked zip archive of the open ``.pt2`` ``f`` (:func:`converter.ziparchive.open_checked`)."""
    try:
        return ziparchive.open_checked(f, str(path))
    except ParseError as e:
        if isinstance(e, UntrustedInputError) or "not a zip file" not in str(e):
            raise
        detail = str(e).removeprefix(f"{path}: ")
        raise ParseError(f"{path}: not a readable torch.export archive (.pt2): {detail}") from e


def _check_open(f, path: Path, trust_pickle: bool) -> None:
    """:func:`check_pt2` of the ``.pt2`` archive open as ``f``."""
    with _open_zip(f, path) as zf:
        infos = {i.filename: i for i in zf.infolist()}
        check_size(sum(i.file_size for i in infos.values()), f"{path}: its members")
        models = [n for n in infos if re.search(r"(^|/)models/[^/]+\.json$", n)]
        legacy = [n for n in infos if n.endswith("serialized_exported_program.json")]
        if not models and not legacy:
            raise ParseError(f"{path}: not a readable torch.export archive (.pt2): no exported program in it")
        refused: list[str] = []
        if not trust_pickle:
            refused += [n for n in infos if "/data/aotinductor/" in f"/{n}"][:1]
        for name in infos:
            if not name.endswith(".json"):
                continue
            try:
                tree = json.loads(ziparchive.read_member(zf, name, str(path)))
            except ValueError as e:
                raise ParseError(f"{path}: member {name} is not valid JSON ({e})") from e
            except RecursionError as e:
                raise ParseError(f"{path}: member {name} nests JSON too deeply") from e
            for expr in _expr_strings(tree):
                if not _safe_expr(expr):
                    raise UntrustedInputError(
                        f"{path}: member {name} has the shape expression {expr[:80]!r}, which is not "
                        "arithmetic over shape symbols; torch would evaluate it as Python (sympy.sympify). "
                        "Refused (no option loads it)."
                    )
            if not trust_pickle:
                refused += [
                    f"{name} (graph node target {t})" for t in _node_targets(tree) if not _safe_target(t)
                ][:3]
            if name.endswith(("_weights_config.json", "_constants_config.json")):
                refused += _check_payload_config(path, zf, infos, name, tree, trust_pickle)
        for name in infos:
            if name.endswith((".pt", ".pkl")):
                data = ziparchive.read_member(zf, name, str(path))
                if ziparchive.is_zip(data):  # torch.save's format: a zip archive, read by torch's reader
                    ziparchive.check_layout(io.BytesIO(data), f"{path}: member {name}")
                if not trust_pickle and name not in refused and not _loads_restricted(data):
                    refused.append(name)
    if refused:
        raise UntrustedInputError(
            f"{path}: loading it would unpickle, load or call code from {', '.join(sorted(set(refused)))} "
            "(pickled payloads and Python callables in the graph can run arbitrary code). Load it "
            "only if you trust where it comes from: `convert --trust-pickle`, or "
            "converter.load_pt2(path, trust_pickle=True)."
        )


def _check_payload_config(
    path: Path, zf: zipfile.ZipFile, infos: dict, name: str, tree: Any, trust_pickle: bool
) -> list[str]:
    """The pickled members a weights/constants config names; raises on impossible sizes."""
    base = name.rpartition("/")[0]
    config = tree.get("config", {}) if isinstance(tree, dict) else {}
    if not isinstance(config, dict):
        raise ParseError(f"{path}: member {name} is not a payload config")
    pickled = []
    unbacked = 0
    for fqn, meta in config.items():
        if not isinstance(meta, dict) or not isinstance(meta.get("path_name"), str):
            raise ParseError(f"{path}: member {name}: entry {fqn!r} has no path_name")
        member = f"{base}/{meta['path_name']}"
        if meta.get("use_pickle") or meta["path_name"].startswith(("custom_obj_", "opaque_obj_")):
            pickled.append(member)
            continue
        tmeta = meta.get("tensor_meta") or {}
        try:
            numel = 1
            for d in tmeta.get("sizes", []):
                numel *= int(d["as_int"])
            itemsize = _ITEMSIZE.get(int(tmeta.get("dtype", 7)), 1)
        except (KeyError, TypeError, ValueError) as e:
            raise ParseError(f"{path}: member {name}: entry {fqn!r} has malformed sizes ({e})") from e
        held = infos[member].file_size if member in infos else 0
        if held == 0 and numel > 0:
            # torch.zeros(sizes) for an empty record: bytes the file does not hold
            check_size(numel * itemsize, f"{path}: {fqn} ({member})")
            unbacked += numel * itemsize
            check_inflate(unbacked, f"{path}: tensors declared without data ({fqn}, {member})")
    return pickled if not trust_pickle else []


def _loads_restricted(data: bytes) -> bool:
    """Whether torch's restricted unpickler (``weights_only=True``) accepts ``data``."""
    import torch

    try:
        torch.load(io.BytesIO(data), weights_only=True)
    except Exception:  # noqa: BLE001 - any refusal means torch would fall back to full pickle
        return False
    return True


def load_pt2(path: str | os.PathLike, *, trust_pickle: bool = False):
    """``torch.export.load(path)`` after :func:`check_pt2`; torch's own warnings and log
    lines about the archive are held back (the error says what went wrong).

    Returns:
        The ``torch.export.ExportedProgram``.

    Raises:
        ParseError: not a readable ``.pt2`` archive (names the file and torch's complaint).
        UntrustedInputError: the archive holds pickled payloads, code or shape expressions
            that would run code, and ``trust_pickle`` is False.
    """
    import torch

    from .. import _threads
    from .._contract import quiet

    path = Path(path)
    with _open_pt2(path) as f:
        _check_open(f, path, trust_pickle)
        f.seek(0)
        try:
            # held back in this thread only (never the process's loggers or warning filters);
            # deserializing builds fake tensors: one thread at a time, as torch.export.
            # The open file that was checked, not the path (which could be replaced meanwhile).
            with _threads.TORCH_TRACE, quiet():
                return torch.export.load(f)
        except MemoryError:
            raise
        except Exception as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else ""
            raise ParseError(
                f"{path}: not a readable torch.export archive (.pt2): {type(e).__name__}: {first}"
            ) from e

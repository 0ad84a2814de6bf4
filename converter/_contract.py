"""The public API's error contract: every failure is a :class:`ConversionError`.

:func:`api` wraps ``from_*``, ``to_*``, ``call_*``, ``load`` and ``save``. A
:class:`ConversionError` passes through; any other exception is classified by where it was
raised and re-raised as a subclass with the original chained (``raise ... from e``):

* :class:`ExportError` (``from_*`` and ``call_*`` only): it came from the user's code (the
  model's ``forward``, the JAX function) or from ``torch.export``/``jax`` tracing on the
  user's behalf, i.e. the source framework refused the model
  (``GuardOnDataDependentSymNode``, unflattenable outputs such as a ``DynamicCache``, a
  shape error in the model). JAX is the converter's own tool when it converts a torch or an
  ONNX model: a failure inside JAX there is no :class:`ExportError`.
* :class:`InputTypeError` / :class:`InputValueError` (also ``TypeError`` / ``ValueError``):
  the converter's own code refused an argument with an explicit ``raise TypeError`` or
  ``raise ValueError`` (an unsupported leaf type, an opset out of range), or the call
  itself was wrong (a ``TypeError`` raised before the function ran, or refusing a keyword
  the caller gave).
* :class:`InternalError`: anything else from the converter's own code: a bug.

Torch's and JAX's own chatter while they fail (torch.export's graph dumps, fake-tensor logs,
pytree FutureWarnings) is held back: the error says what went wrong, and what was printed is
its ``diagnostics`` attribute. Set ``CONVERTER_VERBOSE=1`` to let it through.
"""

from __future__ import annotations

import contextlib
import functools
import io
import logging
import os
import re
import sys
import sysconfig
import traceback
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from .errors import ConversionError, ExportError, InputTypeError, InputValueError, InternalError

F = TypeVar("F", bound=Callable[..., Any])

_REPO = Path(__file__).resolve().parent.parent
_OURS = tuple(str(_REPO / d) + os.sep for d in ("converter", "frontends", "backends"))
_LIBRARY = tuple(
    {
        str(Path(p).resolve()) + os.sep
        for k in ("stdlib", "platstdlib", "purelib", "platlib")
        if (p := sysconfig.get_paths().get(k))
    }
)
#: Frames of these framework packages that trace or export the user's model on its behalf.
_TRACING = ("torch/export/", "torch/_export/", "torch/_dynamo/", "torch/fx/", "torch/_subclasses/", "jax/")


def _frames(e: BaseException) -> list[str]:
    return [f.filename for f in traceback.extract_tb(e.__traceback__)]


def _is_user(filename: str) -> bool:
    path = str(Path(filename).resolve()) if not filename.startswith("<") else filename
    if filename.startswith("<"):
        return False
    return not path.startswith(_OURS) and not path.startswith(_LIBRARY)


def classify(e: Exception, what: str, code: Any = None, keywords: Any = ()) -> ConversionError:
    """The :class:`ConversionError` to raise for ``e``, an exception escaping ``what`` (the
    API function's name, whose code object is ``code``, called with the keyword arguments
    ``keywords``); see the module docstring. A ``TypeError`` raised before ``code`` ran, or
    one refusing a keyword the caller gave (passed on as ``**options``), is the caller's:
    arguments the function does not take."""
    if isinstance(e, TypeError) and (
        (code is not None and not _entered(e, code)) or _refused_keyword(e) in keywords
    ):
        return InputTypeError(f"{what}: {e}")
    files = _frames(e)
    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
    detail = f"{type(e).__name__}: {first}" if first else type(e).__name__
    frames = traceback.extract_tb(e.__traceback__)
    deliberate = (
        bool(frames) and frames[-1].filename.startswith(_OURS) and (frames[-1].line or "").startswith("raise")
    )
    if deliberate and isinstance(e, (TypeError, ValueError)):  # our own check of an argument
        return (InputTypeError if isinstance(e, TypeError) else InputValueError)(str(e))
    ours_last = next((f for f in reversed(files) if f.startswith(_OURS)), None)
    user = any(_is_user(f) for f in files)
    # converting a torch or ONNX model, JAX is the converter's own tool: a failure in it is a
    # conversion failure (the rules' job), never the source framework refusing the model
    own_jax = what.rpartition(".")[2] in ("from_torch", "from_onnx", "load_pt2")
    tracing = any(
        t in f.replace(os.sep, "/") for f in files for t in _TRACING if not (own_jax and t == "jax/")
    )
    after_ours = files[files.index(ours_last) + 1 :] if ours_last is not None else files
    model_code = what.rpartition(".")[2].startswith(("from_", "call_"))  # others run no model
    if model_code and (user or (tracing and any(not f.startswith(_OURS) for f in after_ours))):
        return ExportError(f"{what}: the source framework could not export or trace the model: {detail}")
    return InternalError(f"{what}: unexpected {detail} (a bug in the converter; please report it)")


def _entered(e: BaseException, code: Any) -> bool:
    """Whether ``e``'s traceback passes through a frame running ``code``."""
    tb = e.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code is code:
            return True
        tb = tb.tb_next
    return False


def _refused_keyword(e: TypeError) -> str | None:
    """The keyword of a ``got an unexpected keyword argument 'name'`` TypeError."""
    found = re.search(r"got an unexpected keyword argument '(\w+)'", str(e))
    return found.group(1) if found else None


_forced_verbose = False


def verbose() -> bool:
    """Whether third-party chatter is let through: ``CONVERTER_VERBOSE`` is set to a
    non-empty value other than ``0``, or inside :func:`verbose_mode` (``convert --verbose``)."""
    return _forced_verbose or os.environ.get("CONVERTER_VERBOSE", "") not in ("", "0")


@contextlib.contextmanager
def verbose_mode(enabled: bool) -> Iterator[None]:
    """Let third-party chatter through while the body runs, when ``enabled``."""
    global _forced_verbose
    previous, _forced_verbose = _forced_verbose, _forced_verbose or enabled
    try:
        yield
    finally:
        _forced_verbose = previous


@contextlib.contextmanager
def quiet(enabled: bool = True, *, capture_stderr: bool = True) -> Iterator[io.StringIO]:
    """Hold back, while the body runs, log records up to ERROR (torch.export's graph dumps,
    fake-tensor and symbolic-shape diagnostics come through torch's own loggers),
    FutureWarnings, DeprecationWarnings and the warnings torch, jax and onnx raise, and (with
    ``capture_stderr``) what is printed to stderr: yields that buffer, written out after a
    success, kept back after a failure. A no-op when ``enabled`` is False."""
    captured = io.StringIO()
    if not enabled:
        yield captured
        return
    previous = logging.root.manager.disable
    logging.disable(logging.ERROR)  # torch sets its own loggers' levels: disable them all
    failed = True
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            warnings.simplefilter("ignore", DeprecationWarning)
            for mod in ("torch", "jax", "onnx", "onnxruntime"):
                warnings.filterwarnings("ignore", module=rf"{mod}(\..*)?$")
            redirect = contextlib.redirect_stderr(captured) if capture_stderr else contextlib.nullcontext()
            with redirect:  # torch.export prints partial graphs there
                yield captured
        failed = False
    finally:
        logging.disable(previous)
        if not failed and captured.getvalue():  # a success keeps what was printed
            sys.stderr.write(captured.getvalue())


_depth = 0


def nested() -> bool:
    """Whether an :func:`api` function is running (its wrapper classifies what escapes):
    for a per-call fast path that applies the contract itself, without the wrapper."""
    return _depth > 0


def api(fn: F | None = None, *, hush: bool = True, name: str | None = None) -> Any:
    """Decorate a public API function with the error contract (see the module docstring).
    ``hush=False`` skips :func:`quiet` (for functions called per step, such as ``call_jax``,
    whose conversions hold back the chatter themselves, on a cache miss only). ``name``: the
    public name in error messages (``converter.<name>``), when not ``fn.__name__``."""
    if fn is None:
        return functools.partial(api, hush=hush, name=name)
    what = f"converter.{name or fn.__name__}"

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        global _depth
        outer = _depth == 0
        _depth += 1
        try:
            if not (outer and hush) or verbose():  # nested calls: the outer one classifies
                return fn(*args, **kwargs)
            with quiet() as captured:
                try:
                    return fn(*args, **kwargs)
                except Exception as e:
                    e.diagnostics = captured.getvalue()  # type: ignore[attr-defined]
                    raise
        except ConversionError:
            raise
        except Exception as e:
            if not outer:
                raise
            err = classify(e, what, getattr(fn, "__code__", None), kwargs)
            err.diagnostics = getattr(e, "diagnostics", "")  # type: ignore[attr-defined]
            raise err from e
        finally:
            _depth -= 1

    return wrapper  # type: ignore[return-value]


__all__ = ["api", "classify", "quiet", "verbose", "verbose_mode"]

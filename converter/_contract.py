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

A ``MemoryError`` becomes :class:`OutOfMemoryError` (a ``ConversionError`` and a
``MemoryError``): the machine ran out of memory, not a converter bug (the CLI reports it as
the input's, exit status 2, "out of memory").

Torch's and JAX's own chatter while they fail (torch.export's graph dumps, fake-tensor logs,
pytree FutureWarnings) is held back: the error says what went wrong, and what was printed is
its ``diagnostics`` attribute. Set ``CONVERTER_VERBOSE=1`` to let it through. The contract
is per thread, and holding back touches no process-wide state (see :func:`quiet`): other
threads' log records, warnings and stderr lines all arrive.
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
import threading
import traceback
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from .errors import (
    ConversionError,
    ExportError,
    InputTypeError,
    InputValueError,
    InternalError,
    OutOfMemoryError,
)

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
    if isinstance(e, MemoryError):
        return OutOfMemoryError(
            f"{what}: out of memory: the model, its inputs or a size a file declares do not fit this "
            "machine (see docs/security.md for the memory budgets)"
        )
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
    last_ours = max((i for i, f in enumerate(files) if f.startswith(_OURS)), default=None)  # frame index
    user = any(_is_user(f) for f in files)
    # converting a torch or ONNX model, JAX is the converter's own tool: a failure in it is a
    # conversion failure (the rules' job), never the source framework refusing the model
    own_jax = what.rpartition(".")[2] in ("from_torch", "from_onnx", "load_pt2")
    tracing = any(
        t in f.replace(os.sep, "/") for f in files for t in _TRACING if not (own_jax and t == "jax/")
    )
    after_ours = files[last_ours + 1 :] if last_ours is not None else files
    model_code = what.rpartition(".")[2].startswith(("from_", "call_"))  # others run no model
    if model_code and (user or (tracing and any(not f.startswith(_OURS) for f in after_ours))):
        where = _raised_at(str(e))
        return ExportError(
            f"{what}: the source framework could not export or trace the model: {detail}"
            + (f" (at {where})" if where else "")
        )
    return InternalError(f"{what}: unexpected {detail} (a bug in the converter; please report it)")


def _raised_at(message: str) -> str:
    """The model's source line torch.export names in its message ("The following call raised
    this error:" then the file, line and code: a data-dependent ``if`` on a tensor's value,
    dynamic NTK rope's ``if seq_len > max_seq_len_cached``), as ``file:line: code``; ``""``
    when it names none."""
    found = re.search(
        r'The following call raised this error:\s*File "([^"]+)", line (\d+), in \S+\s*\n\s*(.+)', message
    )
    return f"{found.group(1)}:{found.group(2)}: {found.group(3).strip()}" if found else ""


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


# --------------------------------------------------------------------------- per-thread state
#
# The contract is per thread: the nesting of API calls (the outer one classifies), the
# ``verbose_mode`` flag and the chatter held back are this thread's. Nothing here changes
# process-wide state while a conversion runs: no ``logging.disable``, no warning filters
# pushed or popped, no ``sys.stderr`` replaced (all three are process globals that another
# thread reads at the same time). Instead the frameworks' own chatter is held back at its
# source, only in the threads inside :func:`quiet`:
#
# * log records of the frameworks' loggers (``torch.*``, ``jax.*``, ``onnx.*``...) through a
#   :class:`logging.Filter` on each of those loggers (:func:`_cover_loggers`), which holds
#   back records up to ERROR emitted by a thread inside :func:`quiet` (they become the
#   error's ``diagnostics``) and lets every other record through;
# * warnings through two entries of ``warnings.filters`` (added at import, and again when
#   found gone: :func:`_install_warning_filters`), whose categories match only in a thread
#   inside :func:`quiet` (their metaclass's ``__subclasscheck__`` asks): FutureWarnings and
#   DeprecationWarnings, and any warning raised from the frameworks' modules. In every
#   other thread they match nothing;
# * what torch.export prints on sys.stderr (a partial graph when export fails), through
#   :func:`hold_print`, which ``converter.frontends.torch._torch_internal`` installs as the ``print``
#   of that torch module.


class _Local(threading.local):
    """Per-thread state, every attribute present from the start: torch.compile traces the
    decorated entry points (``call_jax``), and a guard on an attribute that did not exist yet
    (``hasattr``) would fail after the first call and recompile the caller's frame."""

    def __init__(self) -> None:  # run once in each thread that reads it
        self.depth = 0  # api nesting
        self.verbose = False  # verbose_mode
        self.held: list | None = None  # quiet scopes


_LOCAL = _Local()

#: top-level packages whose loggers and warnings :func:`quiet` holds back
_FRAMEWORKS = ("torch", "jax", "jaxlib", "onnx", "onnxruntime", "onnxscript")


def verbose() -> bool:
    """Whether third-party chatter is let through: ``CONVERTER_VERBOSE`` is set to a
    non-empty value other than ``0``, or this thread is inside :func:`verbose_mode`
    (``convert --verbose``)."""
    return _LOCAL.verbose or os.environ.get("CONVERTER_VERBOSE", "") not in ("", "0")


@contextlib.contextmanager
def verbose_mode(enabled: bool) -> Iterator[None]:
    """Let third-party chatter through while the body runs in this thread, when ``enabled``."""
    previous = _LOCAL.verbose
    _LOCAL.verbose = previous or enabled
    try:
        yield
    finally:
        _LOCAL.verbose = previous


class _Held:
    """What one :func:`quiet` scope holds back in its thread: ``text`` (everything, the
    error's ``diagnostics``) and ``printed`` (what the frameworks printed to stderr, written
    out after a success)."""

    __slots__ = ("text", "printed", "capture_stderr")

    def __init__(self, capture_stderr: bool):
        self.text = io.StringIO()
        self.printed = io.StringIO()
        self.capture_stderr = capture_stderr


def _held() -> _Held | None:
    """This thread's innermost :func:`quiet` scope, if any."""
    stack = _LOCAL.held
    return stack[-1] if stack else None


def hold_print(
    *values: Any, sep: str | None = " ", end: str | None = "\n", file: Any = None, **kw: Any
) -> None:
    """``print`` for framework modules that print diagnostics on ``sys.stderr``: in a thread
    inside :func:`quiet` (with ``capture_stderr``), what goes to ``sys.stderr`` is held back
    (the error's ``diagnostics``; written out after a success); anything else is printed."""
    held = _held()
    if held is None or not held.capture_stderr or file is not sys.stderr:
        print(*values, sep=sep, end=end, file=file, **kw)
        return
    text = (" " if sep is None else sep).join(str(v) for v in values) + ("\n" if end is None else end)
    held.text.write(text)
    held.printed.write(text)


class _FrameworkRecords(logging.Filter):
    """On the frameworks' loggers: holds back the records up to ERROR that a thread inside
    :func:`quiet` emits (kept as the error's ``diagnostics``); passes every other record."""

    def filter(self, record: logging.LogRecord) -> bool:
        held = _held()
        if held is None or record.levelno > logging.ERROR:
            return True
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed record is still held back
            message = str(record.msg)
        held.text.write(f"{record.levelname}:{record.name}:{message}\n")
        return False


_RECORDS = _FrameworkRecords()
_COVER_LOCK = threading.Lock()
_covered: dict[str, logging.Logger] = {}
_pending: set[str] = set()  # framework names that are still logging.PlaceHolders
_seen = [0]  # len(loggerDict) at the last full scan


def _cover(name: str, lg: Any) -> None:
    if not isinstance(lg, logging.Logger):
        _pending.add(name)
        return
    _pending.discard(name)
    if _covered.get(name) is not lg:
        if _RECORDS not in lg.filters:
            lg.addFilter(_RECORDS)
        _covered[name] = lg


def _cover_loggers() -> None:
    """Add :data:`_RECORDS` to every framework logger that exists (a filter on a logger sees
    the records created there, not its children's: each one needs it). Loggers created
    later are covered at the next :func:`quiet`: a full scan when loggers were added, else a
    look at the names that were placeholders (``getLogger`` turns one into a logger)."""
    loggers = logging.root.manager.loggerDict
    with _COVER_LOCK:
        if len(loggers) != _seen[0]:
            for name, lg in list(loggers.items()):
                if name.partition(".")[0] in _FRAMEWORKS:
                    _cover(name, lg)
            _seen[0] = len(loggers)
        else:
            for name in list(_pending):
                _cover(name, loggers.get(name))


class _InQuietThread(type):
    """Metaclass of warning categories that match (``issubclass``, which the warnings
    machinery asks of each filter) only in a thread inside :func:`quiet`, and then the
    classes in ``matches``."""

    matches: tuple[type, ...] = ()

    def __subclasscheck__(cls, sub: type) -> bool:
        return _held() is not None and isinstance(sub, type) and issubclass(sub, cls.matches)


class _HeldDeprecation(Warning, metaclass=_InQuietThread):
    """Matches FutureWarning and DeprecationWarning in a thread inside :func:`quiet`."""

    matches = (FutureWarning, DeprecationWarning)


class _HeldFrameworkWarning(Warning, metaclass=_InQuietThread):
    """Matches any warning in a thread inside :func:`quiet` (the filter adds: raised from a
    framework module)."""

    matches = (Warning,)


_FILTER_LOCK = threading.Lock()


def _install_warning_filters() -> None:
    """The two inert filters (see the section comment): added at import, and again by a
    :func:`quiet` that finds them gone (a ``warnings.catch_warnings`` block that was open at
    import restores, on exit, a filter list without them; so does ``resetwarnings``). They
    match nothing outside a converting thread, so adding them changes no warning's fate."""
    filters = warnings.filters
    if any(f[2] is _HeldDeprecation for f in filters) and any(f[2] is _HeldFrameworkWarning for f in filters):
        return
    with _FILTER_LOCK:
        module = rf"({'|'.join(_FRAMEWORKS)})(\..*)?$"
        warnings.filterwarnings("ignore", category=_HeldFrameworkWarning, module=module)
        warnings.filterwarnings("ignore", category=_HeldDeprecation)


_install_warning_filters()


@contextlib.contextmanager
def quiet(enabled: bool = True, *, capture_stderr: bool = True) -> Iterator[io.StringIO]:
    """Hold back, while the body runs in this thread, the frameworks' chatter: log records up
    to ERROR of torch's, JAX's and ONNX's loggers (torch.export's graph dumps, fake-tensor
    and symbolic-shape diagnostics), FutureWarnings, DeprecationWarnings and the warnings
    those frameworks raise, and (with ``capture_stderr``) the partial graph torch.export
    prints to stderr. Yields the buffer of what was held back (an error's ``diagnostics``);
    the printed part is written to stderr after a success (into the enclosing scope's
    buffers when nested), kept back after a failure. Other threads' records, warnings and
    stderr lines are untouched. A no-op when ``enabled`` is False."""
    held = _Held(capture_stderr)
    if not enabled:
        yield held.text
        return
    _cover_loggers()
    _install_warning_filters()
    stack = _LOCAL.held
    if stack is None:
        stack = _LOCAL.held = []
    stack.append(held)
    failed = True
    try:
        yield held.text
        failed = False
    finally:
        stack.pop()
        outer = stack[-1] if stack else None
        if outer is not None:  # the enclosing scope holds it in turn
            outer.text.write(held.text.getvalue())
            outer.printed.write(held.printed.getvalue())
        elif not failed and held.printed.getvalue():  # a success keeps what was printed
            sys.stderr.write(held.printed.getvalue())


def _init_backends_quietly() -> None:
    """JAX's backends created with XLA's client log lines held back
    (:func:`converter._jax_internal.init_backends_quietly`), before the first API call uses them."""
    from . import _jax_internal

    _jax_internal.init_backends_quietly()


def nested() -> bool:
    """Whether an :func:`api` function is running in this thread (its wrapper classifies
    what escapes): for a per-call fast path that applies the contract itself, without the
    wrapper."""
    return _LOCAL.depth > 0


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
        depth = _LOCAL.depth
        outer = depth == 0
        _LOCAL.depth = depth + 1
        try:
            if outer and not verbose():
                _init_backends_quietly()
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
            _LOCAL.depth = depth

    return wrapper  # type: ignore[return-value]


__all__ = ["api", "classify", "hold_print", "nested", "quiet", "verbose", "verbose_mode"]

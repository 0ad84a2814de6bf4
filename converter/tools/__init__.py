"""The tool layer: the ``convert`` command line (:mod:`.cli`), ``convert validate``
(:mod:`.validate`, :mod:`.bisect`), ``convert inspect`` (:mod:`.inspection`), embedding
(:mod:`.embed`: ``call_jax``/``call_torch``) and the ``.pt2`` reader (:mod:`.pt2`).
Tools use the layers below only through their public functions; nothing below imports
a tool."""

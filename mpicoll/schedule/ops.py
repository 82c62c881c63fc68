"""Reduction operations: what ``a (op) b`` means locally, and for which types.

An :class:`Op` is what schedules' ``Reduce`` steps apply. It knows whether it
commutes (selection needs that), which NumPy dtype kinds MPI defines it for
(checked before any message moves), and how to apply itself into an output
array without allocating.

Built-in ops are named as MPI names them, lower-case: ``"sum", "prod",
"max", "min", "land", "lor", "lxor", "band", "bor", "bxor"``. A user op is
either :func:`Op.from_callable` (a NumPy function ``f(a, b) -> a (op) b``) or
an ``MPI.Op`` made with ``MPI.Op.Create`` (converted by
:func:`mpicoll.args.mpi_ops.as_op`, which is where mpi4py is imported).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

# MPI's type classes as NumPy dtype kinds: integer (i, u), floating (f),
# complex (c), logical (b). MPI defines MAX/MIN on integers and floats only,
# logical ops on integers and C_BOOL, bitwise ops on integers.
_BUILTINS = {
    "sum": (np.add, "iufc"),
    "prod": (np.multiply, "iufc"),
    "max": (np.maximum, "iuf"),
    "min": (np.minimum, "iuf"),
    "land": (np.logical_and, "iub"),
    "lor": (np.logical_or, "iub"),
    "lxor": (np.logical_xor, "iub"),
    "band": (np.bitwise_and, "iu"),
    "bor": (np.bitwise_or, "iu"),
    "bxor": (np.bitwise_xor, "iu"),
}

BUILTIN_NAMES = tuple(_BUILTINS)
# NumPy 2.4 deprecates a positional output for these two.
_OUT_BY_KEYWORD = ("maximum", "minimum")


class Op:
    """A reduction operation ``dst = a (op) b``.

    ``apply(a, b, dst)`` may be called with ``dst`` aliasing ``a`` or ``b``
    (element for element); built-in ops then allocate nothing.
    """

    def __init__(
        self,
        name: str,
        apply: Callable[[np.ndarray, np.ndarray, np.ndarray], None],
        *,
        commutative: bool,
        kinds: str | None = None,
        mpi_op=None,
        ufunc: str | None = None,
        host_only: bool = False,
    ) -> None:
        self.name = name
        self.apply = apply
        self.commutative = commutative
        self.kinds = kinds  # None: any dtype (user-defined ops)
        self.mpi_op = mpi_op  # the MPI.Op a native call uses, if known
        self.ufunc = ufunc  # built-ins: the ufunc's name in any array module
        self.host_only = host_only  # applies only to host memory (MPI.Op)

    def __repr__(self) -> str:
        return f"Op({self.name!r}, commutative={self.commutative})"

    def supports(self, dtype: np.dtype) -> bool:
        return self.kinds is None or np.dtype(dtype).kind in self.kinds

    def kernel(self, xp):
        """``kernel(a, b, dst)`` for arrays of module ``xp``: a built-in op
        calls ``xp``'s ufunc of its name (CuPy's runs on the current
        stream), NumPy's ufunc itself where it takes its output as the
        third argument; other ops are ``apply``, given ``xp``'s arrays as
        they are."""
        if self.ufunc is None:
            return self.apply
        ufunc = getattr(xp, self.ufunc)
        if xp is np and self.ufunc not in _OUT_BY_KEYWORD:
            return ufunc  # about 0.1 us less per reduction than a wrapper

        def apply(a, b, dst):
            ufunc(a, b, out=dst)

        return apply

    @classmethod
    def builtin(cls, name: str) -> Op:
        ufunc, kinds = _BUILTINS[name]

        def apply(a, b, dst, _ufunc=ufunc):
            _ufunc(a, b, out=dst)

        return cls(name, apply, commutative=True, kinds=kinds,
                   ufunc=ufunc.__name__)

    @classmethod
    def from_callable(
        cls, func: Callable, *, commute: bool = False, name: str | None = None
    ) -> Op:
        """An op from ``func(a, b) -> a (op) b`` on NumPy arrays.

        ``commute`` defaults to False: algorithms then keep rank order, which
        is right for any associative ``func``.
        """

        def apply(a, b, dst):
            dst[...] = func(a, b)

        return cls(name or getattr(func, "__name__", "user"), apply,
                   commutative=commute)


_BUILTIN_OPS = {name: Op.builtin(name) for name in _BUILTINS}


def builtin_op(name: str) -> Op | None:
    """The shared built-in :class:`Op` called ``name`` (case-insensitive)."""
    return _BUILTIN_OPS.get(name.lower())

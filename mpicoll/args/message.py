"""Buffer arguments parsed exactly as mpi4py 4 parses them.

:func:`message` is mpi4py's ``message_simple`` and :func:`vector_message`
its ``message_vector`` (``msgbuffer.pxi``), ported line for line: the same
forms are accepted, the same are rejected, with the same exception type
and text. Each error is an :class:`~mpicoll.errors.MpicollError` naming the
rank and the call that is *also* an instance of what mpi4py raises
(``TypeError``, ``ValueError``, ``KeyError``, ``BufferError``,
``OverflowError``, or ``MPI.Exception`` with MPI's error class).

Simple messages: ``buf``, ``[buf, type]``, ``[buf, count]``,
``[buf, (count, displ)]``, ``[buf, count | (count, displ), type]``,
``[buf, count, displ, type]``; ``type`` an ``MPI.Datatype`` or a type code
(``'i'``, ``'f8'``); a ``None``/``MPI.BOTTOM`` buffer needs a type;
``displ`` counts datatype extents; an inferred count is per block when
``blocks`` >= 2. Vector messages: ``buf``, ``[buf, type]``,
``[buf, counts]``, ``[buf, (counts, displs)]``, ``[buf, counts | (counts,
displs), type]``, ``[buf, counts, displs, type]`` (only a tuple splits).

Beyond mpi4py, mpicoll refuses what would make its hand-built code touch
memory outside the buffer, which mpi4py leaves to MPI: counts beyond the
buffer, negative displacements, data at ``MPI.BOTTOM`` (all ``ValueError``);
and what MPI rejects later, at once: ``MPI.DATATYPE_NULL`` and uncommitted
datatypes (``ERR_TYPE``), negative vector counts (``ERR_COUNT``).

The checks MPI makes of the other arguments are in
:mod:`mpicoll.args.checks`; derived datatypes are staged for hand-built
code by :mod:`mpicoll.args.datatypes`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from mpi4py import MPI
from mpi4py.util import dtlib

from mpicoll.errors import MpicollError, PendingMPIError, spec_error
from mpicoll.args.vectors import packed_displs
from mpicoll.args.getbuffer import (BYTE_FMT, Export, as_c, buffer_bytes,
                               get_buffer, is_buffer, is_cai, is_dlpack,
                               is_integral)


class Message(NamedTuple):
    obj: object  # the buffer object (the spec's first item)
    array: object  # count*blocks units from displ; None when derived
    datatype: MPI.Datatype
    count: int  # per block, in datatype units
    unit: np.dtype | None  # one basic element; None: derived, mixed
    derived: bool  # not a predefined basic datatype
    buffer: object = None  # uint8 view of the whole buffer (None: BOTTOM)
    offset: int = 0  # bytes from the buffer's start to the first element
    blocks: int = 1  # count * blocks elements in all


class VectorMessage(NamedTuple):
    obj: object
    array: object  # the whole buffer from element 0, in unit; None: derived
    datatype: MPI.Datatype
    counts: tuple
    displs: tuple  # in datatype extents
    unit: np.dtype | None
    derived: bool
    buffer: object = None  # uint8 view of the whole buffer (None: BOTTOM)


def _basic_units() -> dict:
    """NumPy units of the predefined basic datatypes, by handle."""
    units = {}
    for name in dir(MPI):
        dt = getattr(MPI, name)
        if not isinstance(dt, MPI.Datatype) or dt == MPI.DATATYPE_NULL:
            continue
        unit = dtlib.to_numpy_dtype(dt)
        if unit.kind == "U" and unit.itemsize != dt.size:  # WCHAR: '<U'
            unit = np.dtype(f"U{dt.size // 4}")
        if unit.fields is None and unit.subdtype is None and \
                unit.itemsize == dt.size == dt.extent:
            units[dt.handle] = unit
    return units


_UNITS = _basic_units()
_FAST: dict = {}  # (dtype.char, byteorder, itemsize) -> (datatype, unit)


def is_in_place(obj) -> bool:
    """mpi4py's ``is_IN_PLACE``: None or ``MPI.IN_PLACE``."""
    return obj is None or obj is MPI.IN_PLACE


def is_bottom(obj) -> bool:
    return obj is None or obj is MPI.BOTTOM


# -- mpi4py's parser ------------------------------------------------------------

def _lookup(key) -> MPI.Datatype:
    try:
        return MPI._typedict[key]
    except KeyError:
        raise KeyError(f"cannot map {key!r} to MPI datatype") from None


def _asdatatype(obj) -> MPI.Datatype:
    return obj if isinstance(obj, MPI.Datatype) else _lookup(obj)


def _getdatatype(form) -> MPI.Datatype:
    if form is BYTE_FMT:
        return MPI.BYTE
    order = form[:1]
    if order in ("<", ">") and (order == "<") != np.little_endian:
        raise BufferError(f"format string {form!r} with non-native byte order")
    return _lookup(form[1:] if order in ("@", "<", ">") else form)


_NAMED: dict = {}  # NumPy dtype -> the MPI datatype mpi4py infers for it


def named(obj):
    """``[obj, datatype]`` for a host NumPy array: the message mpi4py
    makes of ``obj`` alone (the count inferred from its size, the datatype
    from its buffer format), with the datatype named, which mpi4py parses
    about 0.1 us faster; anything else as it is."""
    if type(obj) is not np.ndarray:
        return obj
    datatype = _NAMED.get(obj.dtype)
    if datatype is None:
        try:
            datatype = _getdatatype(memoryview(obj).format)
        except (BufferError, KeyError, ValueError):
            return obj  # mpi4py says what is wrong with it
        _NAMED[obj.dtype] = datatype
    return [obj, datatype]


def _is_datatype(obj) -> bool:
    return isinstance(obj, (MPI.Datatype, str))


def _pair(items):
    """``(a, b) = items`` with Cython's messages."""
    if len(items) != 2:
        n = len(items)
        raise ValueError("too many values to unpack (expected 2)" if n > 2
                         else f"need more than {n} value{'s' * (n != 1)} "
                              f"to unpack")
    return items


def _split(msg, splits):
    """(buf, count, displ, type) from a message; ``splits``: the types of
    a count item that carry (count, displ)."""
    kind = type(msg)
    if kind is np.ndarray or (kind is not list and kind is not tuple
                              and is_buffer(msg)):
        return msg, None, None, None
    if isinstance(msg, (list, tuple)):
        count = displ = datatype = None
        if len(msg) == 2:
            buf, count = msg
            if _is_datatype(count):
                count, datatype = None, count
            elif isinstance(count, splits):
                count, displ = _pair(count)
        elif len(msg) == 3:
            buf, count, datatype = msg
            if isinstance(count, splits):
                count, displ = _pair(count)
        elif len(msg) == 4:
            buf, count, displ, datatype = msg
        else:
            raise ValueError("message: expecting 2 to 4 items")
        return buf, count, displ, datatype
    if is_dlpack(msg) or is_cai(msg):
        return msg, None, None, None
    raise TypeError("message: expecting buffer or list/tuple")


def _basic(buf, datatype, readonly):
    """mpi4py's ``message_basic``: (export or None, datatype)."""
    if is_bottom(buf):
        return None, _asdatatype(datatype)
    if type(buf) is np.ndarray:  # NumPy's export, without ctypes
        found = None if datatype is not None else _fast_type(buf.dtype)
        flat = _flat(buf, readonly)
        if flat is not None and (datatype is not None or found is not None):
            raw = flat.view(np.uint8)
            export = Export(0, raw.size, not raw.flags.writeable, None, -1,
                            raw)
            return export, (found[0] if found else _asdatatype(datatype))
    export = get_buffer(buf, readonly, datatype is None)
    if datatype is not None:
        return export, _asdatatype(datatype)
    return export, _getdatatype(export.format)


def _extent(dt, why: str) -> int:
    if dt == MPI.DATATYPE_NULL:
        raise ValueError(f"message: cannot {why}, datatype is null")
    lb, extent = dt.Get_extent()
    if extent <= 0:
        raise ValueError(f"message: cannot {why}, datatype extent {extent} "
                         f"(lb:{lb}, ub:{lb + extent})")
    return extent


def _infer(length: int, dt) -> int:
    extent = _extent(dt, "infer count")
    if length % extent:
        lb = dt.Get_extent()[0]
        raise ValueError(f"message: cannot infer count, buffer length "
                         f"{length} is not a multiple of datatype extent "
                         f"{extent} (lb:{lb}, ub:{lb + extent})")
    return length // extent


def _chkarray(obj, n: int) -> tuple:
    values = tuple(as_c(obj[i]) for i in range(len(obj)))
    if len(values) != n:
        raise ValueError(f"expecting {n} items, got {len(values)}")
    return values


def _simple(spec, readonly, blocks):
    buf, o_count, o_displ, o_type = _split(spec, (tuple, list))
    export, dt = _basic(buf, o_type, readonly)
    length = export.nbytes if export else 0
    count = displ = offset = 0
    if o_displ is not None:
        displ = as_c(o_displ)
        if displ < 0:
            raise ValueError(f"message: negative displacement {displ}")
        if displ > 0:
            extent = _extent(dt, "handle displacement")
            if displ * extent > length:
                raise ValueError(f"message: displacement {displ} out of "
                                 f"bounds, number of datatype entries "
                                 f"{length // extent}")
            offset = displ * extent
            length -= offset
    if o_count is not None:
        count = as_c(o_count)
        if count < 0:
            raise ValueError(f"message: negative count {count}")
        if count > 0 and buf is None:
            raise ValueError(f"message: buffer is None but count is {count}")
    elif length > 0:
        entries = _infer(length, dt)
        count = entries
        if blocks >= 2:
            if entries % blocks:
                raise ValueError(f"message: cannot infer count, number of "
                                 f"entries {entries} is not a multiple of "
                                 f"required number of blocks {blocks}")
            count = entries // blocks
    blocks = max(blocks, 1)
    _inside(export, _geometry(dt), [(offset, count * blocks)])
    raw, unit, derived = _views(buf, export, dt)
    array = None
    if not derived:
        end = offset + count * blocks * unit.itemsize
        array = np.empty(0, unit) if raw is None \
            else raw[offset:end].view(unit)
    return Message(buf, array, dt, count, unit, derived, raw, offset, blocks)


def _vector(spec, readonly, blocks):
    buf, o_counts, o_displs, o_type = _split(spec, tuple)
    export, dt = _basic(buf, o_type, readonly)
    size = export.nbytes if export else 0
    if o_counts is None:
        total = _infer(size, dt) if size > 0 else 0
        counts = tuple(total // blocks + (total % blocks > i)
                       for i in range(blocks))
    elif is_integral(o_counts):
        counts = (as_c(o_counts),) * blocks
    else:
        counts = _chkarray(o_counts, blocks)
    if o_displs is None:
        displs = packed_displs(counts)
    elif is_integral(o_displs):
        step = as_c(o_displs)
        displs = tuple(step * i for i in range(blocks))
    else:
        displs = _chkarray(o_displs, blocks)
    geometry = _geometry(dt)
    if any(c < 0 for c in counts):
        raise PendingMPIError(MPI.ERR_COUNT, f"message: negative count in "
                                             f"counts {list(counts)}")
    _inside(export, geometry, [(d * geometry[0], c)
                               for d, c in zip(displs, counts)])
    raw, unit, derived = _views(buf, export, dt)
    array = None
    if not derived:
        array = np.empty(0, unit) if raw is None \
            else raw[:raw.size - raw.size % unit.itemsize].view(unit)
    return VectorMessage(buf, array, dt, counts, displs, unit, derived, raw)


# -- mpicoll's own checks and views ---------------------------------------------

def _geometry(dt) -> tuple[int, int, int]:
    """(extent, true lb, true extent) of a datatype MPI accepts."""
    if dt == MPI.DATATYPE_NULL:
        raise PendingMPIError(MPI.ERR_TYPE,
                              "message: datatype is MPI.DATATYPE_NULL")
    unit = _UNITS.get(dt.handle)
    if unit is not None:
        return unit.itemsize, 0, unit.itemsize
    try:
        dt.Pack_size(1, MPI.COMM_SELF)
    except MPI.Exception:
        raise PendingMPIError(MPI.ERR_TYPE, "message: datatype is not "
                                            "committed") from None
    extent = dt.Get_extent()[1]
    if extent <= 0:
        raise ValueError(f"message: mpicoll cannot handle a datatype of "
                         f"extent {extent}")
    return (extent, *dt.Get_true_extent())


def _inside(export, geometry, ranges) -> None:
    """Check that ``(byte offset, count)`` ranges lie in the buffer."""
    extent, true_lb, true_extent = geometry
    size = export.nbytes if export else 0
    for offset, n in ranges:
        if n <= 0 or true_extent <= 0:
            continue
        if export is None:
            raise ValueError(f"message: {n} elements at MPI.BOTTOM (absolute "
                             f"addresses) are not supported by mpicoll")
        lo = offset + true_lb
        hi = offset + (n - 1) * extent + true_lb + true_extent
        if lo < 0 or hi > size:
            raise ValueError(f"message: {n} elements from byte {offset} need "
                             f"bytes {lo} to {hi}, the buffer holds {size}")


def _views(buf, export: Export | None, dt):
    """(uint8 view of the whole buffer, unit, derived)."""
    unit = _UNITS.get(dt.handle)
    derived = unit is None
    if derived:
        unit = _homogeneous(dt)
    raw = None if export is None else buffer_bytes(buf, export)
    if derived and raw is not None and type(raw) is not np.ndarray:
        raise ValueError("message: derived datatypes on device memory are "
                         "not supported by mpicoll")
    return raw, unit, derived


def _homogeneous(dt) -> np.dtype | None:
    """The one basic NumPy type all of ``dt``'s leaves have, if any
    (the leaves found through the type's envelope)."""
    units, todo = set(), [dt]
    while todo:
        t = todo.pop()
        if t.is_named:
            unit = _UNITS.get(t.handle)
            if unit is None:  # a pair type: INT_INT, DOUBLE_INT, ...
                pair = dtlib.to_numpy_dtype(t)
                units.update([f[0] for f in pair.fields.values()]
                             if pair.fields else [pair])
            else:
                units.add(unit)
            continue
        for inner in t.Get_contents()[-1]:
            todo.append(inner)
        if t is not dt:
            t.Free()
    if len(units) != 1:
        return None
    unit = units.pop()
    return unit if dt.size % unit.itemsize == 0 else None


# -- the API ----------------------------------------------------------------------

def message(spec, *, readonly: bool, blocks: int = 1, null: bool = False,
            where: dict) -> Message | None:
    """Parse a simple message as mpi4py's ``message_simple`` does.

    ``readonly``: the call only reads it (a send buffer, a root's bcast
    buffer). ``blocks``: how many blocks an inferred count divides into
    (the communicator size for a gather's receive buffer; 0 or 1: none).
    ``null``: the argument is ignored, as mpi4py ignores it for
    ``MPI.PROC_NULL`` (a gather's receive buffer on a non-root): None.
    """
    if null:
        return None
    if type(spec) is np.ndarray:
        fast = _fast(spec, readonly, blocks)
        if fast is not None:
            return fast
    return _parsed(_simple, spec, readonly, blocks, where)


def vector_message(spec, *, readonly: bool, blocks: int, null: bool = False,
                   where: dict) -> VectorMessage | None:
    """Parse a vector message as mpi4py's ``message_vector`` does:
    ``blocks`` counts and displacements (one per rank)."""
    if null:
        return None
    return _parsed(_vector, spec, readonly, blocks, where)


def _parsed(parse, spec, readonly: bool, blocks: int, where: dict):
    """``parse(spec, readonly, blocks)``; what mpi4py would raise for the
    spec raised as an :class:`~mpicoll.errors.MpicollError` of the same
    type, naming the rank and the call (:func:`mpicoll.errors.spec_error`)."""
    try:
        return parse(spec, readonly, blocks)
    except MpicollError:
        raise
    except Exception as exc:
        raise spec_error(exc, where) from exc


def _fast(spec: np.ndarray, readonly: bool, blocks: int) -> Message | None:
    """The common case without ctypes: a contiguous NumPy array of a type
    with an MPI twin, whole."""
    found = _fast_type(spec.dtype)
    flat = None if found is None else _flat(spec, readonly)
    blocks = max(blocks, 1)
    if flat is None or flat.size % blocks:
        return None
    return tuple.__new__(Message, (spec, flat, found[0], flat.size // blocks,
                                   found[1], False, flat.view(np.uint8), 0,
                                   blocks))


def _fast_type(dtype: np.dtype):
    """(datatype, unit) mpi4py gives an array of ``dtype``; None: ask."""
    key = (dtype.char, dtype.byteorder, dtype.itemsize)
    found = _FAST.get(key, False)
    if found is False:
        try:
            dt = _getdatatype(memoryview(np.empty(1, dtype)).format)
            found = (dt, _UNITS[dt.handle])
        except Exception:
            found = None
        _FAST[key] = found
    return found


def _flat(spec: np.ndarray, readonly: bool):
    """``spec`` as 1-D in memory order, where NumPy's buffer export
    (``PyBUF_ANY_CONTIGUOUS``, writable unless ``readonly``) succeeds."""
    flags = spec.flags
    if not (readonly or flags.writeable) or spec.dtype.hasobject:
        return None
    if flags.c_contiguous:
        return spec if spec.ndim == 1 else spec.reshape(-1)
    if flags.f_contiguous:
        return spec.T.reshape(-1)
    return None

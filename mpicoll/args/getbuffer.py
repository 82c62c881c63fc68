"""mpi4py's buffer acquisition (``PyMPI_GetBuffer``), in Python.

mpi4py 4 reads a message's memory in this order (``asbuffer.pxi``):

1. the buffer protocol (PEP 3118), asking for ``PyBUF_ANY_CONTIGUOUS``,
   plus ``PyBUF_WRITABLE`` for an output and ``PyBUF_FORMAT`` when no
   datatype was given;
2. if that raised: DLPack (``__dlpack__``/``__dlpack_device__``,
   ``asdlpack.pxi``), whose own errors win; an object without it passes on;
3. then the CUDA array interface (``ascaibuf.pxi``);
4. if neither applies, the buffer protocol's exception is re-raised.

:func:`get_buffer` does the same (the protocol through ``ctypes``, with
mpi4py's exact flags, so every exporter answers as it answers mpi4py) and
returns an :class:`Export`: address, length, read-only flag, format, and
the device type (0 for the buffer protocol, DLPack's ``kDL*`` otherwise).
The export stays held (``PyBuffer_Release`` or the capsule's deleter) as
long as the :func:`host_bytes` view made from it lives. Exceptions are the
ones mpi4py raises: type and message.
"""

from __future__ import annotations

import ctypes
import operator
import sys
from ctypes import (POINTER, Structure, c_char_p, c_int, c_int32, c_int64,
                    c_ssize_t, c_uint8, c_uint16, c_uint32, c_uint64,
                    c_void_p, py_object)
from typing import NamedTuple

import numpy as np

from mpicoll.device import cuda

_api = ctypes.pythonapi

PyBUF_WRITABLE = 0x0001
PyBUF_FORMAT = 0x0004
PyBUF_ANY_CONTIGUOUS = 0x0080 | 0x0010 | 0x0008

kDLCPU, kDLCUDA, kDLCUDAHost, kDLROCMHost, kDLCUDAManaged = 1, 2, 3, 11, 13
HOST_KINDS = (0, kDLCPU, kDLCUDAHost, kDLROCMHost, kDLCUDAManaged)
BYTE_FMT = None  # the format mpi4py maps to MPI.BYTE (unknown DLPack/CAI types)


class _PyBuffer(Structure):
    _fields_ = [("buf", c_void_p), ("obj", c_void_p), ("len", c_ssize_t),
                ("itemsize", c_ssize_t), ("readonly", c_int), ("ndim", c_int),
                ("format", c_char_p), ("shape", c_void_p),
                ("strides", c_void_p), ("suboffsets", c_void_p),
                ("internal", c_void_p)]


def _fn(name, restype, *argtypes):
    fn = getattr(_api, name)
    fn.restype, fn.argtypes = restype, list(argtypes)
    return fn


_GetBuffer = _fn("PyObject_GetBuffer", c_int, py_object, POINTER(_PyBuffer),
                 c_int)
_Release = _fn("PyBuffer_Release", None, POINTER(_PyBuffer))
try:
    _CheckBuffer = _fn("PyObject_CheckBuffer", c_int, py_object)
except AttributeError:  # a macro before Python 3.9
    def _CheckBuffer(obj) -> bool:
        try:
            memoryview(obj)
        except TypeError:
            return False
        return True
_IndexCheck = _fn("PyIndex_Check", c_int, py_object)
_SequenceCheck = _fn("PySequence_Check", c_int, py_object)
_CapsuleIsValid = _fn("PyCapsule_IsValid", c_int, py_object, c_char_p)
_CapsuleGetPointer = _fn("PyCapsule_GetPointer", c_void_p, py_object,
                         c_char_p)


class Export(NamedTuple):
    address: int
    nbytes: int
    readonly: bool
    format: str | None  # None: BYTE_FMT
    kind: int  # 0: buffer protocol; else the DLPack device type
    keep: object  # holds the export (a _Held, a capsule or the object)


class _Held:
    """A buffer-protocol export, released when the last view of it dies."""

    __slots__ = ("view",)

    def __init__(self, view: _PyBuffer) -> None:
        self.view = view

    def __del__(self) -> None:
        _Release(ctypes.byref(self.view))


class _Memory:
    """What :func:`host_bytes` hands NumPy: an address and what keeps it."""

    __slots__ = ("__array_interface__", "keep")

    def __init__(self, export: Export) -> None:
        self.keep = export.keep
        self.__array_interface__ = {
            "data": (export.address, bool(export.readonly)),
            "shape": (export.nbytes,), "typestr": "|u1", "version": 3}


def host_bytes(export: Export) -> np.ndarray:
    """A uint8 NumPy view of a host export, read-only when it is."""
    if export.nbytes == 0:
        raw = np.empty(0, np.uint8)
        raw.flags.writeable = not export.readonly
        return raw
    return np.asarray(_Memory(export))


def buffer_bytes(obj, export: Export):
    """A 1-D uint8 view of all of ``export``'s memory: NumPy for host
    memory, the device runtime's array (:mod:`mpicoll.device.cuda`) for device
    memory; ``obj`` is the object the export came from."""
    runtime = cuda.runtime_of(obj)
    if runtime is not None:
        array = runtime.as_array(obj)
    elif export.kind == kDLCUDA:  # a DLPack-only CUDA object
        array = cuda.cupy_runtime().xp.from_dlpack(obj)
    elif export.kind == -1:  # a NumPy array's own bytes (mpicoll.args.message)
        return export.keep
    elif export.kind in HOST_KINDS:
        return host_bytes(export)
    else:
        raise BufferError(f"buffer on DLPack device type {export.kind} is "
                          f"not supported by mpicoll")
    flat = array.reshape(-1) if array.flags.c_contiguous \
        else array.T.reshape(-1)
    raw = flat.view(np.uint8)
    info = getattr(raw, "__cuda_array_interface__", None) or \
        getattr(raw, "__array_interface__", None)
    moved = bool(raw.size and info and info["data"][0] != export.address)
    if raw.size != export.nbytes or moved:
        raise BufferError("the device runtime's view is not the buffer's "
                          "memory")
    return raw


# -- what mpi4py tests before it takes a message apart ------------------------

def is_buffer(obj) -> bool:
    return bool(_CheckBuffer(obj))


def is_dlpack(obj) -> bool:
    try:
        return hasattr(obj, "__dlpack__")
    except Exception:
        return False


def is_cai(obj) -> bool:
    try:
        return hasattr(obj, "__cuda_array_interface__")
    except Exception:
        return False


def is_integral(obj) -> bool:
    """mpi4py's ``is_integral``: an index that is not a sized sequence."""
    if not _IndexCheck(obj):
        return False
    if not _SequenceCheck(obj):
        return True
    try:
        len(obj)
    except Exception:
        pass
    else:
        return False
    try:
        operator.index(obj)
    except Exception:
        return False
    return True


def as_c(value, bits: int = 64) -> int:
    """``PyNumber_Index`` into a C integer of ``bits`` (MPI_Count/Aint)."""
    value = operator.index(value)
    if not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
        raise OverflowError("Python int too large to convert to C long")
    return value


# -- acquisition ---------------------------------------------------------------

def get_buffer(obj, readonly: bool, fmt: bool) -> Export:
    """mpi4py's ``getbuffer(obj, readonly, fmt)``."""
    flags = PyBUF_ANY_CONTIGUOUS
    if not readonly:
        flags |= PyBUF_WRITABLE
    if fmt:
        flags |= PyBUF_FORMAT
    view = _PyBuffer()
    try:
        _GetBuffer(obj, ctypes.byref(view), flags)
    except BaseException:
        for other in (_dlpack_buffer, _cai_buffer):
            try:
                return other(obj, flags)
            except NotImplementedError:
                pass
        raise
    held = _Held(view)
    form = view.format.decode("latin-1") if view.format else "B"
    return Export(view.buf or 0, view.len, bool(view.readonly), form, 0, held)


class _DLDataType(Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class _DLTensor(Structure):
    _fields_ = [("data", c_void_p), ("device_type", c_int),
                ("device_id", c_int32), ("ndim", c_int32),
                ("dtype", _DLDataType), ("shape", POINTER(c_int64)),
                ("strides", POINTER(c_int64)), ("byte_offset", c_uint64)]


class _DLManaged(Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", c_void_p),
                ("deleter", c_void_p)]


class _DLManagedVersioned(Structure):
    _fields_ = [("major", c_uint32), ("minor", c_uint32),
                ("manager_ctx", c_void_p), ("deleter", c_void_p),
                ("flags", c_uint64), ("dl_tensor", _DLTensor)]


_SIZES = {"char": 1, "short": ctypes.sizeof(ctypes.c_short),
          "int": ctypes.sizeof(c_int), "long": ctypes.sizeof(ctypes.c_long),
          "longlong": ctypes.sizeof(ctypes.c_longlong),
          "float": 4, "double": 8,
          "longdouble": ctypes.sizeof(ctypes.c_longdouble)}
_INTS = ("char", "short", "int", "long", "longlong")
_FLOATS = {"e": 2, "f": 4, "d": 8, "g": _SIZES["longdouble"]}


def _int_format(signed: bool, nbytes: int):
    for name, code in zip(_INTS, "bhilq"):
        if _SIZES[name] == nbytes:
            return code if signed else code.upper()
    return BYTE_FMT


def _float_format(nbytes: int, prefix: str = ""):
    for code, size in _FLOATS.items():
        if size == nbytes:
            return prefix + code
    return BYTE_FMT


def _dlpack_format(code: int, bits: int, lanes: int):
    """``dlpack_get_format`` and ``dlpack_get_itemsize``."""
    if lanes != 1:
        if code == 2 and lanes == 2 and bits // 8 in (4, 8, _FLOATS["g"]) \
                and bits % 8 == 0:
            return "Z" + _float_format(bits // 8), bits // 8 * 2
        return BYTE_FMT, 1
    itemsize = (bits + 7) // 8
    form = BYTE_FMT
    if code == 6 and bits == 8:
        form = "?"
    elif code in (0, 1) and bits % 8 == 0:
        form = _int_format(code == 0, bits // 8)
    elif code == 2 and bits % 8 == 0:
        form = _float_format(bits // 8)
    elif code == 5 and bits % 16 == 0:
        form = _float_format(bits // 16, "Z")
    return form, itemsize


def _contig(shape, strides, unit: int, order: str) -> bool:
    dims = range(len(shape)) if order == "F" else range(len(shape) - 1, -1, -1)
    size = unit
    for i in dims:
        if shape[i] > 1 and size != strides[i]:
            return False
        size *= shape[i]
    return True


def _dlpack_buffer(obj, flags: int) -> Export:
    try:
        dlpack = obj.__dlpack__
        dlpack_device = obj.__dlpack_device__
    except AttributeError:
        raise NotImplementedError("dlpack: missing support") from None
    device_type, _ = dlpack_device()
    device_type = int(device_type)
    versioned, name = True, b"dltensor_versioned"
    try:
        if device_type == kDLCPU:
            capsule = dlpack(max_version=(1, 0), copy=False)
        else:
            capsule = dlpack(stream=-1, max_version=(1, 0), copy=False)
    except TypeError:
        versioned, name = False, b"dltensor"
        capsule = dlpack() if device_type == kDLCPU else dlpack(stream=-1)
    if not _CapsuleIsValid(capsule, name):
        raise BufferError("dlpack: invalid capsule object")
    pointer = _CapsuleGetPointer(capsule, name)
    if versioned:
        managed = _DLManagedVersioned.from_address(pointer)
        if managed.major < 1:
            raise BufferError("dlpack: unexpected version")
        readonly = bool(managed.flags & 1)
    else:
        managed = _DLManaged.from_address(pointer)
        readonly = False
    tensor = managed.dl_tensor
    ndim = tensor.ndim
    if ndim < 0:
        raise BufferError("dlpack: number of dimensions is negative")
    if ndim > 0 and not tensor.shape:
        raise BufferError("dlpack: shape is NULL")
    shape = [tensor.shape[i] for i in range(ndim)]
    if any(n < 0 for n in shape):
        raise BufferError("dlpack: shape item is negative")
    if tensor.strides:
        strides = [tensor.strides[i] for i in range(ndim)]
        if any(s < 0 for s in strides):
            raise BufferError("dlpack: strides item is negative")
        if not _contig(shape, strides, 1, "C") and \
                not _contig(shape, strides, 1, "F"):
            raise BufferError("dlpack: buffer is not contiguous")
    if readonly and flags & PyBUF_WRITABLE:
        raise BufferError("dlpack: buffer is not writable")
    dtype = tensor.dtype
    size = 1
    for n in shape:
        size *= n
    size *= (dtype.bits * dtype.lanes + 7) // 8
    form, _ = _dlpack_format(dtype.code, dtype.bits, dtype.lanes)
    address = (tensor.data or 0) + tensor.byte_offset
    return Export(address, size, readonly, form, device_type, capsule)


def _cai_format(kind: str, itemsize: int):
    if kind == "b" and itemsize == 1:
        return "?"
    if kind in "iu":
        return _int_format(kind == "i", itemsize)
    if kind == "f":
        return _float_format(itemsize)
    if kind == "c" and itemsize % 2 == 0:
        return _float_format(itemsize // 2, "Z")
    return BYTE_FMT


def _cai_buffer(obj, flags: int) -> Export:
    try:
        cai = obj.__cuda_array_interface__
    except AttributeError:
        raise NotImplementedError("missing CUDA array interface") from None
    data, typestr, shape = cai["data"], cai["typestr"], cai["shape"]
    strides, descr, mask = cai.get("strides"), cai.get("descr"), \
        cai.get("mask")
    pointer, readonly = data
    size = 1
    for n in shape:
        size *= n
    if pointer is None and size == 0:
        pointer = 0
    try:
        address = operator.index(pointer)
    except TypeError:
        raise TypeError("an integer is required") from None
    order, kind, itemsize = typestr[0:1], typestr[1:2], int(typestr[2:])
    form = _cai_format(kind, itemsize)
    if flags & PyBUF_FORMAT:
        native = "<" if sys.byteorder == "little" else ">"
        if order in "<>" and order != native:
            raise BufferError(f"__cuda_array_interface__: typestr {typestr!r}"
                              f" with non-native byte order")
        if order not in "<>|":
            raise BufferError(f"__cuda_array_interface__: typestr {typestr!r}"
                              f" with unrecognized byte order")
    if mask is not None:
        raise BufferError("__cuda_array_interface__: "
                          "cannot handle masked arrays")
    if size < 0:
        raise BufferError(f"__cuda_array_interface__: buffer with negative "
                          f"size (shape:{shape}, size:{size})")
    if strides is not None and not _contig(shape, strides, itemsize, "C") \
            and not _contig(shape, strides, itemsize, "F"):
        raise BufferError(f"__cuda_array_interface__: buffer is not "
                          f"contiguous (shape:{shape}, strides:{strides}, "
                          f"itemsize:{itemsize})")
    if descr is not None and (len(descr) != 1 or descr[0] != ("", typestr)):
        import warnings

        warnings.warn("__cuda_array_interface__: ignoring 'descr' key",
                      RuntimeWarning, stacklevel=2)
    if readonly and flags & PyBUF_WRITABLE:
        raise BufferError("__cuda_array_interface__: buffer is not writable")
    return Export(address, size * itemsize, bool(readonly), form, kDLCUDA,
                  obj)

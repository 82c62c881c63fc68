"""``--device``: where the benchmark's buffers live (host NumPy, CuPy, or
the host model of CUDA).

Inputs and expected outputs are made on the host (:mod:`mpicoll.bench.specs`)
and copied to the device before timing; results are copied back only for
validation, after timing. On ``cuda`` and ``model`` every timed call is
followed by a synchronisation of the current stream, so a time covers the
device work a call started, not just its launch. ``model`` runs mpicoll's
whole device path on :mod:`mpicoll.device.hostmodel`'s arrays, with the
latencies ``MPICOLL_MODEL_LATENCIES`` names (default ``assumed``; the
syntax of :meth:`~mpicoll.device.hostmodel.Latencies.parse`): a dry run of
a GPU benchmark on a machine without one.
"""

from __future__ import annotations

import numpy as np

from mpicoll.device import hostmodel

DEVICES = ("cpu", "cuda", "model")


def unavailable(device: str) -> str | None:
    """Why ``device`` cannot be used here, or None."""
    if device == "cpu":
        return None
    if device == "model":
        try:
            hostmodel.from_environment()
        except ValueError as e:
            return f"--device model: {e}"
        return None
    try:
        import cupy
    except ImportError:
        return "--device cuda needs CuPy (pip install cupy-cuda12x)"
    try:
        cupy.cuda.runtime.getDeviceCount()
    except cupy.cuda.runtime.CUDARuntimeError as e:
        return f"--device cuda: no usable GPU ({e})"
    return None


def to_device(array: np.ndarray, device: str):
    """``array`` on ``device`` (the same object for ``cpu``)."""
    if device == "cpu":
        return array
    if device == "model":
        hostmodel.from_environment()
        return hostmodel.device_array(array)
    import cupy

    return cupy.asarray(array)


def to_host(array) -> np.ndarray:
    """A NumPy copy (or the array itself) of a host or device array."""
    if isinstance(array, hostmodel.DeviceArray):
        hostmodel.NULL_STREAM.synchronize()
        return np.array(array.view(np.ndarray))
    if isinstance(array, np.ndarray):
        return array
    return array.get()


def synchronizer(device: str):
    """A no-argument function that waits for the device's queued work."""
    if device == "cpu":
        return _nothing
    if device == "model":
        return hostmodel.NULL_STREAM.synchronize
    import cupy

    return lambda: cupy.cuda.get_current_stream().synchronize()


def _nothing() -> None:
    return None

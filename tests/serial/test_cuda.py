"""The device layer's pieces, one process, no GPU: CUDA-awareness,
location, kernels per array module, device steps, lifetimes."""

from __future__ import annotations

import numpy as np
import pytest

from mpicoll.device import hostmodel
import mpicoll.device.steps as device_steps
from mpicoll.device import cuda, rules as devicecall
from mpicoll.coll.registry import lookup
from mpicoll.schedule.ops import builtin_op, Op


@pytest.fixture
def runtime():
    yield hostmodel.install()
    hostmodel.uninstall()


@pytest.mark.parametrize(("setting", "want"), [("1", True), ("0", False)])
def test_environment_decides_cuda_awareness(monkeypatch, setting, want):
    monkeypatch.setenv("MPICOLL_CUDA_AWARE", setting)
    monkeypatch.setattr(cuda, "library_says_cuda_aware", pytest.fail)
    assert cuda.cuda_aware() is want


def test_a_bad_setting_is_an_error(monkeypatch):
    monkeypatch.setenv("MPICOLL_CUDA_AWARE", "yes")
    with pytest.raises(ValueError, match="MPICOLL_CUDA_AWARE='yes'"):
        cuda.cuda_aware()


@pytest.mark.parametrize(("says", "probe", "want"), [
    (None, None, False), (False, None, False), (True, False, False),
    (True, True, True)])
def test_the_library_is_asked_and_a_yes_is_probed(monkeypatch, says, probe,
                                                  want):
    """No probe unless the library says yes: a pointer it cannot read
    could crash the process."""
    monkeypatch.delenv("MPICOLL_CUDA_AWARE", raising=False)
    monkeypatch.setattr(cuda, "_library_aware", None)
    monkeypatch.setattr(cuda, "library_says_cuda_aware", lambda: says)
    monkeypatch.setattr(cuda, "_round_trip",
                        pytest.fail if probe is None else lambda: probe)
    assert cuda.cuda_aware() is want


def test_this_mpich_wheel_is_not_cuda_aware():
    """The PyPI MPICH build answers the query, and says no."""
    assert cuda.library_says_cuda_aware() is False


def test_placement(runtime):
    assert cuda.location(np.zeros(3)) is None
    assert cuda.runtime_of(np.zeros(3)) is None
    x = hostmodel.device_array([1.0, 2.0])
    assert cuda.location(x) == (runtime, 0)
    assert type(cuda.empty_like(x, 5)) is hostmodel.DeviceArray
    assert type(cuda.empty_like(np.zeros(1), 5)) is np.ndarray


def test_builtin_kernels_run_on_the_current_stream(runtime):
    a, b = hostmodel.device_array([1, 5]), hostmodel.device_array([4, 2])
    out = runtime.xp.empty(2, a.dtype)
    stream = runtime.new_stream(0)
    with runtime.use(0, stream):
        builtin_op("max").kernel(runtime.xp)(a, b, out)
    assert stream.launched == 1
    stream.synchronize()
    np.testing.assert_array_equal(out.view(np.ndarray), [4, 5])
    # On NumPy a built-in op's kernel is the ufunc itself (its output the
    # third argument), except where NumPy wants the output by keyword.
    assert builtin_op("sum").kernel(np) is np.add
    x, y, z = np.array([1, 5]), np.array([4, 2]), np.empty(2, int)
    builtin_op("max").kernel(np)(x, y, z)
    np.testing.assert_array_equal(z, [4, 5])


def test_user_kernels_are_given_the_arrays_as_they_are(runtime):
    op = Op.from_callable(np.minimum, commute=True)
    assert op.kernel(runtime.xp) is op.apply


def _ring_steps(runtime, staged, count=64):
    alg = lookup("allreduce", "ring")
    schedule = alg.schedule(0, 2, count, root=0, commutative=True)
    arrays = {"send": runtime.xp.empty(count), "recv": runtime.xp.empty(count),
              "tmp": runtime.xp.empty(schedule.tmp),
              "sync": np.empty(0, np.uint8)}
    mirrors = {k: np.empty(len(v), v.dtype) for k, v in arrays.items()} \
        if staged else None
    stream = runtime.new_stream(0)
    return device_steps.compile_device(schedule, arrays, builtin_op("sum"),
                                       runtime, 0, stream, mirrors)


@pytest.mark.parametrize("staged", [False, True], ids=["aware", "staged"])
def test_messages_are_cut_into_pieces_behind_fences(runtime, monkeypatch,
                                                    staged):
    """Ring allreduce of 64 doubles on 2 ranks: two rounds of one 256-byte
    message each way; in 64-byte pieces, four steps per round. Every
    step that posts has a fence; staged, each piece has its own (its
    copy to the host), aware, a round's pieces share one."""
    monkeypatch.setattr(device_steps, "PIECE_BYTES", 64)
    steps, end = _ring_steps(runtime, staged)
    posting = [s for s in steps if s.sends or s.recvs]
    assert len(posting) == 8
    assert all(s.ready is not None for s in posting)
    assert all(b.nbytes == 64 for s in posting for b, _ in s.sends + s.recvs)
    fences = {id(s.ready) for s in posting}
    assert len(fences) == (8 if staged else 2)
    host = all(type(b) is np.ndarray for s in posting
               for b, _ in s.sends + s.recvs)
    assert host is staged
    assert end is not None


def test_held_objects_are_released_once_their_event_is_done(runtime):
    stream = runtime.new_stream(0)
    stream.enqueue(lambda: None, 0.05)  # a kernel the event waits behind
    event = runtime.new_event(0)
    event.record(stream)
    kept = object()
    devicecall.hold_until(event, (kept,))
    assert any(kept in objects for _, objects in devicecall._held)
    event.synchronize()
    devicecall.hold_until(None, ())
    assert not any(kept in objects for _, objects in devicecall._held)


def test_model_work_takes_effect_once_observed(runtime):
    """The host model's laziness: a copy changes nothing until an event
    after it is seen complete; a stream's wait on another stream's event
    applies that stream first."""
    copies, kernels = runtime.new_stream(0), runtime.new_stream(0)
    src, dst = hostmodel.device_array([1.0, 2.0]), np.zeros(2)
    runtime.copy_async(dst, src, copies)
    np.testing.assert_array_equal(dst, [0, 0])
    copied = runtime.new_event(0)
    copied.record(copies)
    out = runtime.xp.empty(2)
    kernels.wait_event(copied)
    with runtime.use(0, kernels):
        runtime.xp.add(dst.view(hostmodel.DeviceArray), src, out=out)
    np.testing.assert_array_equal(dst, [0, 0])  # nothing observed yet
    kernels.synchronize()
    np.testing.assert_array_equal(dst, [1, 2])
    np.testing.assert_array_equal(out.view(np.ndarray), [2, 4])


def test_model_work_is_late_by_its_latency(runtime):
    """With latencies, work is not complete until its time has come (an
    hour here: the test does not wait for it) and the ledger counts it."""
    hostmodel.set_latencies(hostmodel.Latencies(copy=3600.0))
    hostmodel.LEDGER.reset()
    stream = runtime.new_stream(0)
    runtime.copy_async(np.zeros(1), hostmodel.device_array([1.0]), stream)
    event = runtime.new_event(0)
    event.record(stream)
    assert not event.done
    assert hostmodel.LEDGER.copies == 1 and hostmodel.LEDGER.early == 1


@pytest.mark.parametrize(("text", "want"), [
    ("0", hostmodel.Latencies()),
    ("assumed", hostmodel.ASSUMED),
    ("copy=2,bandwidth=10", hostmodel.Latencies(copy=2e-6, bandwidth=1e10)),
    ("assumed,flops=0.5", hostmodel.ASSUMED._replace(flops=5e11))])
def test_model_latencies_are_parsed(text, want):
    assert hostmodel.Latencies.parse(text) == want


@pytest.mark.parametrize("text", ["copy", "copy=-1", "speed=3", "flops=0",
                                  "copy=x"])
def test_bad_model_latencies_are_refused(text):
    with pytest.raises(ValueError, match="device model latencies"):
        hostmodel.Latencies.parse(text)


def test_a_blocking_call_on_another_stream_waits_for_the_last_copy_back(
        runtime):
    """BlockingNative keeps its pinned mirrors. Made again under another
    current stream, it first makes that stream wait for the last run's
    end (its copy back from the mirrors, on the stream the caller had
    then), before this run's copies and its MPI call write them."""
    calls = []

    def native(nonblocking, send, recv):
        return lambda: calls.append((nonblocking, send, recv))

    x = hostmodel.device_array([1.0, 2.0])
    y = hostmodel.device_array([0.0, 0.0])
    first, second = runtime.new_stream(0), runtime.new_stream(0)
    target = devicecall.DeviceTarget(runtime, 0, None, True)
    call = devicecall.BlockingNative(target, "allreduce", native, x, y)
    with runtime.use(0, first):
        end = call.run()
    waits = []
    real = second.wait_event
    second.wait_event = lambda event: (waits.append(event), real(event))
    with runtime.use(0, second):
        call.run()
    with runtime.use(0, second):
        call.run()  # the same stream again: no wait
    assert waits == [end]
    assert len(calls) == 3 and calls[0][1] is calls[2][1]  # same mirrors

"""Warp-level primitives for numba's CUDA simulator.

The simulator of numba-cuda 0.30.4 (``NUMBA_ENABLE_CUDASIM=1``) runs every CUDA thread
of a block as a Python thread but has none of the warp primitives, so kernels using
them cannot run in CPU CI. :func:`install` adds ``shfl_sync``, ``shfl_up_sync``,
``shfl_down_sync``, ``shfl_xor_sync``, ``syncwarp``, ``ballot_sync``, ``all_sync``,
``any_sync``, ``eq_sync``, ``match_any_sync``, ``match_all_sync``, ``activemask`` and
``lanemask_lt`` to the ``cuda`` module that simulated kernels see, with the argument
lists of numba.cuda's GPU versions, so one kernel source runs on both.

Model:

- A warp is 32 consecutive linear thread ids of a block (x fastest, then y, then z),
  as on hardware and as the simulator's ``cuda.laneid`` already counts.
- Each call is a rendezvous of the lanes its mask names: every lane drops its value
  into a record made for that one call and waits until all have arrived. A fresh
  record per call means no second barrier is needed before slots are reused. The
  records live on the simulator's per-block manager, so no state survives into the
  next block (the simulator runs blocks one after another).
- Partial warps (block sizes not a multiple of 32): lanes that do not exist are
  dropped from the mask, so the usual full mask means "all existing lanes". Hardware
  leaves naming absent lanes undefined; we take the tolerant reading because common
  kernels rely on it. A shuffle whose source lane is absent or not in the mask returns
  the caller's own value (hardware: an undefined value).
- Shuffle offsets and source lanes use their low 5 bits, as PTX ``shfl.sync`` does.
- Results have the GPU's types: ``ballot_sync`` and the ``match_*`` masks are signed
  32-bit (all 32 lanes set gives -1), ``activemask``/``lanemask_lt`` unsigned, votes
  ``bool``; a shuffle returns the source lane's object itself, so np.float32 stays
  np.float32. ``popc`` is replaced so it counts the two's-complement bits of negative
  values (the simulator's gives 1 for ``popc(-1)``).
- ``activemask()`` stands in for convergence, which independently running threads do
  not have: it waits until every other existing lane has exited, waits in another
  warp call or in ``syncthreads``, or calls ``activemask`` at the same source line, and
  returns the lanes of that group. So lock-step code gets what a GPU gives: lanes
  that returned early are out, and so are lanes in the other branch of an if/else.

Divergence: where hardware would hang or give undefined results, a call raises
:class:`WarpDivergenceError` naming the primitive, the warp and the missing lanes. It
does so at once when a named lane has exited, waits at a barrier that a lane of the
call has not reached (a barrier being released is told apart by counting the barriers
each thread has passed, not by timing), calls another
primitive with the same mask, or waits in a warp call that can never complete (a
cycle); otherwise after ``TIMEOUT_S`` seconds in which no lane arrived (e.g. a lane
spinning on a lock). The simulator re-raises a failing thread's exception from the
kernel launch, its message prefixed by the thread's ``tid=[..] ctaid=[..]``, once the
block's other threads have stopped (up to ``JOIN_S``).

Static shared arrays: the simulator's ``cuda.shared.array`` finds a block's array for
a source line in a dict, and creates it when missing, without a lock: two threads that
reach the line together can both miss and each keep an array of its own, whose
writes the others never see and whose unwritten (``np.empty``) elements they read. It
showed as rare wrong results in CPU CI under load (a CUDA-core attention dQ, a
dropout bias gradient of ~1e32, a float32 GEMM). :func:`install` replaces it with the
same lookup under a lock.
"""

import os
import queue
import sys
import threading
import time

import numpy as np

__all__ = ["install", "WarpDivergenceError", "TIMEOUT_S", "SWITCH_INTERVAL_S", "exited_threads"]

# Backstop only: the common divergences are detected without waiting. Long enough
# that a slow lane among ~1000 GIL-sharing threads is not mistaken for a lost one:
# 5 s was not (lanes queueing on the simulator's per-module lock around every device
# function call, behind warp-mates that had branched past them, took longer).
TIMEOUT_S = 60.0
# How long a failed launch waits for its other threads to stop (see _track_threads).
JOIN_S = 10.0
# How often waiting lanes look for lanes stuck in syncthreads or aborted kernels:
# the simulator signals neither to us.
_POLL_S = 0.05
# The simulator's own block manager busy-polled its threads while holding the GIL, so
# each lane woken from a warp call could wait out a whole switch interval (5 ms by
# default) before it ran, and install() lowered the interval to 1 ms. Its
# replacement (_track_threads) sleeps, and there the default is the faster one:
# a barrier cost each thread (256-thread blocks, 2-core host) 36-44 us at 5 ms against
# 83-93 at 1 ms, a shuffle 25% less; LayerNorm, GEMM and dropout simulator tests ran
# 0-18% faster. If set, install() lowers the process's interval to this (never
# raises it); None leaves it alone.
SWITCH_INTERVAL_S = None
_FULL = 0xFFFFFFFF
_WARP = 32

_install_lock = threading.Lock()
_state_lock = threading.Lock()
_installed = False


class WarpDivergenceError(RuntimeError):
    """A warp primitive cannot complete: lanes named in its mask cannot arrive."""


def install():
    """Add the warp primitives to the simulator's in-kernel ``cuda`` module.

    Does nothing (returns False) unless the simulator is enabled; idempotent.
    """
    global _installed
    from numba.cuda.core import config

    if not config.ENABLE_CUDASIM:
        return False
    with _install_lock:
        if not _installed:
            # numba.cuda.simulator, not numba_cuda.numba.cuda.simulator: the latter is a
            # second copy of the module that simulated kernels never see.
            from numba.cuda.simulator import kernel, kernelapi

            _track_threads(kernel.BlockThread, kernel.BlockManager)
            _fast_device_calls(kernel)
            os.register_at_fork(after_in_child=_forget_pool)
            kernelapi.FakeCUDAShared.array = _shared_array
            fake = kernelapi.FakeCUDAModule
            for fn in _PRIMITIVES:
                if not hasattr(fake, fn.__name__):  # a future simulator's own wins
                    setattr(fake, fn.__name__, fn)
            fake.popc = popc
            _installed = True
        if SWITCH_INTERVAL_S and sys.getswitchinterval() > SWITCH_INTERVAL_S:
            sys.setswitchinterval(SWITCH_INTERVAL_S)
    return True


def _fast_device_calls(kernel):
    """Swap a module's ``cuda`` global for the fake one once per launch, not once per
    device-function call.

    The simulator wraps every device-function call in ``swapped_cuda_module`` (two
    lock round trips, a context manager, and a scan of the module's globals whenever
    no other thread is inside one of its helpers), so that the helper's module sees
    the launch's fake ``cuda``; py-spy of a LayerNorm backward simulator test read
    ~15% of its kernel threads' samples there. Here the first call of a helper of a
    module in a launch enters that swap and holds it until the launch's threads have
    stopped; later calls of that module's helpers run directly. The kernel's own
    module is swapped by the launch itself for its whole run. Outside a launch the
    simulator's path is kept.
    """
    from numba.cuda.simulator.kernelapi import swapped_cuda_module

    fake_kernel = kernel.FakeCUDAKernel
    call = fake_kernel.__call__
    lock = threading.Lock()
    # id(module globals) -> the swap held for the running launch (None: the kernel's
    # own module, which the launch swaps); None between launches. The simulator runs
    # one launch at a time, and a module's globals live as long as the module.
    state = {"held": None}

    def device_call(self, *args):
        if self._device:
            held = state["held"]
            context = kernel._kernel_context
            if held is None or context is None:
                return call(self, *args)
            fn_globals = self.fn.__globals__
            if id(fn_globals) not in held:
                with lock:
                    if id(fn_globals) not in held:
                        swap = swapped_cuda_module(self.fn, context)
                        swap.__enter__()
                        held[id(fn_globals)] = swap
            return self.fn(*args)
        if kernel._kernel_context is not None:
            return call(self, *args)
        state["held"] = {id(self.fn.__globals__): None}
        try:
            return call(self, *args)
        finally:
            held, state["held"] = state["held"], None
            with lock:
                for swap in held.values():
                    if swap is not None:
                        swap.__exit__(None, None, None)

    device_call.__doc__ = call.__doc__
    fake_kernel.__call__ = device_call


_SHARED_LOCK = threading.Lock()
# numba type -> NumPy dtype of static shared arrays (as_dtype is slow for a per-thread
# call).
_SHARED_DTYPES = {}


def _new_shared(shape, dtype):
    """A new static shared array (uninitialised, as on a GPU)."""
    return np.empty(shape, dtype)


def _shared_array(self, shape, dtype, alignment=None):
    """``cuda.shared.array`` of the simulator (``FakeCUDAShared``), thread-safe: a
    static array is identified, as there, by the calling source file and line, and
    created once per block under a lock; ``shape == 0`` is the dynamic shared
    memory, one buffer for every dtype."""
    from numba.cuda.simulator.kernelapi import numpy_support, types

    if alignment is not None:
        raise RuntimeError("Array alignment is not supported in cudasim")
    if isinstance(dtype, types.Type):
        found = _SHARED_DTYPES.get(dtype)
        if found is None:
            found = _SHARED_DTYPES[dtype] = numpy_support.as_dtype(dtype)
        dtype = found
    if shape == 0:
        return np.frombuffer(self._dynshared.data, dtype=dtype,
                             count=self._dynshared_size // dtype.itemsize)
    caller = sys._getframe(1)
    key = (caller.f_code.co_filename, caller.f_lineno)
    with _SHARED_LOCK:
        res = self._allocations.get(key)
        if res is None:
            res = self._allocations[key] = _new_shared(shape, dtype)
    return res


def _bits(mask):
    return [lane for lane in range(_WARP) if mask >> lane & 1]


def _i32(x):
    return x - (1 << 32) if x & 0x80000000 else x


class _Call:
    """One warp primitive call: the values of the lanes that have arrived."""

    __slots__ = ("op", "mask", "site", "values", "arrived", "done", "error", "last")

    def __init__(self, op, mask, site=None):
        self.op, self.mask, self.site = op, mask, site
        self.values = [None] * _WARP
        self.arrived = 0
        self.done = False
        self.error = None
        self.last = time.monotonic()


class _Block:
    """Warp state of one simulated block."""

    def __init__(self, manager, block_idx):
        dx, dy, dz = manager._block_dim
        self.nthreads = dx * dy * dz
        self.index = tuple(block_idx)
        self.lock = threading.Lock()
        self.warps = {}
        self.threads = {}  # thread_id -> BlockThread, from the thread's start
        self.exited = set()
        # The first divergence found: lanes that fail because of it (their partner
        # raised and exited) repeat it, so whichever thread's error the simulator
        # reports names the cause.
        self.failure = None

    def warp(self, w):
        with self.lock:
            warp = self.warps.get(w)
            if warp is None:
                warp = self.warps[w] = _Warp(self, w)
        return warp

    def thread_exited(self, tid):
        self.exited.add(tid)
        warp = self.warps.get(tid // _WARP)
        if warp is not None:  # lanes waiting for this one should find out now
            with warp.cond:
                warp.cond.notify_all()


def exited_threads(thread):
    """Thread ids of ``thread``'s block that have left the kernel (returned or raised).

    Not the same as ``not t.is_alive()``: a thread the simulator has started but that
    has not begun to run yet is not alive either (on a loaded machine, for a while)."""
    return _block_of(thread).exited


def _block_of(thread):
    manager = thread._manager
    block = getattr(manager, "_warp_state", None)
    if block is None:
        with _state_lock:
            block = getattr(manager, "_warp_state", None)
            if block is None:
                block = manager._warp_state = _Block(manager, thread.blockIdx)
    return block


class _Gate:
    """Barrier state of one simulated block (see :func:`_track_threads`).

    ``live`` counts the block's threads that have not exited (from before the first
    one starts), ``waiting`` the threads in the open barrier. The barrier opens when
    every live thread waits in it, as the simulator's own manager decides, but the
    last thread to arrive (or to exit) opens it, under ``lock``, instead of a manager
    thread that polls every thread's flags while holding the GIL.
    """

    def __init__(self, nthreads):
        self.lock = threading.Lock()
        self.opened = threading.Condition(self.lock)  # barrier waiters
        self.changed = threading.Condition(self.lock)  # the manager: exits, failures
        self.live = nthreads
        self.waiting = []
        self.generation = 0
        self.failed = None  # the first thread error: (exception, traceback)

    def open(self):
        """Release the barrier's threads (lock held): their flags clear at once, so a
        released lane is never seen waiting in a barrier it has left."""
        for thread in self.waiting:
            thread.syncthreads_blocked = False
        self.waiting = []
        self.generation += 1
        self.opened.notify_all()

    def open_if_all_wait(self):
        """Open the barrier if every live thread waits in it (lock held)."""
        if self.waiting and len(self.waiting) == self.live:
            self.open()


class _Pool:
    """Simulator threads kept between blocks: a task queue and the count of threads
    waiting on it. Starting a Python thread costs ~140 us (start, join) on a 2-core
    host against ~55 us to hand a waiting one a task, and CI's simulated kernels
    start hundreds of thousands."""

    def __init__(self):
        self.lock = threading.Lock()
        self.tasks = queue.SimpleQueue()
        self.idle = 0

    def reserve(self, n):
        """Take ``n`` threads for a block: returns how many new ones to start."""
        with self.lock:
            taken = min(self.idle, n)
            self.idle -= taken
        return n - taken


_pool = None


def _forget_pool():
    global _pool
    _pool = None  # a forked child has none of its parent's threads


def _track_threads(block_thread_cls, manager_cls):
    """Run each simulated block without the simulator's polling manager, on pooled
    threads; record each thread's exit and barriers passed, and make a failed
    block's launch wait for its threads.

    numba-cuda's BlockManager.run starts a thread per CUDA thread and polls them all
    in a loop (flags, ``is_alive``) until they have exited, holding the GIL against
    the threads it waits for: py-spy of a LayerNorm simulator test read most of the
    process's samples there. Here a :class:`_Gate` per block does the same
    bookkeeping when threads arrive at a barrier or exit, the manager sleeps until
    the last thread exits or one raises, and threads come from a :class:`_Pool`
    (each is a BlockThread given the CUDA thread's identity for one task; the
    simulator's debug mode keeps a fresh thread per CUDA thread).

    The barrier count tells a lane that waits in syncthreads to be released from one
    that never will be (see _Warp.blocker). The block re-raises the first thread
    error it sees while its other threads may still run until their next barrier or
    warp call: such a thread could run on into the next launch of a kernel of the
    same module, whose ``cuda`` global (the simulator swaps it per launch) would then
    hand it that launch's shared arrays. So a failing block's threads, told to abort,
    are waited for (up to JOIN_S; a lane spinning on a lock may never stop) before
    the error leaves the launch.
    """
    from numba.cuda.simulator.kernelapi import Dim3

    run = block_thread_cls.run

    def run_tracked(self):
        self.barriers_passed = 0
        gate = self._manager._gate
        block = _block_of(self)
        block.threads[self.thread_id] = self
        if gate.failed is not None:
            # A pooled thread that picks its task up after another failed runs to
            # its first barrier or warp call, as the simulator's threads, all started
            # at once, did.
            self.abort = True
        try:
            run(self)
        finally:
            block.thread_exited(self.thread_id)
            with gate.lock:
                gate.live -= 1
                if self.exception is not None:
                    if gate.failed is None:
                        # The error itself: a pooled thread's own field is reset by
                        # its next task.
                        gate.failed = self.exception
                else:
                    gate.open_if_all_wait()
                gate.changed.notify()

    class Worker(block_thread_cls):
        """A pooled simulator thread: runs one CUDA thread of a block per task."""

        def __init__(self, pool):
            threading.Thread.__init__(self, daemon=True)
            self.pool = pool

        def run(self):
            pool = self.pool
            while True:
                manager, grid_point, block_point, target = pool.tasks.get()
                dx, dy, _ = manager._block_dim
                x, y, z = block_point
                self._manager = manager
                self.blockIdx, self.threadIdx = Dim3(*grid_point), Dim3(x, y, z)
                self.thread_id = x + dx * (y + dy * z)
                self.exception, self.abort, self.debug = None, False, False
                self.syncthreads_blocked = False
                self._target, self._args, self._kwargs = target, (), {}
                run_tracked(self)
                self._manager = None  # nothing of the launch is kept while idle
                with pool.lock:
                    pool.idle += 1

    def syncthreads(self):
        if self.abort:
            raise RuntimeError("abort flag set on syncthreads call")
        gate = self._manager._gate
        with gate.lock:
            self.syncthreads_blocked = True
            gate.waiting.append(self)
            generation = gate.generation
            gate.open_if_all_wait()
            while gate.generation == generation and not self.abort:
                gate.opened.wait()
        if self.abort:
            raise RuntimeError("abort flag set on syncthreads clear")
        self.barriers_passed += 1

    def _start(self, nthreads, grid_point, target, started):
        """Start the block's ``nthreads`` threads, counting them in ``started[0]``."""
        if self._debug:
            for block_point in np.ndindex(*self._block_dim):
                block_thread_cls(target, self, grid_point, block_point, True).start()
                started[0] += 1
            return
        global _pool
        pool = _pool
        if pool is None:
            pool = _pool = _Pool()
        for _ in range(pool.reserve(nthreads)):
            Worker(pool).start()
        for block_point in np.ndindex(*self._block_dim):
            pool.tasks.put((self, grid_point, block_point, target))
            started[0] += 1

    def _run_block(self, grid_point, *args):
        nthreads = int(np.prod(self._block_dim))
        gate = self._gate = _Gate(nthreads)

        def target():
            self._f(*args)

        started = [0]
        try:
            _start(self, nthreads, grid_point, target, started)
        finally:
            with gate.lock:
                # Threads never started (a failed start) will not exit: stop counting them.
                gate.live -= nthreads - started[0]
                gate.open_if_all_wait()
                while gate.live and gate.failed is None:
                    gate.changed.wait()
                failed = gate.failed
        if failed is None:
            return
        deadline = time.monotonic() + JOIN_S
        block = getattr(self, "_warp_state", None)
        with gate.lock:
            for thread in list(block.threads.values()) if block else ():
                thread.abort = True
                thread.syncthreads_blocked = False
            gate.opened.notify_all()
            while gate.live and time.monotonic() < deadline:
                gate.changed.wait(max(0.0, deadline - time.monotonic()))
        raise failed[0].with_traceback(failed[1])

    block_thread_cls.run = run_tracked
    block_thread_cls.syncthreads = syncthreads
    manager_cls.run = _run_block


class _Warp:
    def __init__(self, block, w):
        self.block, self.w = block, w
        self.lanes = min(_WARP, block.nthreads - _WARP * w)
        self.existing = (1 << self.lanes) - 1
        self.cond = threading.Condition()
        self.pending = {}  # mask -> _Call still collecting lanes
        self.waiting = {}  # lane -> _Call it waits in
        self.gathering = {}  # source line -> activemask() _Call collecting lanes

    def __str__(self):
        return f"warp {self.w} (threads {_WARP * self.w}..{_WARP * self.w + self.lanes - 1}) of block {self.block.index}"

    def fail(self, call, message):
        message = self.block.failure = self.block.failure or message
        if call is not None:
            call.error = message
            for calls, key in ((self.pending, call.mask), (self.gathering, call.site)):
                if calls.get(key) is call:
                    del calls[key]
            self.cond.notify_all()
        raise WarpDivergenceError(message)

    def wait(self, call, lane, thread):
        self.waiting[lane] = call
        if self.gathering:  # one more lane out of activemask's way
            self.cond.notify_all()
        try:
            while not call.done:
                if call.error:
                    raise WarpDivergenceError(call.error)
                if thread.abort:  # another thread failed and the launch is over
                    raise RuntimeError(f"abort flag set while waiting in {call.op}")
                self.cond.wait(_POLL_S)
                # One lane per call looks into the others; the rest only wait.
                first = (call.arrived & -call.arrived).bit_length() - 1
                if lane == first and not call.done and call.error is None:
                    problem = self.diagnose(call)
                    if problem:
                        self.fail(call, problem)
        finally:
            del self.waiting[lane]

    def blocker(self, lane, live, call):
        """Why ``lane`` can never arrive in ``call`` (or anywhere), or None if it still may."""
        tid = _WARP * self.w + lane
        thread = self.block.threads.get(tid)
        if tid in self.block.exited:
            error = getattr(thread, "exception", None)
            return f"exited the kernel by raising {error[0]!r}" if error else "exited the kernel"
        if thread is not None and thread.syncthreads_blocked:
            # The simulator releases a barrier by clearing its threads' flags one at a
            # time (on a loaded machine that can take seconds), so a flagged lane may be
            # on its way out. It is not when the flag was read while the lane was in
            # barrier number k + 1 (k passed before and after the read) and a lane of
            # ``call`` has passed at most k: that lane cannot reach barrier k + 1 before
            # ``call`` completes, so the barrier cannot open.
            before = thread.barriers_passed
            flagged = thread.syncthreads_blocked
            if flagged and thread.barriers_passed == before:
                behind = [other for other in _bits(call.arrived)
                          if self._passed(other) <= before]
                if behind:
                    return (f"waits in syncthreads (barrier {before + 1}), which lanes "
                            f"{behind} waiting here have not reached")
            return None
        other = self.waiting.get(lane)
        if other is not None and not other.done and other not in live and other.site is None:
            return f"waits in {other.op}(mask={other.mask:#010x}), which cannot complete"
        return None

    def _passed(self, lane):
        thread = self.block.threads.get(_WARP * self.w + lane)
        return thread.barriers_passed if thread is not None else 0

    def settle(self, call):
        """Complete activemask() ``call`` unless lanes outside it still run; return those.

        Lanes in an activemask() at an earlier source line count as running: that group
        completes first, which is where if/else branches reconverge.
        """
        running = []
        for lane in range(self.lanes):
            tid = _WARP * self.w + lane
            if call.arrived >> lane & 1 or tid in self.block.exited:
                continue
            thread, other = self.block.threads.get(tid), self.waiting.get(lane)
            parked = other is not None and not other.done and not (other.site and other.site < call.site)
            if thread is None or not (thread.syncthreads_blocked or parked):
                running.append(lane)
        if not running:
            call.mask, call.done = call.arrived, True
            del self.gathering[call.site]
            self.cond.notify_all()
        return running

    def diagnose(self, call):
        """A message if ``call`` can never complete, else None."""
        if call.site:
            running = self.settle(call)
            if running and time.monotonic() - call.last > TIMEOUT_S:
                return (f"activemask() in {self}: lanes {running} neither arrived, exited nor "
                        f"waited elsewhere within TIMEOUT_S={TIMEOUT_S} s")
            return None
        # A call can complete when each missing lane is running or waits in a call that
        # can complete; grow that set from nothing so that cycles stay out of it.
        live, grown = set(), True
        while grown:
            grown = False
            for c in self.pending.values():
                if c not in live and all(
                    self.blocker(lane, live, c) is None for lane in _bits(c.mask & ~c.arrived)
                ):
                    live.add(c)
                    grown = True
        head = f"{call.op}(mask={call.mask:#010x}) in {self}"
        missing = _bits(call.mask & ~call.arrived)
        if call not in live:
            why = {lane: self.blocker(lane, live, call) for lane in missing}
            why = {lane: reason for lane, reason in why.items() if reason}
            text = "; ".join(f"lane {lane} {reason}" for lane, reason in why.items())
            return f"{head}: lanes {list(why)} can never arrive: {text}"
        if time.monotonic() - call.last > TIMEOUT_S:
            return (f"{head}: lanes {missing} still running but not arriving within "
                    f"TIMEOUT_S={TIMEOUT_S} s (spinning, or diverged?)")
        return None


def _rendezvous(op, mask, value):
    """Wait until every lane named in ``mask`` has called ``op``; return (call, lane)."""
    thread = threading.current_thread()
    block = _block_of(thread)
    lane = thread.thread_id % _WARP
    warp = block.warp(thread.thread_id // _WARP)
    # int(): masks may come as numpy ints or as -1 (an int32 full mask on the GPU).
    given = int(mask) & _FULL
    mask = given & warp.existing
    with warp.cond:
        if not mask >> lane & 1:
            warp.fail(None, f"{op}: lane {lane} of {warp} is not in its own mask {given:#010x}")
        call = warp.pending.get(mask)
        if call is None:
            call = warp.pending[mask] = _Call(op, mask)
        elif call.op != op:
            warp.fail(
                call,
                f"{op}(mask={mask:#010x}) in {warp}: lane {lane} called {op} while lanes "
                f"{_bits(call.arrived)} wait in {call.op} with the same mask",
            )
        call.values[lane] = value
        call.arrived |= 1 << lane
        call.last = time.monotonic()
        if call.arrived == mask:
            del warp.pending[mask]
            call.done = True
            warp.cond.notify_all()
        else:
            warp.wait(call, lane, thread)
    return call, lane


def _shuffle(op, mask, value, source):
    call, lane = _rendezvous(op, mask, value)
    src = source(lane)
    return call.values[src] if 0 <= src < _WARP and call.mask >> src & 1 else value


# The primitives become methods of the simulator's FakeCUDAModule, hence ``self``.


def shfl_sync(self, mask, value, src_lane):
    return _shuffle("shfl_sync", mask, value, lambda lane: int(src_lane) & 31)


def shfl_up_sync(self, mask, value, delta):
    return _shuffle("shfl_up_sync", mask, value, lambda lane: lane - (int(delta) & 31))


def shfl_down_sync(self, mask, value, delta):
    return _shuffle("shfl_down_sync", mask, value, lambda lane: lane + (int(delta) & 31))


def shfl_xor_sync(self, mask, value, lane_mask):
    return _shuffle("shfl_xor_sync", mask, value, lambda lane: lane ^ (int(lane_mask) & 31))


def syncwarp(self, mask=_FULL):
    _rendezvous("syncwarp", mask, None)


def _vote(op, mask, predicate):
    call, _ = _rendezvous(op, mask, bool(predicate))
    return sum(1 << lane for lane in _bits(call.mask) if call.values[lane]), call.mask


def ballot_sync(self, mask, predicate):
    return _i32(_vote("ballot_sync", mask, predicate)[0])


def all_sync(self, mask, predicate):
    votes, mask = _vote("all_sync", mask, predicate)
    return votes == mask


def any_sync(self, mask, predicate):
    return _vote("any_sync", mask, predicate)[0] != 0


def eq_sync(self, mask, predicate):
    votes, mask = _vote("eq_sync", mask, predicate)
    return votes in (0, mask)


# match_*: the GPU compares bit patterns; == differs only for NaN and signed zeros.
def match_any_sync(self, mask, value):
    call, _ = _rendezvous("match_any_sync", mask, value)
    return _i32(sum(1 << lane for lane in _bits(call.mask) if call.values[lane] == value))


def match_all_sync(self, mask, value):
    call, _ = _rendezvous("match_all_sync", mask, value)
    same = all(call.values[lane] == value for lane in _bits(call.mask))
    return (_i32(call.mask), True) if same else (0, False)


def activemask(self):
    thread = threading.current_thread()
    lane = thread.thread_id % _WARP
    warp = _block_of(thread).warp(thread.thread_id // _WARP)
    caller = sys._getframe(1)
    site = (caller.f_code.co_filename, caller.f_lineno)
    with warp.cond:
        call = warp.gathering.get(site)
        if call is None:
            call = warp.gathering[site] = _Call("activemask", None, site)
        call.arrived |= 1 << lane
        call.last = time.monotonic()
        if warp.settle(call):
            warp.wait(call, lane, thread)
    return call.mask


def lanemask_lt(self):
    return (1 << threading.current_thread().thread_id % _WARP) - 1


def popc(self, val):
    if val < 0:
        # Two's complement at the GPU's width: numpy ints carry theirs; a negative Python
        # int is most likely a ballot/match result, which is int32 on the GPU.
        if isinstance(val, np.integer):
            bits = 8 * val.dtype.itemsize
        else:
            bits = 32 if val >= -(1 << 31) else 64
        val = int(val) + (1 << bits)
    return bin(int(val)).count("1")


_PRIMITIVES = (
    shfl_sync, shfl_up_sync, shfl_down_sync, shfl_xor_sync, syncwarp, ballot_sync,
    all_sync, any_sync, eq_sync, match_any_sync, match_all_sync, activemask, lanemask_lt,
)

# Cython declarations for napi.py (compiled build only): the device models'
# per-frame state as typed fields.  Both devices keep an instance dict.
cimport cython
from grotool.engine.skb cimport Delivery, Skb, Stats, clear_keeping_room
from grotool.engine.gro cimport GroNode
from grotool.engine.rss cimport Toeplitz, hash_input

cdef long long NEVER, NS_PER_S
cdef int EVENT_IRQ, EVENT_TIMER, EVENT_STEP

cpdef long long jiffies_at(long long now, long hz) noexcept
cpdef receive_batch(GroNode gro, list skbs, primer)
cpdef budget_exhausted(GroNode gro, long hz)

@cython.final
cdef class VethDevice:
    cdef dict __dict__
    cdef public object settings, primer
    cdef public Toeplitz toeplitz
    cdef public Stats stats
    cdef public GroNode gro
    cdef public list pending
    cdef public Py_ssize_t budget
    cpdef feed(self, Skb skb)

@cython.final
cdef class _Queue:
    cdef public Py_ssize_t index
    cdef public GroNode gro
    cdef public list ring
    cdef public bint irq_enabled
    cdef public long long irq_at, timer_at, poll_at
    cdef public long defer_count
    cdef public Py_ssize_t work
    cdef public bint timer_poll

@cython.final
cdef class NicDevice:
    cdef dict __dict__
    cdef public object settings, primer, single_queue, _to_stack
    cdef public long long now, next_at
    cdef public int next_kind
    cdef public Toeplitz toeplitz
    cdef public Stats stats
    cdef public long long gro_flush_timeout
    cdef public long long napi_defer_hard_irqs
    cdef public dict _hash_cache
    cdef public list queues
    cdef public long long rx_usecs_ns
    cdef public Py_ssize_t rx_frames, irq_frames, budget
    cdef public long hz
    cdef public long long cost
    @cython.locals(d=Delivery, stamp="long long")
    cpdef deliver(self, list batch)
    @cython.locals(q=_Queue, tup=bytes, ring=list, h="long long", ts="long long", irq_at="long long")
    cpdef feed(self, Skb skb)
    @cython.locals(q=_Queue, ring=list, batch=list, work=Py_ssize_t, gro=GroNode)
    cpdef _poll(self, _Queue q, long long now, bint timer)
    @cython.locals(q=_Queue, best=_Queue, at="long long", kind=int)
    cpdef _Queue _next_event(self)
    @cython.locals(q=_Queue, at="long long", kind=int, timer=bint)
    cpdef _run_until(self, long long limit, bint inclusive)
    @cython.locals(gro=GroNode)
    cpdef _start_poll(self, _Queue q, long long now, bint timer)
    @cython.locals(gro=GroNode)
    cpdef _step(self, _Queue q, long long now)
    @cython.locals(gro=GroNode, ring=list, rearm=bint, timeout="long long")
    cpdef _complete_done(self, _Queue q, long long now, Py_ssize_t work, bint timer)

# Cython declarations for napi.py (compiled build only): the device models'
# per-frame state as typed fields.  Both devices keep an instance dict.
cimport cython
from grotool.engine.skb cimport Skb, Stats
from grotool.engine.gro cimport GroNode
from grotool.engine.rss cimport Toeplitz, hash_input

cpdef receive_batch(GroNode gro, list skbs, primer)
cpdef budget_exhausted(GroNode gro, long hz)

cdef class VethDevice:
    cdef dict __dict__
    cdef public object settings, primer
    cdef public Toeplitz toeplitz
    cdef public Stats stats
    cdef public GroNode gro
    cdef public list pending
    cdef public Py_ssize_t budget
    cpdef feed(self, Skb skb)

cdef class _Queue:
    cdef public Py_ssize_t index
    cdef public GroNode gro
    cdef public list ring
    cdef public bint irq_enabled
    cdef public object irq_at, timer_at, poll_at
    cdef public long defer_count
    cdef public Py_ssize_t work
    cdef public bint timer_poll

cdef class NicDevice:
    cdef dict __dict__
    cdef public object settings, now, primer, next_at, single_queue
    cdef public Toeplitz toeplitz
    cdef public Stats stats
    cdef public object gro_flush_timeout
    cdef public long long napi_defer_hard_irqs
    cdef public dict _hash_cache
    cdef public list queues
    cdef public object rx_usecs_ns
    cdef public Py_ssize_t rx_frames, irq_frames, budget
    cdef public long hz
    cdef public object cost
    @cython.locals(q=_Queue, tup=bytes, ring=list, h="long long")
    cpdef feed(self, Skb skb)
    @cython.locals(q=_Queue, ring=list, batch=list, work=Py_ssize_t, gro=GroNode)
    cpdef _poll(self, _Queue q, now, bint timer)
    @cython.locals(q=_Queue, best=tuple)
    cpdef _next_event(self)
    @cython.locals(q=_Queue, ev=tuple)
    cpdef _run_until(self, limit, bint inclusive)
    @cython.locals(gro=GroNode, ring=list, rearm=bint)
    cpdef _complete_done(self, _Queue q, now, Py_ssize_t work, bint timer)

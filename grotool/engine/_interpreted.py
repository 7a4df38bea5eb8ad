"""``cython.compiled`` for the engine run from source.

A few byte readers have a body for each build (csum.py, tcp.py, rss.py, and
io/capture.py outside the engine): they read ``cython.compiled``.  Those
modules import ``cython`` under TYPE_CHECKING,
where only the Cython compiler reads it (it makes ``cython.compiled`` the
constant True and drops the other branch), and take this stand-in otherwise,
so the interpreter neither imports Cython nor needs it installed.

``cython.cclass``, ``cython.no_gc`` and ``cython.freelist(n)`` (class
decorators for the compiled build: an extension type, whose objects the cycle
collector does not track, and which keeps up to n freed objects for reuse)
leave a class as it is.
"""

from types import ModuleType

# a module object, not a SimpleNamespace: the interpreter reads ``cython.compiled``
# (several times per frame) through its specialised module attribute look-up
cython = ModuleType("cython")
cython.compiled = False
cython.cclass = lambda cls: cls
cython.no_gc = lambda cls: cls
cython.freelist = lambda n: lambda cls: cls

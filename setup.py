"""Build step: compile the engine's own .py files with Cython when possible.

The engine's Python source is the specification of the kernel's rules; the
compiled build is that same source turned into C extension modules (Cython in
pure-Python mode), never a second copy of any rule.  Without Cython or a C
compiler, or when a module fails to compile, the install goes on with the
interpreted engine and says so in one line of the build log.  GROTOOL_PURE=1
at install time skips compilation.  `grotool --version` says which build runs.

Compiled modules are kept in build/ext-cache, keyed on what went into them (the
generated C source, the compiler command, the Python ABI): installing again
with nothing changed (`pip install -e '.[plot]'` after `pip install -e .`, whose
isolated builds start from an empty build directory) copies them instead of
compiling for minutes.
"""

import glob
import hashlib
import os
import shutil
import sys
import sysconfig

from setuptools import setup
from setuptools.command.build_ext import build_ext

# The modules compiled: the whole engine, plus the capture reader, the replay
# loop, the statistics and the flow naming that run per packet beside it.
COMPILED_MODULES = sorted(glob.glob("grotool/engine/*.py")) + [
    "grotool/io/capture.py",
    "grotool/replay.py",
    "grotool/report/stats.py",
    # naming each new flow (and each packet GRO never parsed, which has no flow key to cache by)
    "grotool/dissect.py",
    "grotool/report/flows.py",
]

# Directives that keep Python semantics exactly: annotations are documentation
# here (annotation_typing=False: an `int` annotation must not become a C long
# that overflows, nor a `float` one a C double), functions stay introspectable.
COMPILER_DIRECTIVES = {
    "language_level": 3,
    "annotation_typing": False,
}


HERE = os.path.dirname(os.path.abspath(__file__))
EXT_CACHE = os.path.join(HERE, "build", "ext-cache")


def note(message: str) -> None:
    print(f"grotool: {message}", file=sys.stderr, flush=True)


def wanted() -> bool:
    return os.environ.get("GROTOOL_PURE", "") in ("", "0")


def extension_modules():
    if not wanted():
        note("GROTOOL_PURE is set: installing the interpreted engine")
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:
        note("Cython is not installed: installing the interpreted engine")
        return []
    try:
        return cythonize(COMPILED_MODULES, compiler_directives=COMPILER_DIRECTIVES,
                         build_dir="build/cython", quiet=True)
    except Exception as exc:  # a Cython error must not stop the install
        note(f"Cython could not translate the engine ({exc}): installing the interpreted engine")
        return []


class OptionalBuildExt(build_ext):
    """All extension modules or none: a missing or failing C compiler leaves
    the interpreted engine in place instead of failing the install."""

    def finalize_options(self):
        super().finalize_options()
        if self.parallel is None:
            self.parallel = os.cpu_count() or 1      # the modules compile independently

    def run(self):
        if not self.extensions:
            return
        self.reused = 0
        try:
            super().run()
        except Exception as exc:
            self.remove_built()
            first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            note(f"no compiled engine (C compilation failed: {first_line}): installing the interpreted engine")
            return
        reused = f", {self.reused} of them unchanged, taken from {EXT_CACHE}" if self.reused else ""
        note(f"compiled engine built ({len(self.extensions)} modules{reused})")

    def cache_path(self, ext) -> str:
        """Where the compiled module for exactly these inputs is kept."""
        key = hashlib.sha256()
        for part in (sys.version, sysconfig.get_config_var("EXT_SUFFIX") or "",
                     repr(getattr(self.compiler, "compiler_so", None)),
                     repr(getattr(self.compiler, "linker_so", None)),
                     repr((ext.extra_compile_args, ext.extra_link_args, ext.define_macros, ext.undef_macros,
                           ext.include_dirs, ext.libraries, ext.library_dirs))):
            key.update(part.encode() + b"\0")
        for source in sorted(ext.sources):
            with open(source, "rb") as f:
                key.update(f.read())
        suffix = os.path.splitext(self.get_ext_filename(ext.name))[1]
        return os.path.join(EXT_CACHE, f"{ext.name}-{key.hexdigest()[:32]}{suffix}")

    def build_extension(self, ext):
        target = self.get_ext_fullpath(ext.name)
        try:
            cached = self.cache_path(ext)
        except OSError:
            cached = None
        if cached and os.path.exists(cached):
            os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
            shutil.copyfile(cached, target)
            self.reused += 1
            return
        super().build_extension(ext)
        if cached:
            self.keep(ext, target, cached)

    def keep(self, ext, built: str, cached: str) -> None:
        """Store a freshly compiled module (atomically), dropping this module's
        older entries; the cache is only an accelerator: failures are ignored."""
        try:
            os.makedirs(EXT_CACHE, exist_ok=True)
            for old in glob.glob(os.path.join(EXT_CACHE, f"{ext.name}-*")):
                os.remove(old)
            partial = f"{cached}.{os.getpid()}.tmp"
            shutil.copyfile(built, partial)
            os.replace(partial, cached)
        except OSError:
            pass

    def remove_built(self):
        # a half-compiled engine would run mixed builds; remove what was built
        for ext in self.extensions:
            name = self.get_ext_fullname(ext.name)
            for base in (self.build_lib, os.getcwd()):
                path = os.path.join(base, self.get_ext_filename(name))
                if os.path.exists(path):
                    os.remove(path)


setup(ext_modules=extension_modules(), cmdclass={"build_ext": OptionalBuildExt})

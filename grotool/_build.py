"""Which build of the engine runs: compiled (Cython) or interpreted.

The compiled build is the engine's own .py files compiled in place (setup.py):
each compiled module sits beside its source as an extension module, which
Python's import system prefers.  This module decides, before any engine module
is imported, whether to take them:

- GROTOOL_PURE=1 in the environment forces the interpreted engine, so both
  builds run from one install (the tests compare them);
- an extension module older than its .py file is stale (the source was edited
  after the build): then every module is imported from source, and `grotool
  --version` says so, rather than silently running old rules.  All of them,
  not just the stale one: compiled modules use each other's C types, and one
  of them meeting the source version of another fails to import.
"""

from __future__ import annotations

import importlib.machinery
import os
import sys

PURE_ENV = "GROTOOL_PURE"
PACKAGE = __name__.rpartition(".")[0]

# a wheel install writes a module's .py and its extension within moments of each
# other, in either order; an edit made after a build comes later than this
INSTALL_SLACK_S = 2.0

_stale: list = []           # modules whose extension was older than the source


def interpreted_forced() -> bool:
    return os.environ.get(PURE_ENV, "") not in ("", "0")


class _SourceFinder:
    """Finds grotool's modules as source, passing over the compiled modules
    beside them; installed only when the interpreted engine is to run (forced,
    or a compiled module is stale), so a compiled run pays no look-ups.
    (A meta path finder by its find_spec alone: importlib.abc, its nominal
    base, imports importlib.resources, typing and pathlib, which cost three
    times a bare interpreter's start-up, on every start of grotool.)"""

    def find_spec(self, fullname, path, target=None):
        if not fullname.startswith(PACKAGE + ".") or not path:
            return None
        import importlib.util

        name = fullname.rpartition(".")[2]
        for entry in path:
            package_dir = os.path.join(entry, name)
            if os.path.isfile(os.path.join(package_dir, "__init__.py")):
                directory, stem, locations = package_dir, "__init__", [package_dir]   # a package
            else:
                directory, stem, locations = entry, name, None
            source = os.path.join(directory, stem + ".py")
            if not os.path.isfile(source):
                continue
            loader = importlib.machinery.SourceFileLoader(fullname, source)
            return importlib.util.spec_from_file_location(fullname, source, loader=loader,
                                                          submodule_search_locations=locations)
        return None


def _older_than_source(compiled: str, source: str) -> bool:
    """The extension module was built before its source was last changed."""
    return os.path.getmtime(source) > os.path.getmtime(compiled) + INSTALL_SLACK_S


def _extension_beside(directory: str, name: str) -> str | None:
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        candidate = os.path.join(directory, name + suffix)
        if os.path.exists(candidate):
            return candidate
    return None


def stale_modules(package_dir: str) -> list:
    """The modules under package_dir (grotool's directory) whose extension
    module is older than their source."""
    found = []
    for directory, subdirs, files in os.walk(package_dir):
        subdirs[:] = [d for d in subdirs if d != "__pycache__"]
        names = set(files)
        for name in files:
            if not name.endswith(".py"):
                continue
            stem = name[:-3]
            for suffix in importlib.machinery.EXTENSION_SUFFIXES:
                if stem + suffix in names:
                    source = os.path.join(directory, name)
                    if _older_than_source(os.path.join(directory, stem + suffix), source):
                        parts = os.path.relpath(source, package_dir)[:-3].split(os.sep)
                        found.append(".".join([PACKAGE] + [p for p in parts if p != "__init__"]))
                    break
    return sorted(found)


def install_finder() -> None:
    """Called by grotool/__init__.py before it imports anything else of grotool."""
    if not any(isinstance(f, _SourceFinder) for f in sys.meta_path):
        force = interpreted_forced()
        if not force:
            stale = stale_modules(os.path.dirname(os.path.abspath(__file__)))
            if stale:
                _stale.extend(stale)
                force = True              # all from source: see the module docstring
        if force:
            sys.meta_path.insert(0, _SourceFinder())


def engine_build() -> str:
    """'compiled, Cython 3.x.y' or 'interpreted' (with why, when a build exists
    but is not used), for `grotool --version`."""
    from .engine import gro
    loader = getattr(gro, "__loader__", None)
    if _stale:
        return (f"interpreted: {len(_stale)} compiled modules are older than their source, "
                "rebuild with pip install -e .")
    if isinstance(loader, importlib.machinery.ExtensionFileLoader):
        # Cython's function type lives in a module named after its version: _cython_3_1_2
        abi = type(gro.GroNode.receive).__module__
        version = abi[len("_cython_"):].replace("_", ".") if abi.startswith("_cython_") else "?"
        return f"compiled, Cython {version}"
    if interpreted_forced() and _extension_beside(os.path.dirname(gro.__file__), "gro"):
        return f"interpreted, forced by {PURE_ENV}"
    return "interpreted"


def version_line(version: str) -> str:
    return f"grotool {version} (engine: {engine_build()})"

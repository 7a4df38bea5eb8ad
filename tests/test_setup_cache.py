"""setup.py keeps compiled modules in a cache keyed on their inputs: a second
build with nothing changed (pip's isolated builds start from an empty build
directory every time) copies them instead of compiling; a changed source
compiles again.  Exercised on a one-function C extension (seconds), with the
real OptionalBuildExt of setup.py."""

from __future__ import annotations

import runpy
import shutil
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

SOURCE = """
#include <Python.h>
static PyObject *answer(PyObject *self, PyObject *args) { return PyLong_FromLong(%d); }
static PyMethodDef methods[] = {{"answer", answer, METH_NOARGS, NULL}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "cachedemo", NULL, -1, methods};
PyMODINIT_FUNC PyInit_cachedemo(void) { return PyModule_Create(&module); }
"""


def _setup_namespace(monkeypatch):
    import setuptools

    monkeypatch.setenv("GROTOOL_PURE", "1")          # no Cython run while setup.py is loaded
    monkeypatch.setattr(setuptools, "setup", lambda **kw: None)
    return runpy.run_path(str(ROOT / "setup.py"))


def _build(namespace, workdir: Path, source: Path):
    """One build as pip's isolated build does it: fresh build_temp and build_lib.
    Returns the built module's path, the sources compiled, the modules reused."""
    from setuptools import Distribution, Extension

    fresh = workdir / f"build-{len(list(workdir.glob('build-*')))}"
    dist = Distribution({"name": "cachedemo", "ext_modules": [Extension("cachedemo", [str(source)])]})
    cmd = namespace["OptionalBuildExt"](dist)
    cmd.build_temp = str(fresh / "temp")
    cmd.build_lib = str(fresh / "lib")
    cmd.parallel = 1
    cmd.ensure_finalized()
    compiled = []
    build_extensions = type(cmd).build_extensions

    def counting_build_extensions(self):
        real_compile = self.compiler.compile
        self.compiler.compile = lambda sources, *a, **k: compiled.extend(sources) or real_compile(sources, *a, **k)
        return build_extensions(self)

    cmd.build_extensions = counting_build_extensions.__get__(cmd)
    cmd.run()
    return Path(cmd.get_ext_fullpath("cachedemo")), compiled, cmd.reused


@pytest.mark.skipif(shutil.which(sysconfig.get_config_var("CC").split()[0] if sysconfig.get_config_var("CC")
                                 else "cc") is None, reason="no C compiler")
def test_second_build_reuses_the_compiled_module_and_a_change_rebuilds(tmp_path, monkeypatch):
    namespace = _setup_namespace(monkeypatch)
    cache = tmp_path / "ext-cache"
    monkeypatch.setitem(namespace["OptionalBuildExt"].run.__globals__, "EXT_CACHE", str(cache))
    source = tmp_path / "cachedemo.c"
    source.write_text(SOURCE % 41)

    first, compiled, reused = _build(namespace, tmp_path, source)
    assert compiled and reused == 0 and first.exists()
    assert len(list(cache.iterdir())) == 1

    second, compiled, reused = _build(namespace, tmp_path, source)
    assert compiled == [] and reused == 1
    assert second != first and second.read_bytes() == first.read_bytes()

    source.write_text(SOURCE % 42)                   # a changed source compiles again
    third, compiled, reused = _build(namespace, tmp_path, source)
    assert compiled and reused == 0
    assert third.read_bytes() != first.read_bytes()
    assert len(list(cache.iterdir())) == 1           # the module's older entry is dropped
    import importlib.util

    spec = importlib.util.spec_from_file_location("cachedemo", third)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.answer() == 42

"""Settings is a frozen dataclass whose __init__, repr, eq and hash are written
once over its fields (engine/config.py, _WrittenOverFields) instead of generated
at import: they must give exactly what the dataclass-generated ones give."""

import dataclasses

import pytest

from grotool.engine.config import Settings

VARIANTS = [
    {},
    {"device": "veth", "budget": 8, "csum": "trust", "gro": False, "hz": 1000},
    {"rss_key": bytes(range(40)), "vxlan_ports": (4789, 8472), "local_tcp": ("10.0.0.1:80>10.0.0.2:1234",)},
]


def _generated_twin():
    """The class @dataclass(frozen=True) makes of the same fields."""
    twin = dataclasses.make_dataclass(
        "Settings", [(f.name, f.type, dataclasses.field(default=f.default)) for f in dataclasses.fields(Settings)],
        frozen=True)
    twin.__qualname__ = Settings.__qualname__
    return twin


@pytest.mark.parametrize("changes", VARIANTS)
def test_repr_eq_and_hash_are_the_generated_ones(changes):
    twin = _generated_twin()
    settings, generated = Settings(**changes), twin(**changes)
    assert repr(settings) == repr(generated)
    assert repr(settings).startswith("Settings(device=")
    assert hash(settings) == hash(generated)
    assert settings == Settings(**changes) and not settings != Settings(**changes)
    for other in VARIANTS:
        assert (settings == Settings(**other)) == (generated == twin(**other))
    # another class (even one with the same fields) is never equal, as for a dataclass
    assert settings.__eq__(generated) is NotImplemented and settings != generated
    assert settings.__eq__(object()) is NotImplemented
    assert {settings: 1}[Settings(**changes)] == 1


def test_still_a_frozen_dataclass():
    settings = Settings(budget=8)
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.budget = 16
    with pytest.raises(dataclasses.FrozenInstanceError):
        del settings.budget
    assert dataclasses.replace(settings, hz=100) == Settings(budget=8, hz=100)
    assert dataclasses.is_dataclass(Settings)
    assert [f.name for f in dataclasses.fields(Settings)][:3] == ["device", "budget", "csum"]
    assert dataclasses.asdict(settings)["budget"] == 8


def test_the_dataclass_generates_no_method():
    # each method dataclass generates is source compiled at import: repr, eq and
    # hash of 29 fields were 4 M instructions of every grotool start-up, __init__ 4.7 M,
    # frozen=True's __setattr__ and __delattr__ 1.7 M
    generated = {"__init__", "__setattr__", "__delattr__", "__repr__", "__eq__", "__hash__"} & set(vars(Settings))
    assert generated == set()


def _refusals(obj, name):
    """What assigning and deleting ``name`` on obj raise (type and text), or None each."""
    out = []
    for act in (lambda: setattr(obj, name, 1), lambda: delattr(obj, name)):
        try:
            act()
            out.append(None)
        except Exception as exc:    # noqa: BLE001 -- the exception itself is compared
            out.append((type(exc), str(exc)))
    return out


def test_frozen_guards_are_the_generated_ones():
    twin = _generated_twin()

    class Sub(Settings):
        pass

    class TwinSub(twin):
        pass

    # on the dataclass itself every name is refused, a field or not; on a plain
    # subclass only the fields, and other names are set and deleted as usual
    for ours, generated in [(Settings(), twin()), (Sub(), TwinSub())]:
        for name in ("budget", "kernel", "not_a_field"):
            assert _refusals(ours, name) == _refusals(generated, name), name
    assert _refusals(Settings(), "budget")[0] == (dataclasses.FrozenInstanceError, "cannot assign to field 'budget'")
    assert _refusals(Sub(), "not_a_field") == [None, None]
    sub = Sub(budget=8)
    sub.note = "kept"
    assert sub.note == "kept" and sub.budget == 8


def test_init_takes_what_the_generated_one_takes():
    twin = _generated_twin()
    names = [f.name for f in dataclasses.fields(Settings)]
    assert Settings() == Settings(**{f.name: f.default for f in dataclasses.fields(Settings)})
    assert repr(Settings("veth", 8, "trust")) == repr(twin("veth", 8, "trust"))
    assert Settings("veth", 8, hz=1000) == Settings(device="veth", budget=8, hz=1000)
    every = [getattr(Settings(), n) for n in names]
    every[1] = 9
    assert repr(Settings(*every)) == repr(twin(*every))
    assert Settings(*every).budget == 9
    for args, kwargs in [((), {"budgett": 8}), (("veth",), {"device": "nic"}), (tuple(every) + (1,), {})]:
        with pytest.raises(TypeError) as ours:
            Settings(*args, **kwargs)
        with pytest.raises(TypeError) as generated:
            twin(*args, **kwargs)
        assert str(ours.value) == str(generated.value).replace("__create_fn__.<locals>.", "")

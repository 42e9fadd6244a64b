"""The tensorclass distribution: install, version lockstep, import edges, callable module."""

import importlib.metadata
import json
import subprocess
import sys

import pytest

import tensordict
import tensordict.tensorclass
from tensordict._plugins.siblings import LAZY_TOP_LEVEL

DISTRIBUTION = "tensorclass"
#: Modules that ``import tensordict.tensorclass`` must never load.
NOT_DECLARED = ("h5py", "tensordict.memmap", "tensordict.nn", "tensordict.distributed")


def modules_loaded_by(statement: str) -> set[str]:
    """``sys.modules`` of a fresh interpreter after running ``statement``."""
    code = f"{statement}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout))


def test_subpackage_is_in_the_core_namespace():
    module = sys.modules["tensordict.tensorclass"]
    assert module.__name__ == "tensordict.tensorclass"
    assert "dataclass_transform" in module.__doc__


def test_version_is_in_lockstep_with_core():
    module = sys.modules["tensordict.tensorclass"]
    assert module.__version__ == tensordict.__version__
    assert importlib.metadata.version(DISTRIBUTION) == module.__version__


def test_import_loads_nothing_undeclared():
    loaded = modules_loaded_by("import tensordict.tensorclass")
    assert "tensordict.tensorclass" in loaded
    leaked = {m for m in loaded for bad in NOT_DECLARED if m == bad or m.startswith(bad + ".")}
    assert not leaked, f"import tensordict.tensorclass loaded {sorted(leaked)}"


def test_top_level_name_is_the_callable_subpackage_once_imported():
    # Importing the subpackage binds tensordict.tensorclass to it, shadowing the decorator
    # name: the module itself must then act as the decorator.
    module = sys.modules["tensordict.tensorclass"]
    assert tensordict.tensorclass is module
    assert callable(tensordict.tensorclass)
    from tensordict import tensorclass

    assert callable(tensorclass)


def test_module_call_forwards_to_the_decorator(monkeypatch):
    module = sys.modules["tensordict.tensorclass"]
    calls = []

    def fake_decorator(*args, **kwargs):
        calls.append((args, kwargs))
        return args[0] if args else fake_decorator

    monkeypatch.setattr(module, "tensorclass", fake_decorator, raising=False)

    class Plain:
        pass

    assert module(Plain) is Plain  # @tensorclass
    assert module(autocast=True) is fake_decorator  # @tensorclass(autocast=True)
    assert calls == [((Plain,), {}), ((), {"autocast": True})]


def test_module_call_without_the_decorator_names_the_distribution(monkeypatch):
    module = sys.modules["tensordict.tensorclass"]
    monkeypatch.delattr(module, "tensorclass", raising=False)
    with pytest.raises(NotImplementedError, match=f"'{DISTRIBUTION}' distribution"):
        module(type("Plain", (), {}))


@pytest.mark.parametrize(
    "name",
    sorted(
        n for n, (sub, _) in LAZY_TOP_LEVEL.items() if sub == "tensorclass" and n != "tensorclass"
    ),
)
def test_top_level_names_resolve_here_or_say_not_implemented(name):
    module = sys.modules["tensordict.tensorclass"]
    attr = LAZY_TOP_LEVEL[name][1]
    if hasattr(module, attr):
        assert getattr(tensordict, name) is getattr(module, attr)
    else:
        with pytest.raises(NotImplementedError, match=DISTRIBUTION):
            getattr(tensordict, name)


def test_top_level_access_before_import_does_not_shadow_the_subpackage():
    # Whatever ``tensordict.tensorclass`` resolved to first, ``import tensordict.tensorclass`` must
    # still give the subpackage, and the top-level name must stay callable.
    code = (
        "import sys, tensordict\n"
        "try:\n"
        "    tensordict.tensorclass\n"
        "except NotImplementedError:\n"
        "    pass\n"
        "import tensordict.tensorclass as m\n"
        "assert m is sys.modules['tensordict.tensorclass'], m\n"
        "assert callable(tensordict.tensorclass)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_callable_module_shows_the_decorators_signature():
    import inspect

    module = sys.modules["tensordict.tensorclass"]
    expected = inspect.signature(module.__dict__["tensorclass"])
    assert inspect.signature(tensordict.tensorclass) == expected
    params = expected.parameters
    assert params["cls"].kind is inspect.Parameter.POSITIONAL_ONLY
    assert [n for n, p in params.items() if p.kind is inspect.Parameter.KEYWORD_ONLY] == [
        "autocast",
        "frozen",
        "nocast",
        "shadow",
        "tensor_only",
        "skip_post_init_on_rebuild",
        "cast_filter",
        "kw_only",
    ]


def test_module_names_of_the_reference():
    from tensordict import NonTensorData, NonTensorStack, TensorDict
    from tensordict.tensorclass import expand_as_right, is_non_tensor
    from tensordict.utils import expand_as_right as core_expand

    assert expand_as_right is core_expand
    assert is_non_tensor(NonTensorData("a")) and is_non_tensor(obj=NonTensorStack("a", "b"))
    assert is_non_tensor(NonTensorData) and not is_non_tensor("a")
    assert not is_non_tensor(TensorDict())


def test_core_names_are_read_from_core_when_it_has_them(monkeypatch):
    module = sys.modules["tensordict.tensorclass"]
    for name in module._FROM_CORE:
        marker = object()
        monkeypatch.setattr(tensordict, name, marker, raising=False)
        assert getattr(module, name) is marker
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        module.not_a_name  # noqa: B018

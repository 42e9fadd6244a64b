"""Safety of the on-disk format: any key stays inside its folder, tampered folders raise
clear errors, nothing is unpickled or imported unless the caller opts in."""

from __future__ import annotations

import json
import os
import re
import warnings

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from memmap_helpers import folder_bytes, run_python

from tensordict import LazyStackedTensorDict, NonTensorData, NonTensorStack, TensorDict
from tensordict.memmap import _fs, register_class

TRAVERSAL_KEYS = [
    "..",
    ".",
    "",
    "../outside",
    "../../etc/passwd",
    "/abs/path",
    "a/b/c",
    "a\\b",
    "sp ace",
    "ünïcödé ключ 鍵",
    "x" * 300,
    "ü" * 200,
    "%2E%2E",
    "meta.json",
    "nul\0byte",
    "new\nline",
    "shape",
    "device",
    "_type",
]


def _tree(root):
    return sorted(
        os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs
    )


@pytest.mark.parametrize("key", TRAVERSAL_KEYS)
def test_any_key_round_trips_and_stays_inside_the_prefix(tmp_path, key):
    prefix = tmp_path / "saved"
    td = TensorDict({key: torch.arange(3), "nested": {key: {"x": torch.ones(3)}}}, [3])
    td.memmap(prefix)
    # nothing was written next to the prefix (only the prefix itself exists there)
    assert sorted(os.listdir(tmp_path)) == ["saved"]
    for path in _tree(prefix):
        assert all(len(part.encode()) <= 255 for part in path.split(os.sep))
        real = os.path.realpath(prefix / path)
        assert real.startswith(str(prefix) + os.sep)
    loaded = TensorDict.load_memmap(prefix)
    assert torch.equal(loaded[key], torch.arange(3))
    assert torch.equal(loaded["nested", key, "x"], torch.ones(3))
    sub = TensorDict.load_memmap(prefix, subpath=("nested", key))
    assert torch.equal(sub["x"], torch.ones(3))


def test_keys_that_share_a_file_name_are_refused(tmp_path):
    td = TensorDict({"a": torch.zeros(2), "b": {"c": torch.zeros(2)}}, [2])
    assert _fs.encode_key("a/b") != _fs.encode_key("a%2Fb")  # % is escaped
    td.memmap(tmp_path / "ok")
    from tensordict.memmap._plan import Planner

    planner = Planner(
        tmp_path / "x", like=False, copy_existing=False, robust_key=True, allow_pickle=False
    )
    used = {}
    planner._claim(used, "a.memmap", "a", ())
    with pytest.raises(ValueError, match="same file"):
        planner._claim(used, "a.memmap", "other", ())


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=80))
def test_encoding_is_one_safe_component_and_injective(key):
    name = _fs.encode_key(key)
    assert _fs.is_plain_name(name) and "/" not in name and name not in (".", "..")
    assert len(name.encode("utf-8", "surrogatepass")) <= _fs.MAX_NAME_BYTES + 40
    if "%~" not in name:
        assert _fs.decode_key(name) == key


@settings(max_examples=25, deadline=None)
@given(st.lists(st.text(min_size=0, max_size=30), min_size=1, max_size=4, unique=True))
def test_save_load_any_keys(tmp_path_factory, keys):
    prefix = tmp_path_factory.mktemp("keys")
    td = TensorDict({k: torch.full((2,), float(i)) for i, k in enumerate(keys)}, [2])
    loaded = TensorDict.load_memmap(td.memmap(prefix, atomic=False).saved_path)
    assert set(loaded.keys()) == set(keys)
    for i, k in enumerate(keys):
        assert (loaded[k] == i).all()


def test_robust_key_false_is_the_legacy_layout(tmp_path):
    TensorDict({"plain": torch.zeros(2)}, [2]).memmap(tmp_path / "a", robust_key=False)
    assert (tmp_path / "a" / "plain.memmap").is_file()
    with pytest.raises(RuntimeError, match="No such file or directory"):
        TensorDict({"a/b": torch.zeros(2)}, [2]).memmap(tmp_path / "b", robust_key=False)
    assert TensorDict.load_memmap(tmp_path / "a", robust_key=False)["plain"].shape == (2,)


def test_nested_symlink_in_the_prefix_is_refused(tmp_path):
    prefix, outside = tmp_path / "saved", tmp_path / "outside"
    prefix.mkdir()
    outside.mkdir()
    (prefix / "nested").symlink_to(outside, target_is_directory=True)
    with pytest.raises(RuntimeError, match="through symlink"):
        TensorDict({"nested": {"x": torch.zeros(2)}}, []).memmap(prefix)
    assert list(outside.iterdir()) == []


def test_load_refuses_symlinked_leaves(tmp_path):
    TensorDict({"a": torch.zeros(2)}, [2]).memmap(tmp_path / "d")
    secret = tmp_path / "secret"
    secret.write_bytes(b"\1" * 8)
    os.remove(tmp_path / "d" / "a.memmap")
    (tmp_path / "d" / "a.memmap").symlink_to(secret)
    with pytest.raises(ValueError, match="symlink"):
        TensorDict.load_memmap(tmp_path / "d")


# --------------------------------------------------------------------------- tampering


def _saved(tmp_path):
    prefix = tmp_path / "d"
    TensorDict(
        {"a": torch.arange(6.0).view(2, 3), "n": {"b": torch.zeros(2)}, "s": "x"}, [2]
    ).memmap(prefix)
    return prefix


def _edit_meta(path, change):
    meta = json.loads(path.read_text())
    change(meta)
    path.write_text(json.dumps(meta))


TAMPERED = [
    # (what, how to tamper, exception type, text the message must contain)
    (
        "bad JSON",
        lambda p: (p / "meta.json").write_text("{not json"),
        ValueError,
        "meta.json' is not valid JSON",
    ),
    ("not an object", lambda p: (p / "meta.json").write_text("[1, 2]"), ValueError, "JSON object"),
    (
        "unknown dtype",
        lambda p: _edit_meta(p / "meta.json", lambda m: m["a"].update(dtype="torch.float99")),
        ValueError,
        "unknown dtype",
    ),
    (
        "dtype is code",
        lambda p: _edit_meta(p / "meta.json", lambda m: m["a"].update(dtype="__import__('os')")),
        ValueError,
        "unknown dtype",
    ),
    (
        "shape larger than the file",
        lambda p: _edit_meta(p / "meta.json", lambda m: m["a"].update(shape=[2, 300])),
        ValueError,
        "a.memmap' holds 24 bytes",
    ),
    (
        "negative size",
        lambda p: _edit_meta(p / "meta.json", lambda m: m["a"].update(shape=[2, -3])),
        ValueError,
        "integers >= 0",
    ),
    (
        "shape not a list",
        lambda p: _edit_meta(p / "meta.json", lambda m: m["a"].update(shape="big")),
        ValueError,
        "shape of 'a'",
    ),
    (
        "shape off the batch size",
        lambda p: _edit_meta(p / "meta.json", lambda m: m["a"].update(shape=[3, 2])),
        ValueError,
        "does not start with the batch size",
    ),
    (
        "missing leaf file",
        lambda p: os.remove(p / "a.memmap"),
        FileNotFoundError,
        "a.memmap' is missing",
    ),
    ("truncated leaf file", lambda p: os.truncate(p / "a.memmap", 5), ValueError, "truncated"),
    (
        "missing nested meta.json",
        lambda p: os.remove(p / "n" / "meta.json"),
        FileNotFoundError,
        "n/meta.json",
    ),
    (
        "nested batch size disagrees",
        lambda p: _edit_meta(p / "n" / "meta.json", lambda m: m.update(shape=[5])),
        ValueError,
        "does not start with the batch size [5]",
    ),
    (
        "bad is_nested",
        lambda p: _edit_meta(p / "meta.json", lambda m: m["a"].update(is_nested="yes")),
        ValueError,
        "is_nested",
    ),
    (
        "entry without dtype or type",
        lambda p: _edit_meta(p / "meta.json", lambda m: m.update(z={"x": 1})),
        ValueError,
        "neither 'dtype' nor 'type'",
    ),
    ("missing top meta.json", lambda p: os.remove(p / "meta.json"), FileNotFoundError, "meta.json"),
    ("lazy count too large", None, FileNotFoundError, "stacks 5 tensordicts"),
]


@pytest.mark.parametrize("what, tamper, error, text", TAMPERED, ids=[t[0] for t in TAMPERED])
def test_tampered_folders_raise_clear_errors(tmp_path, what, tamper, error, text):
    if tamper is None:  # a lazy stack claiming more members than it has
        from tensordict import LazyStackedTensorDict

        prefix = tmp_path / "d"
        LazyStackedTensorDict(
            TensorDict({"a": torch.zeros(2)}, [2]), TensorDict({"a": torch.ones(2)}, [2])
        ).memmap(prefix)
        _edit_meta(prefix / "meta.json", lambda m: m.update(count=5))
    else:
        prefix = _saved(tmp_path)
        tamper(prefix)
    before = folder_bytes(prefix)
    with pytest.raises(error, match=re.escape(text)):
        TensorDict.load_memmap(prefix)
    assert folder_bytes(prefix) == before  # e.g. a shape larger than the file: never grown


def _extra_bytes(path, n=8):
    with open(path, "ab") as f:
        f.write(b"\x01" * n)


# a file longer than its entry: only an unfinished append_memmap leaves that, and only for
# a tensor with batch dimensions, not nested, outside a lazy stack
LONGER_FILES = {
    "no batch dimension": (
        lambda: TensorDict({"a": torch.arange(4.0)}, []),
        "a.memmap",
        16,
    ),
    "nested tensor": (
        lambda: TensorDict({"a": torch.nested.nested_tensor([torch.ones(2), torch.ones(3)])}, [2]),
        "a.memmap",
        20,
    ),
    "nested sizes": (
        lambda: TensorDict({"a": torch.nested.nested_tensor([torch.ones(2), torch.ones(3)])}, [2]),
        "a.shape.memmap",
        16,
    ),
    "lazy-stack member": (
        lambda: LazyStackedTensorDict(
            TensorDict({"a": torch.zeros(2)}, [2]), TensorDict({"a": torch.ones(2)}, [2])
        ),
        "1/a.memmap",
        8,
    ),
}


@pytest.mark.parametrize("what", list(LONGER_FILES))
def test_a_file_longer_than_meta_json_says_is_refused_where_no_append_makes_one(tmp_path, what):
    make, rel, nbytes = LONGER_FILES[what]
    make().memmap(tmp_path / "d")
    _extra_bytes(tmp_path / "d" / rel)
    before = folder_bytes(tmp_path / "d")
    message = f"'{tmp_path / 'd' / rel}' holds {nbytes + 8} bytes, but .* with {nbytes} bytes"
    with pytest.raises(ValueError, match=message):
        TensorDict.load_memmap(tmp_path / "d")
    assert folder_bytes(tmp_path / "d") == before


def test_rows_of_an_unfinished_append_are_not_read(tmp_path):
    # append_memmap grows the files first and replaces meta.json last: a reader in between
    # (or after a crash) sees the old rows, so a longer file is a valid layout there
    td = TensorDict({"x": torch.arange(6.0).view(3, 2), "n": {"y": torch.ones(3)}}, [3])
    td.memmap(tmp_path / "d")
    _extra_bytes(tmp_path / "d" / "x.memmap", 8 + 3)  # a row and a part of one
    _extra_bytes(tmp_path / "d" / "n" / "y.memmap", 4)
    loaded = TensorDict.load_memmap(tmp_path / "d")
    assert (loaded == td).all() and loaded.batch_size == (3,)


# --------------------------------------------------------------------------- pickle


class Opaque:
    """A value JSON cannot hold."""

    def __init__(self, x):
        self.x = x

    def __eq__(self, other):
        return isinstance(other, Opaque) and other.x == self.x


@pytest.mark.parametrize(
    ("value", "culprit"),
    [
        (1 + 2j, "a value of type complex"),
        ((1, 2), "a value of type tuple"),
        ({1: 2}, "a dict key of type int"),
        (Opaque(3), "a value of type Opaque"),
        ({"ok": (1,)}, "a value of type tuple"),
    ],
    ids=["complex", "tuple", "intkey", "object", "inner-tuple"],
)
@pytest.mark.parametrize("save_flag", [None, True])
def test_non_json_values_are_pickled_and_need_allow_pickle_to_load(
    tmp_path, value, culprit, save_flag
):
    td = TensorDict({"v": NonTensorData(value, batch_size=[])}, [])
    with pytest.raises(TypeError, match=f"v: {culprit}.*allow_pickle=False"):
        td.memmap(tmp_path / "refused", allow_pickle=False)
    assert not (tmp_path / "refused").exists()
    kwargs = {} if save_flag is None else {"allow_pickle": save_flag}
    td.memmap(tmp_path / "d", **kwargs)  # the reference's memmap takes no flag: pickles
    assert (tmp_path / "d" / "v" / "other.pickle").is_file()
    pickled = str(tmp_path / "d" / "v" / "other.pickle")
    with pytest.raises(RuntimeError, match="allow_pickle=True") as refused:
        TensorDict.load_memmap(tmp_path / "d")
    assert str(refused.value).startswith(f"{pickled!r} holds pickled data")  # named once
    with pytest.raises(RuntimeError, match="allow_pickle=True"):
        TensorDict.load_memmap(tmp_path / "d", allow_pickle=False)
    assert TensorDict.load_memmap(tmp_path / "d", allow_pickle=True)["v"] == value


def test_json_values_need_nothing(tmp_path):
    values = {
        "s": "x",
        "i": 3,
        "f": 2.5,
        "b": True,
        "n": None,
        "l": [1, [2, "3"]],
        "d": {"k": [1, None]},
    }
    td = TensorDict({k: NonTensorData(v, batch_size=[]) for k, v in values.items()}, [])
    loaded = TensorDict.load_memmap(td.memmap(tmp_path).saved_path)
    for k, v in values.items():
        assert loaded[k] == v and type(loaded[k]) is type(v)


def test_pickled_stack(tmp_path):
    td = TensorDict({"v": NonTensorStack(1j, 2j)}, [2])
    td.memmap(tmp_path)
    assert json.loads((tmp_path / "v" / "meta.json").read_text())["data"] == "pickle.pkl"
    with pytest.raises(RuntimeError, match="allow_pickle"):
        TensorDict.load_memmap(tmp_path)
    assert TensorDict.load_memmap(tmp_path, allow_pickle=True).get("v").tolist() == [1j, 2j]


def test_pickle_is_never_run_without_consent(tmp_path):
    marker = tmp_path / "ran"
    TensorDict({"a": torch.zeros(1)}, [1]).memmap(tmp_path / "d")
    (tmp_path / "d" / "p").mkdir()
    (tmp_path / "d" / "p" / "meta.json").write_text(
        json.dumps(
            {
                "_type": "<class 'tensordict.tensorclass.NonTensorData'>",
                "_metadata": None,
                "_is_non_tensor": True,
            }
        )
    )
    payload = f"cos\nsystem\n(S'touch {marker}'\ntR.".encode()
    (tmp_path / "d" / "p" / "other.pickle").write_bytes(payload)
    _edit_meta(tmp_path / "d" / "meta.json", lambda m: m.update(p={"type": "NonTensorData"}))
    with pytest.raises(RuntimeError, match="allow_pickle"):
        TensorDict.load_memmap(tmp_path / "d")
    assert not marker.exists()


# --------------------------------------------------------------------------- classes


def _write_class_folder(prefix, type_name):
    TensorDict({"x": torch.zeros(2)}, [2]).memmap(prefix)
    _edit_meta(
        prefix / "meta.json", lambda m: m.update(_type=f"<class '{type_name}'>", _class=None)
    )


def test_a_class_named_in_meta_json_is_never_imported(tmp_path):
    module = tmp_path / "evil_module_xyz.py"
    module.write_text(f"open({str(tmp_path / 'imported')!r}, 'w').close()\nclass Evil: pass\n")
    _write_class_folder(tmp_path / "d", "evil_module_xyz.Evil")
    code = (
        "import sys, warnings\n"
        f"sys.path.insert(0, {str(tmp_path)!r})\n"
        "from tensordict import TensorDict\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    warnings.simplefilter('always')\n"
        f"    td = TensorDict.load_memmap({str(tmp_path / 'd')!r})\n"
        "print(type(td).__name__, 'evil_module_xyz' in sys.modules, any('not imported' in str(x.message) for x in w))\n"
    )
    assert run_python(code).split() == ["TensorDict", "False", "True"]
    assert not (tmp_path / "imported").exists()
    # opting in imports the module and uses the class
    code_opt_in = code.replace("load_memmap(", "load_memmap(import_classes=True, prefix=")
    assert run_python(code_opt_in).split()[1] == "True"


class SavedSub(TensorDict):
    """A TensorDict subclass defined in this (imported) test module."""


def test_imported_registered_or_passed_classes_are_used(tmp_path):
    _write_class_folder(tmp_path / "a", f"{SavedSub.__module__}.{SavedSub.__qualname__}")
    assert type(TensorDict.load_memmap(tmp_path / "a")) is SavedSub  # a TensorDict subclass

    class Local(TensorDict):
        pass

    name = f"{Local.__module__}.{Local.__qualname__}"
    _write_class_folder(tmp_path / "b", name)
    assert type(TensorDict.load_memmap(tmp_path / "b")) is Local  # found among subclasses
    _write_class_folder(tmp_path / "c", "nowhere.Unknown")
    with pytest.warns(UserWarning, match="not imported or registered"):
        assert type(TensorDict.load_memmap(tmp_path / "c")) is TensorDict

    class Marker:
        """Not a tensordict: rebuilt through from_tensordict."""

        @classmethod
        def from_tensordict(cls, td):
            out = cls()
            out.td = td
            return out

    _write_class_folder(tmp_path / "d", "elsewhere.Marker")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = TensorDict.load_memmap(tmp_path / "d", classes=[Marker])
    assert isinstance(got, Marker) and torch.equal(got.td["x"], torch.zeros(2))
    register_class(Marker)
    _write_class_folder(tmp_path / "e", f"{Marker.__module__}.{Marker.__qualname__}")
    assert isinstance(TensorDict.load_memmap(tmp_path / "e"), Marker)

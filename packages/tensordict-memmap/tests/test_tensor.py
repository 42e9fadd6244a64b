"""MemoryMappedTensor: constructors, views, ops, pickling, files, processes, bad input."""

from __future__ import annotations

import os
import pickle
import shutil
import tempfile
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp
from memmap_helpers import run_python

from tensordict import MemoryMappedTensor, TensorDict

DTYPES = [
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.int8,
    torch.int64,
    torch.bool,
    torch.complex64,
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("with_file", [False, True])
def test_from_tensor_copies_values_and_dtype(tmp_path, dtype, with_file):
    source = (torch.arange(6) % 2).to(dtype).view(2, 3)
    name = tmp_path / "x.memmap" if with_file else None
    m = MemoryMappedTensor.from_tensor(source, filename=name)
    assert type(m) is MemoryMappedTensor and m.dtype == dtype and m.shape == (2, 3)
    assert torch.equal(m.as_subclass(torch.Tensor), source)
    source.zero_()  # a copy, not a view of the source
    assert m.as_subclass(torch.Tensor).any() or dtype == torch.bool and not m.any()
    if with_file:
        assert m.filename == str(name.absolute())
        assert name.stat().st_size == 6 * dtype.itemsize
        assert m._handler is None
    else:
        assert m._filename is None and m._handler is not None


def test_file_holds_raw_bytes(tmp_path):
    m = MemoryMappedTensor.from_tensor(torch.arange(4, dtype=torch.int32), filename=tmp_path / "x")
    assert (tmp_path / "x").read_bytes() == torch.arange(4, dtype=torch.int32).numpy().tobytes()
    m[1] = 7
    assert (tmp_path / "x").read_bytes()[4:8] == (7).to_bytes(4, "little")


@pytest.mark.parametrize(
    "make",
    [
        lambda **k: MemoryMappedTensor.zeros(2, 3, **k),
        lambda **k: MemoryMappedTensor.zeros((2, 3), **k),
        lambda **k: MemoryMappedTensor.zeros(shape=(2, 3), **k),
        lambda **k: MemoryMappedTensor.zeros(torch.Size([2, 3]), **k),
    ],
)
@pytest.mark.parametrize("with_file", [False, True])
def test_shape_argument_forms(tmp_path, make, with_file):
    kwargs = {"filename": tmp_path / "z"} if with_file else {}
    t = make(dtype=torch.int16, **kwargs)
    assert t.shape == (2, 3) and t.dtype == torch.int16 and not t.any()


@pytest.mark.parametrize("with_file", [False, True])
def test_constants_and_like(tmp_path, with_file):
    f = (lambda n: {"filename": tmp_path / n}) if with_file else (lambda n: {})
    assert (MemoryMappedTensor.ones(3, **f("o")) == 1).all()
    assert (MemoryMappedTensor.full((3,), fill_value=2.5, **f("f")) == 2.5).all()
    assert MemoryMappedTensor.empty(4, dtype=torch.int8, **f("e")).shape == (4,)
    ref = torch.ones(2, 2, dtype=torch.float64)
    assert (MemoryMappedTensor.zeros_like(ref, **f("zl")) == 0).all()
    assert MemoryMappedTensor.ones_like(ref, **f("ol")).dtype == torch.float64
    assert (MemoryMappedTensor.full_like(ref, 3, **f("fl")) == 3).all()
    assert MemoryMappedTensor.empty_like(ref, **f("el")).shape == (2, 2)
    assert MemoryMappedTensor.full((2,), 5).tolist() == [5.0, 5.0]  # positional fill value


def test_constructor_bad_arguments(tmp_path):
    with pytest.raises(TypeError):
        MemoryMappedTensor.zeros()
    with pytest.raises(TypeError, match="unexpected"):
        MemoryMappedTensor.zeros(2, colour="red")
    with pytest.raises(RuntimeError, match="CPU"):
        MemoryMappedTensor.zeros(2, device="meta")
    with pytest.raises(ValueError, match="CPU"):
        MemoryMappedTensor([1, 2], device="meta")
    with pytest.raises(TypeError, match="torch.Tensor"):
        MemoryMappedTensor.from_tensor([1, 2])
    with pytest.raises(RuntimeError, match="gradients"):
        MemoryMappedTensor.from_tensor(torch.zeros(2, requires_grad=True))
    with pytest.raises(ValueError, match="unknown dtype"):
        MemoryMappedTensor.from_filename(tmp_path / "x", "torch.notadtype", [2])


def test_existing_file_needs_existsok(tmp_path):
    name = tmp_path / "x.memmap"
    MemoryMappedTensor.from_tensor(torch.zeros(3), filename=name)
    with pytest.raises(RuntimeError, match="already exists"):
        MemoryMappedTensor.from_tensor(torch.ones(3), filename=name)
    again = MemoryMappedTensor.from_tensor(torch.ones(3), filename=name, existsok=True)
    assert (again == 1).all()


def test_refuses_to_write_through_a_symlink(tmp_path):
    target = tmp_path / "target"
    target.write_bytes(b"keep me")
    (tmp_path / "link").symlink_to(target)
    with pytest.raises(RuntimeError, match="symlink"):
        MemoryMappedTensor.from_tensor(torch.zeros(3), filename=tmp_path / "link", existsok=True)
    assert target.read_bytes() == b"keep me"


def test_from_tensor_identity_and_copy_existing(tmp_path):
    m = MemoryMappedTensor.from_tensor(torch.arange(3.0), filename=tmp_path / "a")
    assert MemoryMappedTensor.from_tensor(m, filename=tmp_path / "a") is m
    anon = MemoryMappedTensor.from_tensor(torch.arange(3.0))
    assert MemoryMappedTensor.from_tensor(anon) is anon
    with pytest.raises(RuntimeError, match="copy_existing"):
        MemoryMappedTensor.from_tensor(m, filename=tmp_path / "b")
    copy = MemoryMappedTensor.from_tensor(m, filename=tmp_path / "b", copy_existing=True)
    assert copy.filename.endswith("b") and torch.equal(copy, m) and copy is not m
    to_memory = MemoryMappedTensor.from_tensor(m)  # a file-backed input copied to shared memory
    assert to_memory._filename is None and torch.equal(to_memory, m)


def test_from_tensor_copy_data_false_and_shape(tmp_path):
    m = MemoryMappedTensor.from_tensor(torch.ones(3), copy_data=False)
    assert not m.any()
    wide = MemoryMappedTensor.from_tensor(torch.arange(3.0), shape=(2, 3))
    assert wide.tolist() == [[0.0, 1.0, 2.0], [0.0, 1.0, 2.0]]


def test_expanded_source_is_materialised():
    m = MemoryMappedTensor.from_tensor(torch.zeros((), dtype=torch.uint8).expand(30, 4, 4))
    assert m.shape == (30, 4, 4) and m.is_contiguous()
    m.copy_(m + 3)
    assert (m == 3).all()


def test_views_keep_the_file_and_torch_ops_give_plain_tensors(tmp_path):
    m = MemoryMappedTensor.from_tensor(torch.arange(10.0), filename=tmp_path / "v")
    for view in (m[2:5], m[3], m.split(3)[1], m.chunk(2)[0], m.unbind(0)[4], next(iter(m))):
        assert type(view) is MemoryMappedTensor and view.filename == m.filename
        assert view.parent_shape == torch.Size([10])
    assert m[2:5]._handler is m._handler
    for plain in (
        m + 1,
        m.clone(),
        m.sum(),
        m.view(2, 5),
        m[torch.tensor([1, 2])],
        m.to(torch.int64),
    ):
        assert type(plain) is torch.Tensor
    assert m.fill_(1.0) is m and m.copy_(torch.zeros(10)) is m and m.contiguous() is m
    m[2:5].fill_(4.0)  # writes through a view reach the mapping
    assert MemoryMappedTensor.from_filename(tmp_path / "v", torch.float32, [10])[3] == 4


def test_from_filename_modes_and_index(tmp_path):
    name = tmp_path / "m"
    MemoryMappedTensor.from_tensor(torch.arange(6), filename=name)
    read_only = MemoryMappedTensor.from_filename(name, torch.int64, (2, 3), mode="r")
    assert read_only.tolist() == [[0, 1, 2], [3, 4, 5]]
    shared = MemoryMappedTensor.from_filename(name, torch.int64, (2, 3), mode="r+")
    shared[0, 0] = 7
    assert MemoryMappedTensor.from_filename(name, torch.int64, (2, 3))[0, 0] == 7
    assert MemoryMappedTensor.from_filename(name, torch.int64, (2, 3), index=1).tolist() == [
        3,
        4,
        5,
    ]
    with pytest.raises(ValueError, match="mode"):
        MemoryMappedTensor.from_filename(name, torch.int64, (2, 3), mode="w")


def test_from_filename_refuses_a_short_file(tmp_path):
    MemoryMappedTensor.from_tensor(torch.arange(2), filename=tmp_path / "short")
    with pytest.raises(RuntimeError, match="truncated"):
        MemoryMappedTensor.from_filename(tmp_path / "short", torch.int64, [100])
    assert (tmp_path / "short").stat().st_size == 16  # never grown


@pytest.mark.parametrize("mode", [None, "r", "r+"])
@pytest.mark.parametrize("shape", [[3], torch.tensor([[2], [1]])], ids=["dense", "nested"])
def test_from_filename_of_a_missing_file_raises_and_creates_nothing(tmp_path, mode, shape):
    # the reference creates a zero-filled file (mode None or "r+"); creating is for
    # empty/zeros/from_tensor(..., filename=...), which TorchRL falls back to on this error
    missing = tmp_path / "missing.memmap"
    with pytest.raises(FileNotFoundError, match="missing.memmap' does not exist"):
        MemoryMappedTensor.from_filename(missing, torch.float32, shape, mode=mode)
    assert list(tmp_path.iterdir()) == []
    created = MemoryMappedTensor.zeros(3, filename=missing)  # the creating path
    assert created.tolist() == [0.0, 0.0, 0.0] and missing.stat().st_size == 12


def _read_only_writes(t):
    """Every kind of write into ``t``, each a callable."""
    return {
        "method": lambda: t.fill_(9),
        "setitem": lambda: t.__setitem__(0, 9),
        "operator": lambda: t.__iadd__(1),
        "view of a view": lambda: t.view(-1)[1:].zero_(),
        "detached": lambda: t.detach().mul_(2),
        "out=": lambda: torch.add(torch.ones(4), 1, out=t),
        "foreach": lambda: torch._foreach_add_([t], 1),
        "copy_": lambda: t.copy_(torch.zeros(4)),
    }


@pytest.mark.parametrize("how", list(_read_only_writes(None)))
def test_a_read_only_mapping_refuses_writes(tmp_path, how):
    name = tmp_path / "ro.memmap"
    MemoryMappedTensor.from_tensor(torch.arange(4.0), filename=name)
    before = name.read_bytes()
    t = MemoryMappedTensor.from_filename(name, torch.float32, [4], mode="r")
    with pytest.raises(RuntimeError, match=f"read-only from '{name}'.*mode='r\\+'"):
        _read_only_writes(t)[how]()
    assert name.read_bytes() == before  # the file...
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0]  # ...and what this process sees
    assert (t[1:] * 2).tolist() == [2.0, 4.0, 6.0]  # reading and out-of-place ops work
    copy = t.clone()
    copy += 1  # a copy in memory is writable
    assert copy.tolist() == [1.0, 2.0, 3.0, 4.0]


@pytest.mark.parametrize("mode", [None, "r+"])
def test_writable_mappings_still_write_to_the_file(tmp_path, mode):
    name = tmp_path / "rw.memmap"
    MemoryMappedTensor.from_tensor(torch.arange(4.0), filename=name)
    t = MemoryMappedTensor.from_filename(name, torch.float32, [4], mode=mode)
    t[1:] += 10
    assert name.read_bytes() == torch.tensor([0.0, 11.0, 12.0, 13.0]).numpy().tobytes()


_UNPRIVILEGED_CHILD = """
import os, sys
import torch
import tensordict.memmap
from tensordict import MemoryMappedTensor, TensorDict
if os.geteuid() == 0:  # root writes any file: run as 'nobody' (imports done above)
    os.setgid(65534)
    os.setuid(65534)
folder = sys.argv[1]
loaded = TensorDict.load_memmap(folder)  # default mode: read-only, the file is not writable
mapped = MemoryMappedTensor.from_filename(folder + "/a.memmap", torch.float32, [4])
print(loaded["a"].tolist(), mapped.tolist())
for t in (loaded["a"], mapped):
    try:
        t.add_(1)
    except RuntimeError as err:
        print("refused:", err)
"""


def test_a_file_without_write_permission_is_read_only():
    # a folder 'nobody' can reach (tmp_path's parents are private to the user)
    folder = tempfile.mkdtemp(prefix="td-readonly-")
    try:
        os.chmod(folder, 0o755)
        TensorDict({"a": torch.arange(4.0)}, [4]).memmap(folder)
        leaf = Path(folder) / "a.memmap"
        os.chmod(leaf, 0o444)
        before = leaf.read_bytes()
        out = run_python(_UNPRIVILEGED_CHILD, folder)
        lines = out.splitlines()
        assert lines[0] == "[0.0, 1.0, 2.0, 3.0] [0.0, 1.0, 2.0, 3.0]"  # reading works
        assert len(lines) == 3 and all(
            line.startswith("refused: add_:") and str(leaf) in line for line in lines[1:]
        )
        assert leaf.read_bytes() == before
    finally:
        shutil.rmtree(folder)


@pytest.mark.parametrize("layout", [torch.sparse_coo, torch.sparse_csr, torch.sparse_csc], ids=str)
def test_sparse_tensors_are_refused_with_a_hint(tmp_path, layout):
    eye = torch.eye(3)
    sparse = eye.to_sparse(layout=layout)
    name = tmp_path / "s.memmap"
    with pytest.raises(RuntimeError, match=r"sparse tensor \(layout .*\.to_dense\(\)"):
        MemoryMappedTensor.from_tensor(sparse, filename=name)
    with pytest.raises(RuntimeError, match=r"sparse tensor .*\.to_dense\(\)"):
        MemoryMappedTensor.from_tensor(sparse)
    td = TensorDict({"dense": eye, "n": {"sp": sparse}}, [3])
    with pytest.raises(RuntimeError, match=r"the entry 'n/sp' is a sparse tensor"):
        td.memmap(tmp_path / "td")
    assert list(tmp_path.iterdir()) == []  # no file, no folder
    assert MemoryMappedTensor.from_tensor(sparse.to_dense()).tolist() == eye.tolist()


def test_from_storage_and_handler(tmp_path):
    base = MemoryMappedTensor.from_tensor(torch.arange(6.0), filename=tmp_path / "s")
    view = MemoryMappedTensor.from_storage(
        base.untyped_storage(), dtype=torch.float32, shape=(2, 3)
    )
    assert view.filename == base.filename and view[1].tolist() == [3.0, 4.0, 5.0]
    with pytest.raises(RuntimeError, match="mapped from"):
        MemoryMappedTensor.from_storage(
            base.untyped_storage(), dtype=torch.float32, filename=tmp_path / "other"
        )
    anon = MemoryMappedTensor.from_tensor(torch.arange(4))
    again = MemoryMappedTensor.from_handler(anon._handler, torch.int64, [2, 2])
    again[0, 0] = 9
    assert anon[0] == 9  # same memory
    with pytest.raises(RuntimeError, match="bytes"):
        MemoryMappedTensor.from_handler(anon._handler, torch.int64, [100])


def test_nested_shapes(tmp_path):
    sizes = torch.tensor([[2, 3], [2, 4]])
    t = MemoryMappedTensor.zeros(sizes, dtype=torch.int32, filename=tmp_path / "n")
    assert t.is_nested and type(t) is MemoryMappedTensor
    t[1].fill_(5)
    again = MemoryMappedTensor.from_filename(tmp_path / "n", torch.int32, sizes)
    assert (again[1] == 5).all() and (again[0] == 0).all()
    nt = torch.nested.nested_tensor([torch.zeros(2, 3), torch.ones(2, 4)])
    m = MemoryMappedTensor.from_tensor(nt)
    assert torch.equal(m[1], torch.ones(2, 4))


def test_filename_property():
    anon = MemoryMappedTensor.zeros(2)
    with pytest.raises(RuntimeError, match="no file"):
        anon.filename


def test_pickle_of_a_file_backed_view_sends_no_data(tmp_path):
    m = MemoryMappedTensor.from_tensor(torch.arange(100_000.0), filename=tmp_path / "p")
    payload = pickle.dumps(m[10:20])
    assert len(payload) < 1000  # file name, dtype, geometry: not 400 kB of data
    view = pickle.loads(payload)
    assert type(view) is MemoryMappedTensor and view.tolist() == list(map(float, range(10, 20)))
    view.fill_(-1)  # the unpickled view maps the same file
    assert (m[10:20] == -1).all()
    anon = MemoryMappedTensor.from_tensor(torch.arange(3))
    assert pickle.loads(pickle.dumps(anon)).tolist() == [0, 1, 2]


def _child_reads_and_writes(t, queue):
    queue.put(t.tolist())
    t.fill_(42)
    queue.put("written")


@pytest.mark.parametrize("with_file", [True, False])
def test_writes_are_visible_across_processes(tmp_path, with_file):
    name = tmp_path / "shared.memmap" if with_file else None
    t = MemoryMappedTensor.from_tensor(torch.arange(4), filename=name)
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_child_reads_and_writes, args=(t[1:], queue))
    proc.start()
    try:
        assert queue.get(timeout=120) == [1, 2, 3]
        assert queue.get(timeout=120) == "written"
    finally:
        proc.join(timeout=120)
    assert t.tolist() == [0, 42, 42, 42]
    if with_file:  # a second mapping of the file sees the child's writes too
        assert MemoryMappedTensor.from_filename(name, torch.int64, [4]).tolist() == [0, 42, 42, 42]


def test_repr_names_the_class():
    assert repr(MemoryMappedTensor.zeros(2)).startswith("MemoryMappedTensor(")


def test_zero_size(tmp_path):
    t = MemoryMappedTensor.from_tensor(torch.zeros(0, 3), filename=tmp_path / "e")
    assert t.shape == (0, 3) and os.path.getsize(tmp_path / "e") == 0
    assert MemoryMappedTensor.from_filename(tmp_path / "e", torch.float32, [0, 3]).shape == (0, 3)
    assert Path(t.filename).exists()


def test_first_class_dim_index_of_memory_mapped_entries_is_refused(tmp_path):
    from functorch import dim as ftdim

    from tensordict import TensorDict

    td = TensorDict(a=torch.arange(12.0).reshape(3, 4), batch_size=[3, 4]).memmap(tmp_path)
    d0 = ftdim.dims(1)
    with pytest.raises(
        ValueError, match="first class dimension indices with MemoryMappedTensor.*'a'"
    ):
        td[d0]
    assert torch.equal(td["a"], torch.arange(12.0).reshape(3, 4))  # unchanged
    in_memory = td.to_tensordict()[d0]  # the way out the error names
    assert in_memory["a"].dims == (d0,)

"""td.map / td.map_iter over real worker processes."""

from __future__ import annotations

import multiprocessing
import multiprocessing.pool
import operator
import os
import signal
import time

import pytest
import torch

from tensordict import LazyStackedTensorDict, TensorDict


# Worker functions: top-level, so that the pool can pickle them.
def square_plus_one(td):
    return td.apply(lambda x: x * x + 1)


def explode_on_row_5000(td):
    if (td["i"] == 5000).any():
        raise ValueError("row 5000 is cursed")
    return td


def returns_none(td):
    return None


def worker_view(td):
    """Whether the chunk arrived in shared memory (not copied), and in which process."""
    shared = all(v.is_shared() for v in td.values(True, True))
    return TensorDict(
        {"shared": torch.full(td.shape, shared), "pid": torch.full(td.shape, os.getpid())},
        td.shape,
    )


def random_draw(td):
    return TensorDict({"r": torch.rand(td.shape)}, td.shape)


def set_two(td):
    return td.set("two", 2)


def dataset(n: int) -> TensorDict:
    return TensorDict(
        {
            "i": torch.arange(n),
            "x": torch.linspace(0, 1, n * 3).reshape(n, 3),
            "n": {"y": torch.ones(n, 2)},
        },
        [n],
    )


class ThreadPoolLike:
    """A minimal Pool-like object: only imap and imap_unordered (what map needs)."""

    def __init__(self) -> None:
        self.pool = multiprocessing.pool.ThreadPool(2)
        self.calls: list[str] = []

    def imap(self, fn, items, chunksize=1):
        self.calls.append("imap")
        return self.pool.imap(fn, items, chunksize)

    def imap_unordered(self, fn, items, chunksize=1):
        self.calls.append("imap_unordered")
        return self.pool.imap_unordered(fn, items, chunksize)


def test_map_over_10000_rows_equals_sequential():
    td = dataset(10_000)
    out = td.map(square_plus_one, num_workers=2, chunksize=1000)
    expected = square_plus_one(td)
    assert out.batch_size == td.batch_size
    for key in (("i",), ("x",), ("n", "y")):
        assert torch.equal(out[key], expected[key]), key
    assert multiprocessing.active_children() == []  # the pool made for the call is gone


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_map_along_other_dims_and_num_chunks(dim):
    td = TensorDict({"a": torch.arange(24.0).reshape(4, 6)}, [4, 6])
    out = td.map(square_plus_one, dim=dim, num_workers=2, num_chunks=3)
    assert torch.equal(out["a"], td["a"] ** 2 + 1)


def test_chunks_arrive_in_shared_memory_in_several_workers():
    td = dataset(100)  # not shared: map moves it to shared memory once
    out = td.map(worker_view, num_workers=2, num_chunks=4)
    assert out["shared"].all()
    assert not td["x"].is_shared()  # the caller's tensordict is left as it was
    assert out["pid"].unique().numel() >= 1


def test_raising_fn_reports_chunk_and_worker_traceback():
    td = dataset(10_000)
    with pytest.raises(ValueError, match="row 5000 is cursed") as info:
        td.map(explode_on_row_5000, num_workers=2, chunksize=1000)
    notes = "".join(getattr(info.value, "__notes__", []))
    assert "chunk 5" in notes  # rows 5000-5999
    cause = info.value.__cause__
    assert cause is not None and "explode_on_row_5000" in str(cause)  # the worker's traceback
    assert multiprocessing.active_children() == []  # no worker left behind


def test_fn_returning_none():
    td = dataset(50)
    assert td.map(returns_none, num_workers=2, chunksize=10) is None


@pytest.mark.parametrize("shared", [True, False])
def test_out_is_written_in_place(shared):
    td = dataset(200)
    out = square_plus_one(td).zero_()
    if shared:
        out.share_memory_()  # workers write straight into it
    result = td.map(square_plus_one, num_workers=2, chunksize=30, out=out)
    assert result is out
    assert torch.equal(out["x"], td["x"] ** 2 + 1)
    assert torch.equal(out["n", "y"], torch.full((200, 2), 2.0))


def test_seeded_shuffle_yields_a_permutation():
    td = dataset(1000)
    seen = []
    for chunk in td.map_iter(
        operator.pos,
        num_workers=2,
        chunksize=100,
        shuffle=True,
        generator=torch.Generator().manual_seed(3),
    ):
        seen.extend(chunk["i"].tolist())
    assert sorted(seen) == list(range(1000))
    assert seen != list(range(1000))
    # the permutation comes from the generator: the same seed gives the same chunks
    again = [
        sorted(c["i"].tolist())
        for c in td.map_iter(
            operator.pos,
            num_workers=2,
            chunksize=100,
            shuffle=True,
            generator=torch.Generator().manual_seed(3),
        )
    ]
    chunks = [sorted(seen[k : k + 100]) for k in range(0, 1000, 100)]
    assert sorted(again) == sorted(chunks)


def test_map_iter_in_order_and_early_break_stops_workers():
    td = dataset(100)
    firsts = [c["i"][0].item() for c in td.map_iter(operator.pos, num_workers=2, chunksize=25)]
    assert firsts == [0, 25, 50, 75]
    for _ in td.map_iter(operator.pos, num_workers=2, chunksize=10):
        break
    assert multiprocessing.active_children() == []


def test_any_pool_like_object():
    pool = ThreadPoolLike()
    td = dataset(100)
    out = td.map(square_plus_one, pool=pool, num_chunks=5)
    assert torch.equal(out["x"], td["x"] ** 2 + 1)
    list(td.map_iter(operator.pos, pool=pool, chunksize=10, shuffle=True))
    assert pool.calls == ["imap", "imap_unordered"]
    pool.pool.close()  # map leaves a given pool open: this still works
    pool.pool.join()


def test_spawn_start_method():
    td = dataset(20)
    out = td.map(operator.neg, num_workers=2, chunksize=5, mp_start_method="spawn")
    assert torch.equal(out["x"], -td["x"])


def test_seeded_workers_draw_the_same_numbers():
    td = dataset(20)
    a = td.map(random_draw, num_workers=1, chunksize=5, generator=torch.Generator().manual_seed(1))
    b = td.map(random_draw, num_workers=1, chunksize=5, generator=torch.Generator().manual_seed(1))
    c = td.map(random_draw, num_workers=1, chunksize=5, generator=torch.Generator().manual_seed(2))
    assert torch.equal(a["r"], b["r"]) and not torch.equal(a["r"], c["r"])


def test_chunksize_zero_stacks_lazily_when_structures_differ():
    td = LazyStackedTensorDict(
        TensorDict({"a": torch.zeros(())}), TensorDict({"b": torch.ones(())})
    )
    out = td.map(set_two, chunksize=0, num_workers=2)
    assert out[0]["a"] == 0 and out[1]["b"] == 1 and (out["two"] == 2).all()


def test_progress_bar(capfd):
    td = dataset(40)
    td.map(operator.pos, num_workers=2, chunksize=10, pbar=True)
    err = capfd.readouterr().err
    assert "4/4" in err and "100%" in err


def test_bad_arguments():
    td = dataset(10)
    with pytest.raises(ValueError, match="but not both"):
        td.map(operator.pos, chunksize=2, num_chunks=2, num_workers=1)
    with pytest.raises(Exception, match="picklable"):
        td.map(lambda x: x, num_workers=1)
    with pytest.raises(IndexError, match="out of range"):
        td.map(operator.pos, dim=3, num_workers=1)
    with pytest.raises(RuntimeError, match="index_with_generator"):
        list(td.map_iter(operator.pos, num_workers=1, shuffle=True, index_with_generator=False))


class _FailsInParent:
    """Unpickles in the worker's own process only: in the parent, unpickling it raises,
    which ends the pool's result-handler thread (as a result whose shared memory went
    with an exited worker does)."""

    def __reduce__(self):
        return (_rebuild_in, (os.getpid(),))


def _rebuild_in(pid):
    if os.getpid() != pid:
        raise RuntimeError("this result cannot be read here")
    return _FailsInParent()


def _result_that_breaks_the_pool(_):
    return _FailsInParent()


def _sleep(seconds):
    import time

    time.sleep(seconds)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_terminate_kills_workers_when_the_result_handler_died():
    from tensordict.distributed._map import _terminate

    pool = multiprocessing.get_context("fork").Pool(2)
    pool.apply_async(_sleep, (60,))  # stays in the cache: terminate() finds it pending
    pool.apply_async(_result_that_breaks_the_pool, (0,))
    handler = pool._result_handler
    handler.join(timeout=60)
    # CPython's terminate() raises AssertionError in this state (result handler gone,
    # a task pending) before it kills the workers; ours kills them.
    assert not handler.is_alive() and len(pool._cache) > 0
    workers = list(pool._pool)
    _terminate(pool)
    assert not any(w.is_alive() for w in workers)
    assert [p for p in multiprocessing.active_children() if p in workers] == []


def memmap_view(td):
    """Whether the chunk arrived memory-mapped (not copied), beside the usual result."""
    out = square_plus_one(td)
    out.set("mapped", torch.full(td.shape, td.is_memmap()))
    return out


def test_memory_mapped_input_and_out(tmp_path):
    pytest.importorskip(
        "tensordict.memmap", reason="memory-mapped chunks need tensordict-memmap (extra memmap)"
    )
    td = dataset(300).memmap(tmp_path / "in")
    out = memmap_view(dataset(300)).zero_().memmap(tmp_path / "out")
    result = td.map(memmap_view, num_workers=2, chunksize=50, out=out)
    assert result is out
    assert out["mapped"].all()  # workers read the files, no copy was sent
    on_disk = TensorDict.load_memmap(tmp_path / "out")  # the workers wrote the files
    assert torch.equal(on_disk["x"], dataset(300)["x"] ** 2 + 1)
    assert torch.equal(on_disk["n", "y"], torch.full((300, 2), 2.0))


# ---------------------------------------------------------------------- workers that die
def killed_on_row_0(td):
    if (td["i"] == 0).any():
        os.kill(os.getpid(), signal.SIGKILL)
    return td


def exits_on_row_0(td):
    if (td["i"] == 0).any():
        os._exit(3)
    return td


def first_row_only(td):
    return td[:1]


def add_trailing_dim(td):
    return td.unsqueeze(-1)


@pytest.mark.parametrize(
    "fn, code", [(killed_on_row_0, "exit code -9"), (exits_on_row_0, "exit code 3")]
)
@pytest.mark.parametrize("iterate", [False, True])
def test_a_dead_worker_raises_within_seconds_and_leaves_no_process(fn, code, iterate):
    from tensordict.distributed import WorkerDiedError

    td = dataset(40)
    start = time.monotonic()
    with pytest.raises(WorkerDiedError, match=code) as info:
        if iterate:
            list(td.map_iter(fn, num_workers=2, chunksize=5))
        else:
            td.map(fn, num_workers=2, chunksize=5)
    assert time.monotonic() - start < 5  # multiprocessing.Pool alone waits forever
    message = str(info.value)
    assert "worker process" in message and "died" in message
    if fn is killed_on_row_0:
        assert "SIGKILL" in message
    assert multiprocessing.active_children() == []  # the pool is torn down


def test_a_worker_recycled_by_max_tasks_per_child_is_not_a_death():
    td = dataset(40)
    out = td.map(operator.pos, num_workers=2, chunksize=5, max_tasks_per_child=1)
    assert torch.equal(out["x"], td["x"])


def test_fn_must_keep_the_chunks_batch_size():
    td = dataset(10)
    with pytest.raises(RuntimeError, match=r"chunk 0.*batch size \(5,\).*batch size \(1,\)"):
        td.map(first_row_only, num_workers=2, chunksize=5)
    assert multiprocessing.active_children() == []
    # trailing batch dims may be added: the results join along the mapped dim
    out = td.map(add_trailing_dim, num_workers=2, chunksize=5)
    assert out.batch_size == (10, 1)
    assert torch.equal(out["x"], td["x"].unsqueeze(1))


@pytest.mark.parametrize("shared", [True, False])
def test_out_of_another_batch_size_is_refused_before_any_chunk(shared):
    td = dataset(20)
    out = square_plus_one(dataset(15)).zero_()
    if shared:
        out.share_memory_()
    before = out.clone()
    with pytest.raises(RuntimeError, match=r"out has batch size \(15,\).*\(20,\).*nothing was"):
        td.map(square_plus_one, num_workers=2, chunksize=5, out=out)
    assert (out == before).all()
    with pytest.raises(TypeError, match="out must be a tensordict"):
        td.map(square_plus_one, num_workers=2, chunksize=5, out=torch.zeros(20))

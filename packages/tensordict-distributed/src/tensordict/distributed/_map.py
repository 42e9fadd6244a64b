"""``td.map`` / ``td.map_iter``: a function over chunks of a tensordict, in worker processes.

The tensordict is split along ``dim`` into chunks (``chunksize`` elements each, ``0`` for
one element at a time, or ``num_chunks`` chunks, by default one per worker) and ``fn`` runs
on each chunk in a pool of processes.

* Chunks cross without copies: a tensordict that is not in shared memory (or memory-
  mapped, with ``tensordict-memmap``) is consolidated once into shared memory, and each
  chunk is a view of it, which ``torch.multiprocessing`` passes as a handle.
* ``pool=`` takes any object with the ``multiprocessing.Pool`` interface — only ``imap``
  (ordered) and ``imap_unordered`` (``shuffle=True``) are called — so a cluster pool such
  as ``ray.util.multiprocessing.Pool`` plugs in unchanged. Without one, a pool of
  ``num_workers`` processes is made for the call, seeded from ``generator`` (worker ``i``
  seeds torch with the base seed + ``i``, NumPy with a value derived from both), with
  ``worker_threads`` torch threads each, and torn down afterwards, also on error.
* A worker's exception reaches the caller with its own type, the worker's traceback (as
  its ``__cause__``) and a note naming the chunk index.
* A worker process that dies (killed, ``os._exit``, a crash in native code) takes its chunk
  with it, and ``multiprocessing.Pool`` would wait for that chunk forever: the results are
  awaited in short steps, and between them the pool's processes are checked. A dead one
  raises :class:`WorkerDiedError` naming its pid and exit code; the pool made for the call
  is then torn down (no process is left behind).
* ``fn`` must keep the batch size of its chunk (it may add trailing batch dims): a result
  of another size raises, naming the chunk and both sizes, before anything is gathered.
* ``out=`` receives the results in place: workers write straight into it when it is in
  shared memory or memory-mapped, otherwise the main process copies each result in.
* ``pbar=True`` shows a tqdm progress bar.
"""

from __future__ import annotations

import contextlib
import itertools
import multiprocessing
import multiprocessing.pool
import os
import pickle
import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch

from tensordict._plugins.api import (
    _unpickle_consolidated,
    consolidated_buffer,
    current_metadata,
)

_MapFn = Callable[[Any], Any]

#: Seconds between two checks of the pool's processes while a result is awaited.
POLL_SECONDS = 0.1


class WorkerDiedError(RuntimeError):
    """A worker process of ``map``/``map_iter`` exited while chunks were still running
    (killed, ``os._exit``, a crash): the chunk it held is lost, so the call fails."""


class _SharedChunk:
    """A chunk that views a shared buffer: it pickles as that buffer (one shared-memory
    handle, no copy) plus the JSON layout of the chunk's leaves in it, and unpickles as a
    tensordict viewing the buffer."""

    __slots__ = ("td", "buffer")

    def __init__(self, td: Any, buffer: torch.Tensor) -> None:
        self.td = td
        self.buffer = buffer

    def __reduce__(self) -> Any:
        meta = current_metadata(self.td, self.buffer, for_pickle=True, nbytes=self.buffer.numel())
        return _unpickle_consolidated, (self.buffer, meta)


def _unwrap(chunk: Any) -> Any:
    return chunk.td if isinstance(chunk, _SharedChunk) else chunk


def _to_shared(result: Any) -> Any:
    """A result as one shared buffer (what it costs anyway to send it back), so that it
    travels as one handle instead of one per leaf."""
    if hasattr(result, "consolidate") and not result.is_consolidated():
        try:
            return result.consolidate(share_memory=True, allow_pickle=True)
        except (NotImplementedError, TypeError, ValueError, RuntimeError):
            return result
    return result


# ---------------------------------------------------------------------- workers
def _init_worker(seed: int, ids: Any, threads: int) -> None:
    """Pool initializer: torch threads, and seeds that differ per worker (``ids`` counts
    the workers started: 0, 1, … then on for those that replace workers recycled by
    ``maxtasksperchild``)."""
    torch.set_num_threads(threads)
    with ids.get_lock():
        worker = ids.value
        ids.value += 1
    torch.manual_seed(seed + worker)
    try:
        import numpy as np

        np.random.seed((seed * 1_000_003 + worker) % 2**32)
    except ImportError:  # pragma: no cover - numpy comes with torch
        pass


class _ByValue:
    """A result pickled to bytes in the worker: its tensors travel as a copy, not as
    shared-memory handles. For pools whose workers exit after ``maxtasksperchild``
    tasks: a handle whose worker has exited cannot be opened any more."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data


class _Task:
    """What a worker runs on ``(index, chunk, out_chunk)``: ``fn(chunk)``, written into
    ``out_chunk`` when one is given (then nothing is sent back)."""

    def __init__(self, fn: _MapFn, remote: bool, by_value: bool = False) -> None:
        self.fn = fn
        self.remote = remote
        self.by_value = by_value

    def __call__(self, item: tuple[int, Any, Any]) -> Any:
        index, chunk, out_chunk = item
        chunk, out_chunk = _unwrap(chunk), _unwrap(out_chunk)
        try:
            result = self.fn(chunk)
        except BaseException as err:
            err.add_note(
                f"(tensordict map: raised by fn on chunk {index}, in worker {os.getpid()})"
            )
            raise
        _check_result(index, chunk, result)
        if out_chunk is None:
            if self.by_value:
                return _ByValue(pickle.dumps(result))
            return _to_shared(result) if self.remote else result
        if result is not None:
            out_chunk.update_(result)
        return None


def _check_result(index: int, chunk: Any, result: Any) -> None:
    """``fn``'s result must keep the chunk's batch size (trailing dims may be added):
    the results are put together along the chunks' dim."""
    if result is None:
        return
    size = getattr(result, "batch_size", None)
    if size is None and isinstance(result, torch.Tensor):
        size = result.shape
    if size is None:
        return
    expected = tuple(chunk.batch_size)
    if tuple(size)[: len(expected)] != expected:
        raise RuntimeError(
            f"map: fn changed the batch size of chunk {index}: it got a chunk of batch size "
            f"{expected} and returned {type(result).__name__} of batch size {tuple(size)}. "
            "fn must keep the chunk's batch size (it may add trailing dims), since the "
            "results are put together along the mapped dim."
        )


# ---------------------------------------------------------------------- dead workers
def _exit_text(code: int) -> str:
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name} (exit code {code})"
        except ValueError:
            return f"killed by signal {-code} (exit code {code})"
    return f"exit code {code}"


class _Watch:
    """The processes of a ``multiprocessing`` pool, seen over time: which one died.

    A worker exits on its own only after ``maxtasksperchild`` tasks, with exit code 0;
    any other exit while results are awaited lost a chunk. Pools without processes
    (a thread pool, a cluster's pool) are not watched."""

    def __init__(self, pool: Any) -> None:
        self.pool = pool
        self.recycles = getattr(pool, "_maxtasksperchild", None) is not None
        self.seen: dict[int, Any] = {}
        self.watchable = isinstance(getattr(pool, "_pool", None), list) and not isinstance(
            pool, multiprocessing.pool.ThreadPool
        )
        self.look()

    def look(self) -> None:
        if self.watchable:
            for proc in list(self.pool._pool):
                self.seen.setdefault(id(proc), proc)

    def dead(self) -> Any:
        """The first worker that died, or ``None``. Workers recycled normally are
        forgotten (a long run would otherwise hold every one, and its pipe, open)."""
        self.look()
        for key, proc in list(self.seen.items()):
            code = getattr(proc, "exitcode", None)
            if code is None:
                continue
            if code != 0 or not self.recycles:
                return proc
            del self.seen[key]
        return None


def _watched(results: Any, watch: _Watch, total: int) -> Iterator[Any]:
    """The results, awaited in steps of :data:`POLL_SECONDS`, checking the workers in
    between (a pool whose iterator has no ``next(timeout)`` is iterated as it is)."""
    step = getattr(results, "next", None)
    if not watch.watchable or step is None:
        yield from results
        return
    done = 0
    while done < total:
        try:
            item = step(timeout=POLL_SECONDS)
        except multiprocessing.TimeoutError:
            handler = getattr(watch.pool, "_result_handler", None)
            if handler is not None and not handler.is_alive():
                raise RuntimeError(
                    f"map: the pool stopped collecting results ({done} of {total} chunks "
                    "had come back): a result could not be read in this process. The pool "
                    "is torn down."
                ) from None
            proc = watch.dead()
            if proc is not None:
                raise WorkerDiedError(
                    f"map: worker process {proc.pid} ({proc.name}) died while chunks were "
                    f"running: {_exit_text(proc.exitcode)}; its chunk is lost. "
                    f"{done} of {total} chunks had come back. A worker dies when it is "
                    "killed (out of memory, a signal), calls os._exit/sys.exit, or crashes "
                    "in native code."
                ) from None
            continue
        except StopIteration:
            return
        done += 1
        # the bytes of our own worker's result (the pool's pipe carries pickles anyway)
        yield pickle.loads(item.data) if isinstance(item, _ByValue) else item


# ---------------------------------------------------------------------- splitting
def _bounds(n: int, chunksize: int | None, num_chunks: int | None, workers: int) -> list[Any]:
    """The chunks of ``range(n)``: an int for chunksize 0 (one element each), else
    ``(start, stop)`` pairs; ``num_chunks`` splits as evenly as possible."""
    if chunksize is not None:
        if isinstance(chunksize, bool) or chunksize < 0:
            raise ValueError(f"chunksize must be a non-negative int, got {chunksize!r}.")
        if chunksize == 0:
            return list(range(n))
        return [(s, min(s + chunksize, n)) for s in range(0, n, chunksize)]
    count = workers if num_chunks is None else num_chunks
    if isinstance(count, bool) or count < 1:
        raise ValueError(f"num_chunks must be a positive int, got {count!r}.")
    count = min(count, n)
    if count == 0:
        return []
    base, extra = divmod(n, count)
    out, start = [], 0
    for i in range(count):
        stop = start + base + (1 if i < extra else 0)
        out.append((start, stop))
        start = stop
    return out


def _index(dim: int, bound: Any, perm: torch.Tensor | None) -> tuple[Any, ...]:
    lead = (slice(None),) * dim
    if perm is None:
        return lead + ((bound,) if isinstance(bound, int) else (slice(*bound),))
    if isinstance(bound, int):
        return lead + (int(perm[bound]),)
    return lead + (perm[bound[0] : bound[1]],)


def _chunks(
    td: Any, dim: int, bounds: list[Any], perm: torch.Tensor | None, lazy: bool
) -> Iterable[Any]:
    """The chunks, made when asked for (``lazy``) or all at once with split/unbind;
    views of a shared buffer travel as :class:`_SharedChunk`."""
    buffer = consolidated_buffer(td)
    if buffer is not None and not buffer.is_shared():
        buffer = None
    if lazy or perm is not None:
        parts: Iterable[Any] = (td[_index(dim, b, perm)] for b in bounds)
    elif bounds and isinstance(bounds[0], int):
        parts = td.unbind(dim)
    else:
        parts = td.split([stop - start for start, stop in bounds], dim) if bounds else []
    if buffer is None or perm is not None:  # fancy indexing copies: nothing to share
        return parts
    return (_SharedChunk(part, buffer) for part in parts)


def _shareable(td: Any) -> Any:
    """``td`` itself when workers can read it without a copy (shared memory, memory-mapped,
    CUDA), else one consolidated copy in shared memory."""
    try:
        if td.is_shared() or td.is_memmap() or (td.device is not None and td.device.type != "cpu"):
            return td
    except NotImplementedError:
        pass
    try:
        return td.consolidate(share_memory=True, allow_pickle=True)
    except (NotImplementedError, TypeError, ValueError):
        return td  # workers receive it through torch.multiprocessing's own sharing


# ---------------------------------------------------------------------- the job
def _check(td: Any, fn: _MapFn, chunksize: Any, num_chunks: Any, dim: int) -> int:
    if any(cls.__name__ == "TensorDictParams" for cls in type(td).__mro__):
        raise RuntimeError(
            "Cannot call map on a TensorDictParams object: its leaves are parameters; "
            "map over params.data (a plain tensordict) instead."
        )
    if chunksize is not None and num_chunks is not None:
        raise ValueError(
            f"map: pass chunksize ({chunksize}) or num_chunks ({num_chunks}), but not both."
        )
    ndim = td.batch_dims
    if not -ndim <= dim < ndim:
        raise IndexError(
            f"map: dim {dim} is out of range for a tensordict with batch size "
            f"{tuple(td.batch_size)} ({ndim} dimensions)."
        )
    try:
        pickle.dumps(fn)
    except Exception as err:
        raise type(err)(
            f"map: fn must be picklable to reach the worker processes (define it at the top "
            f"level of a module, not as a lambda or a local function): {err}"
        ) from err
    return dim % ndim


def _check_out(td: Any, out: Any) -> None:
    """``out`` must be a tensordict whose batch size starts with ``td``'s: checked before
    the first chunk runs, so that a wrong ``out`` is left untouched."""
    if out is None:
        return
    size = getattr(out, "batch_size", None)
    if size is None:
        raise TypeError(
            f"map: out must be a tensordict (or tensorclass instance), got {type(out).__name__}."
        )
    expected = tuple(td.batch_size)
    if tuple(size)[: len(expected)] != expected:
        raise RuntimeError(
            f"map: out has batch size {tuple(size)}, but the results have the batch size of "
            f"the tensordict mapped over, {expected}; nothing was written."
        )


def _own_pool(
    num_workers: int,
    generator: torch.Generator | None,
    max_tasks_per_child: int | None,
    worker_threads: int,
    mp_start_method: str | None,
) -> Any:
    import torch.multiprocessing as mp

    gen = torch.Generator() if generator is None else generator
    seed = int(torch.empty((), dtype=torch.int64).random_(generator=gen).item())
    ctx = mp.get_context(mp_start_method)
    ids = ctx.Value("q", 0)
    return ctx.Pool(
        processes=num_workers,
        initializer=_init_worker,
        initargs=(seed, ids, worker_threads),
        maxtasksperchild=max_tasks_per_child,
    )


@contextlib.contextmanager
def _pool_for(
    pool: Any,
    workers: int,
    generator: torch.Generator | None,
    max_tasks_per_child: int | None,
    worker_threads: int,
    mp_start_method: str | None,
) -> Iterator[Any]:
    """``pool`` itself, or a pool made for the call: its workers exit after a job that
    completed and are killed after an error or an early break (none is left behind)."""
    if pool is not None:
        yield pool
        return
    own = _own_pool(workers, generator, max_tasks_per_child, worker_threads, mp_start_method)
    try:
        yield own
    except WorkerDiedError:
        _kill(own)
        raise
    except BaseException:
        _terminate(own)
        raise
    own.close()
    own.join()


def _terminate(pool: Any) -> None:
    """``pool.terminate()`` and join, or kill its workers where CPython's terminate fails.

    After a worker error, results of other chunks may still be on their way; one whose
    worker has already exited cannot be unpickled (its shared memory handle went with the
    worker), which ends the pool's result thread, and ``terminate()`` then raises
    ``AssertionError("Cannot have cache with result_hander not alive")`` before it kills
    the workers. They are killed here instead, so none is left behind.
    """
    workers = list(getattr(pool, "_pool", ()))
    try:
        pool.terminate()
    except AssertionError:
        # terminate() has told the worker handler to stop; once it has, no worker is
        # started any more: kill those it had, and any it started meanwhile.
        handler = getattr(pool, "_worker_handler", None)
        if handler is not None and handler is not threading.current_thread():
            handler.join(timeout=10)
        workers += [w for w in getattr(pool, "_pool", ()) if w not in workers]
        for worker in workers:
            if worker.is_alive():
                worker.kill()
        for worker in workers:
            worker.join(timeout=10)
        return
    pool.join()


def _kill(pool: Any) -> None:
    """Tear down a pool one of whose workers died: ``terminate()`` within a time limit
    (a worker killed while it held the task queue's lock leaves that lock taken, and
    ``terminate()`` would wait for it forever), then kill whatever worker is still alive."""
    workers = list(getattr(pool, "_pool", ()))
    closer = threading.Thread(target=_terminate, args=(pool,), daemon=True)
    closer.start()
    closer.join(timeout=5)
    for worker in list(getattr(pool, "_pool", ())) + workers:
        if worker.is_alive():
            worker.kill()
        worker.join(timeout=5)


def _workers(num_workers: int | None, pool: Any) -> int:
    if num_workers is not None:
        if isinstance(num_workers, bool) or num_workers < 1:
            raise ValueError(f"num_workers must be a positive int, got {num_workers!r}.")
        return int(num_workers)
    given = getattr(pool, "_processes", None) if pool is not None else None
    return int(given) if isinstance(given, int) and given > 0 else (os.cpu_count() or 1)


def _progress(it: Iterator[Any], total: int, pbar: bool) -> Iterator[Any]:
    if not pbar:
        return it
    try:
        from tqdm.auto import tqdm
    except ImportError as err:  # pragma: no cover - tqdm is a dependency
        raise ModuleNotFoundError(
            "map(pbar=True) shows its progress with tqdm: pip install tqdm"
        ) from err
    return iter(tqdm(it, total=total))


def _run(
    td: Any,
    fn: _MapFn,
    dim: int,
    pool: Any,
    workers: int,
    *,
    chunksize: int | None,
    num_chunks: int | None,
    shuffle: bool,
    generator: torch.Generator | None,
    index_with_generator: bool,
    pbar: bool,
    out: Any,
) -> tuple[Iterator[Any], list[Any]]:
    """Dispatch the chunks to ``pool``; the results (in chunk order unless ``shuffle``)
    and the chunk bounds."""
    n = td.batch_size[dim]
    bounds = _bounds(n, chunksize, num_chunks, workers)
    perm = None
    if shuffle:
        if not index_with_generator:
            raise RuntimeError(
                "map_iter(shuffle=True) draws each chunk's elements from a permutation and "
                "needs index_with_generator=True."
            )
        perm = torch.randperm(n, generator=generator)
    source = _shareable(td)
    chunks = _chunks(source, dim, bounds, perm, index_with_generator)
    writes_out = out is not None and _direct_out(out)
    outs: Iterable[Any] = itertools.repeat(None)
    if writes_out:
        outs = _chunks(out, dim, bounds, perm, index_with_generator)
    items = ((i, c, o) for i, (c, o) in enumerate(zip(chunks, outs)))
    imap = pool.imap_unordered if shuffle else pool.imap
    remote = not isinstance(pool, multiprocessing.pool.ThreadPool)
    watch = _Watch(pool)
    task = _Task(fn, remote, by_value=remote and watch.recycles)
    results = _watched(imap(task, items, 1), watch, len(bounds))
    return _progress(results, len(bounds), pbar), bounds


def _direct_out(out: Any) -> bool:
    try:
        return bool(out.is_shared() or out.is_memmap())
    except NotImplementedError:
        return False


def td_map(
    td: Any,
    fn: _MapFn,
    dim: int = 0,
    num_workers: int | None = None,
    *,
    out: Any = None,
    chunksize: int | None = None,
    num_chunks: int | None = None,
    pool: Any = None,
    generator: torch.Generator | None = None,
    max_tasks_per_child: int | None = None,
    worker_threads: int = 1,
    index_with_generator: bool = False,
    pbar: bool = False,
    mp_start_method: str | None = None,
) -> Any:
    """Apply ``fn`` to chunks of ``td`` along ``dim`` in worker processes; join the results.

    Results are concatenated along ``dim`` (stacked, lazily when their structures differ,
    with ``chunksize=0``). Returns ``out`` when it is given, ``None`` when ``fn`` returns
    ``None`` for every chunk. ``fn`` must be picklable (a top-level function). See the
    module documentation for the pool, the seeds, errors and ``out``.

    >>> import operator, torch
    >>> from tensordict import TensorDict
    >>> td = TensorDict({"x": torch.arange(6.0)}, [6])
    >>> td.map(operator.neg, num_workers=2, chunksize=2)["x"]
    tensor([-0., -1., -2., -3., -4., -5.])

    With a cluster, pass its pool, for example Ray's, whose
    ``ray.util.multiprocessing.Pool`` has the ``multiprocessing.Pool`` interface (the
    workers then run on the cluster's nodes; ``fn`` and the chunks are shipped by Ray):

    .. code-block:: python

        import ray
        from ray.util.multiprocessing import Pool

        ray.init(address="auto")
        with Pool() as pool:  # one worker per CPU of the cluster
            result = td.map(process, pool=pool, chunksize=1000)
    """
    dim = _check(td, fn, chunksize, num_chunks, dim)
    _check_out(td, out)
    workers = _workers(num_workers, pool)
    with _pool_for(
        pool, workers, generator, max_tasks_per_child, worker_threads, mp_start_method
    ) as pool:
        results, bounds = _run(
            td,
            fn,
            dim,
            pool,
            workers,
            chunksize=chunksize,
            num_chunks=num_chunks,
            shuffle=False,
            generator=generator,
            index_with_generator=index_with_generator,
            pbar=pbar,
            out=out,
        )
        return _gather(results, bounds, dim, chunksize == 0, out)


def _gather(results: Iterator[Any], bounds: list[Any], dim: int, stacked: bool, out: Any) -> Any:
    lead = (slice(None),) * dim
    kept = []
    for n, item in enumerate(results):  # to the end: a progress bar then closes
        bound = bounds[n]
        if item is None:
            continue
        if out is not None:
            index = lead + ((bound,) if stacked else (slice(*bound),))
            out[index].update_(item)
        else:
            kept.append(item)
    if out is not None or not kept:
        return out
    if isinstance(kept[0], torch.Tensor):
        return torch.stack(kept, dim) if stacked else torch.cat(kept, dim)
    if stacked:
        from tensordict import LazyStackedTensorDict

        return LazyStackedTensorDict.maybe_dense_stack(kept, dim)
    return torch.cat(kept, dim)


def td_map_iter(
    td: Any,
    fn: _MapFn,
    dim: int = 0,
    num_workers: int | None = None,
    *,
    shuffle: bool = False,
    chunksize: int | None = None,
    num_chunks: int | None = None,
    pool: Any = None,
    generator: torch.Generator | None = None,
    max_tasks_per_child: int | None = None,
    worker_threads: int = 1,
    index_with_generator: bool = True,
    pbar: bool = False,
    mp_start_method: str | None = None,
) -> Iterator[Any]:
    """Yield ``fn`` of each chunk of ``td`` along ``dim``, computed in worker processes.

    In chunk order, or with ``shuffle=True`` (needs ``index_with_generator=True``) from a
    random permutation of the elements (drawn from ``generator``), in the order the
    workers finish. Breaking out of the loop stops the pool made for the call. Other
    arguments as in ``map``.

    >>> import operator, torch
    >>> from tensordict import TensorDict
    >>> td = TensorDict({"x": torch.arange(6)}, [6])
    >>> [chunk["x"].tolist() for chunk in td.map_iter(operator.neg, num_workers=2, chunksize=3)]
    [[0, -1, -2], [-3, -4, -5]]
    """
    dim = _check(td, fn, chunksize, num_chunks, dim)
    workers = _workers(num_workers, pool)
    return _iterate(
        td,
        fn,
        dim,
        workers,
        pool,
        shuffle=shuffle,
        chunksize=chunksize,
        num_chunks=num_chunks,
        generator=generator,
        max_tasks_per_child=max_tasks_per_child,
        worker_threads=worker_threads,
        index_with_generator=index_with_generator,
        pbar=pbar,
        mp_start_method=mp_start_method,
    )


def _iterate(
    td: Any,
    fn: _MapFn,
    dim: int,
    workers: int,
    pool: Any,
    *,
    shuffle: bool,
    chunksize: int | None,
    num_chunks: int | None,
    generator: torch.Generator | None,
    max_tasks_per_child: int | None,
    worker_threads: int,
    index_with_generator: bool,
    pbar: bool,
    mp_start_method: str | None,
) -> Iterator[Any]:
    with _pool_for(
        pool, workers, generator, max_tasks_per_child, worker_threads, mp_start_method
    ) as pool:
        results, _ = _run(
            td,
            fn,
            dim,
            pool,
            workers,
            chunksize=chunksize,
            num_chunks=num_chunks,
            shuffle=shuffle,
            generator=generator,
            index_with_generator=index_with_generator,
            pbar=pbar,
            out=None,
        )
        yield from results

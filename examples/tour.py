"""A tour of tensordict: what is built so far, as a realistic walk through a small task.

Run it with ``python examples/tour.py`` (or ``nox -s tour``). Every step checks its own
result, so the tour doubles as an end-to-end smoke test of the installed distributions.

The story: we collect a batch of transitions from 4 parallel environments over 5 steps,
store them in one TensorDict, slice and reshape them for training, and compute a few
quantities leaf by leaf.
"""

from __future__ import annotations

import importlib.util
import pickle

import torch

import tensordict
from tensordict import TensorDict

torch.manual_seed(0)
N_ENVS, N_STEPS, OBS_DIM = 4, 5, 3


def section(title: str) -> None:
    print(f"\n== {title} ==")


def env_step(step: int) -> TensorDict:
    """One step of 4 environments: observations, actions, rewards, a nested 'next' entry."""
    return TensorDict(
        {
            "observation": torch.randn(N_ENVS, OBS_DIM),
            "action": torch.randint(0, 2, (N_ENVS,)),
            "next": {
                "reward": torch.randn(N_ENVS, 1),
                "done": torch.zeros(N_ENVS, 1, dtype=torch.bool),
            },
            "env_name": "CartPole",  # non-tensor data travels with the batch
        },
        batch_size=[N_ENVS],
    )


section("1. Lazy pre-allocation: write step by step into an empty tensordict")
rollout = TensorDict(batch_size=[N_STEPS, N_ENVS], names=["time", "env"])
steps = [env_step(t) for t in range(N_STEPS)]
for t, step in enumerate(steps):
    rollout[t] = step  # the first write allocates every entry, the rest write in place
print(rollout)
assert rollout["observation"].shape == (N_STEPS, N_ENVS, OBS_DIM)
assert torch.equal(rollout["next", "reward"][2], steps[2]["next", "reward"])
assert rollout["env_name"] == "CartPole"

section("2. Stacking gives the same result")
stacked = torch.stack(steps, dim=0)
assert (stacked == rollout).all()
print("torch.stack(steps) matches the pre-allocated rollout:", stacked.batch_size)

section("3. Nested keys")
print(sorted(rollout.keys(include_nested=True, leaves_only=True), key=str))
rollout["next", "discounted", "reward"] = rollout["next", "reward"] * 0.99
assert ("next", "discounted", "reward") in rollout.keys(include_nested=True)
flat = rollout.flatten_keys(".")
assert "next.discounted.reward" in flat.keys()
assert (
    flat.unflatten_keys(".")["next", "discounted", "reward"]
    == rollout["next", "discounted", "reward"]
).all()

section("4. Indexing acts on the batch dimensions of every leaf at once")
last_step = rollout[-1]
env0 = rollout[:, 0]
done_mask = rollout["next", "done"].squeeze(-1)
print("last step:", last_step.batch_size, "env 0:", env0.batch_size, "names:", env0.names)
assert last_step["observation"].shape == (N_ENVS, OBS_DIM)
assert env0.names == ["time"]
assert rollout[~done_mask].batch_size == (int((~done_mask).sum()),)

section("5. Shape operations for training: flatten time and env into one batch")
batch = rollout.reshape(-1)
assert batch.batch_size == (N_STEPS * N_ENVS,)
minibatches = batch.split(8)
print("minibatch sizes:", [mb.batch_size[0] for mb in minibatches])
assert sum(mb.batch_size[0] for mb in minibatches) == N_STEPS * N_ENVS
assert torch.equal(torch.cat(minibatches, 0)["observation"], batch["observation"])

section("6. Leaf-wise maths: normalise observations, apply, arithmetic")
obs = rollout.select("observation", ("next", "reward"))
mean = obs.apply(lambda x: x.mean(dim=(0, 1), keepdim=True), batch_size=[1, 1])
centered = obs - mean  # leaf-wise, with broadcasting
assert torch.allclose(centered["observation"].mean(dim=(0, 1)), torch.zeros(OBS_DIM), atol=1e-6)
floats_only = rollout.apply(lambda x: x if x.is_floating_point() else None)
assert "action" not in floats_only.keys()
print("float entries:", sorted(floats_only.keys(include_nested=True, leaves_only=True), key=str))

section("7. Locking protects the structure")
rollout.lock_()
try:
    rollout["oops"] = torch.zeros(N_STEPS, N_ENVS)
except RuntimeError as err:
    print("refused:", str(err).split(":")[0])
with rollout.unlock_():
    rollout["advantage"] = torch.zeros(N_STEPS, N_ENVS)
assert rollout.is_locked and "advantage" in rollout.keys()

section("8. Episodes of different lengths: lazy stacks")
episodes = [  # one entry per episode; the reward sequences have different lengths
    TensorDict({"reward": torch.ones(length), "task": f"task-{i}"})
    for i, length in enumerate((3, 5))
]
lazy = tensordict.lazy_stack(episodes)  # the members keep their own shapes
print(lazy)
assert lazy[1] is episodes[1] and lazy["task"] == ["task-0", "task-1"]
try:
    lazy["reward"]
except RuntimeError as err:
    print("cannot read as one tensor:", str(err).split(";")[0])
padded = lazy.to_padded_tensor(padding=0.0, mask_key="mask")
assert padded["reward"].shape == (2, 5) and int(padded["mask", "reward"].sum()) == 8
lazy[0]["reward"] *= 2  # writes go through to the member
assert episodes[0]["reward"].sum() == 6

section("9. Reductions, conversions and torch integration")
returns = rollout["next", "reward"].sum()
per_env = rollout.select(("next", "reward")).sum(dim=0)  # reduce the time dimension
assert per_env.batch_size == (N_ENVS,)
assert torch.allclose(per_env["next", "reward"].sum(), returns)
as_dict = rollout.to_dict()  # plain nested dicts of tensors, and back
assert (TensorDict.from_dict(as_dict, batch_size=[N_STEPS, N_ENVS]) == rollout).all()
leaves, spec = torch.utils._pytree.tree_flatten(rollout)  # a torch pytree node
doubled = torch.utils._pytree.tree_map(lambda x: x * 2, rollout)
n_tensors = sum(isinstance(v, torch.Tensor) for v in rollout.values(True, True))
assert isinstance(doubled, TensorDict) and len(leaves) == n_tensors  # "env_name" is in the spec
per_sample = torch.vmap(lambda td: td["observation"].norm())(rollout[0])
assert per_sample.shape == (N_ENVS,)
print(
    f"return {returns:.3f}; per env {[round(r, 3) for r in per_env['next', 'reward'].flatten().tolist()]}"
)
print(
    f"pytree: {len(leaves)} tensor leaves; vmap over the env dimension: {tuple(per_sample.shape)}"
)

section("10. One buffer for the whole tensordict: consolidate")
packed = rollout.consolidate()
buffer = packed["observation"].untyped_storage()
assert all(
    leaf.untyped_storage().data_ptr() == buffer.data_ptr()
    for leaf in packed.values(include_nested=True, leaves_only=True)
    if isinstance(leaf, torch.Tensor)
)
print(f"{len(leaves)} tensor leaves in one buffer of {buffer.nbytes()} bytes")
assert (pickle.loads(pickle.dumps(packed)) == rollout).all()  # pickles as one buffer

section("11. Sibling distributions plug into the same namespace")
for subpackage, dist, what in [
    (
        "tensordict.memmap",
        "tensordict-memmap",
        "td.memmap(), TensorDict.load_memmap(), MemoryMappedTensor",
    ),
    (
        "tensordict.nn",
        "tensordict-nn",
        "TensorDictModule, td.to_module(), TensorDict.from_module()",
    ),
    ("tensordict.distributed", "tensordict-distributed", "td.send()/recv(), td.isend()/irecv()"),
    ("tensordict.tensorclass", "tensorclass", "@tensorclass"),
]:
    installed = importlib.util.find_spec(subpackage) is not None
    print(f"{dist:24s} {'installed' if installed else 'not installed':14s} -> {what}")

if importlib.util.find_spec("tensordict.memmap") is not None:
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    section("12. Datasets on disk: save, reload lazily elsewhere, fill from workers, pack")
    disk = Path(tempfile.mkdtemp(prefix="tour-memmap-"))
    saved = rollout.memmap(disk / "rollout")  # one file per leaf + meta.json; atomic
    print(saved)  # the leaves are MemoryMappedTensors; the repr says where they live
    assert saved.is_memmap() and saved.saved_path == str(disk / "rollout")
    # A fresh process maps the files (reading nothing until it indexes)
    reader = (
        "import sys; from tensordict import TensorDict\n"
        "td = TensorDict.load_memmap(sys.argv[1])\n"
        "print(type(td['observation']).__name__, td.batch_size, td['env_name'])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", reader, str(disk / "rollout")],
        capture_output=True,
        text=True,
        check=True,
    )
    print("fresh process:", out.stdout.strip())
    assert out.stdout.startswith("MemoryMappedTensor")
    # Pre-allocate a dataset of 1,000 rows (sparse zero files), fill it from 2 workers
    template = TensorDict(
        {"obs": torch.zeros(OBS_DIM), "step": torch.zeros((), dtype=torch.int64)}, []
    )
    dataset = template.expand(1000).memmap_like(disk / "dataset")
    worker = (
        "import sys, torch; from tensordict import TensorDict\n"
        "ds = TensorDict.load_memmap(sys.argv[1]); w = int(sys.argv[2])\n"
        "rows = slice(w * 500, (w + 1) * 500)\n"
        "ds[rows] = TensorDict({'obs': torch.full((500, 3), float(w)), 'step': torch.arange(500)}, [500])\n"
    )
    workers = [
        subprocess.Popen([sys.executable, "-c", worker, str(disk / "dataset"), str(w)])
        for w in (0, 1)
    ]
    assert all(p.wait() == 0 for p in workers)
    assert (dataset["obs"][:500] == 0).all() and (dataset["obs"][500:] == 1).all()  # seen here too
    print("2 workers filled", dataset.batch_size[0], "rows in place")
    # Pack the folder into one file: aligned, mapped without copy, checksummed
    archive = tensordict.pack_memmap(disk / "dataset", disk / "dataset.tdz")
    packed_ds = TensorDict.load_memmap(archive)
    assert torch.equal(packed_ds["step"], dataset["step"])
    print(
        f"{archive.name}: {archive.stat().st_size} bytes, is archive: {tensordict.is_memmap_archive(archive)}"
    )
    del saved, dataset, packed_ds
    import shutil

    shutil.rmtree(disk)

print(f"\ntensordict {tensordict.__version__}: tour finished, every check passed.")

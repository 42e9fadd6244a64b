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
growing = tensordict.LazyStackedTensorDict(stack_dim=0)  # an empty stack, grown per episode
for episode in episodes:
    growing.append(episode)
rewards = growing.get("reward", as_padded_tensor=True, padding_value=-1.0)  # ragged read
assert rewards.shape == (2, 5) and int((rewards == -1).sum()) == 2

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
# in_dims names a batch dim of the tensordict: -1 is the env dim, whatever the feature dims
per_env_obs = torch.vmap(lambda td: td["observation"].mean(0), in_dims=(-1,))(
    rollout.exclude("env_name")
)
assert torch.allclose(per_env_obs, rollout["observation"].mean(0))
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

section("11. Two processes exchange a tensordict; a parallel map with a progress bar")


def _peer(port: int) -> None:
    """The second process: learn the structure from rank 0, add 1, send it back."""
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=1, world_size=2)
    received = TensorDict.from_remote_init(src=0)  # no template: the message says it all
    received["observation"].add_(1)  # in place: a received tensordict is locked, as the sent one
    received.send(dst=0)
    dist.destroy_process_group()


def _normalise(rows: TensorDict) -> TensorDict:
    """What each worker of the parallel map runs on its chunk of rows."""
    x = rows["x"]
    return rows.empty().set("x", (x - x.mean(-1, keepdim=True)) / x.std(-1, keepdim=True))


if importlib.util.find_spec("tensordict.distributed") is None:
    print("tensordict-distributed is not installed: skipped")
else:
    import socket

    import torch.distributed as dist
    import torch.multiprocessing as mp

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    peer = mp.get_context("fork").Process(target=_peer, args=(port,))
    peer.start()
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=2)
    rollout.init_remote(dst=1)  # one header, one JSON description, one buffer
    back = rollout.clone().zero_()
    back.recv(src=1)  # checked against `back`'s keys, shapes and dtypes, then written in place
    dist.destroy_process_group()
    peer.join()
    assert (back["observation"] == rollout["observation"] + 1).all()
    assert (back["next", "reward"] == rollout["next", "reward"]).all()
    assert back["env_name"] == rollout["env_name"]  # non-tensor data rides along
    print(f"round trip through a second process: {len(leaves)} leaves, one message each way")

    dataset = TensorDict({"x": torch.randn(20_000, 16)}, [20_000])
    # the chunks reach the 2 workers through shared memory; pool= takes any Pool-like object
    normalised = dataset.map(_normalise, num_workers=2, chunksize=2_000, pbar=True)
    assert torch.allclose(normalised["x"], _normalise(dataset)["x"], atol=1e-5)
    print(f"map over {dataset.shape[0]} rows in 2 worker processes: same result as in one")

section("12. Typed batches: a tensorclass (dataclass fields, TensorDict behaviour)")
if importlib.util.find_spec("tensordict.tensorclass") is None:
    print("tensorclass is not installed (pip install tensorclass)")
else:
    from tensordict import TensorClass

    class Transition(TensorClass):
        observation: torch.Tensor
        action: torch.Tensor
        reward: torch.Tensor
        env_name: str = "CartPole"

    batch = Transition(
        observation=rollout["observation"],
        action=rollout["action"],
        reward=rollout["next", "reward"],
        batch_size=rollout.batch_size,
        names=rollout.names,
    )
    first_steps = batch[:2]  # indexing, shape ops, torch.* and .to() keep the class
    assert type(first_steps) is Transition and first_steps.observation.shape == (2, N_ENVS, 3)
    assert type(torch.stack([batch, batch])) is Transition
    assert batch.to(torch.float64).observation.dtype == torch.float64
    assert batch.reshape(-1)[3].env_name == "CartPole"  # non-tensor fields read as values
    assert batch.observation is rollout["observation"]  # a field is the stored tensor
    try:
        batch.reward = torch.zeros(N_STEPS + 1, N_ENVS, 1)
    except RuntimeError as err:  # the field, both shapes; the batch is left unchanged
        print("wrong shape:", err)
    assert batch.reward is rollout["next", "reward"]
    print(
        f"{type(batch).__name__}{tuple(batch.batch_size)}: fields {[f.name for f in Transition.fields()]}"
    )

section("13. Sibling distributions plug into the same namespace")
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
    (
        "tensordict.distributed",
        "tensordict-distributed",
        "td.send()/recv(), collectives, td.map(), TensorDictStore",
    ),
    ("tensordict.tensorclass", "tensorclass", "@tensorclass, TensorClass, TypedTensorDict"),
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

section("14. Models: a policy and a value network trained on the rollout (tensordict.nn)")
if importlib.util.find_spec("tensordict.nn") is None:
    print("tensordict-nn is not installed: pip install tensordict-nn")
else:
    from torch import nn

    from tensordict.nn import (
        ProbabilisticTensorDictModule,
        ProbabilisticTensorDictSequential,
        TensorDictModule,
        set_interaction_type,
    )

    torch.manual_seed(0)
    # The policy reads "observation", writes "logits", then samples "action" from a
    # Categorical (and writes its log-probability); the value net writes "state_value".
    policy = ProbabilisticTensorDictSequential(
        TensorDictModule(
            nn.Sequential(nn.Linear(OBS_DIM, 16), nn.Tanh(), nn.Linear(16, 2)),
            in_keys=["observation"],
            out_keys=["logits"],
        ),
        ProbabilisticTensorDictModule(
            in_keys=["logits"],
            out_keys=["action"],
            distribution_class=torch.distributions.Categorical,
            return_log_prob=True,
        ),
    )
    value = TensorDictModule(
        nn.Sequential(nn.Linear(OBS_DIM, 16), nn.Tanh(), nn.Linear(16, 1)),
        in_keys=["observation"],
        out_keys=["state_value"],
    )
    batch = rollout.select("observation", "action", ("next", "reward")).reshape(-1)
    optimizer = torch.optim.Adam([*policy.parameters(), *value.parameters()], lr=0.02)
    value_losses = []
    for _ in range(30):
        data = value(batch.clone())
        log_prob = policy.log_prob(data)  # of the recorded actions
        advantage = (data["next", "reward"] - data["state_value"]).squeeze(-1)
        value_loss = advantage.pow(2).mean()
        loss = value_loss - (log_prob * advantage.detach()).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        value_losses.append(value_loss.item())
    assert value_losses[-1] < value_losses[0]
    print(f"30 steps: value loss {value_losses[0]:.3f} -> {value_losses[-1]:.3f}")

    with set_interaction_type("mode"):  # greedy actions for evaluation
        acted = policy(rollout[-1].select("observation"))
    assert (acted["action"] == acted["logits"].argmax(-1)).all()
    print("greedy actions:", acted["action"].tolist())

    # Called with tensors instead of a tensordict, a module returns tensors.
    assert value(observation=torch.zeros(OBS_DIM)).shape == (1,)
    # Parameters as a tensordict: a functional call with other weights, then restored.
    params = TensorDict.from_module(value)
    with params.detach().clone().zero_().to_module(value):
        assert (value(observation=torch.ones(OBS_DIM)) == 0).all()
    assert TensorDict.from_module(value)["module", "0", "weight"] is params["module", "0", "weight"]
    print(
        f"value net: {sum(p.numel() for p in value.parameters())} parameters, swapped and restored"
    )

    if importlib.util.find_spec("tensordict.memmap") is not None:
        # The checkpoint recipe of the reference's README: parameters to memory-mapped
        # files, loaded (nothing read yet) straight into a fresh model.
        import tempfile

        with tempfile.TemporaryDirectory() as folder:
            TensorDict.from_module(value).memmap(folder)
            fresh = TensorDictModule(
                nn.Sequential(nn.Linear(OBS_DIM, 16), nn.Tanh(), nn.Linear(16, 1)),
                in_keys=["observation"],
                out_keys=["state_value"],
            )
            TensorDict.load_memmap(folder).to_module(fresh)
            probe = torch.randn(3, OBS_DIM)
            assert torch.equal(fresh(observation=probe), value(observation=probe))
            print("checkpoint: saved with memmap, loaded into a fresh model, same outputs")

    # torch.export of a module called with keyword tensors, named after its in_keys.
    program = torch.export.export(
        value, args=(), kwargs={"observation": torch.zeros(4, OBS_DIM)}, strict=False
    )
    probe = torch.randn(4, OBS_DIM)
    assert torch.allclose(program.module()(observation=probe), value(observation=probe))
    print("torch.export: the exported program gives the module's outputs")

section("15. Code written for the reference runs unchanged: its module paths and names")
from tensordict import NestedKey, unravel_key  # noqa: E402
from tensordict.functional import pad  # noqa: E402
from tensordict.utils import _zip_strict  # noqa: E402  (a name TorchRL imports)

assert isinstance(("next", "reward"), NestedKey) and not isinstance(["next"], NestedKey)
assert unravel_key(("next", ("reward",))) == ("next", "reward") and unravel_key((0,)) == ()
assert pad(TensorDict(x=torch.ones(2), batch_size=[2]), [0, 1])["x"].tolist() == [1, 1, 0]
assert list(_zip_strict("ab", "cd")) == [("a", "c"), ("b", "d")]
print("tensordict.functional, tensordict.utils' private names, NestedKey checks: as the reference")

print(f"\ntensordict {tensordict.__version__}: tour finished, every check passed.")

"""broadcast, all_gather, reduce and all_reduce between real gloo processes (3 and 4 ranks,
subgroups, a source and destination other than rank 0, mismatches)."""

from __future__ import annotations

import math

import pytest


def _reduced(scenarios, value: float, label_rank: int):
    td = scenarios.nested(value).exclude(("n", "done"))
    td.set_non_tensor("label", f"v{float(label_rank + 1)}")  # non-tensor values are kept
    return scenarios.dump(td)


def _kept_sums(changes, world):
    """What scenario_collectives' repeated all_reduce of 12 leaves should give."""
    values = [{f"k{i}": float(r + i) for i in range(12)} for r in range(world)]
    out = []
    for change in changes:
        for r, v in enumerate(values):
            if change in ("replace", "memory"):
                v["k1" if change == "replace" else "k2"] = float(r)
            elif change == "rename":
                v["z3"] = v.pop("k3")
        summed = {k: sum(v[k] for v in values) for k in values[0]}
        values = [dict(summed) for _ in range(world)]
        out.append({k: [x] for k, x in summed.items()})
    return out


@pytest.mark.parametrize("world", [3, 4])
def test_collectives(run_ranks, scenarios, world):
    res = run_ranks("collectives", world)
    total = sum(r + 1 for r in range(world))
    for rank, r in enumerate(res):
        assert r["unpickled"] == []
        out, consolidated = r["broadcast"]
        assert out == scenarios.dump(scenarios.nested(5.0)) and consolidated is True
        assert r["broadcast_lazy"] == scenarios.dump(scenarios.lazy(6.0))
        out, consolidated = r["scatter"]
        assert out == scenarios.dump(scenarios.nested(float(10 + rank), rows=rank + 1))
        assert consolidated is True  # received ranks get a consolidated tensordict
        assert r["scatter_method"] == out
        bad = r["scatter_bad"]
        if rank == world - 1:
            assert bad[:2] == ["error", "ValueError"] and "one tensordict per rank" in bad[2]
        else:
            assert bad[:2] == ["error", "RemoteError"] and "one tensordict per rank" in bad[2]
        assert r["all_gather"] == [
            scenarios.dump(scenarios.nested(float(k), rows=k + 1)) for k in range(world)
        ]
        assert r["all_reduce_sum"] == _reduced(scenarios, float(total), rank)
        assert r["all_reduce_max_small_buckets"] == _reduced(scenarios, float(world), rank)
        product, same_buffer = r["all_reduce_async"]
        assert product == _reduced(scenarios, float(math.factorial(world)), rank)
        assert same_buffer is True  # a consolidated tensordict is reduced where it is
        assert r["all_reduce_lazy"] == scenarios.dump(scenarios.lazy(float(total)))
        if rank == 1:  # the destination of reduce
            assert r["reduce"] == _reduced(scenarios, float(total), rank)
            assert r["reduce_async"] == _reduced(scenarios, float(total), rank)
        result, unchanged = r["reduce_mismatch"]
        assert result[:2] == ["error", "ValueError"], result
        assert "differ" in result[2] and "'obs'" in result[2]
        assert "8 elements" in result[2] and "6 elements" in result[2]
        assert "nothing was reduced" in result[2]
        assert unchanged is True
        gather_bad, bcast_bad = r["gather_bad"], r["bcast_bad"]
        if rank == 0:
            assert gather_bad[:2] == ["error", "TypeError"] and "'label'" in gather_bad[2]
            assert bcast_bad[:2] == ["error", "TypeError"]
        else:
            assert gather_bad[:2] == ["error", "RemoteError"] and "rank 0" in gather_bad[2]
            assert bcast_bad[:2] == ["error", "RemoteError"] and "rank 0" in bcast_bad[2]
        assert r["again"] == _reduced(scenarios, float(total), rank)
        assert r["same_numel"] == [float(world)] * 2  # shapes (1, 2) and (2,): as torch does
        assert r["many"] is True
        # 1,000 leaves of one dtype: one all_gather of a digest (the ranks hold the same
        # leaves) and one all_reduce of one bucket
        assert r["many_calls"] == 2
        # three 3 MiB leaves to pack: one bucket each (buckets of about 4 MiB), summed
        calls, values = r["wide"]
        assert calls == 1 + 3
        assert values == [[float(sum(range(world)) + world * i)] for i in range(3)]
        assert r["mixed"] == [[float(sum(range(world)) + world * i)] for i in range(2)]
        assert r["kept"] == _kept_sums(scenarios.KEPT_CHANGES, world)
    members = [0, world - 1]
    for rank in members:
        r = res[rank]
        assert r["sub_broadcast"] == scenarios.dump(scenarios.nested(9.0))
        assert r["sub_all_reduce"] == _reduced(scenarios, float(1 + world), rank)
        assert r["sub_gather"] == [scenarios.dump(scenarios.nested(float(k))) for k in members]
    assert res[world - 1]["sub_send"] == scenarios.dump(scenarios.nested(4.0))
    for rank in range(1, world - 1):
        assert "sub_broadcast" not in res[rank]

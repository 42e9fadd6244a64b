"""send/recv, isend/irecv, init_remote/from_remote_init between real gloo processes."""

from __future__ import annotations

import pytest
import torch

from tensordict import TensorDict
from tensordict.distributed import _parts


def _ok(scenarios, value, rows=2):
    return scenarios.dump(scenarios.nested(value, rows))


def test_point_to_point(run_ranks, scenarios):
    sender, receiver = run_ranks("p2p", 2)
    r = receiver
    assert r["unpickled"] == []
    # values arrive, nested, with their dtypes and non-tensor values
    assert r["nested"] == _ok(scenarios, 1.0)
    assert r["recv_tag"] == 2  # tags 0, 1, 2: header, description, data
    assert r["lazy_root"] == scenarios.dump(scenarios.lazy(2.0))
    expected = scenarios.dump(TensorDict({"ls": scenarios.lazy(3.0)}, [2, 2]))
    assert r["lazy_nested"] == expected
    assert sender["isend_tag"] == 12
    assert r["irecv"] == _ok(scenarios, 4.0)
    assert r["premature_before"] == _ok(scenarios, 0.0) or r["premature_before"] == _ok(
        scenarios, 5.0
    )
    assert r["premature_after"] == _ok(scenarios, 5.0)
    # the receiver learns the structure; later transfers land straight in its buffer
    remote, consolidated = r["remote"]
    assert remote == _ok(scenarios, 6.0) and consolidated is True
    again, same_buffer = r["remote_again"]
    assert again == _ok(scenarios, 7.0) and same_buffer is True
    assert r["remote_lazy"] == scenarios.dump(scenarios.lazy(8.0))
    # mismatches: a clear ValueError on the receiver, the template unchanged
    parts = {
        "bad_shape": ["batch size (3,) expected, got (2,)", "'obs'", "(3, 3)", "(2, 3)"],
        "bad_dtype": ["'obs'", "torch.float64", "torch.float32"],
        "bad_keys": ["missing key(s) ['extra']", "unexpected key(s) in 'n' ['done']"],
        "bad_kind": ["'label'", "expected a tensor", "got a non-tensor value"],
    }
    for name, needles in parts.items():
        result, unchanged = r[name]
        assert result[:2] == ["error", "ValueError"], (name, result)
        assert "nothing was written" in result[2] and "rank 0" in result[2]
        for needle in needles:
            assert needle in result[2], (name, needle, result[2])
        assert unchanged is True, name
    # the two sides stayed in step: the next transfer is right
    assert r["after_mismatch"] == _ok(scenarios, 13.0)
    # a sender that cannot encode its tensordict raises, and so does its receiver
    bad = sender["bad_send"]
    assert bad[:2] == ["error", "TypeError"] and "'label'" in bad[2] and "JSON" in bad[2]
    got = r["bad_recv"]
    assert got[:2] == ["error", "RemoteError"] and "TypeError" in got[2] and "'label'" in got[2]
    assert r["after_bad"] == _ok(scenarios, 15.0)
    # 1,000 leaves, one transfer: a header, the description and one buffer each way
    assert r["many"] is True
    assert sender["many_messages"] == 3 and r["many_messages"] == 3
    # leaves of 2 MiB travel as messages of their own, straight into the receiver's leaves
    messages, sums, in_place = r["wide"]
    assert sender["wide_messages"] == messages == 2 + 3  # header, description, a, [s], b
    # 8 MiB of small leaves: a header, the description and one message per piece
    assert r["pieces"] is True
    pieces = -(-(8 << 20) // _parts.CHUNK_BYTES)
    assert sender["pieces_messages"] == r["pieces_messages"] == 2 + pieces
    n = 1 << 19
    assert sums == {"a": 1.0 * n, "s": 2.0 * 3, "b": 3.0 * n / 2} and in_place is True
    assert r["wide_remote"] == {"a": 2.0 * n, "s": 3.0 * 3, "b": 4.0 * n / 2}
    # a subgroup, by group rank and by global rank
    assert r["group_src"] == _ok(scenarios, 16.0)
    assert r["group_global"] == _ok(scenarios, 17.0)
    # a timeout: a clear error within about the timeout given, not the group's (60 s)
    kind, name, message, seconds = r["timeout"]
    assert (kind, name) == ("error", "DistributedTimeoutError"), r["timeout"]
    assert "rank 0" in message and "1 s" in message
    assert seconds < 15
    after = r["after_timeout"]
    assert after[:2] == ["error", "PeerClosedError"] and after[3] < 15, after


def test_bad_peers_raise_at_once_and_broadcast_checks_templates(run_ranks, scenarios):
    for rank, r in enumerate(run_ranks("bad_peers", 2)):
        for name, needles in {
            "send_outside": ["dst=5", "not a rank of the world", "size 2"],
            "isend_outside": ["dst=-1", "size 2"],
            "recv_outside": ["src=2", "size 2"],
            "send_self": [f"dst={rank}", "own rank"],
            "recv_self": [f"src={rank}", "own rank"],
            "remote_self": [f"dst={rank}", "own rank"],
            "group_outside": ["group_dst=2", "size 2"],
            "group_self": [f"group_src={rank}", "own rank"],
        }.items():
            kind, error, message, seconds = r[name]
            assert (kind, error) == ("error", "ValueError"), (name, r[name])
            assert seconds < 1, (name, seconds)  # at once, not after a timeout
            for needle in needles:
                assert needle in message, (name, needle, message)
        assert r["unchanged"] is True
        if rank == 0:  # the source returns its own (consolidated) tensordict
            assert r["bcast_bad_shape"][0] == ["ok", _ok(scenarios, 2.0)]
            assert r["bcast_bad_shape"][2] == []  # the source is not warned
            continue
        # a template that does not fit: a warning naming each difference, the template
        # unchanged, and the new tensordict returned (the reference's result)
        for name, needles in {
            "bcast_bad_shape": ["batch size (3,) expected, got (2,)", "'obs'"],
            "bcast_bad_dtype": ["'obs'", "torch.int64", "torch.float32"],
        }.items():
            result, unchanged, warned = r[name]
            assert result == ["ok", _ok(scenarios, 2.0)], (name, result)
            assert unchanged is True, name
            assert len(warned) == 1 and "left unchanged" in warned[0] and "rank 0" in warned[0]
            for needle in needles:
                assert needle in warned[0], (name, needle, warned[0])
        values, returned_itself, same_leaf = r["bcast_template"]
        assert values == _ok(scenarios, 3.0) and returned_itself and same_leaf
        assert r["bcast_empty"] == _ok(scenarios, 4.0)


def test_raw_unregistered_group(run_ranks, scenarios):
    receiver, _ = run_ranks("raw_group", 2)
    assert receiver["recv"] == _ok(scenarios, 1.0)
    assert receiver["irecv"] == _ok(scenarios, 2.0)
    assert receiver["remote"] == _ok(scenarios, 3.0)


def test_dead_peer_raises_within_the_timeout(run_ranks):
    survivor, dead = run_ranks("dead_peer", 2, may_fail=(1,))
    assert dead == {"exit_code": 3}
    kind, name, message, seconds = survivor["recv"]
    assert (kind, name) == ("error", "PeerClosedError"), survivor["recv"]
    assert "exited or crashed" in message and "rank 1" in message
    assert seconds < 30  # the group timeout is 60 s: the closed connection is seen at once
    assert survivor["collective"][0] == "error"


def test_tensorclass_instances_travel(run_ranks):
    tc = pytest.importorskip("tensordict.tensorclass")
    if not hasattr(tc, "tensorclass"):
        pytest.skip("the tensorclass distribution does not provide @tensorclass yet")
    sender, receiver = run_ranks("tensorclass", 2)
    assert receiver["type"] == "Pair" and receiver["a"] == [1.0, 1.0, 1.0]
    assert receiver["broadcast_type"] == "Pair"
    for rank, r in enumerate((sender, receiver)):
        assert r["all_gather"] == [["TensorDict", [0.0, 0.0]], ["TensorDict", [1.0, 1.0]]]
        assert r["scatter"] == ["TensorDict", [float(rank)]]


@pytest.mark.cuda
def test_nccl(run_ranks, scenarios):
    if torch.cuda.device_count() < 2:
        pytest.skip("nccl between two processes needs two CUDA devices")
    _, receiver = run_ranks("nccl", 2)
    assert receiver["recv"] == _ok(scenarios, 1.0)
    assert receiver["remote"] == [_ok(scenarios, 2.0), "cuda"]
    td = scenarios.nested(3.0).exclude(("n", "done"))
    td.set_non_tensor("label", "v2.0")
    assert receiver["all_reduce"] == scenarios.dump(td)


# ---------------------------------------------------------------------- no processes
@pytest.mark.parametrize("method", ["send", "isend", "recv", "irecv"])
def test_peer_arguments_are_checked(method):
    td = TensorDict({"a": torch.zeros(1)}, [])
    peer, group_peer = ("dst", "group_dst") if "send" in method else ("src", "group_src")
    with pytest.raises(ValueError, match="requires `group`"):
        getattr(td, method)(**{group_peer: 0})
    with pytest.raises(ValueError, match="mutually exclusive"):
        getattr(td, method)(0, group=object(), **{group_peer: 0})
    with pytest.raises(ValueError, match="Exactly one"):
        getattr(td, method)()
    with pytest.raises(TypeError, match="int rank"):
        getattr(td, method)(**{peer: "one"})


def test_without_a_process_group():
    td = TensorDict({"a": torch.zeros(1)}, [])
    for call in (
        lambda: td.send(1),
        lambda: td.recv(1),
        lambda: td.all_reduce(),
        lambda: td.broadcast(0),
    ):
        with pytest.raises(RuntimeError, match="init_process_group"):
            call()


def test_bad_timeout_and_tag():
    from tensordict.distributed._peers import as_timedelta, tags

    with pytest.raises(ValueError, match="timeout"):
        as_timedelta(-1)
    with pytest.raises(ValueError, match="init_tag"):
        tags(-3, False)
    assert tags(7, False) == [7, 8, 9]
    assert tags(7, True) == tags(7, True) != tags(8, True)

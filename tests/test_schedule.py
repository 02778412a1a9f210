"""The suite's file order under ``--dist loadfile`` (tests/support/schedule.py): the slowest
files are handed out first, every file still goes whole to one worker, and nothing is lost."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.support import schedule
from tests.support.schedule import MOSTLY_WAITING, SLOW_FIRST, SlowFilesFirst

REPO = Path(__file__).resolve().parent.parent


class Node:
    """A worker as the scheduler sees it: it is sent test indexes and may be shut down."""

    def __init__(self, name: str) -> None:
        self.gateway = SimpleNamespace(id=name)
        self.shutting_down = False
        self.sent: list[list[int]] = []

    def send_runtest_some(self, indexes: list[int]) -> None:
        self.sent.append(indexes)

    def shutdown(self) -> None:
        self.shutting_down = True


class Config:
    option = SimpleNamespace(loadscopereorder=True)

    def __init__(self, workers: int) -> None:
        self.workers = workers

    def getvalue(self, name: str) -> object:
        return {"tx": [f"{self.workers}*popen"], "dist": "loadfile"}[name]


def run_schedule(collection: list[str], workers: int) -> tuple[list[Node], list[list[set[str]]]]:
    """The nodes after a whole run of ``collection`` (each runs what it was sent, in turn),
    and the files of each batch each node was sent."""
    scheduler = SlowFilesFirst(Config(workers), None)
    nodes = [Node(f"gw{i}") for i in range(workers)]
    for node in nodes:
        scheduler.add_node(node)
        scheduler.add_node_collection(node, collection)
    scheduler.schedule()
    done: set[int] = set()
    while not scheduler.tests_finished:  # each node runs what it was sent, and is sent more
        for node in nodes:
            for index in [i for batch in node.sent for i in batch if i not in done]:
                done.add(index)
                scheduler.mark_test_complete(node, index)
    files = [[{collection[i].split("::")[0] for i in batch} for batch in node.sent] for node in nodes]
    return nodes, files


def assert_every_test_once_and_every_file_whole(nodes: list[Node], collection: list[str]) -> None:
    sent = sorted(i for node in nodes for batch in node.sent for i in batch)
    assert sent == list(range(len(collection)))  # every test once
    owners: dict[str, set[str]] = {}
    for node in nodes:
        for index in (i for batch in node.sent for i in batch):
            owners.setdefault(collection[index].split("::")[0], set()).add(node.gateway.id)
    assert all(len(names) == 1 for names in owners.values()), owners  # every file whole to one node


def test_the_slow_files_are_handed_out_first_and_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(schedule, "cores", lambda: 2)
    many = [f"tests/common/test_many.py::test_{i}" for i in range(6)]
    one = ["tests/common/test_one.py::test_it"]
    slow = [f"{SLOW_FIRST[1]}::test_{i}" for i in range(2)] + [f"{SLOW_FIRST[0]}::test_{i}" for i in range(3)]
    collection = many + slow + one
    nodes, files = run_schedule(collection, 2)
    # Each node's first file is a slow one, the slowest to the first node; xdist's own order
    # (most tests first) would have started with test_many.py.
    assert files[0][0] == {SLOW_FIRST[0]} and files[1][0] == {SLOW_FIRST[1]}, files
    assert_every_test_once_and_every_file_whole(nodes, collection)


def test_with_a_worker_more_than_cores_the_first_is_a_lane_for_the_waiting_files(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(schedule, "cores", lambda: 2)
    waiting = [name for name in SLOW_FIRST if name in MOSTLY_WAITING][:2]
    computing = [name for name in SLOW_FIRST if name not in MOSTLY_WAITING][:3]
    collection = [f"{name}::test_{i}" for name in [*waiting, *computing] for i in range(2)] + \
        [f"tests/common/test_many.py::test_{i}" for i in range(6)]
    nodes, files = run_schedule(collection, 3)
    lane, others = files[0], [batch for node in files[1:] for batch in node]
    assert lane and all(batch <= set(waiting) for batch in lane), files  # the lane waits only
    assert all(not batch & set(waiting) for batch in others), files  # while others remain
    assert nodes[0].shutting_down  # and ends once no waiting file is left
    assert_every_test_once_and_every_file_whole(nodes, collection)


def test_every_file_named_slow_is_in_the_suite() -> None:
    missing = [name for name in SLOW_FIRST if not (REPO / name).is_file()]
    assert not missing, f"tests/support/schedule.py names files the suite no longer has: {missing}"

"""The suite's file order under ``--dist loadfile`` (tests/support/schedule.py): the slowest
files are handed out first, every file still goes whole to one worker, and nothing is lost."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from tests.support.schedule import SLOW_FIRST, SlowFilesFirst

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

    def getvalue(self, name: str) -> object:
        return {"tx": ["2*popen"], "dist": "loadfile"}[name]


def test_the_slow_files_are_handed_out_first_and_whole() -> None:
    many = [f"tests/common/test_many.py::test_{i}" for i in range(6)]
    one = ["tests/common/test_one.py::test_it"]
    slow = [f"{SLOW_FIRST[1]}::test_{i}" for i in range(2)] + [f"{SLOW_FIRST[0]}::test_{i}" for i in range(3)]
    collection = many + slow + one
    scheduler = SlowFilesFirst(Config(), None)
    nodes = [Node("gw0"), Node("gw1")]
    for node in nodes:
        scheduler.add_node(node)
        scheduler.add_node_collection(node, collection)
    scheduler.schedule()
    files = [[{collection[i].split("::")[0] for i in batch} for batch in node.sent] for node in nodes]
    done: set[int] = set()
    while not scheduler.tests_finished:  # each node runs what it was sent, and is sent more
        for node in nodes:
            for index in [i for batch in node.sent for i in batch if i not in done]:
                done.add(index)
                scheduler.mark_test_complete(node, index)
    # Each node's first file is a slow one, the slowest to the first node; xdist's own order
    # (most tests first) would have started with test_many.py.
    assert files[0][0] == {SLOW_FIRST[0]} and files[1][0] == {SLOW_FIRST[1]}, files
    sent = sorted(i for node in nodes for batch in node.sent for i in batch)
    assert sent == list(range(len(collection)))  # every test once
    owners: dict[str, set[str]] = {}
    for node in nodes:
        for index in (i for batch in node.sent for i in batch):
            owners.setdefault(collection[index].split("::")[0], set()).add(node.gateway.id)
    assert all(len(names) == 1 for names in owners.values()), owners  # every file whole to one node


def test_every_file_named_slow_is_in_the_suite() -> None:
    missing = [name for name in SLOW_FIRST if not (REPO / name).is_file()]
    assert not missing, f"tests/support/schedule.py names files the suite no longer has: {missing}"

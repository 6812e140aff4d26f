"""Cycles in supersession links: every link between two versions on one cycle is dropped, and
no other (a property over random graphs, against reachability worked out by brute force)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from connectors.linking import break_graph_cycles

NODES = [f"n{i}" for i in range(6)]


def reaches(graph: dict[str, list[str]], a: str, b: str) -> bool:
    seen, todo = set(), [a]
    while todo:
        node = todo.pop()
        for nxt in graph.get(node, []):
            if nxt == b:
                return True
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return False


graphs = st.dictionaries(
    st.sampled_from(NODES),
    st.lists(st.sampled_from(NODES), min_size=1, max_size=3, unique=True),
    max_size=6,
).map(lambda g: {a: [b for b in named if b != a] for a, named in g.items()})


@given(graphs)
def test_exactly_the_links_inside_a_cycle_are_dropped(graph: dict[str, list[str]]) -> None:
    graph = {a: named for a, named in graph.items() if named}
    kept = {a: list(named) for a, named in graph.items()}
    dropped = break_graph_cycles(kept)
    expected = {a: [b for b in named if not reaches(graph, b, a)] for a, named in graph.items()}
    assert kept == {a: named for a, named in expected.items() if named}
    # each version that lost a link is named once, with a message of the cycle
    on_cycles = sorted(a for a, named in graph.items() if any(reaches(graph, b, a) for b in named))
    assert [key for key, _ in dropped] == on_cycles
    assert all("forms a cycle of" in message for _, message in dropped)
    # what is left has no cycle at all
    assert not any(reaches(kept, a, a) for a in kept)


def test_a_cycle_of_three_joined_by_a_shortcut_is_one_cycle() -> None:
    # found by the in-force property: the message's cycle (2 long) is not the whole component
    graph = {"a": ["b"], "b": ["c"], "c": ["a", "b"]}
    dropped = break_graph_cycles(graph)
    assert graph == {}
    assert [key for key, _ in dropped] == ["a", "b", "c"]

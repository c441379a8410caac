"""LangGraph's own cost per run for the service's graph shape: routing by conditional-edge
functions (the first design) against routing by ``Command(goto=...)`` from the nodes (the
current one, ``tests/bench/floor.py``'s ``bare_graph``). Nodes do nothing.

Run by hand (not part of `make test`):

    .venv/bin/python -m tests.bench.graph_routing [--runs 1000] [--rounds 5]

Prints the median CPU milliseconds per ``ainvoke`` of each, measured in alternating rounds
in one process.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from langgraph.graph import END, START, StateGraph

from tests.bench.floor import GraphShapeState, bare_graph


def edge_routed_graph() -> Any:
    """The same five nodes and shortcuts, routed by two async conditional-edge functions."""

    async def step(state: GraphShapeState) -> dict[str, Any]:
        return {"route": "reply"}

    async def after_ingest(state: GraphShapeState) -> str:
        return END if state["route"] == "skip" else "recall"

    async def after_recall(state: GraphShapeState) -> str:
        return "remember" if state["route"] == "tool" else "call_model"

    graph = StateGraph(GraphShapeState)
    for name in ("ingest", "recall", "call_model", "build_candidate", "remember"):
        graph.add_node(name, step)
    graph.add_edge(START, "ingest")
    graph.add_conditional_edges("ingest", after_ingest, ["recall", END])
    graph.add_conditional_edges("recall", after_recall, ["call_model", "remember", END])
    graph.add_edge("call_model", "build_candidate")
    graph.add_edge("build_candidate", "remember")
    graph.add_edge("remember", END)
    return graph.compile()


async def cpu_per_run(graph: Any, runs: int) -> float:
    start = time.process_time()
    for n in range(runs):
        await graph.ainvoke({"event": n, "lease_token": "t"})
    return (time.process_time() - start) / runs * 1000


async def run(args: argparse.Namespace) -> None:
    graphs = {"conditional edges": edge_routed_graph(), "Command(goto)": bare_graph()}
    results: dict[str, list[float]] = {name: [] for name in graphs}
    for graph in graphs.values():
        await cpu_per_run(graph, 200)  # warm up
    for _ in range(args.rounds):
        for name, graph in graphs.items():
            results[name].append(await cpu_per_run(graph, args.runs))
    base = statistics.median(results["conditional edges"])
    for name, values in results.items():
        median = statistics.median(values)
        print(
            f"{name:18s} {median:.3f} ms CPU/run (median of {len(values)}; {median / base:.2f} x)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()

"""Child process for tests/memory/test_memory_processes.py: one run against a shared SqliteStore file.

Usage:
    python tests/_memory_child.py --db PATH --task TEXT --mode save --lesson L [--lesson L ...]
    python tests/_memory_child.py --db PATH --task TEXT --mode search
    python tests/_memory_child.py --db PATH --task TEXT --mode graph
    python tests/_memory_child.py --db PATH --task TEXT --mode race --lesson L --name NAME --count N
        --max-entries M --barrier DIR --parties P
    python tests/_memory_child.py --db DIR --task TEXT --mode setup --lesson L --name NAME --count ROUNDS
        --barrier DIR --parties P [--raw-setup]

Prints one JSON object on stdout:
- save: {"saved": [...], "count": N}
- search: {"lessons": [{"text", "task", "similarity"}, ...]}
- graph: {"generate_prompts": [...], "critic_prompts": [...], "stop_reason": ..., "candidate": ..., "count": N}
- setup: {"failures": [...]}. For each of `--count` rounds: waits until all `--parties` children are ready, then
  opens the fresh file `DIR/round-R.sqlite`, sets the store up (`setup_store`, or the store's bare `setup()` with
  `--raw-setup`) and saves `--task` with its `--lesson`; an error of a round is recorded, not raised.
- race: {"count": N}. Waits until all `--parties` children are ready, saves `--count` distinct tasks of its own
  one by one (racing the other children's saves), waits for all of them again, then saves `--task` with its
  `--lesson` (so no later save evicts that task).
  The graph runs `create_reflection_graph` with a recording fake generator and a scripted fake critic, so the
  test can assert on the generate prompt the model *received*.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from langgraph.store.sqlite import SqliteStore  # noqa: E402

from reflection_graph.memory import ReflexionMemory, setup_store  # noqa: E402

FIRST_CRITIQUE = {
    "issues": ["The email does not thank the recruiter"],
    "suggestions": ["Thank the recruiter by name in the first sentence."],
    "is_acceptable": False,
    "score": 5,
    "feedback": "Polite but cold.",
}
SECOND_CRITIQUE = {"issues": [], "suggestions": [], "is_acceptable": True, "score": 9, "feedback": "Good."}


def _run_graph(memory: ReflexionMemory, store: SqliteStore, task: str) -> dict[str, Any]:
    from reflection_graph.graph import create_reflection_graph
    from tests.fakes import FakeCriticModel, RecordingChatModel

    generator = RecordingChatModel(
        replies=["Dear hiring team, I must decline the offer.", "Dear Ana, thank you..."]
    )
    critic = FakeCriticModel(critiques=[FIRST_CRITIQUE, SECOND_CRITIQUE])
    graph = create_reflection_graph(generator, critic=critic, max_iterations=2, memory=memory, store=store)
    result = graph.invoke({"task": task})
    return {
        "generate_prompts": generator.prompts,
        "critic_prompts": critic.prompts,
        "stop_reason": result.get("stop_reason"),
        "candidate": result.get("candidate"),
        "count": memory.count(),
    }


def _barrier(directory: Path, stage: str, name: str, parties: int) -> None:
    (directory / f"{stage}-{name}").touch()
    deadline = time.monotonic() + 120
    while len(list(directory.glob(f"{stage}-*"))) < parties:
        if time.monotonic() > deadline:
            raise SystemExit(f"barrier {stage}: timed out")
        time.sleep(0.01)


def _race(memory: ReflexionMemory, args: argparse.Namespace) -> dict[str, Any]:
    barrier = Path(args.barrier)
    _barrier(barrier, "start", args.name, args.parties)
    for i in range(args.count):
        memory.save(f"{args.name} describes planet {i} orbiting star{i}", [f"{args.name} lesson {i}"])
    _barrier(barrier, "saved", args.name, args.parties)
    memory.save(args.task, args.lesson)
    return {"count": memory.count()}


def _setup_rounds(args: argparse.Namespace) -> dict[str, Any]:
    failures: list[str] = []
    for i in range(args.count):
        _barrier(Path(args.barrier), f"round{i}", args.name, args.parties)
        try:
            with SqliteStore.from_conn_string(str(Path(args.db) / f"round-{i}.sqlite")) as store:
                store.setup() if args.raw_setup else setup_store(store)
                ReflexionMemory(store).save(f"{args.task} {args.name}", args.lesson)
        except Exception as exc:  # recorded: the test counts the rounds that failed
            failures.append(f"round {i}: {type(exc).__name__}: {exc}")
    return {"failures": failures}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True, help="SQLite file shared by the processes")
    parser.add_argument("--task", required=True)
    parser.add_argument("--mode", choices=["save", "search", "graph", "race", "setup"], required=True)
    parser.add_argument("--lesson", action="append", default=[])
    parser.add_argument("--name", default="child")
    parser.add_argument("--count", type=int, default=0)
    parser.add_argument("--max-entries", type=int, default=1000)
    parser.add_argument("--barrier", default="")
    parser.add_argument("--parties", type=int, default=1)
    parser.add_argument("--raw-setup", action="store_true", help="call the store's own setup(), unlocked")
    args = parser.parse_args(argv)
    if args.mode == "setup":
        print(json.dumps(_setup_rounds(args)))
        return 0

    with SqliteStore.from_conn_string(args.db) as store:
        setup_store(store)
        memory = ReflexionMemory(store, max_entries=args.max_entries)
        if args.mode == "race":
            out: dict[str, Any] = _race(memory, args)
        elif args.mode == "save":
            memory.save(args.task, args.lesson)
            out = {"saved": args.lesson, "count": memory.count()}
        elif args.mode == "search":
            out = {
                "lessons": [
                    {"text": lesson.text, "task": lesson.task, "similarity": lesson.similarity}
                    for lesson in memory.search(args.task)
                ]
            }
        else:
            out = _run_graph(memory, store, args.task)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Does the bundled Qwen apply the critique's feedback? One greedy revision, on the HumanEval/40-163 problems where
the greedy draft fails a visible docstring example (`--ids`), or on IFBench development prompts (`--ifbench N`: the
first N of bench_instructions.py's fixed order; the reserved half is never read).

The graph runs with `strategy="loop"`, one greedy draft, one greedy revision (`retries=0`: no other tactic when
the revision repeats its draft), the visible examples as its critic (`CodeTestCritic`), judged on HumanEval's own
tests (`Judge.solves`). Run it from two checkouts whose critics word their feedback differently, with `--label`
naming each; the records (one per problem and label) hold the critique the reviser saw, whether the revision
repeated the draft, passed the visible examples and solved the problem, its tokens and seconds, and the load.

    python bench/exp_revision_feedback.py --label new --ids 47,54,64
    python bench/exp_revision_feedback.py --label new --ifbench 12
    python bench/exp_revision_feedback.py --label quoted --ifbench 12 --phrasing quoted
    python bench/exp_revision_feedback.py --report

`--phrasing` chooses how the revision is asked for: `chat` (the package's own: the task, the draft as the model's
own turn, then the review) or `quoted` (the `prompts={"revise": ...}` override `QUOTED`: one request that quotes
the draft and lists the review's points, asking for a new version), to measure which the model applies.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import _humaneval as he  # noqa: E402
from _humaneval_set import problems  # noqa: E402
from _raw import append_record, embedded_model, read_jsonl, recorded, with_load  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "revision-feedback-qwen2.5-coder-1.5b.jsonl"
LOAD_LIMIT = 3.0
SETTINGS = {"strategy": "loop", "max_iterations": 2, "min_iterations": 2, "n_drafts": 1, "n_revisions": 1}
QUOTED = (
    """{task}

Here is a draft answer to the request above:
<draft>
{candidate}
</draft>

A reviewer found these problems in the draft:
{critique}

Write a new version of the answer that fixes every problem the reviewer found and keeps the rest. """
    "Write the new answer only."
)
"""The `quoted` phrasing: the draft quoted in one request, not given as the model's own turn."""
PHRASINGS: dict[str, dict[str, Any]] = {"chat": {}, "quoted": {"prompts": {"revise": QUOTED}}}
"""`--phrasing`: the graph's extra settings for each way of asking for the revision."""


def one(problem: dict[str, Any], model: Any, judge: Any, phrasing: str = "chat") -> dict[str, Any]:
    """The draft, its critique and one greedy revision of `problem` (asked for in `phrasing`), judged."""
    from reflection_graph import create_reflection_graph

    critic = he.visible_critic(problem)
    graph = create_reflection_graph(
        model, critic=critic, focus="code", retries=0, **SETTINGS, **PHRASINGS[phrasing]
    )
    start = time.monotonic()
    result = graph.invoke({"task": he.task_of(problem)})
    seconds = time.monotonic() - start
    rounds = result["trajectory"]
    draft, critique = rounds[0]["candidate"], rounds[0].get("critique") or {}
    revised = rounds[1]["candidate"] if len(rounds) > 1 else None
    return {
        "draft_visible": judge.visible(problem, draft),
        "critique": {"issues": critique.get("issues"), "suggestions": critique.get("suggestions")},
        "repeated": revised is None or " ".join(revised.split()) == " ".join(draft.split()),
        "revised_visible": None if revised is None else judge.visible(problem, revised),
        "revised_solved": None if revised is None else judge.solves(problem, revised),
        "stop": result["stop_reason"],
        "tactics": [r.get("tactic") for r in rounds],
        "seconds": round(seconds, 1),
        "revision": revised,
    }


def one_instructions(row: dict[str, Any], model: Any, phrasing: str = "chat") -> dict[str, Any]:
    """The draft of IFBench prompt `row`, its checker's critique and one greedy revision (asked for in
    `phrasing`), scored by IFBench."""
    import bench_instructions as bi

    from reflection_graph import create_reflection_graph

    critic = bi.critic_of(row)
    graph = create_reflection_graph(model, critic=critic, retries=0, **SETTINGS, **PHRASINGS[phrasing])
    start = time.monotonic()
    result = graph.invoke({"task": row["prompt"]})
    seconds = time.monotonic() - start
    rounds = result["trajectory"]
    draft, critique = rounds[0]["candidate"], rounds[0].get("critique") or {}
    revised = rounds[1]["candidate"] if len(rounds) > 1 else None
    scored = None if revised is None else bi.scored(row, revised, critic)
    return {
        "instructions": len(row["instruction_id_list"]),
        "draft_strict": sum(bi.scored(row, draft, critic)["strict"]),
        "critique": {"issues": critique.get("issues"), "suggestions": critique.get("suggestions")},
        "repeated": revised is None or " ".join(revised.split()) == " ".join(draft.split()),
        "revised_strict": None if scored is None else sum(scored["strict"]),
        "stop": result["stop_reason"],
        "tactics": [r.get("tactic") for r in rounds],
        "seconds": round(seconds, 1),
        "revision": revised,
    }


def report(path: Path) -> None:
    """The counts per label."""
    rows = read_jsonl(path)
    loaded = sorted({r["task_id"] for r in rows if max(r["load"]) > LOAD_LIMIT})
    if loaded:
        print(f"left out, a record of theirs measured above load {LOAD_LIMIT:g}: {', '.join(loaded)}")
    rows = [r for r in rows if r["task_id"] not in loaded]
    for label in sorted({r["label"] for r in rows if "instructions" in r}):
        mine = [r for r in rows if r["label"] == label and "instructions" in r]
        gained = sum(
            max(0, (r["revised_strict"] or 0) - r["draft_strict"])
            for r in mine
            if r["revised_strict"] is not None
        )
        lost = sum(
            max(0, r["draft_strict"] - r["revised_strict"]) for r in mine if r["revised_strict"] is not None
        )
        loads = [x for r in mine for x in r["load"]]
        print(
            f"ifbench {label}: {len(mine)} prompts ({sum(r['instructions'] for r in mine)} instructions) at"
            f" {sorted({r['commit'] for r in mine})}; drafts follow {sum(r['draft_strict'] for r in mine)}; the"
            f" revision repeats the draft {sum(bool(r['repeated']) for r in mine)}, newly follows {gained}, breaks"
            f" {lost}; load {min(loads)}-{max(loads)}"
        )
    for label in sorted({r["label"] for r in rows if "instructions" not in r}):
        mine = [r for r in rows if r["label"] == label and "instructions" not in r]
        fixed = sum(bool(r["revised_visible"] == 1.0) for r in mine)
        solved = sum(bool(r["revised_solved"]) for r in mine)
        same = sum(bool(r["repeated"]) for r in mine)
        loads = [x for r in mine for x in r["load"]]
        print(
            f"{label}: {len(mine)} problems at {sorted({r['commit'] for r in mine})}; the revision repeats the draft"
            f" {same}, passes every visible example {fixed}, solves {solved}; load {min(loads)}-{max(loads)}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--label", help="the feedback's name in the records (e.g. old, new)")
    parser.add_argument("--ids", default="", help="HumanEval numbers, comma-separated, within 40-163")
    parser.add_argument("--ifbench", type=int, default=0, help="the first N IFBench development prompts")
    parser.add_argument(
        "--phrasing", choices=sorted(PHRASINGS), default="chat", help="how the revision is asked for"
    )
    parser.add_argument("--report", action="store_true")
    parser.add_argument(
        "--results", type=Path, default=RESULTS, help=f"default {RESULTS.name} in bench/results"
    )
    args = parser.parse_args()
    if args.report:
        report(args.results)
        return 0
    ids = [int(i) for i in args.ids.split(",") if i]
    if not args.label or not (args.ifbench or ids) or (ids and min(ids) < 40):
        parser.error("--label and --ids (40-163) or --ifbench N are needed")
    loaded = embedded_model("embedded:qwen2.5-coder-1.5b")
    if loaded is None:
        return 2
    model, _ = loaded
    judge = he.Judge()
    done = recorded(args.results, "label", "task_id")
    if args.ifbench:
        import bench_instructions as bi
        from _ifbench_set import prompts

        for row in bi.in_order(bi.split_rows(prompts())[0])[: args.ifbench]:
            if (args.label, bi.prompt_id(row)) in done:
                continue
            keys = {"label": args.label, "task_id": bi.prompt_id(row), "phrasing": args.phrasing}
            record = with_load(keys, one_instructions, row, model, args.phrasing)
            shown = [record[k] for k in ("draft_strict", "revised_strict", "seconds")]
            append_record(args.results, record, row["key"], args.label, *shown)
        return 0
    for problem in problems(ids):
        if (args.label, problem["task_id"]) in done or he.visible_critic(problem) is None:
            continue
        keys = {"label": args.label, "task_id": problem["task_id"], "phrasing": args.phrasing}
        record = with_load(keys, one, problem, model, judge, args.phrasing)
        shown = [record[k] for k in ("repeated", "revised_visible", "revised_solved", "seconds", "load")]
        append_record(args.results, record, problem["task_id"], args.label, *shown)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

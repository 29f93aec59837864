"""Does the default critic's written critique name only real faults, in whole lines? With 95% Wilson intervals.

On every (task, answer, its real faults) case of `datasets/critique_cases.jsonl` (written for this benchmark: 17
good answers with no fault, 22 answers with one or two known faults: a missing decline, a wrong fact, a wrong
number, a placeholder, a rude line), the default critic of an instruction-tuned embedded model (`JudgeCritic`)
writes its critique of the answer as a first candidate, and the judge checks each written fault. From the same
calls, side by side:

- `before (issue 37)` (with `--before`): the critique as the critic wrote it before issue 37: its old prompt,
  `issues` and `suggestions` lists under the grammar's default bounds (100 characters, 2 items), every line shown.
- `new, as written`: the new prompt's issue/fix pairs as the model wrote them (the grammar's declared bounds).
- `new, whole lines`: the lines kept as whole sentences in the task's script (`confirm="none"`), with the
  rules' faults.
- `checked once`: the faults the judge confirms to "Does this answer have this fault?" (`confirm="yes"`).
- `checked both ways` (the default): the faults whose mean log-odds over that question and "Is this answer free of
  this fault?" is above 0 (`confirm="both"`).
- `checked as a choice`: the faults the judge confirms choosing between "the reviewer is right" and "wrong", each
  in place A in turn (`confirm="choice"`; two more one-token calls per fault).
- `..., judged wrong only`: the same lines shown only when the judge's own verdict on the answer ("is it correct
  and does it do what the task asks?") has P(Yes) <= 1/2; otherwise only the rules' lines (one more one-token
  call per case, the verdict the critic reads first anyway; nothing fitted). `checked both ways, judged wrong
  only` is what `JudgeCritic` shows by default.
- `rules alone (no model)`: the faults the rule-based detectors name (reflection_graph/critics/_rule_faults.py:
  placeholders, a requirement the task states and the answer misses, another script), real by construction;
  every variant from `new, whole lines` on shows them too. They are read from the case at report time, so a
  saved run is reported with today's rules without a model call.

Printed per variant, each with a Wilson 95% interval:
- `false claims on good`: good answers with at least one fault shown (every claim on a good answer is false), and
  the number of claims;
- `recall: real faults named`: the cases' faults named by a shown fault. **Matching is by keyword rules written in the
  dataset**: each real fault carries a regular expression (`match`), and a shown fault (its issue and its fix)
  names it when the expression finds it, case-insensitively. No model decides a match;
- `unmatched on bad`: shown faults on the bad answers that match none of their listed faults (a false claim, or a
  real fault the rules miss);
- `precision`: the shown faults that name a real fault of their case (by the same keyword rules), over all shown
  faults, on good and bad answers alike (every claim on a good answer is false);
- `malformed lines`: shown lines (issues and fixes) that a rule written here, apart from the critic's own, calls
  broken: not ending with `.`, `!` or `?` (cut mid-sentence, or not a sentence), a letter outside the Latin script
  (every task here is English), or a `[...]` placeholder the answer does not hold.

The sets, reported apart and then combined: `datasets/critique_cases.jsonl` (the set above) and
`datasets/critique_cases_new.jsonl` (35 more cases written before the rule-based detectors: 12 good answers, 23
with one known fault each: a missing subject line, signature, phrase or date, a placeholder, a word or bullet count,
a paragraph count, capitals or commas the task forbade, a reply in another language or script, an off-by-one, a
wrong fact or number), `datasets/critique_cases_3.jsonl` (32 cases written before the facts rule, by a hand
that had not read the rules), `datasets/critique_cases_4.jsonl` (32 cases written before the language rule, by
a hand that had not read the critics) and `datasets/critique_cases_5.jsonl` (34 cases written before the arithmetic
and recipient rules, by a hand that had not read the critics) and `datasets/critique_cases_6.jsonl` (34 cases
written before the rules read more phrasings of a limit, a changed code and a missing contact detail or deadline,
by a hand that had read neither the critics nor the other sets). `--cases` reads other sets instead.
`--rules-only` prints the rules' row alone for every case, with no model and no saved reading.

The judge-level lines of a critique (P(Yes) below 1/2, "judged worse") are not written faults and are not counted.
The seconds of each kind of call are printed at the end (per case: the written critique, each fault check, the
`before` critique).

Resumable: each case's readings are saved to `--out` (default `bench/results/critique-<model>.jsonl`) as soon as
they are read, keyed by the case and the prompts; a run started again skips what is saved. Progress is printed per
case. Needs the `[local]` extra. Never tuned on: nothing here is fitted.

    python bench/bench_critique.py --before                       # Qwen2.5-Coder-1.5B, the whole set
    python bench/bench_critique.py --limit 5 -v                   # a quick look
    python bench/bench_critique.py --cases datasets/critique_cases_new.jsonl   # the new cases alone
    python bench/bench_critique.py --report-only                  # the tables from the saved readings, no model
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common  # noqa: E402,F401  (puts the repository on sys.path)
from _common import print_table  # noqa: E402
from _raw import embedded_model, llama_cpp_missing  # noqa: E402
from bench_critic import share  # noqa: E402
from pydantic import BaseModel, Field  # noqa: E402

CASES = "datasets/critique_cases.jsonl"
NEW_CASES = "datasets/critique_cases_new.jsonl"
"""Cases written before the rule-based detectors, reported apart from `CASES`."""
THIRD_CASES = "datasets/critique_cases_3.jsonl"
"""Cases written before the facts rule (`rule:facts`), by a hand that had not read the rules, reported apart."""
FOURTH_CASES = "datasets/critique_cases_4.jsonl"
"""Cases written before the language rule (`rule:language`), by a hand that had not read the critics, reported
apart."""
FIFTH_CASES = "datasets/critique_cases_5.jsonl"
"""Cases written before the arithmetic and recipient rules, by a hand that had not read the critics, reported
apart."""
SIXTH_CASES = "datasets/critique_cases_6.jsonl"
"""Cases written before the rules' wider reading of limits, changed codes and missing contact details, by a hand
that had read neither the critics nor the other sets, reported apart."""

BEFORE_SYSTEM = (
    "You review answers. You list only real faults: a wrong fact, number or result, something the task asks "
    "for that is missing, something the task did not ask for, or a tone that does not fit. You never invent a "
    "fault: an answer that does the task gets empty lists."
)
BEFORE_PROMPT = """Task:
{task}
{context}
Answer:
{candidate}

List the answer's real faults ("issues") and how to fix each ("suggestions"). Reply with JSON only."""
"""The written critique's prompt before issue 37 (reflection_graph/prompts.py at the time), kept here to measure it."""


class BeforeCritique(BaseModel):
    """The written critique's schema before issue 37: two free lists, bounded by the grammar's defaults."""

    issues: list[str] = Field(default_factory=list)
    suggestions: list[str] = Field(default_factory=list)


def load_cases(path: Path) -> list[dict[str, Any]]:
    """The cases of `path`, checked: a task, an answer and a list of faults, each with a compiling `match`; each
    case's `set` is the file's name."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if len({row.get("id") for row in rows}) != len(rows):
        raise ValueError(f"{path}: two cases share an id")
    for row in rows:
        missing = {"id", "task", "answer", "faults"} - set(row)
        if missing:
            raise ValueError(f"{path}: case {row.get('id', '?')} lacks {sorted(missing)}")
        for fault in row["faults"]:
            if not fault.get("fault") or not fault.get("match"):
                raise ValueError(f"{path}: case {row['id']}: each fault needs 'fault' and 'match'")
            re.compile(fault["match"])
        row["set"] = path.name
    return rows


# -- rules written here, apart from the critic's --------------------------------------------------------------------
_ENDS = re.compile(r"[.!?][\"'”’)\]]*\s*$")
_SLOT = re.compile(r"\[[A-Za-z][^\]\n]{0,40}\]")


def malformed(line: str, answer: str) -> bool:
    """A shown line is broken: no sentence end, a letter outside Latin, or a placeholder the answer lacks."""
    if not _ENDS.search(line):
        return True
    if any(ch.isalpha() and ord(ch) > 0x24F for ch in line):
        return True
    return any(slot not in answer for slot in _SLOT.findall(line))


def named(fault: dict[str, str], shown: Sequence[tuple[str, str]]) -> bool:
    """A real fault is named when its `match` expression finds a shown fault's issue or fix."""
    pattern = re.compile(fault["match"], re.I)
    return any(pattern.search(f"{issue} {fix}") for issue, fix in shown)


# -- reading one case -------------------------------------------------------------------------------------------------
def _key(model_name: str) -> str:
    from reflection_graph import prompts

    text = "\n".join(
        [
            model_name,
            prompts.CHAT_CRITIQUE_SYSTEM,
            prompts.CHAT_CRITIQUE_PROMPT,
            prompts.CHAT_FAULT_PROMPT,
            prompts.CHAT_NO_FAULT_PROMPT,
            prompts.CHAT_FAULT_CHOICE_PROMPT,
            prompts.FAULT_HELD,
            prompts.FAULT_NOT_HELD,
        ]
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def read_case(critic: Any, case: dict[str, Any], before: bool) -> dict[str, Any]:
    """Every reading of one case: the written critique, its whole lines and checks, the rule's placeholders, and
    (with `before`) the old critique; with the seconds of each kind of call."""
    from langchain_core.messages import HumanMessage, SystemMessage

    from reflection_graph._text._placeholders import introduced_placeholders
    from reflection_graph.critics import CritiqueRequest
    from reflection_graph.prompts import render_prompt

    request = CritiqueRequest(task=case["task"], candidate=case["answer"])
    record: dict[str, Any] = {"id": case["id"], "seconds": {}}
    record.update(read_verdict(critic, case))
    start = time.perf_counter()
    written = critic.faults(request)
    record["seconds"]["written"] = time.perf_counter() - start
    record["unread"] = written is None
    record["raw"] = [f.model_dump() for f in written.faults] if written else []
    usable = critic.usable_faults(request, written) if written else []
    start = time.perf_counter()
    checks = critic.check_faults(request, usable)
    record["seconds"]["checks"] = time.perf_counter() - start
    record["checks"] = [{**c.fault.model_dump(), "has": c.has, "free": c.free} for c in checks]
    start = time.perf_counter()
    choices = critic._with(confirm="choice").check_faults(request, usable)
    record["seconds"]["choices"] = time.perf_counter() - start
    record["choices"] = [{**c.fault.model_dump(), "has": c.has, "free": c.free} for c in choices]
    record["placeholders"] = introduced_placeholders(case["answer"], task=case["task"])
    if before:
        values = {"task": case["task"].strip(), "context": "", "candidate": case["answer"].strip()}
        messages = [SystemMessage(BEFORE_SYSTEM), HumanMessage(render_prompt(BEFORE_PROMPT, values))]
        start = time.perf_counter()
        reply = critic.model.with_structured_output(BeforeCritique, include_raw=True).invoke(messages)
        record["seconds"]["before"] = time.perf_counter() - start
        parsed = reply.get("parsed")
        record["before"] = parsed.model_dump() if parsed is not None else None
    return record


def read_verdict(critic: Any, case: dict[str, Any]) -> dict[str, Any]:
    """The judge's verdict on the answer as a first candidate: `p_yes` (one one-token call), and its seconds."""
    from reflection_graph.critics import CritiqueRequest

    start = time.perf_counter()
    judged = critic.judge(CritiqueRequest(task=case["task"], candidate=case["answer"]))
    return {"p_yes": judged.p_yes, "verdict_seconds": time.perf_counter() - start}


# -- the variants -----------------------------------------------------------------------------------------------------
Shown = list[tuple[str, str]]


def _rule(record: dict[str, Any]) -> Shown:
    """The rules' faults (placeholders, a missed requirement, another script), as `JudgeCritic` shows them beside
    the judge's for a rejected answer: read from the case's task and answer at report time, no model call."""
    from reflection_graph.critics._rule_faults import rule_faults

    return [(f.issue, f.fix) for f in rule_faults(record["answer"], task=record["task"])]


def _checked(
    keep: Callable[[dict[str, Any]], bool], readings: str = "checks"
) -> Callable[[dict[str, Any]], Shown | None]:
    return lambda r: [(c["issue"], c["fix"]) for c in r[readings] if keep(c)] + _rule(r)


def _before(record: dict[str, Any]) -> Shown | None:
    if "before" not in record:
        return None  # not read (run without --before)
    old = record["before"] or {"issues": [], "suggestions": []}  # an unreadable reply showed no line
    issues, fixes = old["issues"], old["suggestions"]
    return [(issue, fixes[i] if i < len(fixes) else "") for i, issue in enumerate(issues)] + [
        ("", fix) for fix in fixes[len(issues) :]
    ]


VARIANTS: dict[str, Callable[[dict[str, Any]], Shown | None]] = {
    "before (issue 37)": _before,
    "rules alone (no model)": _rule,
    "new, as written": lambda r: [(f["issue"], f["fix"]) for f in r["raw"]],  # the model alone, no rule
    "new, whole lines": _checked(lambda c: True),
    "checked once": _checked(lambda c: c["has"] > 0),
    "checked both ways (default)": _checked(lambda c: (c["has"] - c["free"]) / 2 > 0),
    "checked as a choice": _checked(lambda c: (c["has"] - c["free"]) / 2 > 0, "choices"),
    "whole lines, judged wrong only": lambda r: (
        _checked(lambda c: True)(r) if r["p_yes"] <= 0.5 else _rule(r)
    ),
    "checked both ways, judged wrong only": lambda r: (
        _checked(lambda c: (c["has"] - c["free"]) / 2 > 0)(r) if r["p_yes"] <= 0.5 else _rule(r)
    ),
}


def _with_case(record: dict[str, Any], case: dict[str, Any]) -> dict[str, Any]:
    """A case's record with its task and answer, which the rules read."""
    return {**record, "task": case["task"], "answer": case["answer"]}


def figures(
    cases: Sequence[dict[str, Any]], records: dict[str, dict[str, Any]], variant: str
) -> list[str] | None:
    """One row: false claims on good answers, precision, recall (real faults named), unmatched claims on bad
    ones, malformed lines."""
    show = VARIANTS[variant]
    good = claims = bad_faults = found = unmatched = lines = broken = shown_all = shown_real = 0
    n_good = 0
    for case in cases:
        shown = show(_with_case(records[case["id"]], case))
        if shown is None:
            return None  # not read (the `before` critique without --before)
        answer = case["answer"]
        for issue, fix in shown:
            for line in (issue, fix):
                if line:
                    lines += 1
                    broken += malformed(line, answer)
        real_issues = [(i, f) for i, f in shown if i]
        shown_all += len(real_issues)
        shown_real += sum(any(named(fault, [(i, f)]) for fault in case["faults"]) for i, f in real_issues)
        if not case["faults"]:
            n_good += 1
            good += bool(real_issues)
            claims += len(real_issues)
            continue
        bad_faults += len(case["faults"])
        found += sum(named(fault, shown) for fault in case["faults"])
        unmatched += sum(not any(named(fault, [(i, f)]) for fault in case["faults"]) for i, f in real_issues)
    return [
        variant,
        f"{share(good, n_good)} ({claims} claims)" if n_good else "no good answers",
        f"{share(shown_real, shown_all)} ({shown_real} of {shown_all})" if shown_all else "nothing shown",
        f"{share(found, bad_faults)} ({found} of {bad_faults})" if bad_faults else "no faults",
        str(unmatched),
        share(broken, lines) if lines else "no lines",
    ]


def by_critic(
    cases: Sequence[dict[str, Any]], records: dict[str, dict[str, Any]]
) -> dict[str, tuple[int, int]]:
    """For the default variant: per critic (`judge`, `rules`), the shown faults that name a real one, and all
    shown faults."""
    counts = {"judge": [0, 0], "rules": [0, 0]}
    for case in cases:
        record = _with_case(records[case["id"]], case)
        rules = _rule(record)
        shown = VARIANTS["checked both ways, judged wrong only"](record) or []
        judge = [pair for pair in shown if pair not in rules]
        for critic, pairs in (("judge", judge), ("rules", rules)):
            counts[critic][1] += len(pairs)
            counts[critic][0] += sum(any(named(f, [pair]) for f in case["faults"]) for pair in pairs)
    return {critic: (real, shown) for critic, (real, shown) in counts.items()}


def saved_records(out: Path, key: str, before: bool) -> dict[str, dict[str, Any]]:
    """The records saved in `out` for these prompts (`key`); a line cut by a kill is skipped (read again)."""
    saved: dict[str, dict[str, Any]] = {}
    if not out.exists():
        return saved
    for line in out.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict) and row.get("key") == key and (not before or "before" in row):
            saved[row["id"]] = row
    return saved


def run(
    critic: Any, cases: Sequence[dict[str, Any]], out: Path, key: str, *, before: bool
) -> dict[str, dict[str, Any]]:
    """Read every case not saved in `out` yet, saving each as soon as it is read; returns every case's record."""
    saved = saved_records(out, key, before)
    out.parent.mkdir(parents=True, exist_ok=True)
    for case in cases:  # records saved before the verdict was read: read it now (one one-token call each)
        if case["id"] in saved and "p_yes" not in saved[case["id"]]:
            saved[case["id"]] = {**saved[case["id"]], **read_verdict(critic, case)}
            with out.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(saved[case["id"]], ensure_ascii=False) + "\n")
    began = time.perf_counter()
    for index, case in enumerate(cases, 1):
        if case["id"] in saved:
            continue
        record = {**read_case(critic, case, before), "key": key}
        saved[case["id"]] = record
        with out.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        confirmed = sum((c["has"] - c["free"]) / 2 > 0 for c in record["checks"])
        seconds = sum(record["seconds"].values())
        print(
            f"[{index}/{len(cases)}] {case['id']}: {len(record['raw'])} written, {len(record['checks'])} whole, "
            f"{confirmed} confirmed ({seconds:.1f}s; {time.perf_counter() - began:.0f}s in all)",
            flush=True,
        )
    return saved


def report(cases: Sequence[dict[str, Any]], saved: dict[str, dict[str, Any]], name: str) -> None:
    """Print the table of every variant read, and the seconds of each kind of call."""
    header = [
        "variant",
        "false claims on good",
        "precision",
        "recall: real faults named",
        "unmatched on bad",
        "malformed lines",
    ]
    rows = [row for v in VARIANTS if (row := figures(cases, saved, v)) is not None]
    n_good = sum(1 for c in cases if not c["faults"])
    print(
        f"\n{name}: {len(cases)} cases ({n_good} good, {len(cases) - n_good} with faults), 95% Wilson intervals"
    )
    print_table(header, rows)
    split = by_critic(cases, saved)
    print(
        "default, by the critic that named each fault: "
        + "; ".join(f"{critic} {real} real of {shown} shown" for critic, (real, shown) in split.items())
    )
    records = [saved[c["id"]] for c in cases]
    checks = sum(len(r["checks"]) for r in records)
    seconds = {
        k: sum(r["seconds"].get(k, 0.0) for r in records) for k in ("written", "checks", "choices", "before")
    }
    before = any("before" in r for r in records)
    print(
        f"\nseconds per case: written critique {seconds['written'] / len(records):.1f}, checks "
        f"{seconds['checks'] / len(records):.1f} ({2 * checks} one-token calls in all, "
        f"{seconds['checks'] / max(1, 2 * checks):.2f}s each), as a choice {seconds['choices'] / len(records):.1f}"
        + (f", before {seconds['before'] / len(records):.1f}" if before else "")
    )


def rules_report(sets: dict[str, list[dict[str, Any]]]) -> None:
    """The rules' row alone (no model) for each set, then for every set combined, and each shown fault that names
    none of its case's faults."""
    header = ["set", "false claims on good", "precision", "recall: real faults named", "unmatched on bad"]
    blank: dict[str, dict[str, Any]] = {c["id"]: {} for rows in sets.values() for c in rows}
    groups = [(Path(path).name, rows) for path, rows in sets.items()]
    if len(sets) > 1:
        groups.append(("all sets combined", [c for rows in sets.values() for c in rows]))
    rows = []
    for label, cases in groups:
        row = figures(cases, blank, "rules alone (no model)")
        assert row is not None  # the rules read every case
        rows.append([label, *row[1:5]])
    print("rules alone (no model), 95% Wilson intervals")
    print_table(header, rows)
    for rows_of_set in sets.values():
        for case in rows_of_set:
            for issue, fix in _rule(_with_case({}, case)):
                if not any(named(fault, [(issue, fix)]) for fault in case["faults"]):
                    print(f"  names none of its case's faults: {case['id']}: {issue}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--model", default="embedded:qwen2.5-coder-1.5b", help="an instruction-tuned embedded model"
    )
    parser.add_argument(
        "--cases",
        nargs="+",
        default=[CASES, NEW_CASES, THIRD_CASES, FOURTH_CASES, FIFTH_CASES, SIXTH_CASES],
        help="the (task, answer, faults) sets, JSONL, each reported apart and then combined (default: all six)",
    )
    parser.add_argument(
        "--out", default=None, help="the resumable cache (default bench/results/critique-<model>.jsonl)"
    )
    parser.add_argument(
        "--before", action="store_true", help="also read the critique as written before issue 37"
    )
    parser.add_argument("--limit", type=int, default=None, help="only the first N cases")
    parser.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: the model's)")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every case's shown faults")
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="no model: the tables from the saved readings (today's rules applied), cases not read yet left out",
    )
    parser.add_argument(
        "--rules-only",
        action="store_true",
        help="no model: the rules' row alone, for every case (no saved reading needed)",
    )
    args = parser.parse_args(argv)
    root = Path(__file__).resolve().parents[1]
    sets = {path: load_cases(root / path)[: args.limit] for path in args.cases}
    cases = [case for rows in sets.values() for case in rows]
    if len({case["id"] for case in cases}) != len(cases):
        print("error: two of the sets share a case id", file=sys.stderr)
        return 2
    if args.rules_only:
        rules_report(sets)
        return 0
    if args.report_only:
        name = args.model.split(":", 1)[-1]
        out = Path(args.out) if args.out else root / "bench" / "results" / f"critique-{name}.jsonl"
        saved = saved_records(out, _key(name), args.before)
        missing = [case["id"] for case in cases if case["id"] not in saved]
        if missing:
            print(f"not read yet, left out: {len(missing)} cases ({', '.join(missing[:5])}, ...)")
        kept = {path: [c for c in rows if c["id"] in saved] for path, rows in sets.items()}
        sets = {path: rows for path, rows in kept.items() if rows}
        _reports(sets, saved, name, verbose=args.verbose)
        return 0
    if llama_cpp_missing():
        return 2
    from reflection_graph.critics import JudgeCritic
    from reflection_graph.models import critic_model

    found = embedded_model(args.model, n_threads=args.threads)
    if found is None:
        return 2
    model = found[0]
    if not model.uses_chat_template:
        print(
            f"error: {args.model} has no chat template: JudgeCritic is not its default critic",
            file=sys.stderr,
        )
        return 2
    name = model.model or Path(model.resolved_model_path).name
    out = Path(args.out) if args.out else root / "bench" / "results" / f"critique-{name}.jsonl"
    critic = JudgeCritic(critic_model(model), confirm="both")
    saved = run(critic, cases, out, _key(name), before=args.before)
    _reports(sets, saved, name, verbose=args.verbose)
    return 0


def _reports(
    sets: dict[str, list[dict[str, Any]]], saved: dict[str, dict[str, Any]], name: str, *, verbose: bool
) -> None:
    """Each set's table, then the old and new sets combined (the measure the critique work is held to) and every
    set combined; with `verbose`, each case's real faults and the default's shown ones first."""
    cases = [case for rows in sets.values() for case in rows]
    if verbose:
        for case in cases:
            shown = (
                VARIANTS["checked both ways, judged wrong only"](_with_case(saved[case["id"]], case)) or []
            )
            print(f"{case['id']}: real {[f['fault'] for f in case['faults']]}; shown {[i for i, _ in shown]}")
    for path, rows in sets.items():
        report(rows, saved, f"{name}, {Path(path).name}")
    if CASES in sets and NEW_CASES in sets and len(sets) > 2:
        report([*sets[CASES], *sets[NEW_CASES]], saved, f"{name}, old and new combined")
    if len(sets) > 1:
        report(cases, saved, f"{name}, all sets combined")


if __name__ == "__main__":
    raise SystemExit(main())

"""What the commands print: ``run``'s rounds as they happen, and the summaries of ``batch``/``merge`` and ``eval``."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from langchain_core.messages import AIMessageChunk, BaseMessage
from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.live import Live
from rich.markup import escape
from rich.panel import Panel
from rich.rule import Rule
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from reflection_graph.cli._common import _printable
from reflection_graph.loop import setup_of
from reflection_graph.runners.eval import RoundStats


def _score_style(score: Any) -> str:
    if not isinstance(score, (int, float)):
        return "dim"
    return "green" if score >= 7 else "yellow" if score >= 4 else "red"


def _bullets(items: Any) -> Text:
    return Text("\n".join(f"  • {item}" for item in items or []))


def _critique_panel(critique: dict[str, Any] | None, title: str) -> Panel:
    if not critique:
        return Panel(Text("no critique", style="dim"), title=title, border_style="dim")
    score = critique.get("score")
    head = Text()
    head.append("score ", style="bold")
    head.append(f"{score:g}/10" if isinstance(score, (int, float)) else "-", style=_score_style(score))
    head.append("   verdict ", style="bold")
    accepted = bool(critique.get("is_acceptable"))
    head.append("acceptable" if accepted else "needs work", style="green" if accepted else "yellow")
    if critique.get("severity"):
        head.append("   severity ", style="bold")
        head.append(str(critique["severity"]))
    if critique.get("parsed") is False:
        head.append("   (unparsed reply)", style="red")
    parts: list[Any] = [head]
    if critique.get("issues"):
        parts += [Text("issues", style="bold"), _bullets(critique["issues"])]
    if critique.get("suggestions"):
        parts += [Text("suggestions", style="bold"), _bullets(critique["suggestions"])]
    if critique.get("feedback"):
        parts += [Text("feedback", style="bold"), Text(str(critique["feedback"]))]
    return Panel(Group(*parts), title=title, border_style=_score_style(score), title_align="left")


def _usage_table(usage: dict[str, Any] | None) -> Table:
    table = Table(title="usage", title_justify="left", show_edge=False)
    for column in ("role", "calls", "input tokens", "output tokens", "total tokens", "seconds"):
        table.add_column(column, justify="left" if column == "role" else "right")
    for role in ("generate", "critique", "revise", "total"):
        row = (usage or {}).get(role)
        if not row:
            continue
        table.add_row(
            role,
            str(row.get("calls", 0)),
            str(row.get("input_tokens", 0)),
            str(row.get("output_tokens", 0)),
            str(row.get("total_tokens", 0)),
            f"{float(row.get('seconds', 0.0)):.2f}",
            style="bold" if role == "total" else None,
        )
    return table


class _LiveRenderer:
    """Prints rounds from the graph's ``updates``/``tasks`` stream as they happen."""

    _ACTIVITY = {"generate": "drafting", "critique": "critiquing", "finalize": "choosing the answer"}

    def __init__(self, console: Console, *, afresh: Callable[[int], bool] = lambda iteration: False) -> None:
        self.console = console
        self.round = 0
        self.shown_draft: str | None = None
        self.afresh = afresh
        """Whether the graph's strategy draws fresh drafts in a later round (`resample`) instead of revising."""

    def _later(self, iteration: int) -> str:
        return "fresh draft" if self.afresh(iteration) else "revision"

    def status_for(self, node: str) -> str:
        activity = self._ACTIVITY.get(node, f"running {node}")
        if node == "generate" and self.round >= 1 and not self.afresh(self.round + 1):
            activity = "revising"
        return f"[bold]{activity}[/] (round {self.round + 1 if node == 'generate' else max(self.round, 1)})…"

    def writing_title(self) -> str:
        """The title of the reply `generate` is writing now: the draft, a revision or a fresh draft, and its round."""
        later = self._later(self.round + 1)
        return f"{later if self.round >= 1 else 'draft'} (round {self.round + 1}, writing)"

    def _draft(self, candidate: str, iteration: int, title: str | None = None) -> None:
        title = title or ("draft" if iteration <= 1 else self._later(iteration))
        self.console.print(Rule(f"round {iteration}", style="cyan"))
        self.console.print(
            Panel(Text(candidate or "(empty)"), title=title, title_align="left", border_style="cyan")
        )
        self.shown_draft = candidate

    def update(self, node: str, update: Any) -> None:
        if not isinstance(update, dict):
            return
        if node == "generate":  # generate writes its round's candidates (`Pending`) and nothing else
            pending = update.get("rg_pending") or {}
            samples = pending.get("samples") if isinstance(pending, dict) else None
            if samples and isinstance(samples[0].get("candidate"), str):
                title = "given candidate" if pending.get("job") == "glean" else None
                self._draft(
                    samples[0]["candidate"], int(pending.get("iteration") or self.round + 1), title=title
                )
        elif node == "critique":
            for step in update.get("trajectory") or []:
                if not isinstance(step, dict):
                    continue
                self.round = int(step.get("iteration") or self.round + 1)
                candidate = step.get("candidate")
                if isinstance(candidate, str) and candidate != self.shown_draft:
                    self._draft(candidate, self.round)
                self.console.print(_critique_panel(step.get("critique"), f"critique (round {self.round})"))
                self.shown_draft = None

    def final(self, result: dict[str, Any], thread_id: str | None) -> None:
        console = self.console
        console.print(Rule("result", style="bold"))
        stop = result.get("stop_reason")
        line = Text()
        line.append("stop reason ", style="bold")
        line.append(
            str(stop), style="red" if stop == "error" else "green" if stop == "accepted" else "yellow"
        )
        line.append(f"   rounds {result.get('iterations', 0)}")
        critique = result.get("critique") or {}
        if isinstance(critique, dict) and isinstance(critique.get("score"), (int, float)):
            line.append("   final score ")
            line.append(f"{critique['score']:g}/10", style=_score_style(critique["score"]))
        if thread_id:
            line.append(f"   thread {thread_id}", style="dim")
        console.print(line)
        if result.get("error"):
            console.print(Text(f"error: {result['error']}", style="red"))
        console.print(
            Panel(
                Text(str(result.get("candidate") or "(empty)")),
                title="answer",
                title_align="left",
                border_style="green",
            )
        )
        console.print(_usage_table(result.get("usage")))


LOADING = "loading the model"
"""What the live view says while `run` loads a local model's file, before the first step."""

TOKEN_REFRESH_S = 0.1
"""The least time between two redraws for new tokens (the first token of a reply is drawn at once)."""


class _Writing:
    """The live bottom of the screen: the replies `generate` is writing (one panel per model call, its last lines
    when it is taller than the screen) above a spinner saying what runs."""

    def __init__(self) -> None:
        self.spinner = Spinner("dots", text=Text.from_markup("[bold]starting[/]…"))
        self.title = "draft (writing)"
        self.replies: dict[str, str] = {}
        self._drawn = 0.0

    def add(self, message: BaseMessage) -> bool:
        """Take a message of the `messages` stream (a streamed chunk, or the whole reply of a model that does not
        stream); True when its reply is new (its first text, to draw at once)."""
        key, text = str(message.id), message.text
        new = key not in self.replies
        if new and not text:  # nothing to show yet (an empty reply, asked again, shows nothing at all)
            return False
        self.replies[key] = self.replies.get(key, "") + text if isinstance(message, AIMessageChunk) else text
        return new

    def due(self, first: bool) -> bool:
        """Whether to redraw now for a new token: at once for a reply's first, then at most every
        `TOKEN_REFRESH_S` (the automatic refresh draws the rest)."""
        now = time.monotonic()
        if first or now - self._drawn >= TOKEN_REFRESH_S:
            self._drawn = now
            return True
        return False

    def clear(self) -> None:
        self.replies.clear()

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        replies = list(self.replies.values())  # a copy: the refresh thread draws while tokens come in
        room = max(3, (options.height or console.size.height) - 4 * len(replies) - 2)
        for text in replies:
            lines = Text(text).wrap(console, max(10, options.max_width - 4))
            shown = Text("\n").join(lines[-room:]) if len(lines) > room else Text(text)
            title = self.title if len(lines) <= room else f"{self.title}, last {room} lines"
            yield Panel(shown, title=title, title_align="left", border_style="dim cyan")
        yield self.spinner


def _afresh(graph: Any) -> Callable[[int], bool]:
    """Whether `graph` (a reflection graph, maybe bound to a config) draws fresh drafts in a given later round
    (its strategy's `drafts_afresh`); never, for a caller's own graph."""
    try:
        return setup_of(getattr(graph, "bound", graph)).strategy.drafts_afresh
    except (TypeError, KeyError, AttributeError):  # not a reflection graph: a caller's own
        return lambda iteration: False


def _stream_with_display(
    graph: Any,
    inputs: dict[str, Any] | None,
    config: dict[str, Any],
    console: Console,
    *,
    load: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Run the graph, printing each round as it ends; the draft and each revision are shown as they are written
    (the `messages` stream of the `generate` node; a critic's calls are not on it), under a spinner that says
    what runs, redrawn as each step starts. `load`, when given, runs first under "loading the model" (a local
    model's file), so "drafting" starts with the draft's call."""
    renderer = _LiveRenderer(console, afresh=_afresh(graph))
    writing = _Writing()
    result: dict[str, Any] = {}
    modes = ["updates", "values", "tasks", "messages"]
    # a slow refresh: on 2 cores a 12.5 Hz spinner thread measurably slows the embedded model's threads
    with Live(writing, console=console, refresh_per_second=2, transient=True) as live:
        if load is not None:
            writing.spinner.update(text=Text.from_markup(f"[bold]{LOADING}[/]…"))
            live.refresh()
            load()
        for mode, chunk in graph.stream(inputs, config, stream_mode=modes):
            if mode == "messages":
                message, meta = chunk
                if meta.get("langgraph_node") == "generate" and writing.due(writing.add(message)):
                    live.refresh()
            elif mode == "tasks" and isinstance(chunk, dict) and "result" not in chunk and chunk.get("name"):
                name = str(chunk["name"])
                writing.spinner.update(text=renderer.status_for(name))
                if name == "generate":
                    writing.title = renderer.writing_title()
                live.refresh()  # the step is shown as it starts, not at the next slow refresh
            elif mode == "updates" and isinstance(chunk, dict):
                for node, update in chunk.items():
                    if node == "generate":
                        writing.clear()
                    renderer.update(node, update)
            elif mode == "values" and isinstance(chunk, dict):
                result = chunk
    renderer.final(result, config.get("configurable", {}).get("thread_id"))
    return result


def _print_eval(report: Any, console: Console) -> None:

    table = Table(
        title=f"eval per round ({report.scorer}, pass mark {report.pass_mark:g})", title_justify="left"
    )
    for column in RoundStats.COLUMNS:
        table.add_column(column, justify="right")
    for r in report.rounds:
        table.add_row(*r.cells())
    console.print(table)
    if report.budget is not None or report.budget_hits:
        cap = f"capped at {report.budget} tokens per record; " if report.budget is not None else ""
        hits = ", ".join(map(str, report.budget_hits)) or "none"
        console.print(f"budget: {cap}records a token budget stopped: {hits}")
    compare = Table(show_edge=False)
    for column in ("answer", "mean score", "pass share"):
        compare.add_column(column, justify="left" if column == "answer" else "right")
    for name, values in report.comparison.items():
        mean, share = values.get("mean_score"), values.get("pass_share")
        compare.add_row(
            name, "-" if mean is None else f"{mean:.3f}", "-" if share is None else f"{share:.0%}"
        )
    console.print(compare)
    flips, agree = report.flips, report.agreement

    def fmt(value: Any) -> str:
        return "n/a" if value is None else f"{value:.2f}"

    console.print(
        f"flips first -> selected: right->wrong {flips.get('right_to_wrong', 0)}, "
        f"wrong->right {flips.get('wrong_to_right', 0)}"
    )
    console.print(
        f"critic agreement: precision {fmt(agree.get('precision'))}, recall {fmt(agree.get('recall'))}"
    )
    if report.errors:
        kinds = ", ".join(f"{k} {v}" for k, v in report.errors_by_type.items())
        console.print(f"[red]{report.errors} error rows[/] ({kinds})")
        for sample in report.error_samples:
            console.print(Text(f"  {sample}", style="red"))
    console.print(Text(report.recommendation, style="bold"))
    console.print(f"report: {report.files.get('html')}")


def _print_summary(summary: Any, console: Console) -> None:
    table = Table(
        title=f"batch summary ({summary.out_path})", title_justify="left", show_header=False, show_edge=False
    )
    table.add_column("what", style="bold")
    table.add_column("value")
    errors = ", ".join(f"{k} {v}" for k, v in summary.errors_by_type.items()) or "none"
    gain = summary.mean_score_gain
    rows = [
        ("records", str(summary.records)),
        ("ok", f"[green]{summary.ok}[/]"),
        ("error", f"[red]{summary.error}[/] ({errors})" if summary.error else "0"),
        ("skipped (already ok)", str(summary.skipped)),
        ("run now", f"{summary.processed} ({summary.retried} retried)"),
        ("tokens", f"{summary.total_tokens} total, {summary.run_tokens} this run"),
        ("seconds", f"{summary.seconds:.1f}"),
        ("stop reasons", ", ".join(f"{k} {v}" for k, v in summary.stop_reasons.items()) or "-"),
        (
            "mean score gain",
            "-"
            if gain is None
            else f"{gain:+.2f} (first {summary.mean_first_score} -> final {summary.mean_final_score})",
        ),
    ]
    if summary.shard:
        rows.insert(0, ("shard", summary.shard))
    if summary.changed:
        rows.append(("input changed (redone)", f"[yellow]{summary.changed}[/]"))
    for what, value in rows:
        table.add_row(what, value)
    console.print(table)
    for sample in summary.error_samples:
        console.print(Text(f"  {_printable(sample)}", style="red"))
    for sample in summary.changed_samples:
        console.print(Text(f"  {_printable(sample)}", style="yellow"))
    if summary.stale_lock:
        console.print(f"[dim]took over the lock of a run that had died ({escape(summary.stale_lock)})[/]")
    if summary.error:
        console.print("[yellow]some records failed; rerun the same command to retry them[/]")

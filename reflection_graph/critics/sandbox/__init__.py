"""The sandbox: run untrusted commands (generated code, its tests, linters) in an isolated, limited subprocess.

`_process` runs a command (sync, async, or several together) and `_collect` runs one and collects what it produced;
`_plan` checks what a run is asked to do; `_isolation` finds the backend and builds its command line; the launcher,
the text of `_confine` then `_launch` passed as one `python -I -S -c` source, runs first (`_launch`: the supervisor
that dies with the parent) and inside the sandbox just before the command (`_confine`: mounts, capabilities, limits,
the socket filter); `_kill` ends a run's whole process tree. `_runner` and `_serve` are the scripts `CodeTestCritic`
copies next to the candidate (the checking side and the candidate side), with `_wire` (the plain data between them),
`_explain` (what a failing test compared) and `_channel` (the checking side's signed result pipe).
"""

from reflection_graph.critics.sandbox._isolation import (
    Isolation,
    IsolationUnavailableError,
    check_isolation,
    isolation_backend,
    resolve_isolation,
)
from reflection_graph.critics.sandbox._plan import DEFAULT_MAX_OUTPUT_BYTES, DEFAULT_MAX_PROCESSES
from reflection_graph.critics.sandbox._process import (
    SandboxOptions,
    SandboxResult,
    arun_sandboxed,
    arun_together,
    run_sandboxed,
    run_together,
)

__all__ = [
    "DEFAULT_MAX_OUTPUT_BYTES",
    "DEFAULT_MAX_PROCESSES",
    "Isolation",
    "IsolationUnavailableError",
    "SandboxOptions",
    "SandboxResult",
    "arun_sandboxed",
    "arun_together",
    "check_isolation",
    "isolation_backend",
    "resolve_isolation",
    "run_sandboxed",
    "run_together",
]

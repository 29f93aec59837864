"""The sandbox: run untrusted commands (generated code, its tests, linters) in an isolated, limited subprocess.

`_process` runs a command (sync, async, or several together) and `_collect` runs one and collects what it produced;
`_plan` checks what a run is asked to do; `_isolation` finds the backend and builds its command line; `_launch` runs
first (the supervisor that dies with the parent) and inside the sandbox (limits, mounts) just before the command;
`_kill` ends a run's whole process tree. `_runner` and `_serve` are the scripts `CodeTestCritic` copies next to the
candidate (the checking side and the candidate side).
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

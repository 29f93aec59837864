"""The sandbox: run untrusted commands (generated code, its tests, linters) in an isolated, limited subprocess.

`_process` launches and limits the child, `_launch` runs inside the sandbox just before the command, `_runner` is
the test runner `CodeTestCritic` copies next to the candidate.
"""

from reflection_graph.critics.sandbox._process import (
    DEFAULT_MAX_OUTPUT_BYTES,
    Isolation,
    IsolationUnavailableError,
    SandboxResult,
    arun_sandboxed,
    check_isolation,
    isolation_backend,
    resolve_isolation,
    run_sandboxed,
)

__all__ = [
    "DEFAULT_MAX_OUTPUT_BYTES",
    "Isolation",
    "IsolationUnavailableError",
    "SandboxResult",
    "arun_sandboxed",
    "check_isolation",
    "isolation_backend",
    "resolve_isolation",
    "run_sandboxed",
]

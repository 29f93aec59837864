"""Running a piece of code in a child process under a CPU-time limit: a guard against work that grows with the
square (or the power) of its input, read in CPU seconds the child spent, which another process on a busy machine
does not add to."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

CPU_SECONDS = 60
"""Some 50 times what each guarded check takes here (about 1 CPU second)."""


def within_cpu_limit(body: str, given: Any) -> Any:
    """Run `body` (Python, reading `given` as the JSON value `GIVEN` and printing its result as JSON) in a child
    limited to `CPU_SECONDS`; its printed value.

    Raises:
        AssertionError: the child did not finish within the limit, or failed.
    """
    code = (
        f"import json, resource, sys\n"
        f"resource.setrlimit(resource.RLIMIT_CPU, ({CPU_SECONDS}, {CPU_SECONDS} + 5))\n"
        f"GIVEN = json.loads(sys.stdin.read())\n" + textwrap.dedent(body)
    )
    done = subprocess.run(
        [sys.executable, "-c", code], input=json.dumps(given), capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, (
        f"the child did not finish within {CPU_SECONDS} CPU seconds: {done.stderr[-2000:]}"
    )
    return json.loads(done.stdout)

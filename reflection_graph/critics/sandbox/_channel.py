"""The checking side's signed result channel (stdlib only, copied into the sandbox next to `_runner.py`).

`open_channel` reads the per-run secret that the parent writes into the pipe SECRET_FD and closes that pipe, keeps
the result pipe RESULT_FD out of child processes, and returns `emit`, which writes each event as one line:

    <hex HMAC-SHA256 of the JSON> <JSON event with a sequence number "seq">

The parent accepts only correctly signed events in sequence (`reflection_graph.critics._test_report`).
"""

import hashlib
import hmac
import json
import os


def open_channel(secret_fd, result_fd):
    """Read the per-run secret and close its pipe; return the signed-event writer."""
    chunks = []
    while True:
        data = os.read(secret_fd, 4096)
        if not data:
            break
        chunks.append(data)
    os.close(secret_fd)
    os.set_inheritable(result_fd, False)
    signer = hmac.new(b"".join(chunks), digestmod=hashlib.sha256)
    del chunks
    counter = [0]

    def emit(**event):
        body = json.dumps({"seq": counter[0], **event}, default=str).encode("utf-8", "replace")
        counter[0] += 1
        tag = signer.copy()
        tag.update(body)
        line = tag.hexdigest().encode("ascii") + b" " + body + b"\n"
        while line:
            line = line[os.write(result_fd, line) :]

    return emit

"""Address families out of the sandbox (issue 38, fault 1).

Generated code under isolation made an `AF_VSOCK` socket, and binding the port a listener outside held gave
`EADDRINUSE`: vsock is not namespaced, so the sandbox shared the host's vsock address space (on a VM, the host's
vsock services were in reach). The seccomp filter refused only `AF_UNIX`. It is now an allow-list: `socket()`
makes `AF_INET` and `AF_INET6` sockets (in the sandbox's own, empty network namespace) and nothing else. Each
isolated run has a control with `isolation="off"`, where the same code makes the sockets, so the isolated
assertions can fail.
"""

from __future__ import annotations

import errno
import random
import socket
import textwrap
from collections.abc import Iterator

import pytest

from tests.critics.test_hostile_code import ISOLATED, REPORT_TESTS, isolation, judge  # noqa: F401  (a fixture)

AF_NETLINK, AF_VSOCK = 16, 40
FAMILIES = range(64)  # every family Linux has (AF_MAX is 46 on 6.x) and some it may add
KINDS = [int(k) for k in (socket.SOCK_STREAM, socket.SOCK_DGRAM, socket.SOCK_RAW, socket.SOCK_SEQPACKET)]

PROBER = textwrap.dedent(
    f"""
    import errno, socket

    def add(a, b):
        return a + b

    def _try(family, kind):
        try:
            socket.socket(family, kind).close()
            return "made"
        except OSError as exc:
            return errno.errorcode.get(exc.errno, str(exc.errno))

    def report():
        made, other = [], []  # the families not refused: made, or failing for another reason (no such family)
        for family in {list(FAMILIES)!r}:
            if family in (socket.AF_INET, socket.AF_INET6):
                continue
            got = [_try(family, kind) for kind in {KINDS!r}]
            if "made" in got:
                made.append(family)
            elif any(g != "EACCES" for g in got):
                other.append(family)
        out = [f"made {{made}}"] if made else []
        out += [f"not refused {{other}}"] if other else []
        for family in (socket.AF_INET, socket.AF_INET6):  # the sandbox's own network namespace: allowed
            if _try(family, socket.SOCK_STREAM) == "EACCES":  # (a kernel without IPv6 says EAFNOSUPPORT)
                out.append(f"family {{family}} refused")
        a, b = socket.socketpair()  # a connected Unix pair (asyncio's and multiprocessing's pipes) still works
        a.sendall(b"x")
        if b.recv(1) != b"x":
            out.append("socketpair broken")
        return out
    """
)


def _made_here(family: int) -> bool:
    """Whether this process (not sandboxed) can make a socket of `family`."""
    for kind in KINDS:
        try:
            socket.socket(family, kind).close()
            return True
        except OSError:
            pass
    return False


@pytest.mark.parametrize("isolation", ["off", *ISOLATED], indirect=True)
def test_only_internet_sockets_can_be_made(isolation: str) -> None:  # noqa: F811
    critique = judge(PROBER, isolation, tests=REPORT_TESTS, timeout_s=20)
    said = " ".join(critique.issues)
    if (
        isolation == "off"
    ):  # the control: netlink (and vsock where the kernel has it) is made without isolation
        here = [
            family
            for family in FAMILIES
            if family not in (socket.AF_INET, socket.AF_INET6) and _made_here(family)
        ]
        assert AF_NETLINK in here and f"made {here}" in said, said
    else:
        assert critique.is_acceptable, said
        assert critique.verdict_source == "outside", critique


@pytest.fixture
def vsock_listener() -> Iterator[int]:
    """A vsock service outside the sandbox, listening on a port of any CID; its port."""
    if not _made_here(AF_VSOCK):
        pytest.skip("this kernel makes no AF_VSOCK sockets (the family test still checks the refusal)")
    listener = socket.socket(AF_VSOCK, socket.SOCK_STREAM)
    for _ in range(20):
        port = random.randrange(20_000, 60_000)
        try:
            listener.bind((socket.VMADDR_CID_ANY, port))
            break
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                listener.close()
                pytest.skip(f"cannot listen on vsock here: {exc}")
    else:
        listener.close()
        pytest.skip("no free vsock port")
    listener.listen()
    try:
        yield port
    finally:
        listener.close()


def _binder(port: int) -> str:
    return textwrap.dedent(
        f"""
        import socket
        def add(a, b):
            return a + b
        def report():
            try:
                with socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM) as s:
                    s.bind((socket.VMADDR_CID_ANY, {port}))
                return ["bound the port the host holds"]
            except OSError as exc:
                return ["vsock blocked " + type(exc).__name__ + " " + str(exc.errno)]
        """
    )


@pytest.mark.parametrize("isolation", ["off", *ISOLATED], indirect=True)
def test_the_hosts_vsock_address_space_is_out_of_reach(isolation: str, vsock_listener: int) -> None:  # noqa: F811
    said = " ".join(judge(_binder(vsock_listener), isolation, tests=REPORT_TESTS, timeout_s=20).issues)
    if isolation == "off":  # the control: the port the listener holds is in use, the same address space
        assert f"vsock blocked OSError {errno.EADDRINUSE}" in said, said
    else:
        assert f"vsock blocked PermissionError {errno.EACCES}" in said, said

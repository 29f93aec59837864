"""The launcher's in-sandbox half: mounts, capabilities, limits and the socket filter (stdlib only).

Not run on its own: `_isolation` joins this file's text and `_launch.py`'s, in that order, into the one source it
passes as `python -I -S -c` (the command line and the `supervise` key are described in `_launch.py`). So it imports
nothing of ours, and `_launch.py` calls its functions by name. The CONFIG keys it serves:

- `unshare`: `{"workdir": ..., "hidden": [dirs], "keep": [paths]}`: we were started by `unshare --user
  --map-root-user --net --pid --mount --fork` and are process 1 of the new pid namespace. Each hidden dir gets an
  empty tmpfs, with only WORKDIR and the kept paths bound back in. Put a fresh `/dev` in place (a tmpfs holding only
  null, zero, full, random, urandom and tty, so no disk device is reachable), make every mount read-only except
  WORKDIR, then fork: the child drops every capability (bounding set included, and `no_new_privs`, so that neither
  remounting nor an `execve` as root gives any back), sets the limits and `execv`s the command; we reap children
  until the command ends and exit with its status (128 + signal when it was killed). When process 1 exits, the
  kernel kills everything left in the namespace.
- `limits`: `{"as": bytes, "cpu": s, "fsize": bytes, "nproc": n}` (-1: none), set just before the command's
  `execv`. `nproc` (RLIMIT_NPROC) is only given inside a new user namespace, where it counts the sandbox's own
  processes (the kernel does not apply it to the real root user: there the pids cgroup is the limit).
- `restrict_sockets` (inside the sandbox): just before the `execv`, a seccomp filter (`_socket_filter`) that the
  command and every process it starts keep. It is an allow-list: `socket()` makes only `AF_INET` and `AF_INET6`
  sockets (they live in the sandbox's own, empty network namespace) and fails with `EACCES` for every other
  address family: `AF_UNIX` (a read-only mount does not stop `connect()` on a socket file), `AF_VSOCK` (not
  namespaced: the host's and a VM host's vsock services), `AF_NETLINK` (kernel events), `AF_PACKET`,
  `AF_BLUETOOTH`, `AF_XDP`, `AF_ALG` and any family a later kernel adds. `socketpair(AF_UNIX, SOCK_STREAM |
  SOCK_SEQPACKET)` still works (asyncio's and multiprocessing's own pipes: a connected pair cannot be pointed
  anywhere else); every other `socketpair`, a Unix datagram pair (which could `sendto` a path) included, does not;
  `io_uring_setup` fails (io_uring makes sockets without the `socket` system call); system calls of another
  architecture's ABI (32-bit, x32) fail. Built for x86_64 and aarch64; on another machine the launcher refuses to
  run rather than run without it.
"""

import ctypes
import os
import resource

_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_NOATIME, _MS_NODIRATIME, _MS_BIND = 32, 1024, 2048, 4096
_MS_REC, _MS_PRIVATE, _MS_RELATIME = 16384, 1 << 18, 1 << 21
_MNT_DETACH = 2
_PR_CAPBSET_DROP, _PR_SET_NO_NEW_PRIVS, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 24, 38, 47, 4
_DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
_KEEP = (  # statvfs flag names -> the mount flag to keep when remounting (the names exist on Linux only)
    ("ST_NOSUID", _MS_NOSUID),
    ("ST_NODEV", _MS_NODEV),
    ("ST_NOEXEC", _MS_NOEXEC),
    ("ST_NOATIME", _MS_NOATIME),
    ("ST_NODIRATIME", _MS_NODIRATIME),
    ("ST_RELATIME", _MS_RELATIME),
)
_RLIMITS = (("as", "RLIMIT_AS"), ("cpu", "RLIMIT_CPU"), ("fsize", "RLIMIT_FSIZE"), ("nproc", "RLIMIT_NPROC"))


def _limit(name: str, value: int) -> None:
    if value < 0 or not hasattr(resource, name):
        return
    kind = getattr(resource, name)
    _soft, hard = resource.getrlimit(kind)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(kind, (value, value))


def _mount(
    libc: ctypes.CDLL, target: str | None, flags: int, source: str | None = None, fstype: str | None = None
) -> None:
    src = source.encode() if source is not None else None
    dst = target.encode() if target is not None else None
    kind = fstype.encode() if fstype is not None else None
    if libc.mount(src, dst, kind, ctypes.c_ulong(flags), None) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno), target)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _fresh_dev(libc: ctypes.CDLL, workdir: str) -> None:
    """Replace /dev by a tmpfs with bind mounts of the few harmless devices (and the usual symlinks)."""
    old = os.path.join(workdir, ".host-dev")
    os.mkdir(old)
    _mount(libc, old, _MS_BIND | _MS_REC, source="/dev")
    _mount(libc, "/dev", _MS_NOSUID | _MS_NOEXEC, source="tmpfs", fstype="tmpfs")
    for name in _DEVICES:
        if os.path.exists(os.path.join(old, name)):
            open(os.path.join("/dev", name), "w").close()
            _mount(libc, os.path.join("/dev", name), _MS_BIND, source=os.path.join(old, name))
    for name, target in (
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
    ):
        os.symlink(target, os.path.join("/dev", name))
    os.symlink("/proc/self/fd/2", "/dev/stderr")
    os.mkdir("/dev/shm")
    _check(libc.umount2(old.encode(), _MNT_DETACH), "umount " + old)
    os.rmdir(old)


def _drop_capabilities(libc: ctypes.CDLL) -> None:
    """Drop every capability for good: bounding set, ambient set, effective/permitted/inheritable, no_new_privs."""
    with open("/proc/sys/kernel/cap_last_cap", encoding="ascii") as handle:
        last = int(handle.read())
    for cap in range(last + 1):
        _check(libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0), f"drop capability {cap}")
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()  # two all-zero {effective, permitted, inheritable} sets
    _check(libc.capset(header, data), "capset")


def _hide(libc: ctypes.CDLL, hidden: list[str], keep: list[str]) -> None:
    """Cover each dir in `hidden` with an empty tmpfs, then bind the paths in `keep` that were inside it back."""
    for directory in hidden:
        if not os.path.isdir(directory) or os.path.islink(directory):
            continue
        inside = [p for p in keep if p.startswith(directory.rstrip("/") + "/") and os.path.exists(p)]
        handles = {path: os.open(path, os.O_PATH) for path in inside}  # reachable after the cover, by fd
        _mount(libc, directory, _MS_NOSUID | _MS_NODEV, source="tmpfs", fstype="tmpfs")
        for path in sorted(handles, key=len):
            if os.path.isdir(f"/proc/self/fd/{handles[path]}"):
                os.makedirs(path, exist_ok=True)
            else:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                open(path, "a").close()
            _mount(libc, path, _MS_BIND | _MS_REC, source=f"/proc/self/fd/{handles[path]}")
            os.close(handles[path])


def _read_only_except(workdir: str, hidden: list[str], keep: list[str]) -> None:
    """Remount every mount read-only (keeping its locked flags), except a fresh bind mount of `workdir`."""
    libc = ctypes.CDLL(None, use_errno=True)
    _mount(libc, "/", _MS_REC | _MS_PRIVATE)
    _fresh_dev(libc, workdir)
    _hide(libc, hidden, [workdir, *keep])
    _mount(libc, workdir, _MS_BIND | _MS_REC, source=workdir)
    with open("/proc/self/mountinfo", encoding="utf-8") as handle:
        points = [line.split()[4] for line in handle]
    for point in points:
        path = point.encode().decode("unicode_escape")  # mountinfo escapes spaces as \040
        if path == workdir:
            continue
        try:
            flags = os.statvfs(path).f_flag
        except OSError:
            continue
        extra = 0
        for name, ms in _KEEP:
            if flags & getattr(os, name, 0):
                extra |= ms
        try:
            _mount(libc, path, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | extra)
        except OSError as exc:
            if not flags & os.ST_RDONLY and exc.errno != 2:  # a mount we cannot make read-only: refuse
                raise
    os.chdir(workdir)  # the old cwd points into the (now read-only) underlying mount


_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2
_AF_UNIX, _SOCK_STREAM, _SOCK_SEQPACKET, _SOCK_TYPE_MASK = 1, 1, 5, 0xF
# The families `socket()` may make: AF_INET and AF_INET6, in the sandbox's own network namespace. An allow-list.
_SOCKET_FAMILIES = (2, 10)
_EACCES, _ENOSYS = 13, 38
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
_SYSCALLS = {  # machine: (audit arch, socket, socketpair, io_uring_setup, first number of another ABI or None)
    "x86_64": (0xC000003E, 41, 53, 425, 0x40000000),
    "aarch64": (0xC00000B7, 198, 199, 425, None),
}


def _socket_filter(machine: str) -> bytes:
    """The seccomp BPF program (`struct sock_filter[]`) that allows only the sockets the sandbox needs; see the
    module docstring."""
    import struct

    if machine not in _SYSCALLS:
        raise OSError(f"no socket filter for {machine!r} (only {', '.join(_SYSCALLS)}): cannot isolate here")
    arch, socket_nr, pair_nr, uring_nr, other_abi = _SYSCALLS[machine]
    program: list[tuple] = []  # (code, true label or 0, false label or 0, k); labels are resolved below

    def load(offset: int) -> None:  # A = the 32-bit word at `offset` of struct seccomp_data
        program.append((0x20, 0, 0, offset))

    def jump(op: int, k: int, true: object, false: object) -> None:  # op: 0x15 jeq, 0x35 jge
        program.append((op, true, false, k))

    def ret(k: int) -> None:
        program.append((0x06, 0, 0, k))

    def label(name: str) -> None:
        program.append(("label", name))

    deny, gone = _RET_ERRNO | _EACCES, _RET_ERRNO | _ENOSYS
    load(4)  # arch
    jump(0x15, arch, "native", "gone")
    label("native")
    load(0)  # system call number
    if other_abi is not None:
        jump(0x35, other_abi, "gone", "next")
        label("next")
    jump(0x15, socket_nr, "socket", "not-socket")
    label("not-socket")
    jump(0x15, pair_nr, "pair", "not-pair")
    label("not-pair")
    jump(0x15, uring_nr, "gone", "allow")
    label("socket")
    load(16)  # args[0], the address family (an int: its low word)
    for family in _SOCKET_FAMILIES:
        jump(0x15, family, "allow", f"not-{family}")
        label(f"not-{family}")
    ret(deny)  # every other family
    label("pair")
    load(16)
    jump(0x15, _AF_UNIX, "unix-pair", "deny")
    label("unix-pair")
    load(24)  # args[1], the type, without SOCK_NONBLOCK / SOCK_CLOEXEC
    program.append((0x54, 0, 0, _SOCK_TYPE_MASK))  # A &= mask
    jump(0x15, _SOCK_STREAM, "allow", "not-stream")
    label("not-stream")
    jump(0x15, _SOCK_SEQPACKET, "allow", "deny")
    label("allow")
    ret(_RET_ALLOW)
    label("deny")
    ret(deny)
    label("gone")
    ret(gone)
    at: dict[object, int] = {}
    code: list[tuple] = []
    for item in program:
        if item[0] == "label":
            at[item[1]] = len(code)
        else:
            code.append(item)
    out = b""
    for index, (op, true, false, k) in enumerate(code):
        jt = at[true] - index - 1 if true else 0
        jf = at[false] - index - 1 if false else 0
        if not (0 <= jt < 256 and 0 <= jf < 256):  # a bug in the program above, never a user's input
            raise OSError("bad seccomp jump")
        out += struct.pack("=HBBI", op, jt, jf, k)
    return out


def _restrict_sockets() -> None:
    """Install `_socket_filter` on this process (kept across `execv`, inherited by every child)."""
    program = _socket_filter(os.uname().machine)

    class _Fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]

    prog = _Fprog(len(program) // 8, program)
    libc = ctypes.CDLL(None, use_errno=True)
    _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    _check(libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0), "seccomp filter")


def _exec(argv: list[str], limits: dict, restrict_sockets: bool = False) -> None:
    for key, name in _RLIMITS:
        if key in limits:
            _limit(name, int(limits[key]))
    _limit("RLIMIT_CORE", 0)
    if restrict_sockets:
        _restrict_sockets()
    os.execv(argv[0], argv)


def _init(argv: list[str], limits: dict, restrict_sockets: bool) -> int:
    child = os.fork()
    if child == 0:
        try:
            _drop_capabilities(ctypes.CDLL(None, use_errno=True))
            _exec(argv, limits, restrict_sockets)
        except BaseException as exc:
            os.write(2, f"sandbox launcher: {exc}\n".encode())
        finally:
            os._exit(127)
    while True:
        pid, status = os.wait()
        if pid == child:
            code = os.waitstatus_to_exitcode(status)
            return 128 - code if code < 0 else code

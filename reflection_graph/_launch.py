"""Launcher that runs inside the sandbox just before the sandboxed command (stdlib only, `python -I -S -c`).

    python -I -S -c <this file> MODE WORKDIR AS_BYTES CPU_S FSIZE_BYTES COMMAND...

- MODE `plain` (no isolation, or inside bubblewrap): set the resource limits and `execv` the command.
- MODE `unshare`: we were started by `unshare --user --map-root-user --net --pid --mount --fork` and are process 1
  of the new pid namespace. Make every mount read-only except WORKDIR, then fork: the child sets the limits and
  `execv`s the command; we reap children until the command ends and exit with its status (128 + signal when it was
  killed). When process 1 exits, the kernel kills everything left in the namespace.

`_sandbox` reads this file and passes it with `-c`, so the limits are in place before the command runs (instead of
`preexec_fn`, which CPython documents as unsafe in a threaded parent).
"""

import ctypes
import os
import resource
import sys

_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_NOATIME, _MS_NODIRATIME, _MS_BIND = 32, 1024, 2048, 4096
_MS_REC, _MS_PRIVATE, _MS_RELATIME = 16384, 1 << 18, 1 << 21
_KEEP = (
    (os.ST_NOSUID, _MS_NOSUID),
    (os.ST_NODEV, _MS_NODEV),
    (os.ST_NOEXEC, _MS_NOEXEC),
    (os.ST_NOATIME, _MS_NOATIME),
    (os.ST_NODIRATIME, _MS_NODIRATIME),
    (os.ST_RELATIME, _MS_RELATIME),
)


def _limit(name: str, value: int) -> None:
    if value < 0 or not hasattr(resource, name):
        return
    kind = getattr(resource, name)
    _soft, hard = resource.getrlimit(kind)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(kind, (value, value))


def _mount(libc: ctypes.CDLL, target: str | None, flags: int, source: str | None = None) -> None:
    src = source.encode() if source is not None else None
    dst = target.encode() if target is not None else None
    if libc.mount(src, dst, None, ctypes.c_ulong(flags), None) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno), target)


def _read_only_except(workdir: str) -> None:
    """Remount every mount read-only (keeping its locked flags), except a fresh bind mount of `workdir`."""
    libc = ctypes.CDLL(None, use_errno=True)
    _mount(libc, "/", _MS_REC | _MS_PRIVATE)
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
        for bit, ms in _KEEP:
            if flags & bit:
                extra |= ms
        try:
            _mount(libc, path, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | extra)
        except OSError as exc:
            if not flags & os.ST_RDONLY and exc.errno != 2:  # a mount we cannot make read-only: refuse
                raise
    os.chdir(workdir)  # the old cwd points into the (now read-only) underlying mount


def _exec(argv: list[str], memory: int, cpu: int, fsize: int) -> None:
    _limit("RLIMIT_AS", memory)
    _limit("RLIMIT_CPU", cpu)
    _limit("RLIMIT_FSIZE", fsize)
    _limit("RLIMIT_CORE", 0)
    os.execv(argv[0], argv)


def _init(argv: list[str], memory: int, cpu: int, fsize: int) -> int:
    child = os.fork()
    if child == 0:
        try:
            _exec(argv, memory, cpu, fsize)
        finally:
            os._exit(127)
    while True:
        pid, status = os.wait()
        if pid == child:
            code = os.waitstatus_to_exitcode(status)
            return 128 - code if code < 0 else code


def main() -> None:
    mode, workdir = sys.argv[1], sys.argv[2]
    memory, cpu, fsize = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    command = sys.argv[6:]
    if mode == "unshare":
        _read_only_except(workdir)
        sys.stdout.flush()
        os._exit(_init(command, memory, cpu, fsize))
    _exec(command, memory, cpu, fsize)


if __name__ == "__main__":
    main()

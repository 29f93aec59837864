"""Launcher that runs inside the sandbox just before the sandboxed command (stdlib only, `python -I -S -c`).

    python -I -S -c <this file> MODE WORKDIR HIDE AS_BYTES CPU_S FSIZE_BYTES COMMAND...

- MODE `plain` (no isolation, or inside bubblewrap): set the resource limits and `execv` the command.
- MODE `unshare`: we were started by `unshare --user --map-root-user --net --pid --mount --fork` and are process 1
  of the new pid namespace. HIDE is JSON `[dirs to hide, paths to keep visible in them]`: each of those dirs gets
  an empty tmpfs, with only WORKDIR and the kept paths bound back in. Put a fresh `/dev` in place (a tmpfs holding only null, zero, full, random, urandom and
  tty, so no disk device is reachable), make every mount read-only except WORKDIR, then fork: the child drops every
  capability (bounding set included, and `no_new_privs`, so that neither remounting nor an `execve` as root gives
  any back), sets the limits and `execv`s the command; we reap children until the command ends and exit with its
  status (128 + signal when it was killed). When process 1 exits, the kernel kills everything left in the namespace.

`_sandbox` reads this file and passes it with `-c`, so the limits are in place before the command runs (instead of
`preexec_fn`, which CPython documents as unsafe in a threaded parent).
"""

import ctypes
import json
import os
import resource
import sys

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
            _drop_capabilities(ctypes.CDLL(None, use_errno=True))
            _exec(argv, memory, cpu, fsize)
        except BaseException as exc:
            os.write(2, f"sandbox launcher: {exc}\n".encode())
        finally:
            os._exit(127)
    while True:
        pid, status = os.wait()
        if pid == child:
            code = os.waitstatus_to_exitcode(status)
            return 128 - code if code < 0 else code


def main() -> None:
    mode, workdir, hide = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    memory, cpu, fsize = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
    command = sys.argv[7:]
    if mode == "unshare":
        _read_only_except(workdir, *hide)
        sys.stdout.flush()
        os._exit(_init(command, memory, cpu, fsize))
    _exec(command, memory, cpu, fsize)


if __name__ == "__main__":
    main()

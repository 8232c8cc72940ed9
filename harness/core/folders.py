"""Whether a folder castguard names can be used before anything runs: not a file, not a dangling link, and, for
the folders it writes, writable (:func:`check_folder`, :func:`check_writable`)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from harness.core.errors import NotWritable
from harness.core.files import check_folder_error, not_writable


def check_folder(folder: Path, *, what: str) -> None:
    """Raise :class:`NotWritable` when ``folder`` (``what``: the option that names it) cannot be a folder: a file or a
    dangling symbolic link stands where it, or one of its parents, belongs. A missing folder is fine (made when
    written) and so is a read-only one (read-only goldens are checked, not written)."""
    error = check_folder_error(Path(folder), what=what)
    if error is not None:
        raise error


def check_writable(folder: Path, *, what: str) -> None:
    """:func:`check_folder`, then make ``folder`` if needed and write (and remove) a temporary file in it: a folder
    castguard must write (the report, the history) that is read-only or not permitted is one :class:`NotWritable`
    naming it before anything runs, not a traceback at the end. Folders the probe made are removed again, so that
    the folder is made by whoever writes it (:func:`own_folder` puts a ``.gitignore`` only into folders it makes).

    Two runs started together in one project probe the same missing folder: one may remove the folder it made
    while the other writes its probe there (the probe is then made again), and a folder that another run's probe
    or report is in is left where it is."""
    check_folder(folder, what=what)
    for _ in range(PROBE_ATTEMPTS):
        made = [p for p in (folder, *folder.parents) if not p.exists()]
        try:
            folder.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=folder, prefix=".castguard-probe.", suffix=".tmp"):
                pass
        except FileNotFoundError:
            continue  # another run's probe removed the folder it had made, between our mkdir and our write
        except OSError as err:
            refused = not_writable(folder, err)
            if refused is None:
                raise
            raise NotWritable(folder=refused.folder, problem=f"{what}: {refused.problem}", fix=refused.fix) from None
        _remove_if_empty(made)
        return
    raise NotWritable(
        folder=folder,
        problem=f"{what}: it vanished {PROBE_ATTEMPTS} times while castguard checked it could write there",
        fix="let the program that keeps removing it finish, or pass another folder",
    )


PROBE_ATTEMPTS = 5


def _remove_if_empty(made: list[Path]) -> None:
    """Remove the folders the probe made, deepest first, stopping at the first one another run is using (not
    empty) or already removed."""
    for path in made:
        try:
            path.rmdir()
        except OSError:
            return

"""``from_pretrained("model.tar.gz")`` unpacks the archive safely and leaves it where it was.

fairseq's ``hub_utils.from_pretrained`` hands a model or data name that is not a folder to
``file_utils.load_archive_file``, which (fairseq/file_utils.py):

* extracts the archive into a temporary folder, **deletes the archive** (``os.remove``, the
  user's own file when it is local) and moves the members' common name prefix into its place:
  the user's ``model.tar.gz`` is now a folder of that name. When the members share a prefix
  that is no folder (``dict.en.txt``, ``dict.de.txt``: "dict.") the move fails with a
  ``FileNotFoundError`` traceback, the archive already gone;
* calls ``tarfile.extractall`` with no filter: a member named ``model/../../x`` is written
  outside the extraction folder, and so is a file written through a symlink member;
* picks the decompression from the file name's last extension (``r:gz``), so ``.tgz`` fails;
* for an ``http://`` name, imports ``requests`` (not a fairseq requirement):
  ``ModuleNotFoundError``.

For any fairseq model: a local archive is unpacked into a new folder of its own (removed when
the process ends), the archive untouched. Every member is checked first: one that would land
outside that folder (an absolute name, ``..``), a link (symbolic or hard) or a device or FIFO
is refused in one line naming it, before anything is written. The model folder is the
archive's one top folder if it has one, else the extraction folder. A URL without
``requests`` installed is one line. Folders and everything else go to fairseq as before.
"""
import atexit
import functools
import importlib.util
import os
import shutil
import tarfile
import tempfile

from fairseq import file_utils

from .errors import UserError
from .patching import FIX, patch, wrap_once


def _refusal(archive, member, extract_to):
    """Why ``member`` of ``archive`` may not be unpacked into ``extract_to``, or None."""
    if member.issym() or member.islnk():
        return f"a link to {member.linkname!r}"
    if member.ischr() or member.isblk() or member.isfifo():
        return "a device or FIFO"
    if not (member.isfile() or member.isdir()):
        return "neither a file nor a folder"
    target = os.path.realpath(os.path.join(extract_to, member.name))
    if os.path.isabs(member.name) or os.path.commonpath([target, extract_to]) != extract_to:
        return "a path that leads outside the folder it is unpacked into"
    return None


def unpack(archive):
    """Unpack the tar archive ``archive`` into a new folder; return the model folder in it."""
    try:
        tar = tarfile.open(archive, "r:*")
    except tarfile.TarError as err:
        raise UserError(f"from_pretrained: {archive} is not a tar archive fairseq can read ({err}): give a model "
                        "folder, or a .tar.gz, .tar.bz2 or .tar.xz of one") from None
    folder = os.path.realpath(tempfile.mkdtemp(prefix="fairseq_archive_"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    with tar:
        members = tar.getmembers()
        for member in members:
            why = _refusal(archive, member, folder)
            if why:
                raise UserError(f"from_pretrained: {archive} holds {member.name!r}, {why}: refused, nothing was "
                                "unpacked; unpack the archive yourself and give the folder")
        tar.extractall(folder, members=members, filter="data")
    tops = {m.name.split("/", 1)[0] for m in members if m.name not in (".", "./")}
    top = os.path.join(folder, next(iter(tops))) if len(tops) == 1 else folder
    return top if os.path.isdir(top) else folder


def _unpacking_safely(load_archive_file):
    @functools.wraps(load_archive_file)
    def wrapper(archive_file):
        name = str(archive_file)
        if "://" in name and name.split("://", 1)[0] in ("http", "https") \
                and importlib.util.find_spec("requests") is None:
            raise UserError(f"from_pretrained: {name} is a URL, and fairseq downloads with the requests package, "
                            "which is not installed: pip install requests, or download the file and give its path")
        if os.path.isfile(name) and tarfile.is_tarfile(name):
            return unpack(name)
        return load_archive_file(archive_file)

    return wrapper


@patch(FIX, "from_pretrained on a local .tar.gz/.tar.bz2/.tgz or a URL, for every fairseq model: unpacked into a "
       "folder of its own, the archive left as it was")
def patch_archives():
    """``file_utils.load_archive_file``: a local archive unpacked into a folder of its own,
    checked member by member; a URL without ``requests`` in one line."""
    wrap_once(file_utils, "load_archive_file", _unpacking_safely)

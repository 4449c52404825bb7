"""Downloading an archive for the fetch scripts (stanford_dogs.py, tiny_imagenet.py): to a
`.part` file renamed when complete, so an interrupted download is never taken for a whole one;
offline, a message that says where to put the file by hand and which stand-in to use instead.
"""
import sys
import urllib.error
import urllib.request


def download(url, dest, size, script, standin):
    """Fetches `url` to `dest` (a pathlib.Path) unless it is there; exits with a message naming
    `script` and the stand-in command `standin` when the network fails."""
    if dest.exists():
        return
    print(f"downloading {url} (about {size}) ...", flush=True)
    part = dest.with_name(dest.name + ".part")
    try:
        urllib.request.urlretrieve(url, part)
    except (urllib.error.URLError, OSError) as e:
        part.unlink(missing_ok=True)
        sys.exit(
            f"{script}: cannot download {url}: {e}\n"
            f"Offline? Copy {dest.name} into {dest.parent} by other means and run this again, "
            f"or use the stand-in: {standin}"
        )
    part.rename(dest)

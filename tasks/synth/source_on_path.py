"""Run inside an image after a regular (non-editable) install of the project: its installed
modules are removed and its source folder put on the path, so the tests import the files in the
work directory (where a task's bug and fix are), as an editable install would. The project's
metadata (version, entry points) stays installed.

Usage: python3 source_on_path.py DISTRIBUTION WORKDIR
"""

import re
import sys
from importlib import metadata
from pathlib import Path


def normalised(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def main(name: str, workdir: str) -> None:
    dist = next((d for d in metadata.distributions() if normalised(d.metadata["Name"]) == normalised(name)), None)
    if dist is None:
        sys.exit(f"{name} is not installed: nothing to put on the path")
    roots = [Path(workdir) / "src", Path(workdir)]
    tops = {
        f.parts[0]
        for f in dist.files or []
        if len(f.parts) and not f.parts[0].endswith((".dist-info", ".data")) and not f.parts[0].startswith("..")
    }
    sources = {}
    for top in tops:
        stem = top.removesuffix(".py")
        found = next((r for r in roots if (r / stem).is_dir() or (r / f"{stem}.py").is_file()), None)
        if found is not None:
            sources[top] = found
    if not sources:
        sys.exit(f"none of {sorted(tops)} (what {name} installs) is in {workdir} or {workdir}/src")
    for file in dist.files:
        if file.parts and file.parts[0] in sources:
            Path(dist.locate_file(file)).unlink(missing_ok=True)
    for top in sources:  # the emptied folders too: none may shadow the source as a namespace package
        folder = Path(dist.locate_file(top))
        for child in sorted(folder.rglob("*"), key=lambda p: len(p.parts), reverse=True) if folder.is_dir() else []:
            if child.is_dir() and not any(child.iterdir()):
                child.rmdir()
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
    # Beside the distribution's own metadata: sysconfig's purelib is not where pip installs on every base
    # (bullseye's Python 3.9 names /usr/lib/python3.9/site-packages, pip uses /usr/local/.../dist-packages).
    site = Path(dist.locate_file(""))
    (site / f"_{normalised(name)}_source.pth").write_text("".join(sorted({f"{p}\n" for p in sources.values()})))
    print(f"{name}: {', '.join(sorted(sources))} imported from {', '.join(sorted({str(p) for p in sources.values()}))}")


if __name__ == "__main__":
    main(*sys.argv[1:3])

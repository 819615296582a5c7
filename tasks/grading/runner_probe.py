"""Run inside the grading sandbox by the test interpreter as `python -I -S -B runner_probe.py OUT WORKDIR [ROOT...]`
(no .pth file, sitecustomize or bytecode write runs in it): what the interpreter's installation holds, written
as JSON to OUT, with the sandbox's processes. With `--kill PIDS` first (a comma-separated list of `pid:start`, the
processes of an earlier probe), every other process but this one's ancestors is killed before the walk: install
steps may leave one behind that edits files later.

Every file under the interpreter's prefixes, its site directories and ROOTs (the workdir and conda's package
cache left out) is recorded by inode, change time, size and mode: a write, a rename or a chmod changes the change
time, which no process in the sandbox can set back. The files a reinstall of the package rewrites with the same
content are hashed too (`.pth`, editable finders, egg-links, entry points, scripts in bin/), and the pytest11
entry points and the setuptools finder templates are read out.

Kept to Python 3.5's syntax and standard library: SWE-bench's environments run 3.5 to 3.11.
"""

import ast
import hashlib
import json
import os
import signal
import site
import sys

HASHED_NAMES = ("entry_points.txt",)
HASHED_SUFFIXES = (".pth", ".egg-link")
RUNNER_GROUPS = ("pytest11",)
# Modules imported by the runner or at interpreter start-up by name, wherever they are found first.
SHADOWS = ("pytest", "_pytest", "pluggy", "py", "unittest", "sitecustomize", "usercustomize")


def hashed(path):
    name = os.path.basename(path)
    in_bin = os.path.basename(os.path.dirname(path)) == "bin"
    return name in HASHED_NAMES or name.endswith(HASHED_SUFFIXES) or name.startswith("__editable__") or in_bin


def sha(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def entry_points(path):
    """The runner groups' entries of one entry_points.txt, as "group: name = value"."""
    found, group = [], ""
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            line = line.strip()
            if line.startswith("[") and line.endswith("]"):
                group = line[1:-1].strip()
            elif group in RUNNER_GROUPS and "=" in line and not line.startswith(("#", ";")):
                name, value = line.split("=", 1)
                found.append("%s: %s = %s" % (group, name.strip(), value.strip()))
    return found


def finder_template(path):
    """setuptools' template of the editable finder module, read from its source without importing it."""
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read())
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if any(getattr(t, "id", "") == "_FINDER_TEMPLATE" for t in targets) and getattr(node, "value", None):
            try:
                return ast.literal_eval(node.value)
            except ValueError:
                return None
    return None


def processes():
    """Every process of the sandbox as `pid:start time` (a pid alone may be reused)."""
    found = []
    for pid in os.listdir("/proc"):
        try:
            with open("/proc/%s/stat" % pid) as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
            found.append((int(pid), int(fields[1]), "%s:%s" % (pid, fields[19])))
        except (OSError, ValueError, IndexError):
            continue
    return found


def kill_strays(kept):
    parents = {pid: parent for pid, parent, _ in processes()}
    pid = os.getpid()
    while pid in parents and pid not in kept:
        kept.add(pid)
        pid = parents[pid]
    for _ in range(50):
        strays = [pid for pid, _, key in processes() if pid not in kept and key not in kept]
        if not strays:
            return
        for stray in strays:
            try:
                os.kill(stray, signal.SIGKILL)
            except OSError:
                pass


def main(argv):
    if argv[:1] == ["--kill"]:
        kill_strays(set(argv[1].split(",")))
        argv = argv[2:]
    out, workdir, extra = argv[0], os.path.realpath(argv[1]), argv[2:]
    sites = list(site.getsitepackages()) + [site.getusersitepackages()]
    roots = {sys.prefix, sys.exec_prefix, getattr(sys, "base_prefix", sys.prefix), os.path.dirname(sys.executable)}
    roots = sorted({os.path.realpath(r) for r in list(roots) + sites + extra if r and os.path.isdir(r)})
    skipped = {workdir, "/proc", "/sys", "/dev", "/tmp"} | {os.path.join(r, "pkgs") for r in roots}
    files, hashes, plugins, templates = {}, {}, {}, []
    for root in roots:
        for folder, dirs, names in os.walk(root):
            dirs[:] = [d for d in dirs if os.path.join(folder, d) not in skipped]
            for name in names + [d for d in dirs if os.path.islink(os.path.join(folder, d))]:
                path = os.path.join(folder, name)
                try:
                    info = os.lstat(path)
                except OSError:
                    continue
                files[path] = [info.st_ino, info.st_ctime_ns, info.st_size, info.st_mode]
                if os.path.islink(path):  # a link out of the roots (Debian's sitecustomize into /etc): its target too
                    try:
                        target = os.stat(path)
                        files[path] += [target.st_ino, target.st_ctime_ns, target.st_size, target.st_mode]
                    except OSError:
                        pass
                regular = not os.path.islink(path) and os.path.isfile(path)
                if regular and hashed(path) and info.st_size < (1 << 22):
                    hashes[path] = sha(path)
                if regular and name == "entry_points.txt":
                    plugins.update((e, path) for e in entry_points(path))
                if regular and name == "editable_wheel.py" and folder.endswith(os.path.join("setuptools", "command")):
                    template = finder_template(path)
                    if template:
                        templates.append(template)
    # Folders outside the roots on the path: the workdir (`python -m pytest` puts it first) and those .pth
    # lines add (a development install). Their metadata counts, and so does a module there named like the
    # runner or a start-up hook: install steps may write one where the patch could not.
    folders = [workdir]
    for path in [p for p in hashes if p.endswith(".pth")]:
        with open(path, encoding="utf-8", errors="replace") as handle:
            folders += [line.strip() for line in handle if line.strip() and not line.startswith(("#", "import"))]
    shadows = []
    for folder in sorted(set(f for f in folders if os.path.isdir(f))):
        for name in sorted(os.listdir(folder)):
            meta = os.path.join(folder, name, "entry_points.txt")
            if name.endswith((".egg-info", ".dist-info")) and os.path.isfile(meta):
                plugins.update((e, meta) for e in entry_points(meta))
            if name.split(".")[0] in SHADOWS and (name.endswith(".py") or "." not in name):
                shadows.append(os.path.join(folder, name))
    texts = {}
    for path in hashes:  # what the comparison reads: start-up lines and editable finders
        if path.endswith(".pth") or os.path.basename(path).startswith("__editable__"):
            with open(path, encoding="utf-8", errors="replace") as handle:
                texts[path] = handle.read()
    report = {
        "executable": sys.executable,
        "roots": roots,
        "files": files,
        "hashes": hashes,
        "texts": texts,
        "plugins": plugins,
        "templates": templates,
        "shadows": shadows,
        "processes": [key for _, _, key in processes()],
    }
    with open(out, "w") as handle:
        json.dump(report, handle)


if __name__ == "__main__":
    main(sys.argv[1:])

"""Asks an sdist's PEP 517 build backend what else it needs to build a wheel; run by a base's own Python.

    PYTHONPATH=SITE python3 -S ask_backend.py SOURCE BACKEND BACKEND_PATH_JSON

SOURCE is the unpacked sdist; SITE holds the backend's declared requirements. Backends name some
requirements only here (meson-python asks for ninja, scikit-build-core for cmake, setuptools for wheel on
old releases), and only the base's Python can say which, since the answer may depend on the interpreter. Prints one line, `ASKED <json list>`.
Kept to what Python 3.6's standard library has: it runs on every base.
"""

import importlib
import json
import os
import sys


def main() -> None:
    root, backend, paths = os.path.abspath(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
    os.chdir(root)
    sys.path[:0] = [os.path.join(root, path) for path in paths]
    module, _, attribute = backend.partition(":")
    hooks = importlib.import_module(module)
    for part in filter(None, attribute.split(".")):
        hooks = getattr(hooks, part)
    ask = getattr(hooks, "get_requires_for_build_wheel", None)
    print("ASKED " + json.dumps(list(ask() if ask else [])))


if __name__ == "__main__":
    main()

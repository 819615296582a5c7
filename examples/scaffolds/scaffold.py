"""`--scaffold examples.scaffolds.scaffold:bash_agent`, or `--plugin examples.scaffolds.scaffold --scaffold bash-agent`."""

import sys
from pathlib import Path

from harness.api import Scaffold, register_scaffold

bash_agent = register_scaffold(Scaffold("bash-agent", [sys.executable, str(Path(__file__).with_name("bash_agent.py"))]))

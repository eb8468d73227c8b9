"""`python verifier/toolgate_evidence bundle.json`: the folder runs as it is, without an install
(its parent on the path, so the package imports as itself; nothing else is added)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from toolgate_evidence.cli import main

sys.exit(main())

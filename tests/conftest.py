"""Make `ansible_collections.gb10.serving` importable from a plain checkout (collections/ links the repo in)."""

import sys
from pathlib import Path

COLLECTIONS = Path(__file__).resolve().parents[1] / "collections"
if str(COLLECTIONS) not in sys.path:
    sys.path.insert(0, str(COLLECTIONS))

"""Put the stand-in's sources (sim/standin/src) on sys.path: its engine is tested on the host, without Docker."""

import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[4] / "sim" / "standin" / "src"
if str(SRC) not in sys.path:
    sys.path.insert(0, str(SRC))

"""rasp-lab benchmarks (`make bench` runs them all; see docs/benchmarks.md)."""

from __future__ import annotations

import platform
from pathlib import Path


def cpu_model() -> str:
    """The CPU's model name (from /proc/cpuinfo; ``platform.processor()`` elsewhere), recorded
    with every benchmark result because absolute times depend on the machine."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"

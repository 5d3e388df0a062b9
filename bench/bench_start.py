"""What starting a backend costs an engine job, against a plain `import keras` of the same one.

Every engine job (train, probe, fits try, parity, calibrate, model info) is a fresh process
that starts its Keras backend, so the try-out pays this about 16 times and the test suite
hundreds. The engine's start skips what Keras and TensorFlow import for features no job uses
(engine/environment.py: scikit-learn, pandas, matplotlib, and JAX beside TensorFlow). Each
round starts a fresh interpreter once each way, in turns, and times it from the outside.

    python bench/bench_start.py --rounds 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

from common import machine

WAYS = {
    "plain import": "import os, sys; os.environ['KERAS_BACKEND'] = sys.argv[1]; import keras",
    "engine start": "import sys; from mptbench.engine.backends import start; start(sys.argv[1])",
}


def seconds(code: str, backend: str) -> float:
    began = time.monotonic()
    subprocess.run([sys.executable, "-c", code, backend], check=True, capture_output=True,
                   env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    return time.monotonic() - began


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--backend", default="tensorflow")
    args = parser.parse_args(argv)
    times: dict[str, list[float]] = {way: [] for way in WAYS}
    seconds(WAYS["plain import"], args.backend)  # the page cache warm for both
    for _ in range(args.rounds):
        for way, code in WAYS.items():
            times[way].append(seconds(code, args.backend))
    print(f"CPU: {machine()}; {args.backend}, {args.rounds} rounds, a fresh process each")
    for way, values in times.items():
        print(f"{way}: median {statistics.median(values):.2f} s "
              f"({', '.join(f'{v:.2f}' for v in values)})")
    ratio = statistics.median(times["engine start"]) / statistics.median(times["plain import"])
    print(f"engine start / plain import: {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

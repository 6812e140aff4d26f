"""``python -m bench.claims``: what reading a body for claims costs per byte
(``reconciler.discovery.claims``), on an ordinary body, on a body dense with "replaces"
sentences that all name one word, and on the crafted note of the attack (each sentence names a
word never seen before; before patterns were compiled once, each such sentence compiled two:
~7 ms a sentence). Process CPU time, best of ``--repeat`` runs.

    .venv/bin/python -m bench.claims                 # bodies of ~110 KB
    .venv/bin/python -m bench.claims --sentences 30000
"""

from __future__ import annotations

import argparse
import random
import string
import time

from reconciler.discovery.claims import MAX_CHARS, read_claims


def bodies(sentences: int) -> dict[str, str]:
    rng = random.Random(7)
    crafted = "".join(
        f"this document replaces {''.join(rng.choices(string.ascii_lowercase, k=9))} {n}. "
        for n in range(sentences)
    )
    dense = "".join(f"this document replaces something {n}. " for n in range(sentences))
    plain = ("the quick brown fox jumps over the lazy dog and reads the manual. " * sentences)[
        : len(crafted)
    ]
    return {"ordinary": plain, "dense, one word": dense, "crafted, a new word each": crafted}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sentences", type=int, default=3_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"claims read from at most {MAX_CHARS:,} characters of a body")
    for name, body in bodies(args.sentences).items():
        best = float("inf")
        for _ in range(args.repeat):
            start = time.process_time()
            read_claims(body, ("pep", 1))
            best = min(best, time.process_time() - start)
        read = min(len(body), MAX_CHARS)
        print(f"{name:>26}: {len(body):>9,} chars, {best:.3f} s, {best / read * 1e9:,.0f} ns/char")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The instruction mix of the hot loops of a built IFMA kernel, read from its disassembly.

For every loop (a backward jump) with at least N products (`vpmadd52`) in the functions
named, one row: its instructions, products (and of them those with a memory operand),
masked loads (blends) and masked stores, other vector operations (zeroing idioms left out),
register-to-register moves, loads and stores. Nested loops each get a row. Counts, not time:
on Intel cores every vector operation but loads and stores shares the products' two ports,
so products + masked loads + other vector operations estimate one iteration's port budget
(docs/MULTIBUFFER.md, 2026-12-06, later, says how far that estimate went).

usage: scripts/ifma-loops.py [--min-products N] BINARY [FUNCTION_REGEX]
  --min-products N  rows only for loops with at least N products (default 200)
  BINARY            a built bench or libkae.so (e.g. target/release/deps/mb_kernel-*), or
                    crypto_mb's libcrypto_mb.so.12.1 (../shared/reference/crypto_mb/lib/)
  FUNCTION_REGEX    functions to read (default: kae's exp_ifma_n, crypto_mb's AMS/AMM/AHMM)
"""
import os
import re
import shutil
import signal
import subprocess
import sys
from collections import Counter

DEFAULT_FUNCTIONS = r"kae::mb::kernel::exp_ifma_n|AMS\w*_mb8|AMM\w*_mb8|ahmm\w*_mb8"
SHORT = {
    "products": "products", "products (memory operand)": "(mem)", "masked loads": "mload",
    "masked stores": "mstore", "other vector operations": "vector", "register moves": "moves",
    "loads": "loads", "stores": "stores",
}
STORE = re.compile(r",\s*-?(0x[0-9a-f]+|[0-9]+)?\(")


def classify(op, args):
    if op.startswith("vpmadd52"):
        return "products (memory operand)" if "(" in args else "products"
    if op.startswith("vmov"):
        if "{%k" in args:
            return "masked stores" if re.search(r"\)\{%k", args) else "masked loads"
        if STORE.search(args):
            return "stores"
        if "(" in args:
            return "loads"
        return "register moves"
    if op.startswith("vpxor") and len(set(a.strip() for a in args.split(","))) == 1:
        return "zeroing idioms"
    if op.startswith("vp") or op.startswith("vx") or op.startswith("k"):
        return "other vector operations"
    return "scalar"


def functions(binary, pattern):
    run = subprocess.run(
        ["objdump", "-d", "--no-show-raw-insn", "-C", binary],
        capture_output=True, text=True,
    )
    if run.returncode != 0:
        raise SystemExit(f"ifma-loops.py: objdump cannot read {binary}: {run.stderr.strip()}")
    out = run.stdout
    name, body = None, []
    for line in out.splitlines():
        m = re.match(r"^([0-9a-f]+) <(.*)>:$", line)
        if m:
            if name and re.search(pattern, name):
                yield name, body
            name, body = m.group(2), []
            continue
        parts = line.split("\t")
        if len(parts) >= 2 and re.match(r"\s*[0-9a-f]+:", parts[0]):
            body.append((int(parts[0].strip().rstrip(":"), 16), parts[1].strip()))
    if name and re.search(pattern, name):
        yield name, body


def usage_error(message):
    print(f"ifma-loops.py: {message} (see --help)", file=sys.stderr)
    return 2


def main(argv):
    args = argv[1:]
    if args and args[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    min_products = 200
    if args and args[0] == "--min-products":
        if len(args) < 2 or not args[1].isdigit() or int(args[1]) < 1:
            return usage_error("--min-products takes a positive whole number")
        min_products = int(args[1])
        args = args[2:]
    if not args or len(args) > 2:
        return usage_error("expected BINARY [FUNCTION_REGEX]")
    if args[0].startswith("-"):
        return usage_error(f"unknown option {args[0]!r}")
    binary = args[0]
    if not os.path.exists(binary):
        return usage_error(f"{binary}: no such file")
    if not os.path.isfile(binary):
        return usage_error(f"{binary}: not a regular file")
    pattern = args[1] if len(args) > 1 else DEFAULT_FUNCTIONS
    try:
        re.compile(pattern)
    except re.error as e:
        return usage_error(f"FUNCTION_REGEX {pattern!r}: {e}")
    if shutil.which("objdump") is None:
        print("ifma-loops.py: objdump not found (binutils)", file=sys.stderr)
        return 2
    columns = ["products", "products (memory operand)", "masked loads", "masked stores",
               "other vector operations", "register moves", "loads", "stores"]
    found = 0
    for name, body in functions(binary, pattern):
        seen = set()
        for addr, text in body:
            m = re.match(r"(j\w+)\s+([0-9a-f]+)", text)
            if not m or int(m.group(2), 16) >= addr:
                continue
            lo, hi = int(m.group(2), 16), addr
            loop = [t for a, t in body if lo <= a <= hi]
            mix = Counter()
            for t in loop:
                op = t.split()[0]
                mix[classify(op, t[len(op):])] += 1
            if mix["products"] + mix["products (memory operand)"] < min_products:
                continue
            key = tuple(sorted(mix.items()))
            if key in seen:
                continue
            seen.add(key)
            found += 1
            if found == 1:
                print("instructions " + " ".join(SHORT[c] for c in columns) + "  function, loop")
            print(f"{len(loop):>12} " + " ".join(f"{mix[c]:>{len(SHORT[c])}}" for c in columns)
                  + f"  {name[:60]} {lo:#x}..{hi:#x}")
    if not found:
        print(f"ifma-loops.py: no loop with {min_products}+ products in {binary}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` ends the output quietly
    sys.exit(main(sys.argv))

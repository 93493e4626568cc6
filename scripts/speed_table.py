#!/usr/bin/env python3
"""Helper for scripts/speed.sh.

  speed_table.py extract LABEL MODE ROUND < speed-mr-output >> results.tsv
      Reads `openssl speed -mr` output and prints one TSV row per RSA result:
      LABEL MODE ROUND BITS SIGN_PER_S VERIFY_PER_S.
      RSA results look like `+F2:<index>:<bits>:<sign/s>:<verify/s>` (checked
      against OpenSSL 3.0; newer versions may append more fields, ignored).
      Exits 1 when there is no RSA result at all.

  speed_table.py table BASE OTHER results.tsv [--mode-first]
      Prints a side-by-side table of the medians over rounds, comparing the
      rows labelled BASE (e.g. default) with those labelled OTHER (e.g. kae).
      Rows come in the order their mode first appears in the file, keys by
      size within a mode. --mode-first puts the mode column, headed "row",
      before the key (scripts/mb-speed.sh, whose modes are its row labels).
      Lines starting with # are comments.
"""
import statistics
import sys
from collections import defaultdict


def extract(label, mode, rnd):
    rows = 0
    for line in sys.stdin:
        line = line.strip()
        if not line.startswith("+F2:"):
            continue
        fields = line.split(":")
        if len(fields) < 5:
            print(f"speed_table.py: malformed line {line!r}", file=sys.stderr)
            continue
        bits, sign, verify = fields[2], float(fields[3]), float(fields[4])
        print(f"{label}\t{mode}\t{rnd}\t{bits}\t{sign:.1f}\t{verify:.1f}")
        rows += 1
    if rows == 0:
        print("speed_table.py: no +F2 (RSA) lines in the speed output", file=sys.stderr)
        return 1
    return 0


def fmt_rate(v):
    return "-" if v is None else f"{v:,.1f}"


def fmt_ratio(a, b):
    if a is None or b is None or a == 0:
        return "-"
    return f"{b / a:.2f}x"


def table(base, other, path, mode_first=False):
    # (mode, bits) -> label -> ([sign...], [verify...])
    data = defaultdict(lambda: defaultdict(lambda: ([], [])))
    with open(path) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if line.startswith("#") or len(parts) != 6:
                continue
            label, mode, _rnd, bits, sign, verify = parts
            data[(mode, int(bits))][label][0].append(float(sign))
            data[(mode, int(bits))][label][1].append(float(verify))
    if not data:
        print("speed_table.py: no results", file=sys.stderr)
        return 1

    def med(values):
        return statistics.median(values) if values else None

    header = ["key", "mode", f"{base} sign/s", f"{other} sign/s", "ratio",
              f"{base} verify/s", f"{other} verify/s", "ratio", "rounds"]
    rows = []
    modes_order = []
    for mode, _ in data:
        if mode not in modes_order:
            modes_order.append(mode)
    for (mode, bits) in sorted(data, key=lambda k: (modes_order.index(k[0]), k[1])):
        b_sign, b_ver = data[(mode, bits)][base]
        o_sign, o_ver = data[(mode, bits)][other]
        bs, bv, os_, ov = med(b_sign), med(b_ver), med(o_sign), med(o_ver)
        rounds = f"{len(b_sign)}/{len(o_sign)}"
        rows.append([f"rsa{bits}", mode, fmt_rate(bs), fmt_rate(os_), fmt_ratio(bs, os_),
                     fmt_rate(bv), fmt_rate(ov), fmt_ratio(bv, ov), rounds])
    if mode_first:
        header[0], header[1] = "row", header[0]
        for r in rows:
            r[0], r[1] = r[1], r[0]
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]
    line = "  ".join(h.rjust(w) if i > 1 else h.ljust(w) for i, (h, w) in enumerate(zip(header, widths)))
    print(line)
    print("-" * len(line))
    for r in rows:
        print("  ".join(c.rjust(w) if i > 1 else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))))
    print(f"(medians over rounds; ratio = {other} / {base}; rounds = {base}/{other} samples)")
    return 0


def main(argv):
    if len(argv) == 2 and argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    if len(argv) == 5 and argv[1] == "extract":
        return extract(argv[2], argv[3], argv[4])
    if len(argv) == 5 and argv[1] == "table":
        return table(argv[2], argv[3], argv[4])
    if len(argv) == 6 and argv[1] == "table" and argv[5] == "--mode-first":
        return table(argv[2], argv[3], argv[4], mode_first=True)
    print(f"{argv[0]}: unknown arguments {' '.join(argv[1:]) or '(none)'}; usage:", file=sys.stderr)
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))

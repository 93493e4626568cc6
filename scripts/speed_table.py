#!/usr/bin/env python3
"""Helper for scripts/speed.sh.

  speed_table.py extract LABEL MODE ROUND < speed-mr-output >> results.tsv
      Reads `openssl speed -mr` output and prints one TSV row per RSA result:
      LABEL MODE ROUND BITS SIGN_PER_S VERIFY_PER_S.
      RSA results look like `+F2:<index>:<bits>:<sign/s>:<verify/s>` (checked
      against OpenSSL 3.0; newer versions may append more fields, ignored).
      Exits 1 when there is no RSA result at all.

  speed_table.py table BASE OTHER results.tsv [--mode-first] [--peer PEER]
      Prints a side-by-side table of the medians over rounds, comparing the
      rows labelled BASE (e.g. default) with those labelled OTHER (e.g. kae).
      Rows come in the order their mode first appears in the file, keys by
      size within a mode. --mode-first puts the mode column, headed "row",
      before the key (scripts/mb-speed.sh, whose modes are its row labels).
      --peer PEER adds the rows labelled PEER (another provider) after each
      measure, with the ratio OTHER / PEER. Each ratio is followed by its
      "paired" value: the median of the per-round ratios (each round's two
      runs back to back), which a drift between rounds moves less.
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


def paired(base, other):
    """Median over the rounds that measured both of other / base, for two lists of (round,
    value) samples (a round's own samples by their median), as "1.23x"; "-" when no round
    has both."""
    def by_round(samples):
        rounds = defaultdict(list)
        for rnd, v in samples:
            rounds[rnd].append(v)
        return {rnd: statistics.median(vs) for rnd, vs in rounds.items()}

    b, o = by_round(base), by_round(other)
    ratios = [o[rnd] / b[rnd] for rnd in sorted(b.keys() & o.keys()) if b[rnd]]
    return f"{statistics.median(ratios):.2f}x" if ratios else "-"


def table(base, other, path, mode_first=False, peer=None):
    # (mode, bits) -> label -> ([(round, sign)...], [(round, verify)...])
    data = defaultdict(lambda: defaultdict(lambda: ([], [])))
    with open(path) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if line.startswith("#") or len(parts) != 6:
                continue
            label, mode, rnd, bits, sign, verify = parts
            data[(mode, int(bits))][label][0].append((rnd, float(sign)))
            data[(mode, int(bits))][label][1].append((rnd, float(verify)))
    if not data:
        print("speed_table.py: no results", file=sys.stderr)
        return 1

    def med(samples):
        return statistics.median(v for _, v in samples) if samples else None

    def measure(name):
        cols = [f"{base} {name}", f"{other} {name}", "ratio", "paired"]
        return cols + [f"{peer} {name}", f"{other}/{peer}", "paired"] if peer else cols

    header = ["key", "mode"] + measure("sign/s") + measure("verify/s") + ["rounds"]
    rows = []
    modes_order = []
    for mode, _ in data:
        if mode not in modes_order:
            modes_order.append(mode)
    for (mode, bits) in sorted(data, key=lambda k: (modes_order.index(k[0]), k[1])):
        cells = [f"rsa{bits}", mode]
        counts = []
        runs = data[(mode, bits)]
        for i in (0, 1):
            b, o = med(runs[base][i]), med(runs[other][i])
            cells += [fmt_rate(b), fmt_rate(o), fmt_ratio(b, o),
                      paired(runs[base][i], runs[other][i])]
            if peer:
                p = med(runs[peer][i])
                cells += [fmt_rate(p), fmt_ratio(p, o), paired(runs[peer][i], runs[other][i])]
        for label in (base, other, peer) if peer else (base, other):
            counts.append(str(len(runs[label][0])))
        rows.append(cells + ["/".join(counts)])
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
    labels = f"{base}/{other}/{peer}" if peer else f"{base}/{other}"
    print(f"(medians over rounds; ratio = {other} / {base} of the medians, paired = the median of "
          f"the per-round ratios; rounds = {labels} samples)")
    return 0


def main(argv):
    if len(argv) == 2 and argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    if len(argv) == 5 and argv[1] == "extract":
        return extract(argv[2], argv[3], argv[4])
    if len(argv) >= 5 and argv[1] == "table":
        opts, peer, mode_first = argv[5:], None, False
        while opts:
            if opts[0] == "--mode-first":
                mode_first, opts = True, opts[1:]
            elif opts[0] == "--peer" and len(opts) >= 2:
                peer, opts = opts[1], opts[2:]
            else:
                break
        if not opts:
            return table(argv[2], argv[3], argv[4], mode_first=mode_first, peer=peer)
    print(f"{argv[0]}: unknown arguments {' '.join(argv[1:]) or '(none)'}; usage:", file=sys.stderr)
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))

#!/usr/bin/env python3
"""Side-by-side table for scripts/nginx-bench.sh and scripts/haproxy-bench.sh.

  bench_table.py row CONFIG PROVIDER ROUND < kae-press-output >> results.tsv
      Takes the final JSON line of a kae-press run and prints one TSV row
      (columns as in HEADER). Exits 1 without a JSON line.

  bench_table.py header
      Prints the TSV header line.

  bench_table.py table BASE OTHER results.tsv
      Medians over the rounds, BASE (default provider) next to OTHER (kae),
      with OTHER/BASE ratios: handshakes/s, p99 latency, server CPU
      milliseconds per handshake and handshakes per server CPU-second. For
      handshakes/s and handshakes per CPU-second also the median of the
      per-round ratios ("paired"): each round measures BASE and OTHER back to
      back, so a pair shares the machine's state of the moment.
"""
import json
import statistics
import sys
from collections import OrderedDict

HEADER = ["config", "provider", "round", "handshakes", "errors", "handshakes_per_s",
          "p50_ms", "p99_ms", "server_cpu_ms_per_handshake", "handshakes_per_server_cpu_s",
          "protocol", "cipher"]


def row(config, provider, rnd):
    doc = None
    for line in sys.stdin:
        line = line.strip()
        if line.startswith("{") and '"kae_press"' in line:
            doc = json.loads(line)
    if doc is None:
        print("bench_table.py: no kae-press JSON line in its output", file=sys.stderr)
        return 1

    def cell(key):
        v = doc.get(key)
        if v is None:
            return "-"
        return f"{v:.4f}" if isinstance(v, float) else str(v)

    vals = [config, provider, rnd] + [cell(k) for k in HEADER[3:]]
    print("\t".join(vals))
    return 0


def num(v):
    try:
        return float(v)
    except ValueError:
        return None


def table(base, other, path):
    data = OrderedDict()  # config -> provider -> column -> [values]
    with open(path) as f:
        lines = [l.rstrip("\n").split("\t") for l in f if l.strip()]
    if lines and lines[0][0] == "config":
        lines = lines[1:]
    for parts in lines:
        if len(parts) < len(HEADER):
            continue
        r = dict(zip(HEADER, parts))
        d = data.setdefault(r["config"], {}).setdefault(r["provider"], {})
        for k in HEADER[3:10]:
            x = num(r[k])
            if x is not None:
                d.setdefault(k, []).append(x)
        d.setdefault("rounds", []).append(r["round"])
        for k in ("handshakes_per_s", "handshakes_per_server_cpu_s"):
            x = num(r[k])
            if x is not None:
                d.setdefault("by_round_" + k, {})[r["round"]] = x
    if not data:
        print("bench_table.py: no results", file=sys.stderr)
        return 1

    def med(cfg, prov, key):
        v = data[cfg].get(prov, {}).get(key)
        return statistics.median(v) if v else None

    def f(v, digits=1):
        return "-" if v is None else f"{v:,.{digits}f}"

    def paired(cfg, key):
        b = data[cfg].get(base, {}).get("by_round_" + key, {})
        o = data[cfg].get(other, {}).get("by_round_" + key, {})
        rs = [o[k] / b[k] for k in b if k in o and b[k] > 0]
        return f"{statistics.median(rs):.2f}x" if rs else "-"

    def ratio(a, b):
        return "-" if a in (None, 0) or b is None else f"{b / a:.2f}x"

    header = ["config", f"{base} hs/s", f"{other} hs/s", "ratio", "paired",
              f"{base} p99 ms", f"{other} p99 ms",
              f"{base} cpu ms/hs", f"{other} cpu ms/hs", "ratio",
              f"{base} hs/cpu-s", f"{other} hs/cpu-s", "ratio", "paired", "errors", "rounds"]
    out = []
    for cfg in data:
        bh, oh = med(cfg, base, "handshakes_per_s"), med(cfg, other, "handshakes_per_s")
        bp, op = med(cfg, base, "p99_ms"), med(cfg, other, "p99_ms")
        bc, oc = (med(cfg, base, "server_cpu_ms_per_handshake"),
                  med(cfg, other, "server_cpu_ms_per_handshake"))
        be, oe = (med(cfg, base, "handshakes_per_server_cpu_s"),
                  med(cfg, other, "handshakes_per_server_cpu_s"))
        errs = sum(sum(data[cfg].get(p, {}).get("errors", [])) for p in (base, other))
        rounds = f"{len(data[cfg].get(base, {}).get('rounds', []))}/" \
                 f"{len(data[cfg].get(other, {}).get('rounds', []))}"
        out.append([cfg, f(bh), f(oh), ratio(bh, oh), paired(cfg, "handshakes_per_s"),
                    f(bp, 2), f(op, 2), f(bc, 3), f(oc, 3), ratio(bc, oc), f(be), f(oe),
                    ratio(be, oe), paired(cfg, "handshakes_per_server_cpu_s"), f"{errs:.0f}",
                    rounds])
    widths = [max(len(r[i]) for r in out + [header]) for i in range(len(header))]
    for r in [header] + out:
        print("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))))
    print(f"(medians over rounds; ratios are {other}/{base}, 'paired' = median of the per-round "
          f"ratios; cpu = user+system time of the server processes, all threads, per handshake)")
    return 0


def main(argv):
    if len(argv) == 2 and argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    if len(argv) == 5 and argv[1] == "row":
        return row(argv[2], argv[3], argv[4])
    if len(argv) == 2 and argv[1] == "header":
        print("\t".join(HEADER))
        return 0
    if len(argv) == 5 and argv[1] == "table":
        return table(argv[2], argv[3], argv[4])
    print(f"{argv[0]}: unknown arguments {' '.join(argv[1:]) or '(none)'}; usage:", file=sys.stderr)
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))

#!/usr/bin/env python3
"""Grouped bar chart (SVG, standard library only) of benchmark results.

Reads a TSV of results (one row per run), takes the median over the rows that
share a configuration and a series (e.g. provider), and draws one panel per
metric: for every configuration a group of bars, one per series, with the
value on top of each bar and the ratio of two series above the group.

  chart.py [options] RESULTS.tsv

  -o, --out FILE        SVG to write (default: RESULTS with .svg)
  --title TEXT          chart title
  --columns A,B,...     column names for a TSV without a header line
                        (otherwise the first line holds the names)
  --config TEMPLATE     how a configuration is labelled, from column values,
                        e.g. "{flavour} c={conns}" (default: "{config}")
  --series COLUMN       column that tells the bars of a group apart
                        (default: provider)
  --metric COL[=LABEL]  a metric to draw (repeatable); LABEL is the panel title
  --ratio BASE,OTHER    print OTHER/BASE above each group (default: the
                        first two series)

The bench scripts (scripts/nginx-bench.sh, scripts/haproxy-bench.sh) chart
handshakes/s and p99 latency; scripts/speed.sh charts sign/s and verify/s.
"""
import argparse
import math
import statistics
import sys
from collections import OrderedDict
from xml.sax.saxutils import escape

COLOURS = ["#8c8c8c", "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd"]


def read_rows(path, columns):
    rows = []
    with open(path) as f:
        lines = [l.rstrip("\n") for l in f if l.strip() and not l.startswith("#")]
    if not lines:
        return rows
    if columns:
        names = columns
    else:
        names, lines = lines[0].split("\t"), lines[1:]
    for l in lines:
        vals = l.split("\t")
        if len(vals) < len(names):
            print(f"chart.py: skipping short row {l!r}", file=sys.stderr)
            continue
        rows.append(dict(zip(names, vals)))
    return rows


def as_float(v):
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def axis(vmax_raw):
    """(axis maximum, tick step): a 1/2/2.5/5 x 10^k step giving 4-5 intervals."""
    if vmax_raw <= 0:
        return 1.0, 0.25
    raw_step = vmax_raw / 4
    exp = math.floor(math.log10(raw_step))
    step = next(m * 10 ** exp for m in (1, 2, 2.5, 5, 10) if m * 10 ** exp >= raw_step)
    return math.ceil(vmax_raw / step - 1e-9) * step, step


def short(v):
    if v is None:
        return "-"
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 100000:
        return f"{v / 1000:.0f}k"
    if a >= 10000:
        return f"{v / 1000:.1f}k"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def build(rows, config_tpl, series_col, metrics):
    """-> (configs, series, {metric: {(config, series): median}})"""
    configs, series = OrderedDict(), OrderedDict()
    samples = {m: {} for m, _ in metrics}
    for r in rows:
        try:
            cfg = config_tpl.format(**r)
        except KeyError as e:
            sys.exit(f"chart.py: --config names unknown column {e}")
        if series_col not in r:
            sys.exit(f"chart.py: no column {series_col!r} (have {', '.join(r)})")
        s = r[series_col]
        configs[cfg] = None
        series[s] = None
        for m, _ in metrics:
            if m not in r:
                sys.exit(f"chart.py: no column {m!r} (have {', '.join(r)})")
            x = as_float(r[m])
            if x is not None:
                samples[m].setdefault((cfg, s), []).append(x)
    med = {m: {k: statistics.median(v) for k, v in d.items()} for m, d in samples.items()}
    return list(configs), list(series), med


def svg(title, configs, series, metrics, med, ratio):
    bar_w, bar_gap, group_gap = 26, 4, 28
    left, right, top = 70, 20, 62
    panel_h, panel_gap, bottom = 210, 76, 40
    group_w = len(series) * (bar_w + bar_gap) - bar_gap
    # One slot per configuration, wide enough for its bars and its label (~6.3 px a char).
    slot = max(group_w + group_gap, max(len(c) for c in configs) * 6.3 + 14)
    plot_w = max(len(configs) * slot + group_gap, 360)
    width = int(max(left + plot_w + right, len(title) * 8.6 + 40))
    height = top + len(metrics) * (panel_h + panel_gap) + bottom - panel_gap + 30
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{width / 2}" y="22" text-anchor="middle" font-size="15" '
        f'font-weight="bold">{escape(title)}</text>',
    ]
    # Legend.
    lx = left
    for i, s in enumerate(series):
        out.append(f'<rect x="{lx}" y="34" width="12" height="12" fill="{COLOURS[i % len(COLOURS)]}"/>')
        out.append(f'<text x="{lx + 16}" y="44">{escape(s)}</text>')
        lx += 30 + 7 * len(s)
    if ratio:
        out.append(f'<text x="{lx + 10}" y="44" fill="#444">above each group: '
                   f'{escape(ratio[1])}/{escape(ratio[0])}</text>')

    for p, (metric, label) in enumerate(metrics):
        y0 = top + p * (panel_h + panel_gap) + 20  # top of the plot area
        vals = [v for (c, s), v in med[metric].items()]
        vmax, step = axis(max(vals) * 1.15 if vals else 1.0)
        ticks = int(round(vmax / step))
        out.append(f'<text x="{left}" y="{y0 - 16}" font-size="13" font-weight="bold">'
                   f'{escape(label)} (median)</text>')
        # Axis and gridlines.
        for k in range(ticks + 1):
            v = step * k
            y = y0 + panel_h - panel_h * v / vmax
            out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" '
                       f'stroke="{"#000" if k == 0 else "#ddd"}"/>')
            out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" fill="#444">{short(v)}</text>')
        for g, cfg in enumerate(configs):
            gx = left + group_gap / 2 + g * slot + (slot - group_w) / 2
            for i, s in enumerate(series):
                v = med[metric].get((cfg, s))
                x = gx + i * (bar_w + bar_gap)
                if v is None:
                    out.append(f'<text x="{x + bar_w / 2}" y="{y0 + panel_h - 4}" '
                               f'text-anchor="middle" fill="#999">n/a</text>')
                    continue
                h = panel_h * max(v, 0) / vmax
                y = y0 + panel_h - h
                out.append(f'<rect x="{x}" y="{y:.1f}" width="{bar_w}" height="{h:.1f}" '
                           f'fill="{COLOURS[i % len(COLOURS)]}"><title>{escape(cfg)} '
                           f'{escape(s)}: {v:g}</title></rect>')
                out.append(f'<text x="{x + bar_w / 2}" y="{y - 3:.1f}" text-anchor="middle" '
                           f'font-size="9">{short(v)}</text>')
            if ratio:
                a, b = med[metric].get((cfg, ratio[0])), med[metric].get((cfg, ratio[1]))
                if a and b is not None:
                    out.append(f'<text x="{gx + group_w / 2}" y="{y0 + 2}" '
                               f'text-anchor="middle" font-weight="bold" fill="#333">{b / a:.2f}x</text>')
            out.append(f'<text x="{gx + group_w / 2}" y="{y0 + panel_h + 15}" '
                       f'text-anchor="middle">{escape(cfg)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results")
    ap.add_argument("-o", "--out")
    ap.add_argument("--title", default="kae benchmark")
    ap.add_argument("--columns")
    ap.add_argument("--config", default="{config}")
    ap.add_argument("--series", default="provider")
    ap.add_argument("--metric", action="append", default=[])
    ap.add_argument("--ratio")
    a = ap.parse_args()
    if not a.metric:
        ap.error("give at least one --metric")
    metrics = [(m.split("=", 1)[0], m.split("=", 1)[1] if "=" in m else m) for m in a.metric]
    rows = read_rows(a.results, a.columns.split(",") if a.columns else None)
    if not rows:
        print(f"chart.py: no results in {a.results}", file=sys.stderr)
        return 1
    configs, series, med = build(rows, a.config, a.series, metrics)
    ratio = a.ratio.split(",", 1) if a.ratio else (series[:2] if len(series) >= 2 else None)
    out = a.out or (a.results.rsplit(".", 1)[0] + ".svg")
    with open(out, "w") as f:
        f.write(svg(a.title, configs, series, metrics, med, ratio))
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

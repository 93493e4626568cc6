#!/usr/bin/env python3
"""Summarise a memcheck XML log of examples/ctgrind.rs (called by scripts/ctgrind.sh).

Every uninitialised-value report is a use of secret data: a conditional jump
(UninitCondition) or an address / syscall argument (UninitValue, SyscallParam...).
Each is attributed
  * to an operation: the ctgrind `op_*` frame on its stack ("setup" for `setup_*`
    frames: key import, blinding pairs, Montgomery contexts); when valgrind could not
    unwind the stack (libcrypto's assembly), from the last "ctgrind-op" marker the harness
    logged before it (column "lost"), and
  * to a place: the innermost frame that is kae's code (a file under src/), the harness
    (examples/), or libcrypto; libc, the Rust standard library and valgrind's preload
    objects are looked through (a memcpy with a secret length counts for its caller).
Prints a table per operation and the list of kae places. Exit status: 1 if an operation
(not setup or teardown, not the canary) has a kae finding or the canary (a deliberate secret branch)
was not seen, else 0.

usage: ctgrind_report.py LOG.xml ROOT
"""
import collections
import re
import sys
import xml.etree.ElementTree as ET

CANARY = "canary"
OP_RE = re.compile(r"(?:^|::)(op|setup)_([a-z0-9_]+)")


def frames(stack):
    for f in stack.findall("frame"):
        yield {
            "obj": f.findtext("obj") or "",
            "fn": f.findtext("fn") or "",
            "dir": f.findtext("dir") or "",
            "file": f.findtext("file") or "",
            "line": f.findtext("line") or "",
            "ip": f.findtext("ip") or "",
        }


_BASES = {}


def offset(f):
    """libcrypto+0xOFFSET of a frame (the load address is found from named frames)."""
    base = _BASES.get(f["obj"])
    if base is None:
        return f["ip"]
    return f"libcrypto+{int(f['ip'], 16) - base:#x}"


def find_bases(tree):
    """Load address of each object with named frames: each named frame gives
    ip - symbol >= base; the smallest such value, rounded down to a page, is the base."""
    import subprocess
    syms, low = {}, {}
    for fr in tree.iter("frame"):
        obj, fn, ip = fr.findtext("obj"), fr.findtext("fn"), fr.findtext("ip")
        if not (obj and fn and ip and "libcrypto" in obj):
            continue
        if obj not in syms:
            try:
                out = subprocess.run(["nm", "-D", "--defined-only", obj], capture_output=True,
                                     text=True, check=True).stdout
            except (OSError, subprocess.CalledProcessError):
                out = ""
            syms[obj] = {l.split()[2].split("@")[0]: int(l.split()[0], 16)
                         for l in out.splitlines() if len(l.split()) == 3}
        if fn in syms[obj]:
            cand = int(ip, 16) - syms[obj][fn]
            low[obj] = min(low.get(obj, cand), cand)
    for obj, v in low.items():
        _BASES[obj] = v & ~0xFFF


def where(f, root):
    path = f["dir"] + "/" + f["file"] if f["dir"] else f["file"]
    if "libcrypto" in f["obj"]:
        return "libcrypto"
    if path.startswith(root + "/src/"):
        return "kae"
    if path.startswith(root + "/examples/"):
        return "harness"
    if not f["dir"] and re.search(r"(?:^|[<\s])kae::", f["fn"]):
        return "kae"
    return None


def main():
    if len(sys.argv) == 2 and sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    if len(sys.argv) != 3 or any(a.startswith("-") for a in sys.argv[1:]):
        print(f"{sys.argv[0]}: expected LOG.xml ROOT, got {' '.join(sys.argv[1:]) or 'nothing'}; usage:", file=sys.stderr)
        print(__doc__, file=sys.stderr)
        return 2
    log, root = sys.argv[1], sys.argv[2].rstrip("/")
    tree = ET.parse(log).getroot()
    find_bases(tree)
    # op -> class -> Counter(place)
    table = collections.defaultdict(lambda: collections.defaultdict(collections.Counter))
    kae_places = collections.defaultdict(set)  # place -> {(op, kind)}
    lib_sites = collections.defaultdict(collections.Counter)  # kae file:line -> libcrypto fns
    marker = "(before setup)"
    for err in tree:
        if err.tag == "clientmsg":
            text = (err.findtext("text") or "").strip()
            if text.startswith("ctgrind-op "):
                marker = text.split(None, 1)[1]
            continue
        if err.tag != "error":
            continue
        kind = err.findtext("kind") or ""
        if not (kind.startswith("Uninit") or kind.startswith("SyscallParam")):
            # Invalid reads/writes or leaks are not this check's business (valgrind.sh's).
            table["(other errors)"]["other"][kind] += 1
            continue
        stack = err.find("stack")
        fs = list(frames(stack)) if stack is not None else []
        # The operation from the stack; when the unwinder lost the stack (libcrypto's
        # assembly), from the last marker the harness wrote before the report.
        op, lost = marker, True
        for f in fs:
            m = OP_RE.search(f["fn"])
            if m and where(f, root) == "harness":
                op = m.group(2).replace("_", "-") if m.group(1) == "op" else "setup"
                lost = False
                break
        cls, place = "other", kind
        for i, f in enumerate(fs):
            w = where(f, root)
            if w is None:
                continue
            cls = w
            if w == "libcrypto":
                name = f["fn"]
                if not name:  # a static function: name it after its nearest named caller
                    caller = next((g["fn"] for g in fs[i + 1:] if g["fn"] and "libcrypto" in g["obj"]), None)
                    if caller:
                        name = f"(static, in {caller})"
                    else:
                        name = f"({'stack lost' if lost else 'unnamed'} at {offset(f)})"
                place = name
                if lost:
                    cls = "lost"
            else:
                name = f["fn"] or "?"
                if name == "UnknownInlinedFun" or name.startswith("{closure"):
                    # Inlined code: name it after the nearest enclosing named kae function.
                    outer = next((g["fn"] for g in fs[i + 1:] if g["fn"] and g["fn"] != "UnknownInlinedFun"
                                  and not g["fn"].startswith("{closure")), None)
                    name = f"(inlined in {outer})" if outer else name
                place = f"{name} {f['file']}:{f['line']}"
            break
        table[op][cls][place] += 1
        if cls == "kae":
            kae_places[place].add((op, kind))
        elif cls == "libcrypto" and op not in ("setup", "teardown"):
            # Which kae call handed the secret to libcrypto.
            kae_frames = [g for g in fs if where(g, root) == "kae"]
            if kae_frames:
                # The first frame above the FFI wrappers (src/ffi/) names the call site.
                outer = next((g for g in kae_frames if "/src/ffi" not in g["dir"]), kae_frames[0])
                site = f"{outer['file']}:{outer['line']}"
                if outer is not kae_frames[0]:
                    site += f" ({kae_frames[0]['file']}:{kae_frames[0]['line']})"
                lib_sites[site][place] += 1

    ops = sorted(table, key=lambda o: (o in ("setup", "teardown"), o.startswith("("), o))
    print(f"{'operation':<18} {'kae':>4} {'libcrypto':>9} {'lost':>5} {'harness':>7} {'other':>5}   libcrypto functions (reports)")
    failing = []
    for op in ops:
        c = table[op]
        n = {k: sum(c[k].values()) for k in ("kae", "libcrypto", "lost", "harness", "other")}
        places = (c["libcrypto"] + c["lost"]).most_common()
        lib = ", ".join(f"{fn} ({cnt})" for fn, cnt in places[:6])
        if len(places) > 6:
            lib += f", +{len(places) - 6} more"
        print(f"{op:<18} {n['kae']:>4} {n['libcrypto']:>9} {n['lost']:>5} {n['harness']:>7} {n['other']:>5}   {lib or '-'}")
        if n["kae"] and op not in ("setup", "teardown", CANARY):
            failing.append(op)
    print()
    if kae_places:
        print("kae findings (innermost kae frame; operations; kind):")
        for place in sorted(kae_places):
            uses = sorted(kae_places[place])
            ops_s = ", ".join(sorted({o for o, _ in uses}))
            kinds = ", ".join(sorted({k for _, k in uses}))
            print(f"  {place}   [{ops_s}] {kinds}")
        print()
    if lib_sites:
        print("libcrypto findings during the operations, by the kae call that passed the secret:")
        for site in sorted(lib_sites):
            fns = ", ".join(f"{fn} ({cnt})" for fn, cnt in lib_sites[site].most_common())
            print(f"  {site:<28} {fns}")
        print()
    canary_seen = bool(table.get(CANARY, {}).get("kae"))
    ok = True
    if not canary_seen:
        print("ctgrind: FAIL: the canary's secret branch was not reported (is the marking working?)")
        ok = False
    if failing:
        print("ctgrind: FAIL: secret-dependent branches or addresses in kae's code in: " + ", ".join(failing))
        ok = False
    if ok:
        print("ctgrind: ok: no secret-dependent branch or address in kae's code (canary seen)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

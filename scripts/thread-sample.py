#!/usr/bin/env python3
"""Every 0.5 s until killed: per-thread CPU (cores) of every `blockhook serve` process (docs/notes/endpoints-bench.md, "Fourth look")."""
import os, time
HZ = os.sysconf('SC_CLK_TCK')
def threads():
    out = {}
    for p in os.listdir('/proc'):
        if not p.isdigit(): continue
        try:
            cmd = open(f'/proc/{p}/cmdline').read().replace('\0', ' ')
            if ' serve' not in cmd: continue
            for t in os.listdir(f'/proc/{p}/task'):
                s = open(f'/proc/{p}/task/{t}/stat').read()
                comm = s[s.index('(')+1:s.rindex(')')]
                r = s.rsplit(')', 1)[1].split()
                out[(int(p), int(t))] = (comm, int(r[11]) + int(r[12]))
        except OSError: continue
    return out
prev = threads(); t0 = time.time()
while True:
    time.sleep(0.5)
    cur = threads()
    g = {}
    for k, (comm, t) in cur.items():
        d = t - prev.get(k, (comm, 0))[1]
        if d: g[f"{comm}:{k[1]}"] = g.get(f"{comm}:{k[1]}", 0) + d
    print(f"{time.time()-t0:6.1f} " + " ".join(f"{c}={v/HZ/0.5:4.2f}" for c, v in sorted(g.items(), key=lambda x: -x[1])[:12]), flush=True)
    prev = cur

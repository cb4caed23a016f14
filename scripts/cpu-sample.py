#!/usr/bin/env python3
"""Samples machine busy time and per-process CPU every 0.5 s until killed (used by docs/notes/endpoints-bench.md, "Fourth look").
Prints: t, machine busy cores, then cores per group (server, harness, floor, postgres, other)."""
import os, sys, time
HZ = os.sysconf('SC_CLK_TCK')
def machine():
    f = open('/proc/stat').readline().split()[1:]
    v = list(map(int, f)); idle = v[3] + v[4]
    return sum(v), idle
def procs():
    out = {}
    for p in os.listdir('/proc'):
        if not p.isdigit(): continue
        try:
            s = open(f'/proc/{p}/stat').read()
            cmd = open(f'/proc/{p}/cmdline').read().replace('\0', ' ')
        except OSError: continue
        r = s.rsplit(')', 1)[1].split()
        out[int(p)] = (int(r[11]) + int(r[12]), cmd)
    return out
def group(cmd):
    if ' bench ' in cmd: return 'harness'
    if ' bench-floor ' in cmd: return 'floor'
    if ' serve' in cmd: return 'server'
    if cmd.startswith('postgres'): return 'pg'
    return 'other'
prev_m = machine(); prev_p = procs(); t0 = time.time()
while True:
    time.sleep(0.5)
    m = machine(); p = procs()
    dt_all = m[0] - prev_m[0]; busy = dt_all - (m[1] - prev_m[1])
    ncpu = os.cpu_count()
    cores = busy / dt_all * ncpu if dt_all else 0
    g = {}
    for pid, (t, cmd) in p.items():
        d = t - prev_p.get(pid, (0, ''))[0] if pid in prev_p else t
        if d: g[group(cmd)] = g.get(group(cmd), 0) + d
    wall = 0.5
    line = f"{time.time()-t0:7.1f} busy={cores:4.2f} " + " ".join(f"{k}={v/HZ/wall:4.2f}" for k, v in sorted(g.items()))
    print(line, flush=True)
    prev_m, prev_p = m, p

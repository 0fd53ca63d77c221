#!/usr/bin/env python3
"""Writes examples/traces/spot-training.jsonl (Tessera trace format, docs/simulator.md), the frozen workload
of examples/scenarios/spot-training.yaml. Deterministic (random.Random(2026)); rerun to reproduce:
    python3 examples/traces/make-spot-training-trace.py > examples/traces/spot-training.jsonl
Workload (assumptions, stated in the scenario file):
  - 36 steady inference replicas (1 whole H100 each, latency-sensitive) for the first 72 h, team serving;
  - 16 daytime replicas per day (08:00-20:00, 3 days), team serving;
  - 140 training jobs arriving as a Poisson stream over the first 60 h, 1/2/4/8 GPUs on one node
    (weights 0.3/0.2/0.3/0.2), ideal durations log-uniform 2-12 h, 90% checkpointable, teams research/platform.
"""
import json, math, random

rng = random.Random(2026)
jobs = []
H = 3600
def add(**kw):
    kw["id"] = len(jobs)
    jobs.append(kw)

for i in range(36):
    add(submit_s=0, **{"class": "inference"}, team="serving", priority=1000, tasks=1, gpus_per_task=1,
        compute_milli=500, memory_mib=61440, cpu_milli=8000, host_memory_mib=32768, duration_s=72 * H)
for d in range(3):
    for i in range(16):
        add(submit_s=(24 * d + 8) * H + 60 * i, **{"class": "inference"}, team="serving", priority=1000, tasks=1,
            gpus_per_task=1, compute_milli=500, memory_mib=61440, cpu_milli=8000, host_memory_mib=32768,
            duration_s=12 * H)
t = 0.0
for i in range(140):
    t += rng.expovariate(140 / (60.0 * H))
    g = rng.choices([1, 2, 4, 8], weights=[0.3, 0.2, 0.3, 0.2])[0]
    dur = int(10 ** rng.uniform(math.log10(2 * H), math.log10(12 * H)))
    ck = rng.random() < 0.9
    job = dict(submit_s=int(t), **{"class": "training"}, team=rng.choice(["research", "platform"]), tasks=1,
               gpus_per_task=g, compute_milli=900, memory_mib=65536, cpu_milli=8000 * g,
               host_memory_mib=65536 * g, duration_s=dur)
    if ck:
        job["checkpointable"] = True
    add(**job)

jobs.sort(key=lambda j: (j["submit_s"], j["id"]))
print(json.dumps({"format": "tessera-trace", "version": 1,
                  "source": "examples/traces/make-spot-training-trace.py (seed 2026)"}))
for j in jobs:
    print(json.dumps(j))

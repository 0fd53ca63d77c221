#!/usr/bin/env python3
"""Durable submissions, builds side by side: for each round, each store and each LABEL=TESSERA binary
(alternating the order of the binaries from round to round), a fresh `tessera serve` with a 1,024-node x 8
H100 cluster, team `load` (4,096 guaranteed GPUs) and a team lead, then
`tessera bench api --requests N --concurrency 64 --json` against it (the load generator is each binary's
own unless --gen names one). Prints a line per run (submissions/s, p50, p99, errors, the server's CPU ticks,
the PostgreSQL backends' CPU ticks, the load average) and the medians.

`pg` starts a PostgreSQL server for the run (initdb into a temporary folder as user `postgres` when run as
root, Unix socket only, default settings: fsync and synchronous_commit on). STAT=PREFIX counts the server's
system calls, context switches and CPU time with `perf stat`; PERF=PREFIX records a `perf record` profile
(PERF_F: frequency, PERF_G: call-graph options); LAT=PREFIX writes each run's latencies (bench api
--latencies) to PREFIX.STORE.BINARY.TIME.csv.

usage: scripts/bench-submissions.py [--rounds R] [--stores sqlite,pg] [--extra "SERVE FLAGS"] LABEL=TESSERA...
"""
import argparse, json, os, pwd, shutil, signal, socket, subprocess, sys, tempfile, time, urllib.request

CLUSTER = """name: check-load
defaults: {gpu: h100-80gb, gpus: 8, cpu: 192, memory_gib: 2048, interconnect: nvswitch, spine: spine-0, tier: reserved}
nodes:
""" + "".join("  - {name: leaf%d-node, count: 32, leaf: leaf-%d}\n" % (i, i) for i in range(32))
PGBIN = sorted(__import__("glob").glob("/usr/lib/postgresql/*/bin"))[-1]

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

def req(url, method, path, body=None, token=None):
    data = json.dumps(body).encode() if body is not None else None
    h = {"Content-Type": "application/json"} if data else {}
    if token: h["Authorization"] = "Bearer " + token
    r = urllib.request.Request(url + path, data=data, method=method, headers=h)
    with urllib.request.urlopen(r, timeout=30) as resp:
        return json.loads(resp.read() or b"null")

def ticks(pid):
    try:
        f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
        return int(f[11]) + int(f[12])
    except OSError:
        return -1

class Pg:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="speed-pg-"); os.chmod(self.dir, 0o777)
        self.data, self.sock = self.dir + "/data", self.dir + "/sock"; os.mkdir(self.sock); os.chmod(self.sock, 0o777)
        self.port = free_port(); self.n = 0
        self.run([PGBIN + "/initdb", "-D", self.data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync"])
        with open(self.data + "/postgresql.conf", "a") as f:
            f.write("\nlisten_addresses = ''\nport = %d\nunix_socket_directories = '%s'\nmax_connections = 100\n" % (self.port, self.sock))
        self.run([PGBIN + "/pg_ctl", "-D", self.data, "-l", self.dir + "/log", "-w", "start"])
        self.psql("CREATE ROLE tessera LOGIN SUPERUSER")
    def run(self, argv):
        root = os.geteuid() == 0  # PostgreSQL refuses to run as root
        subprocess.run((["runuser", "-u", "postgres", "--"] if root else []) + argv, check=True, capture_output=True)
    def psql(self, sql):
        self.run([PGBIN + "/psql", "-X", "-q", "-h", self.sock, "-p", str(self.port), "-U", "postgres", "-d", "postgres", "-c", sql])
    def new_db(self):
        self.n += 1; name = "b%d" % self.n
        self.psql("CREATE DATABASE %s OWNER tessera" % name)
        return "postgresql://tessera@localhost:%d/%s?host=%s" % (self.port, name, self.sock)
    def backend_ticks(self):
        # CPU of all postgres processes so far
        t = 0
        for p in os.listdir("/proc"):
            if p.isdigit():
                try:
                    if open("/proc/%s/comm" % p).read().strip() == "postgres": t += ticks(int(p))
                except OSError: pass
        return t
    def stop(self):
        self.run([PGBIN + "/pg_ctl", "-D", self.data, "-m", "fast", "-w", "stop"]); shutil.rmtree(self.dir, True)

def one(exe, gen, store, pg, n, conc, extra):
    work = tempfile.mkdtemp(prefix="speed-run-")
    cl = work + "/cluster.yaml"; open(cl, "w").write(CLUSTER)
    port = free_port(); url = "http://127.0.0.1:%d" % port
    db = work + "/t.db"
    argv = [exe, "serve"] + (["--db", db] if store != "pg" else []) + ["--listen", "127.0.0.1:%d" % port, "--cluster", cl] + extra
    tokfile = db + ".admin-token"
    if store == "pg":
        argv += ["--store", pg.new_db(), "--admin-token-file", tokfile]
    log = open(work + "/serve.log", "wb")
    p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=work, start_new_session=True)
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(url + "/readyz", timeout=2); break
            except Exception: time.sleep(0.2)
        for _ in range(100):
            if os.path.exists(tokfile) and open(tokfile).read().strip(): break
            time.sleep(0.1)
        if not os.path.exists(tokfile): print(open(work + "/serve.log").read()[-1500:])
        admin = open(tokfile).read().strip()
        req(url, "POST", "/api/v1/teams", {"name": "load", "guaranteed_gpus": 4096}, admin)
        tok = req(url, "POST", "/api/v1/users", {"name": "bench", "team": "load", "role": "team-lead"}, admin)["token"]
        time.sleep(0.5)
        t0 = ticks(p.pid); pg0 = pg.backend_ticks() if store == "pg" else 0
        la = os.getloadavg()[0]
        perf = None
        if os.environ.get("STAT"):
            perf = subprocess.Popen(["perf", "stat", "-e", "raw_syscalls:sys_enter,context-switches,task-clock", "-o", os.environ["STAT"] + "." + store + "." + os.path.basename(exe), "-p", str(p.pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.5)
        if os.environ.get("PERF"):
            perf = subprocess.Popen(["perf", "record", "-F", os.environ.get("PERF_F", "2000")] + os.environ.get("PERF_G", "-g").split() + ["-o", os.environ["PERF"] + "." + store, "-p", str(p.pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.5)
        lat = (["--latencies", "%s.%s.%s.%d.csv" % (os.environ["LAT"], store, os.path.basename(exe), time.time_ns())]
               if os.environ.get("LAT") else [])
        r = subprocess.run([gen, "bench", "api", "--url", url, "--token", tok, "--requests", str(n),
                            "--concurrency", str(conc), "--json"] + lat, capture_output=True, text=True, timeout=600)
        if perf: perf.send_signal(signal.SIGINT); perf.wait()
        t1 = ticks(p.pid); pg1 = pg.backend_ticks() if store == "pg" else 0
        res = json.loads(r.stdout[r.stdout.index("{"):])
        return dict(rate=res["submissions_per_second"], p50=res["p50_ms"], p99=res["p99_ms"], errors=res["errors"],
                    ticks=t1 - t0, pgticks=pg1 - pg0, load=la)
    finally:
        os.killpg(p.pid, signal.SIGTERM)
        try: p.wait(20)
        except subprocess.TimeoutExpired: os.killpg(p.pid, signal.SIGKILL); p.wait()
        if os.environ.get("KEEP_LOG"): shutil.copy(work + "/serve.log", os.environ["KEEP_LOG"] + ".%d.log" % time.time_ns())
        shutil.rmtree(work, True)

def main():
    a = argparse.ArgumentParser()
    a.add_argument("--rounds", type=int, default=3); a.add_argument("--stores", default="sqlite")
    a.add_argument("--gen"); a.add_argument("--n", type=int, default=20000); a.add_argument("--conc", type=int, default=64)
    a.add_argument("--extra", default=""); a.add_argument("bins", nargs="+")
    o = a.parse_args()
    bins = [b.split("=", 1) for b in o.bins]
    stores = o.stores.split(",")
    pg = Pg() if "pg" in stores else None
    res = {}
    try:
        for rnd in range(o.rounds):
            order = bins if rnd % 2 == 0 else bins[::-1]
            for store in stores:
                for label, exe in order:
                    r = one(exe, o.gen or exe, store, pg, o.n, o.conc, o.extra.split() if o.extra else [])
                    res.setdefault((store, label), []).append(r)
                    print("round %d %-6s %-8s rate %7.0f p50 %5.1f p99 %6.1f err %d ticks %d pg %d load %.1f" % (
                        rnd, store, label, r["rate"], r["p50"], r["p99"], r["errors"], r["ticks"], r["pgticks"], r["load"]), flush=True)
    finally:
        if pg: pg.stop()
    med = lambda xs: sorted(xs)[len(xs) // 2]
    for (store, label), rs in res.items():
        print("median %-6s %-8s rate %7.0f p99 %6.1f ticks %d pg %d" % (store, label, med([r["rate"] for r in rs]),
              med([r["p99"] for r in rs]), med([r["ticks"] for r in rs]), med([r["pgticks"] for r in rs])))

main()

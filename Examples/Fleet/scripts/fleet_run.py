#!/usr/bin/env python3
"""Runs downloader-fleet workers against PostgreSQL and nginx and checks the fleet's promises (issue #49).

Each trial is one job: a list of URLs (one missing: a 404) added in shards, three workers with --exit-when-done, and
what goes wrong meanwhile:
  --scenario e2e    the issue's run: one worker killed with SIGKILL (then started again on its folder), one stopped
                    with SIGSTOP past its lease and continued, PostgreSQL restarted mid-run; then a SIGTERM test.
  --scenario chaos  seeded random events: SIGKILL (and a restart), SIGSTOP for 0.5 s to twice the lease, PostgreSQL
                    stopped or killed -9 and started again. The seed is printed; --seed S replays a trial.
Checked after each trial: exactly one result per URL; every ok file identical to its source; the missing URL failed
with its 404; `status --json` agrees; and (e2e) GETs at most 1.05 times the files. SIGTERM: the worker ends within
5 s and its shard is free at once (no holder, no lease).
"""
import argparse, hashlib, json, os, random, re, signal, subprocess, sys, time

p = argparse.ArgumentParser()
p.add_argument("--fleet", required=True)
p.add_argument("--db", required=True)
p.add_argument("--pg", required=True, help="the cluster's folder (postgres.sh start/stop/kill)")
p.add_argument("--pgport", required=True)
p.add_argument("--postgres-sh", required=True)
p.add_argument("--www", required=True, help="nginx's root: the source files")
p.add_argument("--base", required=True, help="nginx's URL")
p.add_argument("--access-log", required=True)
p.add_argument("--work", required=True)
p.add_argument("--scenario", choices=["e2e", "chaos"], default="e2e")
p.add_argument("--urls", type=int, default=2000)
p.add_argument("--shard-size", type=int, default=100)
p.add_argument("--lease", type=float, default=6)
p.add_argument("-j", type=int, default=8)
p.add_argument("--trials", type=int, default=1)
p.add_argument("--seed", type=int)
p.add_argument("--deadline", type=float, default=240)
args = p.parse_args()
env = dict(os.environ, DATABASE_URL=args.db)
files = sorted(f for f in os.listdir(args.www) if f.endswith(".bin"))
problems = []


def fail(trial, message):
    print(f"  PROBLEM (trial {trial}): {message}", flush=True)
    problems.append((trial, message))


def fleet(*words, check=True):
    return subprocess.run([args.fleet, *words], env=env, capture_output=True, text=True, check=check)


def postgres(verb):
    words = [args.postgres_sh, verb, args.pg] + ([args.pgport] if verb == "start" else [])
    subprocess.run(words, check=True, stdout=subprocess.DEVNULL)


class Workers:
    def __init__(self, job, folder):
        self.job, self.folder, self.procs, self.logs, self.starts = job, folder, {}, {}, 0
        self.nodes = {}  # slot -> the node name of its current process (the User-Agent of its requests)

    def start(self, slot):
        self.starts += 1
        self.nodes[slot] = f"{self.job}-w{slot}-{self.starts}"
        os.makedirs(f"{self.folder}/w{slot}", exist_ok=True)
        log = open(f"{self.folder}/w{slot}.log", "a")
        self.procs[slot] = subprocess.Popen(
            [args.fleet, "work", "--job", self.job, "--dir", f"{self.folder}/w{slot}", "-j", str(args.j),
             "--lease", str(args.lease), "--exit-when-done", "--node", self.nodes[slot]],
            env=env, stdout=log, stderr=log)

    def held_shard(self, slot):
        """The shard the worker in `slot` claimed last (its log's last `claimed shard N`), or None."""
        with open(f"{self.folder}/w{slot}.log") as log:
            claims = re.findall(r"claimed shard (\d+) ", log.read())
        return int(claims[-1]) if claims else None

    def running(self):
        return [s for s, proc in self.procs.items() if proc.poll() is None]

    def kill_all(self):
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.kill()
                proc.wait()


def status(job):
    return json.loads(fleet("status", "--job", job, "--json").stdout)


def gets(trial):
    tag = f"trial={trial} "
    with open(args.access_log) as log:
        return sum(1 for line in log if line.startswith("GET ") and tag in line)


def run_trial(trial, rng):
    job = f"{args.scenario}-{trial}"
    folder = f"{args.work}/{job}"
    os.makedirs(folder, exist_ok=True)
    chosen = files[: args.urls]
    urls = [f"{args.base}/{name}?trial={trial}" for name in chosen] + [f"{args.base}/missing.bin?trial={trial}"]
    with open(f"{folder}/list.txt", "w") as out:
        out.write("# a comment\n\n" + "\n".join(urls) + "\n")
    added = fleet("add", "--job", job, "--shard-size", str(args.shard_size), f"{folder}/list.txt").stdout.strip()
    again = fleet("add", "--job", job, f"{folder}/list.txt").stdout.strip()
    if not added.startswith(f"added {len(urls)} ") or not again.startswith("added 0 "):
        fail(trial, f"add said {added!r}, then {again!r}")
    workers = Workers(job, folder)
    for slot in range(3):
        workers.start(slot)
    began = time.monotonic()
    stopped = {}  # slot -> when to continue it
    continued = []  # (node, wall-clock time, the shard it held when stopped) of each worker continued after a stop
    held = {}  # slot -> the shard it held when it was stopped
    pg_down_until = None
    events = []
    if args.scenario == "e2e":
        # The three faults, spread over the run: by the share of URLs done.
        plan = [(0.15, "kill", 0), (0.3, "stop", 1), (0.5, "pg", None)]
    while True:
        now = time.monotonic()
        if now - began > args.deadline:
            fail(trial, f"not done after {args.deadline} s: {status(job) if pg_down_until is None else 'db down'}")
            break
        for slot, until in list(stopped.items()):
            if now >= until:
                workers.procs[slot].send_signal(signal.SIGCONT)
                continued.append((workers.nodes[slot], time.time(), held.pop(slot, None)))
                events.append(f"{now - began:.1f}s continue w{slot}")
                del stopped[slot]
        if pg_down_until is not None and now >= pg_down_until:
            postgres("start")
            events.append(f"{now - began:.1f}s postgres up")
            pg_down_until = None
        running = workers.running()
        if not running and not stopped and pg_down_until is None:
            break
        if pg_down_until is None:
            try:
                state = status(job)
            except subprocess.CalledProcessError:
                state = None
            share = state and (state["done"] + state["failed"]) / state["urls"]
        else:
            share = None
        if args.scenario == "e2e":
            while plan and share is not None and share >= plan[0][0]:
                _, what, slot = plan.pop(0)
                if what == "kill":
                    workers.procs[slot].kill()
                    workers.procs[slot].wait()
                    events.append(f"{now - began:.1f}s SIGKILL w{slot}, started again")
                    workers.start(slot)
                elif what == "stop":
                    workers.procs[slot].send_signal(signal.SIGSTOP)
                    stopped[slot] = now + args.lease + 4
                    held[slot] = workers.held_shard(slot)
                    events.append(f"{now - began:.1f}s SIGSTOP w{slot} for {args.lease + 4:.0f} s")
                else:
                    postgres("stop")
                    pg_down_until = now + 3
                    events.append(f"{now - began:.1f}s postgres stopped for 3 s")
        elif running and rng.random() < 0.08:
            what = rng.choice(["kill", "stop", "pg", "pgkill"])
            slot = rng.choice(running)
            if what == "kill" and slot not in stopped:
                workers.procs[slot].kill()
                workers.procs[slot].wait()
                workers.start(slot)
                events.append(f"{now - began:.1f}s SIGKILL w{slot}, started again")
            elif what == "stop" and slot not in stopped:
                pause = rng.uniform(0.5, 2 * args.lease)
                workers.procs[slot].send_signal(signal.SIGSTOP)
                stopped[slot] = now + pause
                held[slot] = workers.held_shard(slot)
                events.append(f"{now - began:.1f}s SIGSTOP w{slot} for {pause:.1f} s")
            elif what in ("pg", "pgkill") and pg_down_until is None:
                postgres("stop" if what == "pg" else "kill")
                pg_down_until = now + rng.uniform(0.2, 4)
                events.append(f"{now - began:.1f}s postgres {'stopped' if what == 'pg' else 'killed -9'}")
        time.sleep(0.25)
    if pg_down_until is not None:
        postgres("start")
    workers.kill_all()
    elapsed = time.monotonic() - began
    print(f"  trial {trial}: {elapsed:.1f} s, {workers.starts} worker starts; " + "; ".join(events), flush=True)
    check(trial, job, chosen, urls)
    for node, at, shard in continued:
        late_starts(trial, node, at, shard, stopped_past_lease=args.scenario == "e2e")


def late_starts(trial, node, at, shard, stopped_past_lease):
    """Requests a worker started after it was continued, and those of them that fetched again what another worker
    fetched of the shard it held when stopped.

    A worker stopped past its lease must start no download of that shard once it runs again (its lease has ended by
    its own clock): each such request is one the shard's next holder makes too. (Its requests for other shards, and
    for the same shard claimed again when nobody took it over, are its own work.)"""
    tag = f"trial={trial} "
    agent = f'"downloader-fleet ({node})"'
    of_shard = set()
    if shard is not None:
        rows = subprocess.run(["psql", args.db, "-Atc", f"SELECT url FROM fleet_urls WHERE shard = {shard}"],
                              capture_output=True, text=True, check=True).stdout.split()
        of_shard = {url[len(args.base):] for url in rows if url.startswith(args.base)}
    late, others = set(), set()
    with open(args.access_log) as log:
        for line in log:
            if not line.startswith("GET ") or tag not in line:
                continue
            fields = line.split(" ")
            uri, msec, seconds = fields[1], float(fields[4]), float(fields[5])
            if line.rstrip("\n").endswith(agent):
                if msec - seconds > at:
                    late.add(uri)
            else:
                others.add(uri)
    twice = late & others & of_shard
    print(f"  trial {trial}: {node} after its continue: {len(late)} requests started, {len(twice)} of them of URLs "
          f"of its old shard ({shard}) that another worker fetched too", flush=True)
    if stopped_past_lease and twice:
        fail(trial, f"{node} started {len(twice)} requests of its old shard's URLs, which another worker fetched, "
             f"after its lease ended")


def check(trial, job, chosen, urls):
    lines = [json.loads(line) for line in fleet("results", "--job", job).stdout.splitlines()]
    by_url = {}
    for line in lines:
        if line["url"] in by_url:
            fail(trial, f"two results for {line['url']}")
        by_url[line["url"]] = line
        missing_keys = {"url", "status", "time", "node"} - set(line)
        if missing_keys:
            fail(trial, f"result without {missing_keys}: {line}")
    if set(by_url) != set(urls):
        fail(trial, f"{len(set(urls) - set(by_url))} URLs without a result, {len(set(by_url) - set(urls))} unknown")
    wrong = 0
    for name, url in zip(chosen, urls):
        line = by_url.get(url)
        if not line or line["status"] != "ok":
            fail(trial, f"{url} did not succeed: {line}")
            continue
        with open(f"{args.www}/{name}", "rb") as source, open(line["path"], "rb") as copy:
            if hashlib.sha256(source.read()).digest() != hashlib.sha256(copy.read()).digest():
                wrong += 1
        if line.get("size") != os.path.getsize(f"{args.www}/{name}"):
            fail(trial, f"{url}: size {line.get('size')}")
    if wrong:
        fail(trial, f"{wrong} files differ from their source")
    missing = by_url.get(urls[-1], {})
    if missing.get("status") != "failed" or "404" not in (missing.get("error") or ""):
        fail(trial, f"the missing URL: {missing}")
    state = status(job)
    expected = {"job": job, "urls": len(urls), "done": len(urls) - 1, "failed": 1, "remaining": 0}
    if {key: state.get(key) for key in expected} != expected:
        fail(trial, f"status {state}")
    if sum(node["done"] for node in state["nodes"]) != len(urls):
        fail(trial, f"the nodes' done add up to {sum(node['done'] for node in state['nodes'])}")
    got = gets(trial)
    print(f"  trial {trial}: {len(lines)} results, {got} GETs for {len(urls)} URLs ({got / len(urls):.3f}x)", flush=True)
    if args.scenario == "e2e" and got > 1.05 * len(urls):
        fail(trial, f"{got} GETs for {len(urls)} URLs")


def sigterm_test(trial):
    job = f"sigterm-{trial}"
    folder = f"{args.work}/{job}"
    os.makedirs(f"{folder}/w", exist_ok=True)
    urls = [f"{args.base}/{name}?trial={trial}" for name in files[:300]]
    with open(f"{folder}/list.txt", "w") as out:
        out.write("\n".join(urls) + "\n")
    fleet("add", "--job", job, "--shard-size", "300", f"{folder}/list.txt")
    log = open(f"{folder}/w.log", "w")
    proc = subprocess.Popen([args.fleet, "work", "--job", job, "--dir", f"{folder}/w", "-j", "4", "--lease", "30",
                             "--node", "term"], env=env, stdout=log, stderr=log)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and status(job)["done"] < 20:
        time.sleep(0.2)
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    took = time.monotonic() - sent
    held = subprocess.run(
        ["psql", args.db, "-At", "-c",
         f"SELECT count(*) FROM fleet_shards WHERE job = '{job}' AND (holder IS NOT NULL OR lease_until IS NOT NULL)"],
        capture_output=True, text=True, check=True).stdout.strip()
    state = status(job)
    print(f"  SIGTERM: exit {proc.returncode} after {took:.2f} s; {state['done']} of 300 done and committed; "
          f"shards still held: {held}", flush=True)
    if took > 5:
        fail(trial, f"SIGTERM took {took:.2f} s")
    if held != "0":
        fail(trial, "the shard was not handed back")
    if took > 5 or held != "0":
        # Once in CI (stop 61) the stop ran into the worker's 4.5 s forced exit before the hand-back; its log says
        # which database call was still waiting (PostgreSQL runs with fsync=on, on a disk the builds just filled).
        log.close()
        with open(f"{folder}/w.log") as text:
            print("  the worker's log, last lines:\n    " + "\n    ".join(text.read().splitlines()[-15:]), flush=True)
    if state["done"] < 20:
        fail(trial, f"only {state['done']} done")


seeds = [args.seed] if args.seed is not None else [random.SystemRandom().randrange(1, 10**6) for _ in range(args.trials)]
for trial in seeds:
    print(f"== {args.scenario} trial, seed {trial} (replay: --seed {trial})", flush=True)
    run_trial(trial, random.Random(trial))
if args.scenario == "e2e":
    sigterm_test(seeds[0])
print(f"{len(problems)} problems in {len(seeds)} trials")
sys.exit(1 if problems else 0)

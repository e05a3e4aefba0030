#!/usr/bin/env python3
"""A seeded soak of downloader-server (issue #50): random aria2 calls (valid and not), the page's polling, /metrics
scrapes, WebSocket listeners, floods of idle connections, and SIGTERM or kill -9 restarts, against files a local
server (nginx in e2e.sh) serves. Invariants: the process never dies on its own and exits 0 on SIGTERM; every answer
is JSON-RPC (a result or an error) or an expected status; at the end every download is let finish and every file in
the folder is identical to its source. Prints the seed; SOAK_SEED replays one.

Usage: soak.py SERVER_BINARY WORK_DIR BASE_URL SOURCE_DIR SECONDS
"""
import hashlib
import http.client
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

server_binary, work, base, sources, seconds = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5])
seed = int(os.environ.get("SOAK_SEED", random.randrange(1 << 32)))
rng = random.Random(seed)
print(f"soak: seed {seed} ({seconds:.0f} s); replay with SOAK_SEED={seed}", flush=True)
SECRET = "soak-secret"
folder = os.path.join(work, "soak-dl")
os.makedirs(folder, exist_ok=True)
names = sorted(n for n in os.listdir(sources) if n.endswith(".bin"))
problems = []
lock = threading.Lock()
state = {"port": None, "process": None, "stopping": False}


def problem(text):
    with lock:
        problems.append(text)
    print(f"soak: PROBLEM: {text}", flush=True)


def start():
    log = open(os.path.join(work, "soak-server.log"), "a")
    process = subprocess.Popen([server_binary, "--port", "0", "--dir", folder, "-j", "3"], stdout=subprocess.PIPE,
                               stderr=log, env={**os.environ, "DOWNLOADER_RPC_SECRET": SECRET, "LOG_LEVEL": "warning"})
    line = process.stdout.readline().decode()
    match = re.search(r"listening on http://127\.0\.0\.1:(\d+)/", line)
    if not match:
        problem(f"no start: {line!r}")
        sys.exit(1)
    state["port"], state["process"] = int(match.group(1)), process


def post(body, timeout=30):
    request = urllib.request.Request(f"http://127.0.0.1:{state['port']}/jsonrpc", data=body.encode())
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def call(method, *params):
    body = json.dumps({"jsonrpc": "2.0", "id": "s", "method": method, "params": ["token:" + SECRET, *params]})
    status, data = post(body)
    answer = json.loads(data)
    if ("result" in answer) == ("error" in answer):
        problem(f"{method}: neither result nor error: {answer}")
    if "error" in answer and status not in (400, 404, 500):
        problem(f"{method}: error with status {status}")
    return answer


def random_call():
    url = f"{base}/{rng.choice(names)}"
    gid = hashlib.md5(url.encode()).hexdigest()[:16]
    choice = rng.randrange(14)
    if choice < 4:
        call("aria2.addUri", [url], {"pause": rng.random() < 0.2})
    elif choice == 4:
        call("aria2.pause", gid)
    elif choice == 5:
        call("aria2.unpause", gid)
    elif choice == 6:
        call("aria2.remove", gid)
    elif choice == 7:
        call(rng.choice(["aria2.tellActive", "aria2.getGlobalStat", "aria2.getGlobalOption"]))
    elif choice == 8:
        call(rng.choice(["aria2.tellWaiting", "aria2.tellStopped"]), rng.randrange(-5, 5), rng.randrange(0, 20))
    elif choice == 9:
        call("aria2.tellStatus", rng.choice([gid, "0123456789abcdef", "zz"]))
    elif choice == 10:
        call("aria2.changeGlobalOption", {"max-concurrent-downloads": str(rng.randrange(1, 6))})
    elif choice == 11:
        calls = [{"methodName": "aria2.tellStatus", "params": ["token:" + SECRET, gid]} for _ in range(rng.randrange(20))]
        call("system.multicall", calls)
    elif choice == 12:
        status, _ = post(rng.choice(["{nope", "[]", '{"jsonrpc":"2.0","id":1,"method":"aria2.getVersion"}', "x" * 5000]))
        if status >= 500 and status != 500:
            problem(f"garbage answered {status}")
    else:
        call("aria2.purgeDownloadResult")


def background(name, action, pause):
    def loop():
        while not state["stopping"]:
            try:
                action()
            except (OSError, urllib.error.URLError, http.client.HTTPException, json.JSONDecodeError):
                pass  # the server is restarting; the restart's own checks say whether it came back
            time.sleep(pause)
    thread = threading.Thread(target=loop, name=name, daemon=True)
    thread.start()
    return thread


def poll_page():
    for path in ["/api/downloads?limit=200", "/metrics", "/healthz"]:
        request = urllib.request.Request(f"http://127.0.0.1:{state['port']}{path}",
                                         headers={"Authorization": "Bearer " + SECRET})
        with urllib.request.urlopen(request, timeout=30) as answer:
            if answer.status != 200:
                problem(f"{path}: {answer.status}")
            answer.read()


def flood():
    sockets = []
    for _ in range(rng.randrange(50, 300)):
        s = socket.create_connection(("127.0.0.1", state["port"]), timeout=5)
        if rng.random() < 0.5:
            s.sendall(b"GET /api/downloads HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # a half-sent request
        sockets.append(s)
    time.sleep(rng.uniform(0.1, 1))
    for s in sockets:
        s.close()


start()
threads = [background("page", poll_page, 0.05), background("flood", flood, 2)]
deadline = time.monotonic() + seconds
restarts = 0
calls = 0
next_restart = time.monotonic() + rng.uniform(2, 6)
while time.monotonic() < deadline:
    process = state["process"]
    if process.poll() is not None:
        problem(f"the server died by itself: exit {process.returncode}")
        start()
    if time.monotonic() >= next_restart:
        how = rng.choice(["SIGTERM", "SIGKILL"])
        process.send_signal(signal.SIGTERM if how == "SIGTERM" else signal.SIGKILL)
        try:
            status = process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            problem(f"{how}: still running after 15 s")
            process.kill()
            status = process.wait()
        if how == "SIGTERM" and status != 0:
            problem(f"SIGTERM: exit {status}")
        restarts += 1
        start()
        next_restart = time.monotonic() + rng.uniform(2, 6)
    try:
        random_call()
        calls += 1
    except (OSError, urllib.error.URLError, http.client.HTTPException) as error:
        if state["process"].poll() is None:
            problem(f"a call failed while the server ran: {error}")
state["stopping"] = True

# The end: every download let finish; every file identical to its source.
call("aria2.changeGlobalOption", {"max-concurrent-downloads": "8"})
call("aria2.unpauseAll")
end = time.monotonic() + 180
while time.monotonic() < end:
    active = call("aria2.tellActive")["result"] + call("aria2.tellWaiting", 0, 1000)["result"]
    if not active:
        break
    time.sleep(0.5)
else:
    problem(f"downloads not finished after 180 s: {[d['gid'] for d in active]}")
failed = [d for d in call("aria2.tellStopped", 0, 1000)["result"] if d["status"] == "error"]
for download in failed:
    problem(f"{download['gid']} failed: {download.get('errorMessage')}")
checked = 0
for entry in os.listdir(folder):
    if entry.startswith("."):
        continue
    source = re.sub(r" \(\d+\)(\.bin)$", r"\1", entry)
    digest = lambda path: hashlib.sha256(open(path, "rb").read()).hexdigest()
    if source not in names or digest(os.path.join(folder, entry)) != digest(os.path.join(sources, source)):
        problem(f"{entry} is not a copy of a source")
    checked += 1
state["process"].send_signal(signal.SIGTERM)
if state["process"].wait(timeout=15) != 0:
    problem("the final SIGTERM did not exit 0")
print(f"soak: {calls} calls, {restarts} restarts, {checked} files identical; {len(problems)} problems", flush=True)
sys.exit(1 if problems else 0)

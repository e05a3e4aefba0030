#!/usr/bin/env python3
"""Drives the page at / in headless chromium through the DevTools protocol, as a user would (issue #50): adds a URL
with the form, then pauses, resumes and removes it with the row's buttons, waiting (with deadlines) for the row to
show each of aria2's states.

Usage: page-check.py CHROMIUM PAGE_URL URL_TO_ADD WORK_DIR
"""
import json
import os
import subprocess
import sys
import time
import urllib.request

import websocket  # websocket-client, which aria2p depends on

chromium, page, url, work = sys.argv[1:5]
profile = os.path.join(work, "chromium-profile")
browser = subprocess.Popen(
    [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-port=0",
     f"--user-data-dir={profile}", page],
    stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "page-check-chromium.log"), "w"))


def fail(message):
    print(f"page-check: FAIL: {message}", file=sys.stderr)
    browser.kill()
    sys.exit(1)


def until(what, check, seconds=30):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    fail(f"{what} within {seconds} s")


port_file = os.path.join(profile, "DevToolsActivePort")
port = until("chromium's DevTools port", lambda: os.path.exists(port_file) and open(port_file).read().split()[0])
# The page's own target (chromium may list others, such as about:blank).
targets = until("the page's target", lambda: [
    t for t in json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list"))
    if t["type"] == "page" and t["url"].startswith(page.split("#")[0])])
socket = websocket.create_connection(targets[0]["webSocketDebuggerUrl"], timeout=30)
serial = 0


def evaluate(expression):
    global serial
    serial += 1
    socket.send(json.dumps({"id": serial, "method": "Runtime.evaluate",
                            "params": {"expression": expression, "returnByValue": True}}))
    while True:
        answer = json.loads(socket.recv())
        if answer.get("id") == serial:
            return answer.get("result", {}).get("result", {}).get("value")


ROWS = "JSON.stringify([...document.querySelectorAll('tr[id^=gid-]')].map(r => " \
       "[r.id.slice(4), r.dataset.state, r.children[1].textContent]))"


def row(name):
    for gid, state, file in json.loads(evaluate(ROWS) or "[]"):
        if file.endswith(name):
            return gid, state
    return None


name = url.rsplit("/", 1)[-1]
until("the page's first listing", lambda: evaluate(
    "(e => e ? e.textContent : 'Loading…')(document.getElementById('summary'))") != "Loading…")
evaluate(f"document.getElementById('url').value = {json.dumps(url)}; "
         "document.querySelector('#add button').click()")
gid, state = until(f"a row for {name} after Add", lambda: row(name))
print(f"page-check: added {name} as {gid} ({state})")
until(f"{gid} active", lambda: row(name) and row(name)[1] in ("active", "waiting"))
for label, wanted in [("pause", ("paused",)), ("resume", ("active", "waiting", "complete")), ("pause", ("paused",))]:
    clicked = until(f"a {label} button on {gid}", lambda: evaluate(
        f"(b => b ? (b.click(), true) : false)(document.querySelector('#gid-{gid} button.{label}'))"))
    state = until(f"{gid} {'/'.join(wanted)} after {label}", lambda: row(name) and row(name)[1] in wanted and row(name)[1])
    print(f"page-check: {label} → {state}")
until(f"a remove button on {gid}", lambda: evaluate(
    f"(b => b ? (b.click(), true) : false)(document.querySelector('#gid-{gid} button.remove'))"))
until(f"{gid}'s row gone after remove", lambda: row(name) is None)
print("page-check: remove → gone")
message = evaluate("document.getElementById('message').textContent")
if message:
    fail(f"the page shows an error: {message}")
browser.kill()
print("page-check: PASS")

"""Drives downloader-server with aria2p, a real aria2 client library from PyPI, as its users would.

usage: python3 aria2p-check.py PORT SECRET URL EXPECTED_SHA256
Adds URL with its checksum, sees it in aria2p's listings with aria2p's field parsing, pauses and resumes it, reads
the global stats, listens to aria2's notifications over the WebSocket, and prints the GID. Leaves the download running.
"""
import sys
import time

import aria2p

port, secret, url, sha256 = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
api = aria2p.API(aria2p.Client(host="http://127.0.0.1", port=int(port), secret=secret))

version = api.client.get_version()
assert "version" in version, version

download = api.add_uris([url], options={"checksum": "sha-256=" + sha256})
assert len(download.gid) == 16, download.gid

# aria2p's own parsing of every listed download (tellActive + tellWaiting + tellStopped).
listed = {d.gid: d for d in api.get_downloads()}
assert download.gid in listed, listed
d = listed[download.gid]
print(f"aria2p sees {d.gid}: status={d.status} name={d.name} total={d.total_length} done={d.completed_length} "
      f"progress={d.progress_string()} speed={d.download_speed_string()} dir={d.dir}", flush=True)

# Wait until it runs, pause it, see it paused, resume it.
deadline = time.time() + 30
while time.time() < deadline:
    d.update()
    if d.status == "active" and d.completed_length > 0:
        break
    time.sleep(0.1)
assert d.status == "active", d.status

# aria2p's WebSocket listener gets aria2's notifications. It connects in its own thread, at a moment this script
# cannot see: pause and resume until a pause is announced (a deadline, not a delay).
notified = []
api.listen_to_notifications(
    threaded=True, timeout=1, handle_signals=False,
    on_download_pause=lambda _, gid: notified.append(("pause", gid)),
    on_download_start=lambda _, gid: notified.append(("start", gid)))
deadline = time.time() + 30
while ("pause", d.gid) not in notified and time.time() < deadline:
    assert api.pause([d]) == [True]
    d.update()
    assert d.status == "paused", d.status
    for _ in range(20):
        if ("pause", d.gid) in notified:
            break
        time.sleep(0.1)
    assert api.resume([d]) == [True]
    d.update()
    assert d.status in ("active", "waiting"), d.status
while ("start", d.gid) not in notified[notified.index(("pause", d.gid)):] and time.time() < deadline:
    time.sleep(0.1)
api.stop_listening()
assert ("pause", d.gid) in notified and ("start", d.gid) in notified, notified
print(f"aria2p notifications: {notified}", flush=True)

stats = api.get_stats()
print(f"aria2p stats: active={stats.num_active} waiting={stats.num_waiting} stopped={stats.num_stopped} "
      f"speed={stats.download_speed_string()}", flush=True)

# A wrong secret is refused with aria2's error.
try:
    aria2p.API(aria2p.Client(host="http://127.0.0.1", port=int(port), secret="wrong")).get_stats()
    raise SystemExit("a wrong secret was accepted")
except aria2p.ClientException as error:
    assert error.code == 1 and "Unauthorized" in error.message, (error.code, error.message)

print(d.gid)

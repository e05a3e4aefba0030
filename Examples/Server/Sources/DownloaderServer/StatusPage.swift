/// The read-only page at `/`: a table of the downloads, refreshed from `/api/downloads` every second.
enum StatusPage {
    static let html = """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <title>downloader-server</title>
        <style>
          body { font: 14px system-ui, sans-serif; margin: 2em; color: #222; }
          table { border-collapse: collapse; width: 100%; }
          th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid #ddd; }
          td.name { max-width: 28em; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
          progress { width: 12em; }
          .failed { color: #b00; }
          .completed { color: #070; }
        </style>
        </head>
        <body>
        <h1>Downloads</h1>
        <p id="summary">Loading…</p>
        <table>
          <thead><tr><th>GID</th><th>File</th><th>State</th><th>Progress</th><th>Bytes</th><th>Speed</th></tr></thead>
          <tbody id="downloads"></tbody>
        </table>
        <script>
        function bytes(n) {
          if (n == null) return "?";
          const units = ["B", "KiB", "MiB", "GiB", "TiB"];
          let i = 0;
          while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
          return (i == 0 ? n : n.toFixed(1)) + " " + units[i];
        }
        function cell(row, text, className) {
          const td = document.createElement("td");
          td.textContent = text;
          if (className) td.className = className;
          row.appendChild(td);
          return td;
        }
        async function refresh() {
          try {
            // With --rpc-secret the page is opened as /#token=SECRET: the fragment never reaches a server.
            const token = new URLSearchParams(location.hash.slice(1)).get("token");
            const answer = await fetch("/api/downloads", token ? { headers: { Authorization: "Bearer " + token } } : {});
            if (answer.status == 401) {
              document.getElementById("summary").textContent = "This server has a secret: open /#token=SECRET";
              return;
            }
            const rows = await answer.json();
            const body = document.getElementById("downloads");
            body.replaceChildren();
            let done = 0;
            for (const { gid, download } of rows) {
              if (download.state == "completed") done++;
              const row = document.createElement("tr");
              row.id = "gid-" + gid;
              row.dataset.state = download.state;
              cell(row, gid);
              cell(row, download.path || decodeURIComponent(download.url.split("/").pop() || download.url), "name");
              const state = download.failure ? download.state + ": " + download.failure.message : download.state;
              cell(row, state + (download.isInterrupted ? " (interrupted)" : ""), download.state);
              const bar = document.createElement("progress");
              bar.max = 1;
              bar.value = download.fractionCompleted;
              cell(row, "").appendChild(bar);
              cell(row, bytes(download.bytesWritten) + " / " + bytes(download.bytesExpected));
              cell(row, download.bytesPerSecond ? bytes(download.bytesPerSecond) + "/s" : "");
              body.appendChild(row);
            }
            document.getElementById("summary").textContent = done + " of " + rows.length + " completed";
          } catch (error) {
            document.getElementById("summary").textContent = "The server does not answer (" + error + ")";
          }
        }
        refresh();
        setInterval(refresh, 1000);
        </script>
        </body>
        </html>
        """
}

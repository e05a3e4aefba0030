/// The page at `/`: the downloads from `/api/downloads` (refreshed every second, the first 200), under aria2's state
/// names, with a form that adds a URL and a pause, resume and remove button on each row, all through the JSON-RPC
/// at `/jsonrpc` (`aria2.addUri`, `aria2.pause`, `aria2.unpause`, `aria2.remove`), the secret included when the
/// page was opened as `/#token=SECRET`.
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
          form { margin: 1em 0; }
          input[type=url] { width: 32em; }
          .error { color: #b00; }
          .complete { color: #070; }
          #message:empty { display: none; }
        </style>
        </head>
        <body>
        <h1>Downloads</h1>
        <form id="add"><input type="url" id="url" placeholder="https://…" required> <button>Add</button></form>
        <p id="message" class="error"></p>
        <p id="summary">Loading…</p>
        <table>
          <thead><tr><th>GID</th><th>File</th><th>Status</th><th>Progress</th><th>Bytes</th><th>Speed</th><th></th></tr></thead>
          <tbody id="downloads"></tbody>
        </table>
        <script>
        // With --rpc-secret the page is opened as /#token=SECRET: the fragment never reaches a server.
        const token = new URLSearchParams(location.hash.slice(1)).get("token");
        // aria2's names for the library's states.
        const status = { downloading: "active", queued: "waiting", suspended: "paused", idle: "paused",
                         completed: "complete", failed: "error" };
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
        async function rpc(method, params) {
          const body = { jsonrpc: "2.0", id: "page", method, params: token ? ["token:" + token, ...params] : params };
          const answer = await fetch("/jsonrpc", { method: "POST", body: JSON.stringify(body),
                                                   headers: { "Content-Type": "application/json" } });
          const reply = await answer.json();
          document.getElementById("message").textContent = reply.error ? method + ": " + reply.error.message : "";
          refresh();
          return reply;
        }
        function button(td, label, method, gid) {
          const b = document.createElement("button");
          b.textContent = label;
          b.className = label.toLowerCase();
          b.onclick = () => rpc(method, [gid]);
          td.appendChild(b);
        }
        document.getElementById("add").onsubmit = (event) => {
          event.preventDefault();
          const field = document.getElementById("url");
          rpc("aria2.addUri", [[field.value]]).then((reply) => { if (!reply.error) field.value = ""; });
        };
        async function refresh() {
          try {
            const answer = await fetch("/api/downloads?limit=200",
                                       token ? { headers: { Authorization: "Bearer " + token } } : {});
            if (answer.status == 401) {
              document.getElementById("summary").textContent = "This server has a secret: open /#token=SECRET";
              return;
            }
            const rows = await answer.json();
            const total = answer.headers.get("X-Total-Count") || rows.length;
            const body = document.getElementById("downloads");
            body.replaceChildren();
            let done = 0;
            for (const { gid, download } of rows) {
              const state = status[download.state] || download.state;
              if (state == "complete") done++;
              const row = document.createElement("tr");
              row.id = "gid-" + gid;
              row.dataset.state = state;
              cell(row, gid);
              cell(row, download.path || decodeURIComponent(download.url.split("/").pop() || download.url), "name");
              const text = download.failure ? state + ": " + download.failure.message : state;
              cell(row, text + (download.isInterrupted ? " (interrupted)" : ""), state);
              const bar = document.createElement("progress");
              bar.max = 1;
              bar.value = download.fractionCompleted;
              cell(row, "").appendChild(bar);
              cell(row, bytes(download.bytesWritten) + " / " + bytes(download.bytesExpected));
              cell(row, download.bytesPerSecond ? bytes(download.bytesPerSecond) + "/s" : "");
              const controls = cell(row, "");
              if (state == "active" || state == "waiting") button(controls, "Pause", "aria2.pause", gid);
              if (state == "paused") button(controls, "Resume", "aria2.unpause", gid);
              if (state != "complete" && state != "error") button(controls, "Remove", "aria2.remove", gid);
              body.appendChild(row);
            }
            const shown = rows.length < total ? " (the first " + rows.length + " shown)" : "";
            document.getElementById("summary").textContent = done + " of " + total + " complete" + shown;
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

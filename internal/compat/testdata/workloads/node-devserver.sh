# proves: a development server can listen on a loopback port inside the
# sandbox and be reached from inside it: node's http servers on 127.0.0.1
# and ::1, fetched by node's fetch (also as localhost) and by curl, and a
# server-sent event stream held open to its end.
set -eux
cat > server.mjs <<'JS'
import http from "node:http";
const srv = http.createServer((req, res) => {
  if (req.url === "/events") {
    res.writeHead(200, { "content-type": "text/event-stream" });
    let n = 0;
    const t = setInterval(() => { res.write(`data: ${n++}\n\n`); if (n === 3) { clearInterval(t); res.end(); } }, 10);
    return;
  }
  res.end(`hello from ${req.url}\n`);
});
srv.listen(Number(process.env.PORT), process.env.HOST, () => console.log("listening"));
JS
PORT=5173 HOST=127.0.0.1 node server.mjs > server.log 2>&1 &
pid=$!
PORT=5174 HOST=::1 node server.mjs > server6.log 2>&1 &
pid6=$!
for i in $(seq 1 3000); do
  grep -q listening server.log && grep -q listening server6.log && break
  sleep 0.02
done
node -e '
(async () => {
  for (const base of ["http://127.0.0.1:5173", "http://localhost:5173", "http://[::1]:5174"]) {
    const r = await fetch(base + "/index.html");
    const t = await r.text();
    if (t !== "hello from /index.html\n") throw new Error(base + ": " + t);
  }
  const ev = await (await fetch("http://127.0.0.1:5173/events")).text();
  if (!ev.includes("data: 2")) throw new Error(ev);
  console.log("fetch: ok");
})().catch((e) => { console.error(e); process.exit(1); });
'
curl -fsS http://127.0.0.1:5173/curl | grep -qx 'hello from /curl'
kill "$pid" "$pid6"
wait "$pid" "$pid6" || true

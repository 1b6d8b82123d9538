# proves: a development server on a loopback port inside the sandbox can be
# reached from inside it by the clients that obey the proxy variables (curl,
# Python's urllib, as test suites and health checks use them) also when the
# sandbox may reach the network, as an agent that installs packages and then
# runs its project's server does.
set -eux
mkdir -p site
printf 'hello from the dev server\n' > site/index.html
python3 -m http.server --bind 127.0.0.1 --directory site 8000 > server.log 2>&1 &
pid=$!
for i in $(seq 1 3000); do
  python3 -c 'import socket; socket.create_connection(("127.0.0.1", 8000), timeout=1)' 2> /dev/null && break
  sleep 0.02
done
curl -fsS http://127.0.0.1:8000/index.html | grep -qx 'hello from the dev server'
curl -fsS http://localhost:8000/index.html | grep -qx 'hello from the dev server'
python3 -c '
import urllib.request
body = urllib.request.urlopen("http://127.0.0.1:8000/index.html", timeout=30).read()
assert body == b"hello from the dev server\n", body
'
kill "$pid"

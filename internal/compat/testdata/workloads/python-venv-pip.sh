# proves: a Python virtual environment can be created in the workspace and pip
# installs a package into it from a package index on the host's loopback,
# reached through cordon's egress proxy with the destination allowed (--allow
# 127.0.0.1:PORT); the installed module imports and its console script runs.
set -eux
python3 -m venv .venv
.venv/bin/pip --version
.venv/bin/pip install --no-cache-dir --index-url "$INDEX_URL" cordon-compat-hello
.venv/bin/python -c 'import cordon_compat_hello as h; assert h.greet("agent") == "hello, agent"'
.venv/bin/cordon-compat-hello | grep -qx 'hello, world'
list=$(.venv/bin/pip list)
printf "%s\n" "$list" | grep -q "^cordon-compat-hello  *1\.0$"

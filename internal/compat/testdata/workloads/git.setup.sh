# An existing repository in the workspace, as an agent finds it: made on the
# host by the workspace's owner before the sandbox starts.
set -eu
git init -q -b main .
mkdir -p src docs
printf 'int main(void) { return 0; }\n' > src/main.c
printf 'lib\n' > src/lib.c
printf 'readme\n' > docs/README
printf 'workload.sh\n' >> .git/info/exclude
git add .
git commit -qm 'initial import'

# proves: git clean returns the repository the agent finds in its workspace
# (made on the host by git.setup.sh) to a fresh checkout: build output,
# untracked and ignored files and directories removed, and it says it did.
set -eux
mkdir -p build/obj
printf 'o\n' > build/obj/main.o
printf 'scratch\n' > notes.txt
printf 'build/\n' > .gitignore
git clean -fdx
test ! -e build && test ! -e notes.txt && test ! -e .gitignore
test -z "$(git status --porcelain --ignored)"

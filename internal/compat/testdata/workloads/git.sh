# proves: git's everyday commands work in the repository the agent finds in
# its workspace (made on the host by git.setup.sh): status, branch, commit,
# git mv across directories, rebase, stash, a linked worktree, tag and gc;
# and in repositories it makes itself (git init, commit, clone, log).
set -eux
export GIT_AUTHOR_NAME=agent GIT_AUTHOR_EMAIL=agent@example.invalid
export GIT_COMMITTER_NAME=agent GIT_COMMITTER_EMAIL=agent@example.invalid
test -z "$(git status --porcelain)"
git switch -qc feature
git mv src/lib.c docs/lib.c
git commit -qm 'move lib.c into docs'
git switch -q main
printf 'two\n' > src/b.c
git add src/b.c
git commit -qm 'add b.c'
git switch -q feature
git rebase -q main
test -f docs/lib.c && test -f src/b.c && test ! -e src/lib.c
printf 'work in progress\n' >> docs/README
git stash -q
git diff --quiet
git stash pop -q
grep -q 'work in progress' docs/README
git commit -qam 'readme'
git worktree add -q wt-main main
test -f wt-main/src/lib.c
git -C wt-main log --oneline | grep -q 'add b.c'
git worktree remove wt-main
git tag v1
git gc -q
git fsck --no-progress --no-dangling
test "$(git rev-list --count HEAD)" = 4
# Repositories of its own (a new project in the workspace, a scratch one in
# the home directory), and a clone.
git init -q -b main new-project
printf 'y\n' > new-project/y
git -C new-project add y
git -C new-project commit -qm y
git init -q -b main "$HOME/scratch"
printf 'x\n' > "$HOME/scratch/x"
git -C "$HOME/scratch" add x
git -C "$HOME/scratch" commit -qm x
git clone -q "$HOME/scratch" /tmp/clone
test "$(git -C /tmp/clone log --format=%s)" = x

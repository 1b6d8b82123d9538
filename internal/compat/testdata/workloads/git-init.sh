# proves: an agent can start version control in the workspace it was given
# when that is not a repository yet: git init at its top, add, commit, log.
set -eux
export GIT_AUTHOR_NAME=agent GIT_AUTHOR_EMAIL=agent@example.invalid
export GIT_COMMITTER_NAME=agent GIT_COMMITTER_EMAIL=agent@example.invalid
printf 'print("hello")\n' > app.py
git init -q -b main .
git add app.py
git commit -qm 'first commit'
test "$(git log --format=%s)" = 'first commit'

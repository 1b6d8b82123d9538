# proves: long shell pipelines with many processes work: a pipeline of forty
# stages, xargs running jobs in parallel, find -exec, sort with its temporary
# files, process substitution, named pipes, and a hundred short-lived
# processes, all within the default profile's process limit.
set -eux
seq 1 20000 > numbers
# Forty stages in one pipeline.
cmd="cat numbers"
for i in $(seq 1 38); do cmd="$cmd | cat"; done
test "$(eval "$cmd" | awk '{s += $1} END {printf "%d\n", s}')" = 200010000
# A classic text pipeline.
test "$(seq 1 50000 | sed 's/$/ word/' | tr a-z A-Z | grep -v 7 | sort -rn -S 1M -T /tmp | uniq | cut -d' ' -f1 | head -n 3 | tail -n 1 | wc -l)" = 1
# Parallel jobs.
mkdir -p jobs
seq 1 100 | xargs -P 8 -I{} sh -c 'echo {} > jobs/{}.out'
test "$(find jobs -name '*.out' | wc -l)" = 100
test "$(find jobs -name '*.out' -exec cat {} + | sort -n | tail -n 1)" = 100
# Process substitution and a named pipe.
diff <(seq 1 100) <(seq 1 100 | sort -n)
mkfifo fifo
(seq 1 1000 > fifo) &
test "$(wc -l < fifo)" = 1000
wait
# Many short-lived processes, a few at a time.
for i in $(seq 1 100); do /bin/true & if (( i % 50 == 0 )); then wait; fi; done
wait
# Background jobs and their exit statuses.
sleep 0.1 & a=$!
sh -c 'exit 3' & b=$!
wait "$a"
set +e
wait "$b"
st=$?
set -e
test "$st" = 3

# proves: Python's multiprocessing works: a Pool, a Lock and a Queue (POSIX
# semaphores in /dev/shm), shared memory (multiprocessing.shared_memory, also
# /dev/shm), and a Manager (a server process reached over a unix socket).
set -eux
cat > check.py <<'PY'
import multiprocessing as mp
from multiprocessing import shared_memory

def square(x):
    return x * x

def add(lock, counter, q, n):
    for _ in range(100):
        with lock:
            counter.value += 1
    q.put(n)

def fill(name):
    shm = shared_memory.SharedMemory(name=name)
    shm.buf[:5] = b"hello"
    shm.close()

if __name__ == "__main__":
    for method in ("fork", "spawn", "forkserver"):
        ctx = mp.get_context(method)
        with ctx.Pool(4) as pool:
            assert pool.map(square, range(50)) == [x * x for x in range(50)]
        lock, counter, q = ctx.Lock(), ctx.Value("i", 0), ctx.Queue()
        ps = [ctx.Process(target=add, args=(lock, counter, q, n)) for n in range(4)]
        for p in ps:
            p.start()
        got = sorted(q.get(timeout=60) for _ in ps)
        for p in ps:
            p.join()
        assert got == [0, 1, 2, 3] and counter.value == 400, (method, got, counter.value)
        shm = shared_memory.SharedMemory(create=True, size=16)
        p = ctx.Process(target=fill, args=(shm.name,))
        p.start()
        p.join()
        assert bytes(shm.buf[:5]) == b"hello"
        shm.close()
        shm.unlink()
        with ctx.Manager() as m:
            d = m.dict()
            d["k"] = 1
            assert dict(d) == {"k": 1}
        print(method, "ok")
PY
python3 check.py

# proves: SQLite in WAL mode works in the workspace: its -wal and -shm files
# (the shared memory index is mmap'ed by every connection), concurrent
# writers in separate processes serialised by its locks, readers that see a
# consistent snapshot while a writer is in a transaction, and a checkpoint.
set -eux
cat > check.py <<'PY'
import multiprocessing as mp, os, sqlite3

DB = "data/app.db"
os.makedirs("data", exist_ok=True)

def writer(n):
    c = sqlite3.connect(DB, timeout=30)
    for i in range(200):
        with c:
            c.execute("INSERT INTO t (who, i) VALUES (?, ?)", (n, i))
    c.close()

if __name__ == "__main__":
    c = sqlite3.connect(DB)
    assert c.execute("PRAGMA journal_mode=WAL").fetchone()[0] == "wal"
    c.execute("CREATE TABLE t (who INTEGER, i INTEGER)")
    c.commit()
    assert os.path.exists(DB + "-wal") and os.path.exists(DB + "-shm")
    ps = [mp.Process(target=writer, args=(n,)) for n in range(4)]
    for p in ps:
        p.start()
    for p in ps:
        p.join()
        assert p.exitcode == 0, p.exitcode
    assert c.execute("SELECT count(*) FROM t").fetchone()[0] == 800
    # A reader keeps its snapshot while another connection writes.
    r = sqlite3.connect(DB, isolation_level=None)
    r.execute("BEGIN")
    before = r.execute("SELECT count(*) FROM t").fetchone()[0]
    with c:
        c.execute("INSERT INTO t VALUES (9, 9)")
    assert r.execute("SELECT count(*) FROM t").fetchone()[0] == before
    r.execute("COMMIT")
    assert r.execute("SELECT count(*) FROM t").fetchone()[0] == before + 1
    busy, log, done = c.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    assert busy == 0, (busy, log, done)
    assert c.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    print("sqlite wal: ok")
PY
python3 check.py

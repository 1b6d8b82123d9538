# proves: archives are made and unpacked in the workspace with their
# permissions, links and times: tar with gzip, bzip2 and xz, tar extracting
# into another directory, zip and unzip, and Python's tarfile and zipfile.
set -eux
mkdir -p tree/sub/deeper
for i in $(seq 1 50); do head -c 4096 /dev/urandom > "tree/sub/f$i"; done
printf '#!/bin/sh\necho run\n' > tree/run.sh
chmod 755 tree/run.sh
ln -s sub/f1 tree/link
ln tree/sub/f2 tree/hard
touch -d '2020-01-02 03:04:05' tree/sub/deeper
for z in z j J; do
  tar -c${z}f "tree.$z.tar" tree
  rm -rf "out-$z" && mkdir "out-$z"
  tar -x${z}f "tree.$z.tar" -C "out-$z"
  diff -r tree "out-$z/tree"
  test -x "out-$z/tree/run.sh" && test -L "out-$z/tree/link"
  test "$(stat -c %Y "out-$z/tree/sub/deeper")" = "$(stat -c %Y tree/sub/deeper)"
  test "$(stat -c %i "out-$z/tree/hard")" = "$(stat -c %i "out-$z/tree/sub/f2")"
done
tar -cf - tree | gzip -9 | gzip -d | tar -xf - -C /tmp
diff -r tree /tmp/tree
if command -v zip > /dev/null; then
  zip -qry tree.zip tree
  unzip -q tree.zip -d out-zip
  diff -r tree out-zip/tree
fi
python3 - <<'PY'
import tarfile, zipfile
with tarfile.open("py.tar.gz", "w:gz") as t:
    t.add("tree")
with tarfile.open("py.tar.gz") as t:
    t.extractall("out-py")
with zipfile.ZipFile("py.zip", "w", zipfile.ZIP_DEFLATED) as z:
    z.write("tree/run.sh")
with zipfile.ZipFile("py.zip") as z:
    assert z.read("tree/run.sh").startswith(b"#!/bin/sh")
PY
diff -r tree out-py/tree

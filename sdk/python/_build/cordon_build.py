"""The build backend of the cordon package (PEP 517 and PEP 660), in the
standard library only, so that ``pip install`` needs no package index: no
setuptools, no wheel.

It builds from pyproject.toml's [project] table: the package directory
``cordon`` as it is, its metadata, and the README as the description. The
bytes depend on nothing but the sources and SOURCE_DATE_EPOCH (default
1980-01-01): entries sorted, one date, one mode.

The version is pyproject's, or $CORDON_SDK_VERSION when set (a release
sets it to its own).
"""

import base64
import gzip
import hashlib
import io
import os
import re
import tarfile
import time
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "cordon"
_TAG = "py3-none-any"

__all__ = [
    "build_wheel",
    "build_sdist",
    "build_editable",
    "get_requires_for_build_wheel",
    "get_requires_for_build_sdist",
    "get_requires_for_build_editable",
    "prepare_metadata_for_build_wheel",
    "prepare_metadata_for_build_editable",
]


def _project():
    try:
        import tomllib
    except ImportError:  # Python < 3.11: building needs 3.11, installing the wheel 3.9
        raise RuntimeError(
            "building the cordon package needs Python 3.11 or later (tomllib); "
            "install the wheel a release ships instead (pip install cordon_sandbox-*.whl)"
        ) from None
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)["project"]
    version = os.environ.get("CORDON_SDK_VERSION") or project["version"]
    if not re.fullmatch(r"[0-9]+(\.[0-9]+)*((a|b|rc)[0-9]+)?(\+[a-z0-9]+(\.[a-z0-9]+)*)?", version):
        raise RuntimeError("version %r is not a version pip accepts (1.2.3, 1.3.0rc1, 0.0.0+local)" % version)
    project["version"] = version
    return project


def _dist_name(project):
    return re.sub(r"[-_.]+", "_", project["name"]).lower()


def _metadata(project):
    lines = [
        "Metadata-Version: 2.1",
        "Name: " + project["name"],
        "Version: " + project["version"],
        "Summary: " + project["description"],
        "License: " + project["license"]["text"],
        "Requires-Python: " + project["requires-python"],
    ]
    lines += ["Classifier: " + c for c in project.get("classifiers", [])]
    lines += ["Project-URL: %s, %s" % kv for kv in sorted(project.get("urls", {}).items())]
    lines += ["Requires-Dist: " + d for d in project.get("dependencies", [])]
    lines.append("Description-Content-Type: text/markdown")
    with open(os.path.join(ROOT, project["readme"]), encoding="utf-8") as f:
        readme = f.read()
    return ("\n".join(lines) + "\n\n" + readme).encode("utf-8")


def _epoch():
    """SOURCE_DATE_EPOCH, at the earliest 1980-01-01 (a zip's first date)."""
    return max(int(os.environ.get("SOURCE_DATE_EPOCH") or 315532800), 315532800)


def _date():
    return time.gmtime(_epoch())[:6]


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _package_files():
    """The package's files, as (name in the archive, path), sorted."""
    files = []
    top = os.path.join(ROOT, PACKAGE)
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith((".pyc", ".pyo")):
                continue
            path = os.path.join(dirpath, name)
            files.append((os.path.relpath(path, ROOT).replace(os.sep, "/"), path))
    return sorted(files)


class _Wheel:
    """A wheel being written: each entry hashed into RECORD."""

    def __init__(self, path):
        self.zip = zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED)
        self.record = []
        self.date = _date()

    def add(self, name, data):
        info = zipfile.ZipInfo(name, self.date)
        info.external_attr = 0o644 << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        self.zip.writestr(info, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")
        self.record.append("%s,sha256=%s,%d" % (name, digest, len(data)))

    def close(self, dist_info):
        name = dist_info + "/RECORD"
        self.record.append(name + ",,")
        info = zipfile.ZipInfo(name, self.date)
        info.external_attr = 0o644 << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        self.zip.writestr(info, "\n".join(self.record) + "\n")
        self.zip.close()


def _wheel_meta():
    return ("Wheel-Version: 1.0\nGenerator: cordon_build\nRoot-Is-Purelib: true\nTag: %s\n" % _TAG).encode("ascii")


def _write_wheel(wheel_directory, editable):
    project = _project()
    dist = _dist_name(project)
    dist_info = "%s-%s.dist-info" % (dist, project["version"])
    name = "%s-%s-%s.whl" % (dist, project["version"], _TAG)
    wheel = _Wheel(os.path.join(wheel_directory, name))
    try:
        if editable:
            # The checkout itself on sys.path: edits take effect at once.
            wheel.add("_%s_editable.pth" % dist, (ROOT + "\n").encode("utf-8"))
        else:
            for arcname, path in _package_files():
                with open(path, "rb") as f:
                    wheel.add(arcname, f.read())
        wheel.add(dist_info + "/METADATA", _metadata(project))
        wheel.add(dist_info + "/WHEEL", _wheel_meta())
        license_path = os.path.join(ROOT, "..", "..", "LICENSE")
        if os.path.exists(license_path):
            with open(license_path, "rb") as f:
                wheel.add(dist_info + "/LICENSE", f.read())
        wheel.close(dist_info)
    except BaseException:
        wheel.zip.close()
        os.unlink(os.path.join(wheel_directory, name))
        raise
    return name


def _write_metadata(metadata_directory):
    project = _project()
    dist_info = "%s-%s.dist-info" % (_dist_name(project), project["version"])
    os.makedirs(os.path.join(metadata_directory, dist_info), exist_ok=True)
    with open(os.path.join(metadata_directory, dist_info, "METADATA"), "wb") as f:
        f.write(_metadata(project))
    with open(os.path.join(metadata_directory, dist_info, "WHEEL"), "wb") as f:
        f.write(_wheel_meta())
    return dist_info


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    return _write_metadata(metadata_directory)


def prepare_metadata_for_build_editable(metadata_directory, config_settings=None):
    return _write_metadata(metadata_directory)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, editable=False)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, editable=True)


def build_sdist(sdist_directory, config_settings=None):
    project = _project()
    base = "%s-%s" % (_dist_name(project), project["version"])
    name = base + ".tar.gz"
    mtime = _epoch()
    files = [("pyproject.toml", os.path.join(ROOT, "pyproject.toml")), ("README.md", os.path.join(ROOT, "README.md"))]
    files += [("_build/cordon_build.py", os.path.abspath(__file__))]
    files += _package_files()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        meta = _metadata(project)
        for arcname, data in [("PKG-INFO", meta)] + [(a, _read(p)) for a, p in sorted(files)]:
            if arcname == "pyproject.toml":
                # The archive builds the version it carries, with or
                # without $CORDON_SDK_VERSION.
                data = re.sub(rb'(?m)^version = "[^"]*"$', b'version = "%s"' % project["version"].encode("ascii"), data, count=1)
            info = tarfile.TarInfo(base + "/" + arcname)
            info.size, info.mtime, info.mode = len(data), mtime, 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    with open(os.path.join(sdist_directory, name), "wb") as f:
        with gzip.GzipFile(filename="", mode="wb", fileobj=f, mtime=mtime) as gz:
            gz.write(buf.getvalue())
    return name


"""All-or-nothing run outputs: everything is written into a staging directory beside the target
(``<output.dir>/.staging-<id>``) and renamed into place only once the whole run has succeeded.

Plain paths go through `os`; URIs (hdfs://, s3a://, file:/, ...) through the Hadoop FileSystem
of the Spark session, so scheduled jobs on a cluster publish the same way.
"""

import os
import shutil
import uuid

from sparkml.jobs.config import ConfigError, is_local_path


class LocalStore:
    """Local filesystem operations used for publishing."""

    def join(self, *parts):
        return os.path.join(*parts)

    def exists(self, path):
        return os.path.exists(path)

    def mkdirs(self, path):
        os.makedirs(path, exist_ok=True)

    def remove(self, path):
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        elif os.path.lexists(path):
            os.remove(path)

    def rename(self, src, dst):
        os.rename(src, dst)

    def write_bytes(self, path, data):
        with open(path, "wb") as f:
            f.write(data)


class HadoopStore:
    """The same operations through the JVM's Hadoop FileSystem (classic sessions only)."""

    def __init__(self, spark, uri):
        sc = getattr(spark, "sparkContext", None)
        if sc is None or getattr(sc, "_jvm", None) is None:
            raise ConfigError("output.dir", f"{uri} needs a classic Spark session (none for Spark Connect)")
        self._path = sc._jvm.org.apache.hadoop.fs.Path
        self._fs = self._path(uri).getFileSystem(sc._jsc.hadoopConfiguration())

    def join(self, *parts):
        return "/".join(p.rstrip("/") for p in parts)

    def exists(self, path):
        return self._fs.exists(self._path(path))

    def mkdirs(self, path):
        self._fs.mkdirs(self._path(path))

    def remove(self, path):
        self._fs.delete(self._path(path), True)

    def rename(self, src, dst):
        if not self._fs.rename(self._path(src), self._path(dst)):
            raise OSError(f"rename {src} -> {dst} failed")

    def write_bytes(self, path, data):
        out = self._fs.create(self._path(path), True)
        try:
            out.write(bytearray(data))
        finally:
            out.close()


def store_for(path, spark=None):
    """LocalStore for a plain path, HadoopStore (needs `spark`) for a URI."""
    return LocalStore() if is_local_path(path) else HadoopStore(spark, path)


def check_local_dir(path, key="output.dir"):
    """Raise a ConfigError naming `key` unless the local directory `path` can take the job's outputs: it is
    a writable directory, or it can be created (its nearest existing ancestor is a writable directory).
    Nothing is created; a job calls this before training."""
    if not path or "\0" in path:
        raise ConfigError(key, f"expected a directory path, got {path!r}")
    path = os.path.abspath(path)
    existing = path
    while not os.path.lexists(existing) and os.path.dirname(existing) != existing:
        existing = os.path.dirname(existing)
    lead = "" if existing == path else f"cannot create {path}: "
    if not os.path.isdir(existing):
        kind = "a file" if os.path.isfile(existing) else "a broken link" if os.path.islink(existing) else "a device"
        raise ConfigError(key, f"{lead}{existing} is {kind}, not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(key, f"{lead}{existing} is not writable")


def refuse_overwrite(
    store,
    out_dir,
    overwrite,
    name="model",
    key="output.dir",
    hint="set output.overwrite: true (or --set output.overwrite=true) to replace it",
):
    """Raise a ConfigError naming `key` when `<out_dir>/<name>` exists and overwriting was not asked for."""
    target = store.join(out_dir, name)
    if not overwrite and store.exists(target):
        raise ConfigError(key, f"{target} already exists; {hint}")


class Staging:
    """A staging directory under `out_dir`; `publish` moves its entries into `out_dir`."""

    def __init__(self, store, out_dir):
        self.store, self.out_dir = store, out_dir
        self.dir = store.join(out_dir, f".staging-{uuid.uuid4().hex[:12]}")
        store.mkdirs(self.dir)

    def path(self, name):
        return self.store.join(self.dir, name)

    def publish(self, names, overwrite):
        """Rename each staged entry over `out_dir/<name>`, in order; all or none on failure.

        Existing entries are first moved aside into the staging directory, restored if any later
        rename fails, and deleted with it afterwards.
        """
        done = []  # (target, backup or None)
        try:
            for name in names:
                target = self.store.join(self.out_dir, name)
                backup = None
                if self.store.exists(target):
                    if not overwrite:
                        raise ConfigError("output.dir", f"{target} already exists; set output.overwrite: true")
                    backup = self.path(f"previous-{name}")
                    self.store.rename(target, backup)
                done.append((target, backup))
                self.store.rename(self.path(name), target)
        except BaseException:
            for target, backup in reversed(done):
                if self.store.exists(target) and (backup is None or self.store.exists(backup)):
                    self.store.remove(target)
                if backup is not None and self.store.exists(backup):
                    self.store.rename(backup, target)
            raise

    def cleanup(self):
        self.store.remove(self.dir)

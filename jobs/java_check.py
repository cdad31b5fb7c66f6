"""Fail fast, with instructions, when no JDK is available to start Spark's JVM.

Only used when this process will launch the JVM itself (`python -m sparkml.jobs.train` with no session);
under spark-submit or in a notebook the JVM already runs.
"""

import os
import re
import shutil
import subprocess
import sys

MESSAGE = (
    "Java 17 (or 21) is required by Spark and was not found: install a JDK "
    "(e.g. apt-get install openjdk-17-jre-headless) and set JAVA_HOME"
)


def find_java():
    """Path of the `java` Spark would run ($JAVA_HOME/bin/java first, as spark-class does), or None."""
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = os.path.join(home, "bin", "java")
        return candidate if os.path.isfile(candidate) else None
    return shutil.which("java")


def java_major(java):
    """Major version of `java` (8, 11, 17, 21, ...), or None when it cannot be told."""
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30).stderr
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r'version "(1\.)?(\d+)', out)
    return int(match.group(2)) if match else None


def require_java(min_major=17):
    """Print a one-line instruction and exit 2 when Java is missing or older than `min_major`."""
    java = find_java()
    if java is None:
        print(MESSAGE, file=sys.stderr)
        sys.exit(2)
    major = java_major(java)
    if major is not None and major < min_major:
        print(f"{MESSAGE} (found Java {major} at {java})", file=sys.stderr)
        sys.exit(2)
    return java

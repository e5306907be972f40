"""librdkafka's source from Debian's source package, and its build (for
bench/librdkafka_suite.py).

On a fresh Debian machine the only registry we may use for C sources is Debian's own:
`apt-get source librdkafka` needs a deb-src entry, which a stock image lacks. The entry is
written from the machine's own `deb` entries (same mirror, same suite, same key), so no
host is named here and the source matches the library the machine ships (2.0.2 on
Debian 12). Nothing of librdkafka's source is kept in the project.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

DEB_SRC_FILE = Path("/etc/apt/sources.list.d/isrlab-deb-src.sources")
APT_SOURCES = Path("/etc/apt/sources.list")
APT_SOURCES_DIR = Path("/etc/apt/sources.list.d")
# Features the broker does not claim (SSL, SASL/GSSAPI) or the suite does not need (HTTP
# for OIDC) are left out: the build then needs nothing beyond build-essential, and the
# tests of those features skip themselves. lz4 is librdkafka's bundled copy.
CONFIGURE_FLAGS = ["--disable-ssl", "--disable-gssapi", "--disable-curl", "--disable-lz4-ext"]
# rapidjson-dev: the suite's tests that read the client's statistics JSON (0098, 0101, 0110)
# skip themselves without it; libzstd-dev: the zstd codec of 0017.
BUILD_PACKAGES = ["build-essential", "dpkg-dev", "zlib1g-dev", "rapidjson-dev", "libzstd-dev"]


class SourceError(Exception):
    """The source could not be fetched or built; the message says which step."""


def _run(args: list[str], cwd: Path, log: Path, timeout_s: float) -> None:
    with open(log, "ab") as out:
        out.write(f"$ {' '.join(args)}\n".encode())
        out.flush()
        try:
            result = subprocess.run(args, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise SourceError(f"{' '.join(args)}: no result within {timeout_s:.0f} s (log: {log})") from None
    if result.returncode != 0:
        raise SourceError(f"{' '.join(args)} exited {result.returncode} (log: {log})")


def has_deb_src() -> bool:
    """Some apt source already offers source packages."""
    files = [APT_SOURCES] if APT_SOURCES.exists() else []
    files += sorted(APT_SOURCES_DIR.glob("*.list")) + sorted(APT_SOURCES_DIR.glob("*.sources"))
    for path in files:
        text = path.read_text(errors="replace")
        if re.search(r"^\s*deb-src\s", text, re.M) or re.search(r"^Types:.*\bdeb-src\b", text, re.M):
            return True
    return False


def deb_src_entry(codename: str) -> str:
    """A deb822 deb-src stanza for ``codename`` copied from the machine's first `deb`
    stanza or line for that suite (its URIs and Signed-By)."""
    for path in sorted(APT_SOURCES_DIR.glob("*.sources")):
        for stanza in re.split(r"\n\s*\n", path.read_text(errors="replace")):
            fields = dict(re.findall(r"^(\S+):\s*(.*)$", stanza, re.M))
            if "deb" in fields.get("Types", "").split() and codename in fields.get("Suites", "").split():
                lines = ["Types: deb-src", f"URIs: {fields['URIs']}", f"Suites: {codename}",
                         f"Components: {fields.get('Components', 'main')}"]
                if "Signed-By" in fields:
                    lines.append(f"Signed-By: {fields['Signed-By']}")
                return "\n".join(lines) + "\n"
    if APT_SOURCES.exists():
        for line in APT_SOURCES.read_text(errors="replace").splitlines():
            words = line.split()
            if len(words) >= 4 and words[0] == "deb" and words[2] == codename:
                return f"Types: deb-src\nURIs: {words[1]}\nSuites: {codename}\nComponents: {' '.join(words[3:])}\n"
    raise SourceError(f"no apt `deb` entry for {codename} to copy into a deb-src entry")


def machine_codename() -> str:
    fields = dict(re.findall(r'^(\w+)="?([^"\n]*)"?$', Path("/etc/os-release").read_text(), re.M))
    if "VERSION_CODENAME" not in fields:
        raise SourceError("/etc/os-release names no VERSION_CODENAME: not a Debian-like machine?")
    return fields["VERSION_CODENAME"]


def fetch_source(workdir: Path, log: Path) -> Path:
    """The unpacked librdkafka source under ``workdir`` (fetched once, reused after)."""
    existing = source_dir(workdir)
    if existing is not None:
        return existing
    if os.geteuid() != 0:
        raise SourceError("fetching the source uses apt-get (deb-src entry, build tools): run as root")
    workdir.mkdir(parents=True, exist_ok=True)
    if not has_deb_src():
        DEB_SRC_FILE.write_text(deb_src_entry(machine_codename()))
    _run(["apt-get", "update", "-q"], workdir, log, 600)
    missing = [name for name in BUILD_PACKAGES if not _installed(name)]
    if missing:
        _run(["apt-get", "install", "-y", "-q", *missing], workdir, log, 900)
    _run(["apt-get", "source", "-q", "librdkafka"], workdir, log, 600)
    found = source_dir(workdir)
    if found is None:
        raise SourceError(f"apt-get source left no librdkafka-*/ in {workdir}")
    return found


def _installed(package: str) -> bool:
    result = subprocess.run(["dpkg-query", "-W", "-f=${Status}", package], capture_output=True, text=True)
    return result.returncode == 0 and "install ok installed" in result.stdout


def source_dir(workdir: Path) -> Path | None:
    """The newest unpacked ``librdkafka-<version>`` directory in ``workdir``."""
    found = sorted(path for path in workdir.glob("librdkafka-*") if (path / "tests" / "test.c").is_file())
    return found[-1] if found else None


def test_runner(source: Path) -> Path:
    return source / "tests" / "test-runner"


def build(source: Path, log: Path, jobs: int) -> Path:
    """Configure, build the library and the suite's test-runner; returns the runner.
    A runner already built is reused (delete it to rebuild)."""
    runner = test_runner(source)
    if runner.exists():
        return runner
    if shutil.which("make") is None or shutil.which("gcc") is None:
        raise SourceError("make and gcc are needed (apt-get install build-essential)")
    if not (source / "Makefile.config").exists():
        _run(["./configure", *CONFIGURE_FLAGS], source, log, 600)
    _run(["make", f"-j{jobs}", "libs"], source, log, 3600)
    _run(["make", f"-j{jobs}", "-C", "tests", "build"], source, log, 3600)
    if not runner.exists():
        raise SourceError(f"make -C tests build left no {runner}")
    return runner


def version(source: Path) -> str:
    return source.name.removeprefix("librdkafka-")

#!/usr/bin/env python3
"""`memfs import` and `memfs export` on 10,000 files and 100 MB (issue 36's
target: an import of 10,000 files within 10 s), side by side in one run with
copying the same files into a memfs mount (`cp -r`, a person's way in) and
onto tmpfs. Prints a Markdown report.

    scripts/bench_import.py target/release/memfs [--files 10000] [--bytes 100000000] [--runs 3]
"""
import argparse
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent


def timed(cmd, **kw):
    t = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if out.returncode != 0:
        raise RuntimeError(f"{cmd}: {out.returncode} {out.stderr}")
    return time.perf_counter() - t, out


def make_repo(repo, commits):
    """A repository of `commits` commits, each changing two of 100 files of
    about 1.2 KB, by three authors a minute apart (through fast-import)."""
    repo.mkdir()
    subprocess.run(["git", "-C", str(repo), "init", "-q", "-b", "main"], check=True)
    parts = []
    for i in range(commits):
        when = 1_500_000_000 + i * 60
        parts.append(f"commit refs/heads/main\nauthor A{i % 3} <a{i % 3}@example.com> {when} +0000\n"
                     f"committer c <c@example.com> {when} +0000\ndata 7\ncommit\n")
        for f in sorted({i % 100, (i * 7 + 3) % 100}):
            body = f"file {f} at commit {i}\n" + "words " * 200
            parts.append(f"M 100644 inline f{f:03d}.md\ndata {len(body)}\n{body}\n")
    subprocess.run(["git", "-C", str(repo), "fast-import", "--quiet"], input="".join(parts).encode(), check=True)
    subprocess.run(["git", "-C", str(repo), "reset", "-q", "--hard", "main"], check=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("memfs")
    ap.add_argument("--files", type=int, default=10000)
    ap.add_argument("--bytes", type=int, default=100_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--commits", type=int, default=1000)
    a = ap.parse_args()
    memfs = str(pathlib.Path(a.memfs).resolve())
    shm = pathlib.Path(tempfile.mkdtemp(prefix="memfs-bench-import-", dir="/dev/shm"))
    work = pathlib.Path(tempfile.mkdtemp(prefix="memfs-bench-import-"))
    rows = {k: [] for k in ["import", "again", "export --dir", "export --tar", "tar import",
                            "cp -r into a memfs mount", "cp -r onto tmpfs",
                            f"import --git, {a.commits:,} commits", "import --git again",
                            "git log -p of the same (the peer's read)"]}
    try:
        corpus = shm / "corpus"
        subprocess.run([sys.executable, str(HERE / "search_corpus.py"), str(corpus),
                        "--files", str(a.files), "--bytes", str(a.bytes)], check=True,
                       stdout=subprocess.DEVNULL)
        files = sum(1 for f in corpus.rglob("*") if f.is_file())
        size = sum(f.stat().st_size for f in corpus.rglob("*") if f.is_file())
        repo = work / "repo"
        make_repo(repo, a.commits)
        # (--secrets allow: the corpus is code, some of it with test passwords.)
        flags = ["--secrets", "allow"]
        for run in range(a.runs):
            data = work / f"d{run}"
            t, out = timed([memfs, "--data", str(data), *flags, "import", "-q", str(corpus)])
            rows["import"].append(t)
            t, _ = timed([memfs, "--data", str(data), *flags, "import", "-q", str(corpus)])
            rows["again"].append(t)
            t, _ = timed([memfs, "--data", str(data), "export", "--dir", str(work / f"out{run}")])
            rows["export --dir"].append(t)
            tar = work / f"m{run}.tar"
            t, _ = timed([memfs, "--data", str(data), "export", "--tar", str(tar)])
            rows["export --tar"].append(t)
            t, _ = timed([memfs, "--data", str(work / f"t{run}"), *flags, "import", "-q", str(tar)])
            rows["tar import"].append(t)
            mnt = work / f"mnt{run}"
            mnt.mkdir()
            owner = subprocess.Popen([memfs, "--data", str(work / f"c{run}"), "mount", str(mnt)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            deadline = time.time() + 60
            while not os.path.ismount(mnt):
                if owner.poll() is not None or time.time() > deadline:
                    raise RuntimeError("the mount did not start")
                time.sleep(0.05)
            t, _ = timed(["sh", "-c", f'cp -r "{corpus}/." "{mnt}/" && sync'])
            rows["cp -r into a memfs mount"].append(t)
            subprocess.run(["umount", str(mnt)])
            owner.wait(timeout=120)
            dest = shm / f"copy{run}"
            t, _ = timed(["cp", "-r", str(corpus), str(dest)])
            rows["cp -r onto tmpfs"].append(t)
            shutil.rmtree(dest)
            g = work / f"g{run}"
            t, _ = timed([memfs, "--data", str(g), "import", "-q", "--git", str(repo)])
            rows[f"import --git, {a.commits:,} commits"].append(t)
            t, _ = timed([memfs, "--data", str(g), "import", "-q", "--git", str(repo)])
            rows["import --git again"].append(t)
            t, _ = timed(["sh", "-c", f'git -C "{repo}" log -p --first-parent > /dev/null'])
            rows["git log -p of the same (the peer's read)"].append(t)
            for p in [data, work / f"out{run}", tar, work / f"t{run}", work / f"c{run}", g]:
                shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
    finally:
        shutil.rmtree(shm, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    print(f"{files:,} files, {size / 1e6:.1f} MB (`scripts/bench_import.py --files {a.files} "
          f"--bytes {a.bytes} --runs {a.runs}`), {os.cpu_count()} cores; min / median / max of "
          f"{a.runs} runs, each into a new data dir.\n")
    print("| what | min | median | max |")
    print("|---|---|---|---|")
    for k, v in rows.items():
        print(f"| {k} | {min(v):.2f} s | {statistics.median(v):.2f} s | {max(v):.2f} s |")
    imp = statistics.median(rows["import"])
    print(f"\n`memfs import` / `cp -r` into a mount: {imp / statistics.median(rows['cp -r into a memfs mount']):.2f}x; "
          f"/ `cp -r` onto tmpfs: {imp / statistics.median(rows['cp -r onto tmpfs']):.1f}x")


if __name__ == "__main__":
    main()

"""Corpus processing on the local path vs on Ray (`executor: ray`), on a generated corpus of >= 500 MB.

Question: on this machine (2 cores), does the Ray Data pipeline (proctor.scale.corpus_pipeline) match the
local loader (proctor.corpus.load_corpus) — same chunks — at about the same wall time, and what does each
cost in memory? Two cores give parity at best, not a speed-up: the point is that the Ray path's overhead
(task scheduling, Parquet round trip, the driver re-reading the table) is small, so it scales with a
cluster's cores.

Each mode runs in a fresh child process; the parent samples the memory of the child's whole process tree
(for Ray: the driver plus GCS, raylet and the worker processes, all its descendants) every 0.25 s:
the sum of RSS (over-counts pages shared between processes, e.g. Ray's object store mapped in several
workers) and, every second, the sum of PSS (shared pages split between the processes sharing them: the
honest total). Reported: wall time of the child (including Ray's start for the Ray mode), the peaks, the
chunk count and the corpus fingerprint (equal fingerprints = identical chunks and ids in order).

Embeddings: the packaged MiniLM embedder, on one thread of this machine, embeds about ten of these chunks
(~1,000 characters) per second, so 500 MB (~540,000 chunks) would take some 15 hours per mode. They are
measured on a stated subset (the first --embed-mb of the corpus, default 0.3 MB), 1 thread on the local path
vs 1 embedding actor (1 CPU, 1 thread) on Ray — one core each, as the machine's other jobs need the other.

    .venv/bin/python bench/corpus_ray.py                  # 512 MB into /tmp/proctor-bench-corpus
    .venv/bin/python bench/corpus_ray.py --mb 600 --dir /data/corpus --embed-mb 2

Writes bench/results/corpus_ray.json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import psutil

ROOT = Path(__file__).resolve().parents[1]
_VOCAB = """
tide glass harbour ferry lantern canal fog salt north bell quay pilot chart keel beacon storm brine gull reef
current mooring anchor shoal buoy ledger tariff council archive weaver kiln furnace ember ash clay loom guild
charter decree census parish orchard terrace cistern aqueduct granary mill the of and a to in is was for on
by with as at from that which their its
"""
WORDS = _VOCAB.split()


# ------------------------------------------------------------------------------------------- corpus


def generate(target: Path, mb: int, seed: int = 15) -> dict[str, Any]:
    """Deterministic markdown files (~256 KB each) in nested folders, paragraphs of varied length."""
    marker = target / ".complete.json"
    want = {"mb": mb, "seed": seed, "version": 1}
    if marker.is_file() and json.loads(marker.read_text()) == want:
        return _stats(target)
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    vocab = np.array(WORDS)
    file_bytes = 256 * 1024
    n_files = -(-mb * 1024 * 1024 // file_bytes)
    t0 = time.perf_counter()
    for i in range(n_files):
        folder = target / f"part{i // 100:03d}"
        folder.mkdir(exist_ok=True)
        parts = [f"# Record {i}\n"]
        size = len(parts[0])
        while size < file_bytes:
            n = int(rng.integers(20, 260))
            words = vocab[rng.integers(0, len(vocab), n)]
            sentences = []
            for s in np.array_split(words, max(1, n // 14)):
                sentence = " ".join(s.tolist())
                sentences.append(sentence[:1].upper() + sentence[1:] + ".")
            para = " ".join(sentences)
            parts.append(para)
            size += len(para) + 2
        (folder / f"record{i:05d}.md").write_text("\n\n".join(parts) + "\n", encoding="utf-8")
    marker.write_text(json.dumps(want))
    print(f"generated {n_files} files in {time.perf_counter() - t0:.0f}s", flush=True)
    return _stats(target)


def _stats(target: Path) -> dict[str, Any]:
    files = [p for p in target.rglob("*.md")]
    return {"files": len(files), "bytes": sum(p.stat().st_size for p in files)}


def subset(corpus: Path, dest: Path, mb: float) -> Path:
    """The first files of the corpus (walk order) up to `mb` megabytes, copied to `dest`."""
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    budget = int(mb * 1024 * 1024)
    for f in sorted(corpus.rglob("*.md")):
        if budget <= 0:
            break
        rel = f.relative_to(corpus)
        (dest / rel.parent).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(f, dest / rel)
        budget -= f.stat().st_size
    return dest


# ------------------------------------------------------------------------------------------ workers


def worker(mode: str, corpus: str, out_dir: str, embed: bool, result_path: str) -> None:
    """One measured run in this (fresh) process; writes its result JSON to `result_path`."""
    from proctor.config import RayConfig
    from proctor.corpus import CorpusConfig, load_corpus

    cfg = CorpusConfig(path=corpus)
    t0 = time.perf_counter()
    stages: dict[str, float] = {}
    if mode == "local":
        c = load_corpus(cfg)
        stages["read_chunk_s"] = time.perf_counter() - t0
        if embed:
            from proctor.embeddings import get_embedder

            t1 = time.perf_counter()
            vecs = get_embedder("local/minilm", cache=False, threads=1).embed([ch.text for ch in c.chunks])
            stages["embed_s"] = time.perf_counter() - t1
            assert vecs.shape[0] == len(c)
    else:
        from proctor.scale.corpus_pipeline import process_corpus
        from proctor.scale.ray_session import ensure_ray

        ensure_ray(RayConfig(num_cpus=2))
        stages["ray_start_s"] = time.perf_counter() - t0
        table = process_corpus(
            cfg,
            settings=RayConfig(num_cpus=2, output_dir=out_dir, embed_actors=1),
            embedder="local/minilm" if embed else None,
            cache_dir=out_dir,
            reuse=False,
        )
        c = table.corpus
        stages["pipeline_s"] = table.seconds
    result = {
        "mode": mode,
        "wall_s_inside": time.perf_counter() - t0,
        "chunks": len(c),
        "duplicate_chunks": c.report.duplicate_chunks,
        "documents": c.report.documents,
        "fingerprint": c.fingerprint,
        **stages,
    }
    Path(result_path).write_text(json.dumps(result))


def measure(mode: str, corpus: Path, work: Path, embed: bool) -> dict[str, Any]:
    """Run one mode in a child process, sampling its process tree's memory; return timings and peaks."""
    result_path = work / f"result-{mode}-{int(embed)}.json"
    result_path.unlink(missing_ok=True)
    out_dir = work / f"ray-out-{mode}-{int(embed)}"
    shutil.rmtree(out_dir, ignore_errors=True)
    cmd = [sys.executable, __file__, "--worker", mode, "--corpus", str(corpus), "--out-dir", str(out_dir),
           "--result", str(result_path)] + (["--embed"] if embed else [])  # fmt: skip
    env = dict(os.environ, PYTHONUNBUFFERED="1", RAY_DISABLE_DOCKER_CPU_WARNING="1")
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=ROOT)
    peaks = {"rss": 0, "pss": 0, "procs": 0}
    stop = threading.Event()

    def sample() -> None:
        parent = psutil.Process(proc.pid)
        last_pss = 0.0
        while not stop.is_set():
            try:
                tree = [parent, *parent.children(recursive=True)]
            except psutil.NoSuchProcess:
                return
            rss = 0
            for p in tree:
                with contextlib.suppress(psutil.Error):
                    rss += p.memory_info().rss
            peaks["rss"] = max(peaks["rss"], rss)
            peaks["procs"] = max(peaks["procs"], len(tree))
            if time.perf_counter() - last_pss >= 1.0:
                last_pss = time.perf_counter()
                pss = 0
                for p in tree:
                    with contextlib.suppress(psutil.Error):
                        pss += p.memory_full_info().pss
                peaks["pss"] = max(peaks["pss"], pss)
            stop.wait(0.25)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    code = proc.wait()
    wall = time.perf_counter() - t0
    stop.set()
    sampler.join()
    if code != 0:
        raise SystemExit(f"{mode} worker failed with exit code {code}")
    result = json.loads(result_path.read_text())
    result.update(
        wall_s=round(wall, 2),
        peak_rss_mb=round(peaks["rss"] / 2**20),
        peak_pss_mb=round(peaks["pss"] / 2**20),
        max_processes=peaks["procs"],
    )
    shutil.rmtree(out_dir, ignore_errors=True)
    return result


# --------------------------------------------------------------------------------------------- main


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=int, default=512, help="corpus size to generate (MB)")
    ap.add_argument("--dir", type=Path, default=Path("/tmp/proctor-bench-corpus"), help="corpus folder")
    ap.add_argument("--embed-mb", type=float, default=0.3, help="subset embedded in both modes (MB; 0: skip)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "corpus_ray.json")
    ap.add_argument("--worker", choices=["local", "ray"], help=argparse.SUPPRESS)
    ap.add_argument("--corpus", help=argparse.SUPPRESS)
    ap.add_argument("--out-dir", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    ap.add_argument("--embed", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.corpus, args.out_dir, args.embed, args.result)
        return

    corpus = args.dir / "corpus"
    work = args.dir / "work"
    work.mkdir(parents=True, exist_ok=True)
    stats = generate(corpus, args.mb)
    print(f"corpus: {stats['files']} files, {stats['bytes'] / 2**20:.0f} MB", flush=True)
    runs = []
    for mode in ("local", "ray"):
        r = measure(mode, corpus, work, embed=False)
        print(json.dumps(r), flush=True)
        runs.append(r)
    embed_runs = []
    embed_stats = None
    if args.embed_mb > 0:
        small = subset(corpus, args.dir / "embed-subset", args.embed_mb)
        embed_stats = _stats(small)
        for mode in ("local", "ray"):
            r = measure(mode, small, work, embed=True)
            print(json.dumps(r), flush=True)
            embed_runs.append(r)
    same = len({r["fingerprint"] for r in runs}) == 1 and len({r["fingerprint"] for r in embed_runs}) <= 1
    import ray

    report = {
        "benchmark": "corpus_ray",
        "date": time.strftime("%Y-%m-%d"),
        "machine": {
            "cpus": os.cpu_count(),
            "ram_gb": round(psutil.virtual_memory().total / 2**30, 1),
            "python": platform.python_version(),
            "ray": ray.__version__,
            "load_avg_after": [round(x, 2) for x in os.getloadavg()],
        },
        "corpus": {"dir": str(corpus), "mb": args.mb, **stats},
        "read_chunk": runs,
        "embed_subset": {"corpus": embed_stats, "embedder": "local/minilm", "runs": embed_runs},
        "identical_chunks": same,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"identical chunks on both paths: {same}; wrote {args.out}")


if __name__ == "__main__":
    main()
